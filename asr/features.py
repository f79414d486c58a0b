"""Front end: waveforms -> normalised log-mel (fbank) or MFCC frames, as an `nn.Module`.

VTLP (vocal-tract length perturbation) is here rather than with the waveform augmentations
(asr/augment.py): scaling formants without touching tempo or pitch is one interpolation of the
power spectrum, whereas the waveform's resampling (speed perturbation) moves all three at once.

Being a module means it runs on the model's device (the GPU when training there) and that its
global CMVN statistics travel inside the model's weights. Frames are computed without centre
padding, so a frame only ever sees samples of its own utterance: batching never changes them.
"""

from dataclasses import dataclass

import torch
import torchaudio.functional as AF
import torchaudio.transforms as T
from torch import nn

from asr.untrusted import check_fields, check_ranges


@dataclass
class FeatureConfig:
    """What the front end computes; `conf/features/*.yaml` fill it."""

    kind: str = "fbank"  # "fbank" (log-mel) or "mfcc"
    sample_rate: int = 16000
    n_fft: int = 512
    win_ms: float = 25.0
    hop_ms: float = 10.0
    n_mels: int = 80
    n_mfcc: int = 40
    # SpecAugment (training only): how many masks and their widest size in bins / frames.
    freq_masks: int = 2
    freq_width: int = 15
    time_masks: int = 2
    time_width: int = 20
    time_max_ratio: float = 0.2
    # VTLP (training only): each utterance's frequency axis warped by a factor drawn from
    # [1 - vtlp, 1 + vtlp] (Jaitly & Hinton 2013: 0.1); 0 is off.
    vtlp: float = 0.0
    # Subtract each utterance's own mean per channel before the global CMVN (cepstral mean
    # normalisation). In the log domain a gain is a constant and a microphone's frequency
    # response a constant per channel, so this removes both; the price is a noisier mean on
    # very short clips, where the share of silence moves it.
    utterance_cmn: bool = False
    # fbank only: log(mel + log_floor), waveforms in [-1, 1]. 1e-6 lies about 23 dB above
    # 16-bit quantisation noise (one LSB of white noise gives mel ~4.5e-9), so it hides a
    # recording's faint background noise and a quiet recording's weak sounds alike. ESPnet
    # and Whisper floor at 1e-10.
    log_floor: float = 1e-6

    def __post_init__(self) -> None:
        check_fields(self, "features")
        if self.kind not in ("fbank", "mfcc"):
            raise ValueError(f"features.kind must be 'fbank' or 'mfcc', got {self.kind!r}")
        check_ranges(self, "features", sample_rate=(4000, 384000), n_fft=(16, 8192),
                     win_ms=(0.1, 1000), hop_ms=(0.1, 1000), n_mels=(1, 512),
                     n_mfcc=(1, self.n_mels), freq_masks=(0, 100), freq_width=(0, 1000),
                     time_masks=(0, 100), time_width=(0, 10000), time_max_ratio=(0, 1),
                     vtlp=(0, 0.5), log_floor=(1e-20, 1))
        if not (1 <= self.hop_length and 1 <= self.win_length <= self.n_fft):
            raise ValueError(f"features: a window of {self.win_length} samples and a hop of "
                             f"{self.hop_length} must be 1..n_fft ({self.n_fft}) samples")

    @property
    def win_length(self) -> int:
        return int(round(self.sample_rate * self.win_ms / 1000))

    @property
    def hop_length(self) -> int:
        return int(round(self.sample_rate * self.hop_ms / 1000))

    @property
    def dim(self) -> int:
        return self.n_mels if self.kind == "fbank" else self.n_mfcc


def vtlp_warp(power: torch.Tensor, alpha: torch.Tensor, boundary: float = 0.6) -> torch.Tensor:
    """Warp (batch, bins, frames) power spectra's frequency axis by `alpha` per utterance.

    Jaitly & Hinton's (2013) piecewise-linear VTLP map f -> alpha f up to a boundary (0.6 of
    Nyquist: their 4.8 kHz at 16 kHz), then a straight line to Nyquist, so no energy falls off
    the top or leaves a gap there. A longer vocal tract (alpha < 1) moves every formant down.
    Each output bin at f' takes the (linearly interpolated) input at the map's inverse.
    """
    bins = power.shape[1]
    out = torch.linspace(0.0, 1.0, bins, device=power.device)  # frequency / Nyquist
    alpha = alpha.to(power.dtype)[:, None]
    edge = boundary * alpha.clamp(max=1.0)  # where f' = alpha f ends, in output frequency
    source = torch.where(out <= edge, out / alpha,
                         1 - (1 - out) * (1 - edge / alpha) / (1 - edge))
    index = (source * (bins - 1)).clamp(0, bins - 1)
    low = index.floor().long().clamp(max=bins - 2)
    frac = (index - low)[..., None]
    low = low[..., None].expand(-1, -1, power.shape[2])
    return torch.gather(power, 1, low) * (1 - frac) + torch.gather(power, 1, low + 1) * frac


def dft_kernels(cfg: FeatureConfig, window: torch.Tensor) -> torch.Tensor:
    """(2 * bins, 1, win_length) real and imaginary DFT kernels of the windowed frames; only
    the window's span, which torch.stft centres in n_fft (outside it the window is zero, so
    those samples add nothing). Computed in float64."""
    bins, left = cfg.n_fft // 2 + 1, (cfg.n_fft - cfg.win_length) // 2
    phase = 2 * torch.pi / cfg.n_fft * torch.outer(
        torch.arange(bins, dtype=torch.float64),
        torch.arange(left, left + cfg.win_length, dtype=torch.float64))
    return (torch.cat([phase.cos(), -phase.sin()]) * window.double()).float().unsqueeze(1)


def padding_mask(lengths: torch.Tensor, max_len: int) -> torch.Tensor:
    """(batch, max_len) bool, True at real (non-padding) positions."""
    return torch.arange(max_len, device=lengths.device)[None, :] < lengths[:, None]


def subtract_utterance_mean(feats: torch.Tensor, frames: torch.Tensor) -> torch.Tensor:
    """(batch, frames, dim) features minus each utterance's mean over its own valid frames,
    so that padding never moves the mean and a batch gives what one utterance alone does."""
    valid = padding_mask(frames, feats.shape[1]).unsqueeze(-1).to(feats.dtype)
    mean = (feats * valid).sum(1, keepdim=True) / valid.sum(1, keepdim=True).clamp(min=1)
    return feats - mean


class FrontEnd(nn.Module):
    """(batch, samples) waveforms + lengths -> (batch, frames, dim) features + frame lengths."""

    def __init__(self, cfg: FeatureConfig) -> None:
        super().__init__()
        self.cfg = cfg
        self.spectrogram = T.Spectrogram(cfg.n_fft, cfg.win_length, cfg.hop_length, center=False,
                                         power=None)
        # Slaney mel scale and norm, as librosa's defaults.
        self.mel = T.MelScale(cfg.n_mels, cfg.sample_rate, n_stft=cfg.n_fft // 2 + 1,
                              norm="slaney", mel_scale="slaney")
        # MFCC as torchaudio's T.MFCC computes it: dB with an 80 dB floor, then an orthonormal DCT.
        self.to_db = T.AmplitudeToDB("power", top_db=80.0)
        self.register_buffer("dct", AF.create_dct(cfg.n_mfcc, cfg.n_mels, "ortho"),
                             persistent=False)
        self.freq_masks = nn.ModuleList(
            T.FrequencyMasking(cfg.freq_width, iid_masks=True) for _ in range(cfg.freq_masks))
        self.time_masks = nn.ModuleList(
            T.TimeMasking(cfg.time_width, iid_masks=True, p=cfg.time_max_ratio)
            for _ in range(cfg.time_masks))
        self.register_buffer("dft", dft_kernels(cfg, self.spectrogram.window), persistent=False)
        self.register_buffer("cmvn_mean", torch.zeros(cfg.dim))
        self.register_buffer("cmvn_std", torch.ones(cfg.dim))

    def frame_lengths(self, lengths: torch.Tensor) -> torch.Tensor:
        """Frames per utterance: only FFT frames that fit entirely inside the samples."""
        frames = (lengths - self.cfg.n_fft) // self.cfg.hop_length + 1
        return frames.clamp(min=1)

    def power(self, wave: torch.Tensor) -> torch.Tensor:
        """(batch, bins, frames) power spectra |X|^2, computed as re^2 + im^2: on CPU, complex
        abs() squared and a sum over view_as_real's last axis are slower (BENCHMARKS.md)."""
        if torch.onnx.is_in_onnx_export():
            return self.dft_power(wave)
        spec = self.spectrogram(wave)
        return spec.real.square() + spec.imag.square()

    def dft_power(self, wave: torch.Tensor) -> torch.Tensor:
        """`power` without complex numbers, which ONNX lacks: the windowed DFT as one strided
        convolution with cosine and sine kernels (`dft_kernels`). In onnxruntime it runs about
        as fast as torch's FFT does in torch (2 threads), twice as fast as ONNX's own STFT
        operator, and Conv is an operator every ONNX runtime has. Same values to float rounding
        (1e-6 relative)."""
        cfg, bins = self.cfg, self.cfg.n_fft // 2 + 1
        left = (cfg.n_fft - cfg.win_length) // 2
        frames = (wave.shape[-1] - cfg.n_fft) // cfg.hop_length + 1
        span = wave[:, left:left + (frames - 1) * cfg.hop_length + cfg.win_length]
        parts = nn.functional.conv1d(span.unsqueeze(1), self.dft, stride=cfg.hop_length)
        return parts[:, :bins].square() + parts[:, bins:].square()

    def raw(self, wave: torch.Tensor, lengths: torch.Tensor,
            warp: torch.Tensor | None = None) -> tuple[torch.Tensor, torch.Tensor]:
        """Un-normalised features; waveforms shorter than one FFT frame are zero-padded to it.
        `warp` (one factor per utterance) applies VTLP to the power spectrum."""
        if wave.shape[-1] < self.cfg.n_fft:
            wave = nn.functional.pad(wave, (0, self.cfg.n_fft - wave.shape[-1]))
        with torch.autocast(wave.device.type, enabled=False):
            power = self.power(wave.float())
            if warp is not None:
                power = vtlp_warp(power, warp)
            mel = self.mel(power).transpose(1, 2)
            if self.cfg.kind == "fbank":
                feats = torch.log(mel + self.cfg.log_floor)
            else:  # 4-D input: the 80 dB floor is relative to each utterance's own peak
                feats = self.to_db(mel.unsqueeze(1)).squeeze(1) @ self.dct
        frames = self.frame_lengths(lengths)
        if self.cfg.utterance_cmn:
            feats = subtract_utterance_mean(feats, frames)
        return feats, frames

    def forward(self, wave: torch.Tensor, lengths: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        warp = None
        if self.training and self.cfg.vtlp > 0:
            warp = 1 + self.cfg.vtlp * (2 * torch.rand(len(wave), device=wave.device) - 1)
        feats, frames = self.raw(wave, lengths, warp)
        feats = (feats - self.cmvn_mean) / self.cmvn_std
        if self.training:
            feats = self.spec_augment(feats)
        return feats * padding_mask(frames, feats.shape[1]).unsqueeze(-1), frames

    def spec_augment(self, feats: torch.Tensor) -> torch.Tensor:
        """Frequency and time masks (after CMVN, so a mask holds the mean: zero)."""
        spec = feats.transpose(1, 2).unsqueeze(1)  # (B, 1, dim, frames): iid masks need 4-D
        for mask in [*self.freq_masks, *self.time_masks]:
            spec = mask(spec)
        return spec.squeeze(1).transpose(1, 2)

    @torch.no_grad()
    def set_cmvn(self, batches) -> int:
        """Compute global mean/std over the valid frames of `(wave, lengths)` batches.

        Returns the number of frames used. Statistics are accumulated in float64 so thousands
        of utterances do not lose precision.
        """
        total = torch.zeros(self.cfg.dim, dtype=torch.float64)
        total_sq = torch.zeros_like(total)
        count = 0
        for wave, lengths in batches:
            feats, frames = self.raw(wave.to(self.cmvn_mean.device), lengths.to(self.cmvn_mean.device))
            for item, n in zip(feats, frames.tolist(), strict=True):
                valid = item[:n].double().cpu()
                total += valid.sum(0)
                total_sq += (valid**2).sum(0)
                count += n
        if count == 0:
            raise ValueError("no frames to compute CMVN statistics from")
        mean = total / count
        std = (total_sq / count - mean**2).clamp(min=1e-10).sqrt()
        self.cmvn_mean.copy_(mean.float())
        self.cmvn_std.copy_(std.float().clamp(min=1e-3))
        return count

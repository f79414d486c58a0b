"""Waveform augmentation for training on real recordings: speed, additive noise, gain.

Real users differ from the few speakers of a small corpus in speaking rate and vocal-tract
length, record in rooms with background noise, and hold the microphone near or far. Each of
these is simulated on the waveform, before the front end, and only for training:

- speed perturbation (Ko et al. 2015, Kaldi's 0.9/1.0/1.1): resampling changes the tempo *and*
  shifts pitch and formants, so three factors act like three speakers per speaker;
- additive noise from real background recordings (e.g. Speech Commands' `_silence_` clips) at
  a random signal-to-noise ratio;
- narrowband: a share of utterances passed through a lower sample rate and back (8 kHz: the
  telephone band and corpora like FSDD), so that a model trained on wide-band speech does not
  lean on frequencies above 4 kHz that such recordings never have;
- a random gain in dB.

Configured under `data.augment` (conf/data/*.yaml), each part switched on by its own `enabled`
flag and all off by default. Random draws use torch's generator, so DataLoader workers (each
seeded by torch) draw differently and a resumed run restores the main process's state.
Audio at another rate (FSDD's 8 kHz) needs no step here: `asr.audio.load_audio` already
resamples every file to the model's rate.
"""

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path

import torch
import torchaudio.functional as AF
from omegaconf import DictConfig, OmegaConf

from asr.audio import load_audio, resample
from asr.data import read_manifest


@dataclass
class SpeedConfig:
    enabled: bool = False
    factors: Sequence[float] = (0.9, 1.0, 1.1)  # > 1 is faster (shorter)


@dataclass
class NoiseConfig:
    enabled: bool = False
    manifest: str | None = None  # JSON lines of noise recordings (their text is ignored)
    prob: float = 0.5  # share of utterances that get noise
    snr_db: Sequence[float] = (0.0, 20.0)  # SNR drawn uniformly from [low, high]


@dataclass
class NarrowbandConfig:
    enabled: bool = False
    prob: float = 0.5  # share of utterances band-limited
    rate: int = 8000  # the rate they pass through: energy above rate / 2 is removed


@dataclass
class GainConfig:
    enabled: bool = False
    db: Sequence[float] = (-10.0, 6.0)  # gain drawn uniformly from [low, high] dB


@dataclass
class AugmentConfig:
    speed: SpeedConfig = field(default_factory=SpeedConfig)
    noise: NoiseConfig = field(default_factory=NoiseConfig)
    narrowband: NarrowbandConfig = field(default_factory=NarrowbandConfig)
    gain: GainConfig = field(default_factory=GainConfig)

    @classmethod
    def from_dict(cls, options: Mapping | None) -> "AugmentConfig":
        """From `data.augment` (a plain mapping); missing parts stay off."""
        if isinstance(options, DictConfig):
            options = OmegaConf.to_container(options, resolve=True)
        options = dict(options or {})
        unknown = set(options) - {"speed", "noise", "narrowband", "gain"}
        if unknown:
            raise ValueError(f"data.augment: unknown part(s) {', '.join(sorted(unknown))}")
        return cls(SpeedConfig(**dict(options.get("speed") or {})),
                   NoiseConfig(**dict(options.get("noise") or {})),
                   NarrowbandConfig(**dict(options.get("narrowband") or {})),
                   GainConfig(**dict(options.get("gain") or {})))

    @property
    def enabled(self) -> bool:
        return (self.speed.enabled or self.noise.enabled or self.narrowband.enabled
                or self.gain.enabled)


def speed_perturb(wave: torch.Tensor, sample_rate: int, factor: float) -> torch.Tensor:
    """Play `wave` `factor` times faster: length / factor, pitch and formants x factor."""
    if factor == 1.0:
        return wave
    return AF.speed(wave, sample_rate, factor)[0]


def add_noise(wave: torch.Tensor, noise: torch.Tensor, snr_db: float) -> torch.Tensor:
    """Add `noise` (looped or cut to length) scaled to `snr_db` below the signal's power."""
    if len(noise) < len(wave):
        noise = noise.repeat(len(wave) // len(noise) + 1)
    noise = noise[:len(wave)]
    if not noise.abs().max() > 0 or not wave.abs().max() > 0:
        return wave
    return AF.add_noise(wave[None], noise[None], torch.tensor([float(snr_db)]))[0]


def band_limit(wave: torch.Tensor, sample_rate: int, rate: int) -> torch.Tensor:
    """`wave` as if recorded at `rate` and then loaded at `sample_rate`: same length, nothing
    left above rate / 2 but what `load_audio`'s resampling itself puts there. The way down is a
    sharp filter (a recorder's anti-aliasing; torchaudio's default 6 zero crossings let through
    several times the energy at 4.25-4.5 kHz); the way up is `load_audio`'s."""
    if rate >= sample_rate:
        return wave
    low = AF.resample(wave, sample_rate, rate, lowpass_filter_width=64)
    return resample(low, rate, sample_rate)[:len(wave)]


def apply_gain(wave: torch.Tensor, gain_db: float) -> torch.Tensor:
    return wave * 10 ** (gain_db / 20)


def _uniform(low_high: Sequence[float]) -> float:
    low, high = (float(x) for x in low_high)
    return low + (high - low) * torch.rand(()).item()


class Augmenter:
    """Speed, then noise, then the narrow band (the channel follows the room), then gain, each
    drawn per utterance where enabled."""

    def __init__(self, config: AugmentConfig, sample_rate: int) -> None:
        self.config, self.sample_rate = config, sample_rate
        self._noises: list[torch.Tensor] | None = None
        if config.noise.enabled and not config.noise.manifest:
            raise ValueError("data.augment.noise: enabled but no manifest of noise recordings "
                             "given (data.augment.noise.manifest=...)")
        if config.noise.enabled and not Path(config.noise.manifest).is_file():
            raise ValueError(f"{config.noise.manifest}: noise manifest not found")

    def noises(self) -> list[torch.Tensor]:
        """The noise recordings at the model's rate, loaded on first use (per worker)."""
        if self._noises is None:
            self._noises = [load_audio(u.audio_filepath, self.sample_rate)
                            for u in read_manifest(self.config.noise.manifest)]
        return self._noises

    def __call__(self, wave: torch.Tensor) -> torch.Tensor:
        speed, noise, gain = self.config.speed, self.config.noise, self.config.gain
        if speed.enabled:
            factor = float(speed.factors[torch.randint(len(speed.factors), ()).item()])
            wave = speed_perturb(wave, self.sample_rate, factor)
        if noise.enabled and torch.rand(()).item() < noise.prob:
            recordings = self.noises()
            clip = recordings[torch.randint(len(recordings), ()).item()]
            if len(clip) > len(wave):
                start = torch.randint(len(clip) - len(wave) + 1, ()).item()
                clip = clip[start:start + len(wave)]
            wave = add_noise(wave, clip, _uniform(noise.snr_db))
        band = self.config.narrowband
        if band.enabled and torch.rand(()).item() < band.prob:
            wave = band_limit(wave, self.sample_rate, band.rate)
        if gain.enabled:
            wave = apply_gain(wave, _uniform(gain.db))
        return wave

"""The torchaudio front end against librosa, its reference, on real speech; CMVN; SpecAugment."""

import librosa
import numpy as np
import pytest
import torch

from asr.audio import load_audio
from asr.features import FeatureConfig, FrontEnd, vtlp_warp
from helpers import COMMANDS, fsdd_file

pytestmark = [pytest.mark.tier("fast"), pytest.mark.data]


@pytest.fixture(scope="module")
def waves() -> list[torch.Tensor]:
    return [load_audio(fsdd_file(5), 16000), load_audio(sorted((COMMANDS / "yes").glob("*.wav"))[0],
                                                        16000)]


def librosa_mel(wave: torch.Tensor, cfg: FeatureConfig) -> np.ndarray:
    return librosa.feature.melspectrogram(
        y=wave.numpy(), sr=cfg.sample_rate, n_fft=cfg.n_fft, hop_length=cfg.hop_length,
        win_length=cfg.win_length, center=False, power=2.0, n_mels=cfg.n_mels)


@pytest.mark.parametrize("kind", ["fbank", "mfcc"])
def test_front_end_matches_librosa(waves, kind):
    cfg = FeatureConfig(kind=kind)
    front = FrontEnd(cfg).eval()
    for wave in waves:
        ours, frames = front(wave[None], torch.tensor([len(wave)]))
        mel = librosa_mel(wave, cfg)
        if kind == "fbank":
            reference = np.log(mel + 1e-6)
        else:
            reference = librosa.feature.mfcc(S=librosa.power_to_db(mel), n_mfcc=cfg.n_mfcc)
        assert ours.shape == (1, reference.shape[1], cfg.dim) and frames.item() == reference.shape[1]
        assert np.allclose(ours[0].numpy(), reference.T, atol=1e-2, rtol=1e-3)


def test_batching_does_not_change_features(waves):
    front = FrontEnd(FeatureConfig()).eval()
    batch = torch.nn.utils.rnn.pad_sequence(waves, batch_first=True)
    feats, frames = front(batch, torch.tensor([len(w) for w in waves]))
    for i, wave in enumerate(waves):
        alone, n = front(wave[None], torch.tensor([len(wave)]))
        assert frames[i] == n.item()
        assert torch.allclose(feats[i, :n], alone[0], atol=1e-5)
        assert feats[i, n:].abs().sum() == 0  # padding frames are zero


def test_cmvn_normalises_to_zero_mean_unit_variance(waves):
    front = FrontEnd(FeatureConfig()).eval()
    lengths = torch.tensor([len(w) for w in waves])
    batch = torch.nn.utils.rnn.pad_sequence(waves, batch_first=True)
    count = front.set_cmvn([(batch, lengths)])
    feats, frames = front(batch, lengths)
    valid = torch.cat([feats[i, :n] for i, n in enumerate(frames.tolist())])
    assert count == len(valid)
    assert torch.allclose(valid.mean(0), torch.zeros(80), atol=1e-4)
    assert torch.allclose(valid.std(0, unbiased=False), torch.ones(80), atol=1e-3)


def test_utterance_cmn_ignores_padding(waves):
    front = FrontEnd(FeatureConfig(utterance_cmn=True)).eval()
    lengths = torch.tensor([len(w) for w in waves])
    feats, frames = front.raw(torch.nn.utils.rnn.pad_sequence(waves, batch_first=True), lengths)
    for i, n in enumerate(frames.tolist()):
        alone, _ = front.raw(waves[i][None], lengths[i:i + 1])
        assert torch.allclose(feats[i, :n], alone[0], atol=1e-4)
        assert torch.allclose(feats[i, :n].mean(0), torch.zeros(80), atol=1e-4)


@pytest.mark.parametrize("cmn, floor, moved", [(False, 1e-10, True), (True, 1e-6, True),
                                                (True, 1e-10, False)])
def test_gain_invariance_needs_utterance_cmn_and_a_low_floor(waves, cmn, floor, moved):
    """20 dB quieter: a constant in the log domain, which the utterance mean removes, where
    the floor leaves the quiet version's spectrum alone (an FSDD clip: 8 kHz, so no energy
    above 4 kHz)."""
    front = FrontEnd(FeatureConfig(utterance_cmn=cmn, log_floor=floor)).eval()
    wave, length = waves[0][None], torch.tensor([len(waves[0])])
    change = (front.raw(wave, length)[0] - front.raw(wave * 0.1, length)[0]).abs().median()
    assert (change > 0.2) if moved else (change < 0.01)


def test_spec_augment_only_in_training(waves):
    front = FrontEnd(FeatureConfig(freq_width=20, time_width=30))
    wave, lengths = waves[0][None], torch.tensor([len(waves[0])])
    torch.manual_seed(0)
    masked, _ = front.train()(wave, lengths)
    clean, _ = front.eval()(wave, lengths)
    assert (masked == 0).sum() > (clean == 0).sum()
    assert torch.equal(clean, front(wave, lengths)[0])  # eval is deterministic


def tone_power(front: FrontEnd, hz: float) -> torch.Tensor:
    t = torch.arange(16000) / 16000
    return front.power(torch.sin(2 * np.pi * hz * t)[None])


@pytest.mark.parametrize(("hz", "alpha", "expected_hz"), [
    (1000.0, 1.0, 1000.0), (1000.0, 1.1, 1100.0), (1000.0, 0.9, 900.0),  # below the boundary: x alpha
    # above the boundary (4.8 kHz out, 4.8 / 1.1 in) the map runs straight to Nyquist
    (7000.0, 1.1, 8000 - (8000 - 4800) / (8000 - 4800 / 1.1) * (8000 - 7000)),
])
def test_vtlp_moves_a_tone_by_the_warp_factor(hz, alpha, expected_hz):
    front = FrontEnd(FeatureConfig())
    warped = vtlp_warp(tone_power(front, hz), torch.tensor([alpha]))
    peak_hz = warped[0].mean(-1).argmax().item() * 16000 / 512
    assert abs(peak_hz - expected_hz) <= 16000 / 512 / 2 + 1e-6
    if alpha == 1.0:
        assert torch.allclose(warped, tone_power(front, hz), rtol=1e-5, atol=1e-6)


def test_vtlp_only_in_training_and_per_utterance(waves):
    front = FrontEnd(FeatureConfig(vtlp=0.1))
    wave = waves[0][None].repeat(4, 1)
    lengths = torch.full((4,), waves[0].shape[0])
    torch.manual_seed(0)
    warped, _ = front.train()(wave, lengths)
    clean, _ = front.eval()(wave, lengths)
    assert all(not torch.allclose(w, clean[0], atol=1e-3) for w in warped)
    assert not torch.allclose(warped[0], warped[1], atol=1e-3)  # a factor per utterance
    assert torch.equal(clean[0], clean[3])
    assert torch.equal(clean, FrontEnd(FeatureConfig()).eval()(wave, lengths)[0])


@pytest.mark.parametrize("cfg", [FeatureConfig(), FeatureConfig(sample_rate=8000, n_fft=256),
                                 FeatureConfig(n_fft=400)], ids=["16k", "8k", "window=n_fft"])
def test_dft_convolution_is_the_fft_power_spectrum(waves, cfg):
    """What the ONNX export computes instead of the FFT (no complex numbers there): the same
    frames and the same power to float rounding, on real speech of any length."""
    front = FrontEnd(cfg)
    for wave in waves:
        for length in (cfg.n_fft, len(wave) - 37):
            fft, dft = front.power(wave[None, :length]), front.dft_power(wave[None, :length])
            assert dft.shape == fft.shape
            assert torch.allclose(dft, fft, rtol=1e-4, atol=1e-7 * float(fft.max()))

"""Audio in: formats, rates and channels are converted; bad files give one clear error."""

import numpy as np
import pytest
import soundfile as sf
import torch

from asr.audio import AudioError, load_audio, prepare_array
from conftest import fsdd_file


@pytest.fixture
def speech() -> tuple[np.ndarray, int]:
    samples, rate = sf.read(str(fsdd_file(3)), dtype="float32")
    return samples, rate


@pytest.mark.parametrize("fmt,subtype", [("WAV", "PCM_16"), ("WAV", "PCM_24"), ("WAV", "PCM_U8"),
                                         ("WAV", "FLOAT"), ("FLAC", "PCM_16")])
def test_formats_load_as_mono_float_at_model_rate(tmp_path, speech, fmt, subtype):
    samples, rate = speech
    path = tmp_path / f"clip.{fmt.lower()}"
    sf.write(str(path), samples, rate, format=fmt, subtype=subtype)
    wave = load_audio(path, 16000)
    assert wave.dtype == torch.float32 and wave.ndim == 1
    assert len(wave) == 2 * len(samples)  # 8 kHz -> 16 kHz
    reference = load_audio(fsdd_file(3), 16000)
    assert torch.allclose(wave, reference, atol=0.02)


def test_channels_are_averaged_and_rates_converted(tmp_path, speech):
    samples, _ = speech
    stereo = np.stack([samples, np.zeros_like(samples)], axis=1)
    path = tmp_path / "stereo_44k.wav"
    sf.write(str(path), stereo, 44100)
    wave = load_audio(path, 16000)
    assert abs(len(wave) - round(len(samples) * 16000 / 44100)) <= 1
    assert abs(wave.abs().max().item() - np.abs(samples).max() / 2) < 0.05


def test_arrays_are_checked_like_files():
    with pytest.raises(AudioError, match=r"^<array>: contains NaN"):
        prepare_array(np.array([0.0, np.inf]), 16000, 16000)
    with pytest.raises(AudioError, match=r"^mic: expected a non-empty"):
        prepare_array(np.zeros(0), 16000, 16000, name="mic")
    assert prepare_array(np.ones((8000, 2)), 8000, 16000).shape == (16000,)

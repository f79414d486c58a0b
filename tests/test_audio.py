"""Audio in: formats, rates and channels are converted; bad files give one clear error."""

import numpy as np
import pytest
import soundfile as sf
import torch

from asr.audio import AudioError, load_audio, prepare_array
from helpers import fsdd_file

pytestmark = [pytest.mark.tier("fast"), pytest.mark.data]


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


@pytest.mark.parametrize("layout", [
    lambda x: x[None, :],  # torchaudio.load: (channels, frames)
    lambda x: torch.from_numpy(x).expand(2, -1).clone(),  # torchaudio, stereo
    lambda x: np.stack([x, x], axis=1),  # soundfile: (frames, channels)
    lambda x: x[:, None],
    lambda x: (x * 32768).round().astype(np.int16),  # scipy.io.wavfile: int16 PCM
    lambda x: ((x * 32768).round().astype(np.int32) << 16),  # int32 PCM
    lambda x: (x * 128 + 128).round().clip(0, 255).astype(np.uint8),  # 8-bit WAV
], ids=["1xN", "2xN torch", "Nx2", "Nx1", "int16", "int32", "uint8"])
def test_array_layouts_of_other_libraries_read_as_the_same_signal(speech, layout):
    """A (1, N) array was averaged over its samples into one sample: silently wrong."""
    samples, rate = speech
    mono = prepare_array(samples, rate, 16000)
    assert torch.allclose(prepare_array(layout(samples), rate, 16000), mono, atol=1 / 64)


@pytest.mark.parametrize("array,problem", [
    (np.zeros((2, 2)), "cannot tell the channels from the samples of a 2 x 2 array"),
    (np.zeros((100, 100)), "cannot tell the channels from the samples of a 100 x 100 array"),
    (np.zeros((2, 2, 2)), "expected a non-empty 1-D or 2-D array, got shape (2, 2, 2)"),
    (np.zeros(16000, np.int64), "samples must be floats in [-1, 1] or 8/16/32-bit integer PCM, "
                                "got torch.int64"),
    (np.zeros(16000, complex), "samples must be floats in [-1, 1] or 8/16/32-bit integer PCM"),
    (object(), "not an array of samples"),
    (np.zeros(301 * 8000, np.float32), "too long: 301.0 s, over the 300 s limit for one input"),
])
def test_arrays_that_are_no_waveform_are_refused(array, problem):
    with pytest.raises(AudioError) as caught:
        prepare_array(array, 8000, 16000)
    assert str(caught.value).startswith(f"<array>: {problem}")


def test_arrays_are_checked_like_files():
    with pytest.raises(AudioError, match=r"^<array>: contains NaN"):
        prepare_array(np.array([0.0, np.inf]), 16000, 16000)
    with pytest.raises(AudioError, match=r"^mic: expected a non-empty"):
        prepare_array(np.zeros(0), 16000, 16000, name="mic")
    assert prepare_array(np.ones((8000, 2)), 8000, 16000).shape == (16000,)

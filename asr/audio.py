"""Audio in: any WAV/FLAC (rate, bit depth, channels) -> mono float32 at the model's rate.

soundfile reads the file (torchaudio.load would need FFmpeg); torchaudio resamples. Every
failure becomes one `AudioError` whose message starts with the file name, so a CLI can print
a single clear line instead of a traceback.
"""

from pathlib import Path

import numpy as np
import soundfile as sf
import torch
import torchaudio.functional as AF


class AudioError(ValueError):
    """A file that cannot be used as audio; the message names the file and the problem."""

    def __init__(self, path: str | Path, problem: str) -> None:
        super().__init__(f"{path}: {problem}")
        self.path = str(path)
        self.problem = problem


def read_audio(path: str | Path) -> tuple[np.ndarray, int]:
    """Read a file as float32 samples (frames, channels) and its sample rate, checking it."""
    path = Path(path)
    if not path.exists():
        raise AudioError(path, "no such file")
    if path.is_dir():
        raise AudioError(path, "is a directory, not an audio file")
    if path.stat().st_size == 0:
        raise AudioError(path, "empty file")
    _check_wav_length(path)
    try:
        samples, rate = sf.read(str(path), dtype="float32", always_2d=True)
    except (sf.LibsndfileError, RuntimeError, ValueError, TypeError) as err:
        raise AudioError(path, f"not readable as audio ({_first_line(err)})") from None
    if samples.shape[0] == 0:
        raise AudioError(path, "contains no samples")
    if not np.isfinite(samples).all():
        raise AudioError(path, "contains NaN or infinite samples")
    return samples, rate


def _check_wav_length(path: Path) -> None:
    """Refuse a WAV whose data chunk is shorter than its header declares.

    libsndfile silently reads what is there, so a file cut off mid-copy would otherwise be
    transcribed as if the speaker had stopped talking.
    """
    with path.open("rb") as f:
        header = f.read(12)
        if len(header) < 12 or header[:4] != b"RIFF" or header[8:12] != b"WAVE":
            return
        while chunk := f.read(8):
            if len(chunk) < 8:
                return
            size = int.from_bytes(chunk[4:], "little")
            if chunk[:4] == b"data":
                available = path.stat().st_size - f.tell()
                if 0 < size < 0xFFFFFFFF and available < size:
                    raise AudioError(path, f"truncated: header declares {size} bytes of audio, "
                                           f"file holds {available}")
                return
            f.seek(size + size % 2, 1)


def to_mono(samples: np.ndarray) -> np.ndarray:
    """Average the channels: a recogniser hears one signal."""
    return samples.mean(axis=1) if samples.ndim == 2 else samples


def resample(wave: torch.Tensor, orig_rate: int, new_rate: int) -> torch.Tensor:
    """Resample a 1-D waveform with torchaudio's band-limited sinc interpolation."""
    if orig_rate == new_rate:
        return wave
    return AF.resample(wave, orig_rate, new_rate)


def load_audio(path: str | Path, sample_rate: int) -> torch.Tensor:
    """Load a file as a 1-D float32 tensor of mono samples at `sample_rate`."""
    samples, rate = read_audio(path)
    wave = torch.from_numpy(np.ascontiguousarray(to_mono(samples)))
    return resample(wave, rate, sample_rate)


def prepare_array(samples: np.ndarray | torch.Tensor, rate: int, sample_rate: int,
                  name: str = "<array>") -> torch.Tensor:
    """Check and convert in-memory samples (1-D, or frames x channels) like a loaded file."""
    array = torch.as_tensor(samples, dtype=torch.float32)
    if array.ndim == 2:
        array = array.mean(dim=1)
    if array.ndim != 1 or array.numel() == 0:
        raise AudioError(name, f"expected a non-empty 1-D or 2-D array, got shape {tuple(array.shape)}")
    if not torch.isfinite(array).all():
        raise AudioError(name, "contains NaN or infinite samples")
    return resample(array, rate, sample_rate)


def audio_duration(path: str | Path) -> float:
    """Duration in seconds from the header alone, without decoding the samples."""
    try:
        info = sf.info(str(path))
    except (sf.LibsndfileError, RuntimeError) as err:
        raise AudioError(path, f"not readable as audio ({_first_line(err)})") from None
    return info.frames / info.samplerate


def _first_line(err: Exception) -> str:
    """The library's own words, on one line, without the path it repeats."""
    text = getattr(err, "error_string", None) or str(err)
    text = text.strip().splitlines()
    return text[0] if text else type(err).__name__

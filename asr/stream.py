"""Audio in, in bounded memory: a file (or array) as a stream of mono blocks at the model's rate.

A long recording is never held whole: soundfile reads it a block at a time
(`soundfile.blocks`) and soxr resamples the blocks as one continuous stream
(`soxr.ResampleStream` keeps the filter state between them, so there are no seams).
Errors are `AudioError`s naming the file, as for `asr.audio.load_audio`.
"""

from collections.abc import Iterator
from pathlib import Path

import numpy as np
import soundfile as sf
import soxr
import torch

from asr.audio import AudioError, _check_wav_length, audio_duration, prepare_array, to_mono


def check_audio_file(path: str | Path) -> float:
    """Fail early, with one clear line, on a file that cannot be streamed; its duration."""
    path = Path(path)
    if not path.exists():
        raise AudioError(path, "no such file")
    if path.is_dir():
        raise AudioError(path, "is a directory, not an audio file")
    if path.stat().st_size == 0:
        raise AudioError(path, "empty file")
    _check_wav_length(path)
    duration = audio_duration(path)
    if duration == 0:
        raise AudioError(path, "contains no samples")
    return duration


def stream_file(path: str | Path, sample_rate: int, block_seconds: float = 1.0,
                ) -> Iterator[np.ndarray]:
    """Mono float32 blocks of a file at `sample_rate`."""
    check_audio_file(path)
    rate = sf.info(str(path)).samplerate
    blocks = sf.blocks(str(path), blocksize=max(1, int(rate * block_seconds)), dtype="float32",
                       always_2d=True)
    yield from _resampled(_checked(blocks, path), rate, sample_rate)


def stream_array(samples: np.ndarray | torch.Tensor, rate: int, sample_rate: int,
                 block_seconds: float = 1.0) -> Iterator[np.ndarray]:
    """An in-memory waveform (checked and resampled as `prepare_array` does) in blocks."""
    wave = prepare_array(samples, rate, sample_rate).numpy()
    step = max(1, int(sample_rate * block_seconds))
    for start in range(0, len(wave), step):
        yield wave[start:start + step]


def _checked(blocks: Iterator[np.ndarray], path: str | Path) -> Iterator[np.ndarray]:
    try:
        for block in blocks:
            if not np.isfinite(block).all():
                raise AudioError(path, "contains NaN or infinite samples")
            yield to_mono(block)
    except (sf.LibsndfileError, RuntimeError) as err:
        raise AudioError(path, f"not readable as audio ({err})") from None


def _resampled(blocks: Iterator[np.ndarray], rate: int, sample_rate: int) -> Iterator[np.ndarray]:
    if rate == sample_rate:
        yield from blocks
        return
    resampler = soxr.ResampleStream(rate, sample_rate, 1, dtype="float32")
    for block in blocks:
        out = resampler.resample_chunk(np.ascontiguousarray(block, dtype=np.float32))
        if out.size:
            yield out
    yield resampler.resample_chunk(np.zeros(0, dtype=np.float32), last=True)

"""Audio in, in bounded memory: a file (or array) as a stream of mono blocks at the model's rate.

A long recording is never held whole: `asr.audio.stream_audio` decodes it a block at a time
(checked as it goes) and soxr resamples the blocks as one continuous stream
(`soxr.ResampleStream` keeps the filter state between them, so there are no seams).
Errors are `AudioError`s naming the file, as for `asr.audio.load_audio`.
"""

from collections.abc import Iterator
from pathlib import Path

import numpy as np
import soxr
import torch

from asr.audio import AudioError, prepare_array, stream_audio


def check_audio_file(path: str | Path) -> None:
    """Fail early, with one clear line, on a file that cannot be streamed.

    Decodes the first block, so an unreadable or empty file is refused before any decoding.
    """
    blocks, _ = stream_audio(path)
    if next(blocks, None) is None:
        raise AudioError(path, "contains no samples")
    blocks.close()


def stream_file(path: str | Path, sample_rate: int, block_seconds: float = 1.0,
                max_seconds: float | None = None) -> Iterator[np.ndarray]:
    """Mono float32 blocks of a file of any length (or at most `max_seconds`) at `sample_rate`."""
    blocks, rate = stream_audio(path, max_seconds)
    yield from _resampled(_rechunked(blocks, max(1, int(rate * block_seconds))), rate, sample_rate)


def stream_array(samples: np.ndarray | torch.Tensor, rate: int, sample_rate: int,
                 block_seconds: float = 1.0, max_seconds: float | None = None,
                 ) -> Iterator[np.ndarray]:
    """An in-memory waveform (checked and resampled as `prepare_array` does) in blocks."""
    wave = prepare_array(samples, rate, sample_rate, max_seconds=max_seconds).numpy()
    step = max(1, int(sample_rate * block_seconds))
    for start in range(0, len(wave), step):
        yield wave[start:start + step]


def _rechunked(blocks: Iterator[np.ndarray], size: int) -> Iterator[np.ndarray]:
    """The decoder's large blocks as blocks of `size` samples (a live stream's pace)."""
    for block in blocks:
        for start in range(0, len(block), size):
            yield block[start:start + size]


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

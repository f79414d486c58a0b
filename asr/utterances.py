"""Inputs -> utterances -> batches: how `asr.transcriber.Transcriber` feeds the decoder.

Each input (a path or an array) is streamed (`asr.stream`) and cut into utterances by the
voice activity detector (`asr.vad`), or taken whole without one; the utterances of all inputs
go to the decoder `batch_size` at a time as they come, so memory stays bounded however long
the inputs are, and come back in order.
"""

from collections.abc import Callable, Iterable, Iterator
from pathlib import Path
from typing import TypeVar

import numpy as np
import torch

from asr.audio import MAX_SECONDS, AudioError, audio_duration
from asr.stream import stream_array, stream_file
from asr.vad import SpeechSpan, VADConfig, split_utterances

AudioInput = str | Path | np.ndarray | torch.Tensor
Item = SpeechSpan | AudioError | None  # an utterance, or the end of an input (None: read whole)
Result = TypeVar("Result")


def input_starts(inputs: list[AudioInput], sample_rate: int | None,
                 model_rate: int) -> list[float]:
    """Where each input begins in all of them, and (last) their total, in seconds (an
    unreadable file counts as empty: transcribing it reports why). Arrays are at
    `sample_rate` (default: `model_rate`)."""
    starts = [0.0]
    for audio in inputs:
        try:
            seconds = audio_duration(audio) if isinstance(audio, str | Path) \
                else len(audio) / (sample_rate or model_rate)
        except AudioError:
            seconds = 0.0
        starts.append(starts[-1] + seconds)
    return starts


def read_utterances(inputs: Iterable[AudioInput], sample_rate: int | None, model_rate: int,
                    vad: VADConfig | None) -> Iterator[Item]:
    """Every utterance of every input at `model_rate`, in order; after each input's last one,
    None, or the AudioError that cut it short."""
    for audio in inputs:
        try:
            yield from input_utterances(audio, sample_rate, model_rate, vad)
        except AudioError as err:
            yield err
        else:
            yield None


def input_utterances(audio: AudioInput, sample_rate: int | None, model_rate: int,
                     vad: VADConfig | None) -> Iterator[SpeechSpan]:
    """One input's utterances; without a VAD the whole input, up to MAX_SECONDS."""
    limit = MAX_SECONDS if vad is None else None
    if isinstance(audio, str | Path):
        blocks = stream_file(audio, model_rate, max_seconds=limit)
    else:
        rate = model_rate if sample_rate is None else sample_rate
        blocks = stream_array(audio, rate, model_rate, max_seconds=limit)
    if vad is None:
        wave = np.concatenate(list(blocks))
        yield SpeechSpan(0.0, round(len(wave) / model_rate, 3), wave)
    else:
        yield from split_utterances(blocks, model_rate, vad)


def speech_span(utterance: SpeechSpan, vad: VADConfig | None) -> tuple[float, float]:
    """Where the speech lies: the VAD keeps `pad_ms` of context on both sides of it for the
    decoder, which the reported times leave out."""
    if vad is None:
        return utterance.start, utterance.end
    pad = vad.pad_ms / 1000
    middle = (utterance.start + utterance.end) / 2
    return (round(min(utterance.start + pad, middle), 3),
            round(max(utterance.end - pad, middle), 3))


def in_batches(items: Iterable[Item], batch_size: int,
               decode: Callable[[list[torch.Tensor]], list[Result]],
               ) -> Iterator[tuple[Item, Result | None]]:
    """Decode utterances `batch_size` at a time, as they come (bounded memory); every item
    comes out in order, an utterance with what `decode` made of it, an end of input with None."""
    pending: list[Item] = []
    count = 0  # utterances in `pending`
    for item in items:
        if not isinstance(item, SpeechSpan) and not count:
            yield item, None  # nothing before it waits to be decoded
            continue
        pending.append(item)
        count += isinstance(item, SpeechSpan)
        if count == batch_size:
            yield from _flush(pending, decode)
            pending, count = [], 0
    yield from _flush(pending, decode)


def _flush(pending: list[Item], decode: Callable[[list[torch.Tensor]], list[Result]],
           ) -> Iterator[tuple[Item, Result | None]]:
    waves = [torch.from_numpy(p.samples) for p in pending if isinstance(p, SpeechSpan)]
    found = iter(decode(waves) if waves else [])
    for item in pending:
        yield item, next(found) if isinstance(item, SpeechSpan) else None


def by_length(waves: list[torch.Tensor], batch_size: int,
              decode: Callable[[list[torch.Tensor]], list[Result]]) -> list[Result]:
    """`decode` over batches of similar length (less padding), the results in input order."""
    order = sorted(range(len(waves)), key=lambda i: len(waves[i]))
    results: list[Result | None] = [None] * len(waves)
    for start in range(0, len(order), batch_size):
        chunk = order[start:start + batch_size]
        for i, result in zip(chunk, decode([waves[i] for i in chunk]), strict=True):
            results[i] = result
    return results

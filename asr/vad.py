"""Voice activity detection: a stream of samples -> utterances with start and end times.

One `Endpointer` serves both uses of the toolkit: the microphone demo feeds it blocks as they
arrive and acts on each utterance as soon as its trailing silence is heard; long files are cut
into utterances by feeding the file through the same object (`split_utterances`). Frames are
classified by WebRTC's VAD (`webrtcvad-wheels`, a small C library: no model download, ~30 us a
frame). The frame decisions are smoothed here: speech starts after `start_frames` voiced frames
among the last few, ends after `end_silence_ms` of silence, and keeps `pad_ms` of context on
both sides so that word onsets and releases are not clipped.
"""

import functools
from collections import deque
from collections.abc import Iterable, Iterator
from dataclasses import dataclass

import numpy as np
import webrtcvad

from asr.untrusted import check_fields, check_ranges

VAD_RATES = (8000, 16000, 32000, 48000)  # the rates WebRTC's VAD accepts


@dataclass
class VADConfig:
    """How to find utterances; `conf/vad/*.yaml` fill it."""

    aggressiveness: int = 2  # 0 (keeps most audio) .. 3 (drops most non-speech)
    frame_ms: int = 30  # 10, 20 or 30: WebRTC's frame sizes
    start_frames: int = 3  # voiced frames, among the last `pad_ms`, that start an utterance
    end_silence_ms: int = 400  # silence that ends an utterance
    pad_ms: int = 210  # audio kept before the first and after the last voiced frame
    min_speech_ms: int = 120  # voiced time below which an utterance is dropped as a click
    max_utterance_s: float = 20.0  # longer speech is cut here (bounded memory and model input)
    # An utterance none of whose voiced frames has a spectrum this peaked is noise, not speech,
    # and is dropped. Spectral flatness (geometric over arithmetic mean power, 200-6000 Hz): 0
    # for a pure tone, about 0.56 for white noise, which WebRTC's VAD takes for speech; every
    # vowel is far below (clean speech under 0.04, in white noise at 0 dB SNR mostly under
    # 0.35). 1 keeps every utterance.
    max_flatness: float = 0.35

    def __post_init__(self) -> None:
        check_fields(self, "vad")
        if self.frame_ms not in (10, 20, 30):
            raise ValueError(f"vad.frame_ms must be 10, 20 or 30, got {self.frame_ms}")
        check_ranges(self, "vad", aggressiveness=(0, 3), end_silence_ms=(0, 10000),
                     pad_ms=(0, 5000), min_speech_ms=(0, 10000), max_utterance_s=(0.1, 300),
                     max_flatness=(0, 1))
        window = max(1, round(self.pad_ms / self.frame_ms))  # frames a start is looked for in
        if not 1 <= self.start_frames <= window:
            raise ValueError(f"vad.start_frames must be in [1, {window}] (the frames of "
                             f"vad.pad_ms), got {self.start_frames}: no speech could ever start")


@dataclass(frozen=True)
class SpeechSpan:
    """A stretch of speech: its samples and where it lies in the stream, in seconds."""

    start: float
    end: float
    samples: np.ndarray


class Endpointer:
    """Feed samples in blocks of any size; get back each utterance once it has ended.

    Samples are mono float in [-1, 1] at `sample_rate` (one of VAD_RATES). The result does
    not depend on how the stream is cut into blocks.
    """

    def __init__(self, sample_rate: int = 16000, config: VADConfig | None = None) -> None:
        self.config = config or VADConfig()
        if sample_rate not in VAD_RATES:
            raise ValueError(f"VAD needs a sample rate in {VAD_RATES}, got {sample_rate}")
        self.sample_rate = sample_rate
        self.frame = sample_rate * self.config.frame_ms // 1000
        self._vad = webrtcvad.Vad(self.config.aggressiveness)
        self._pad = max(1, self._frames(self.config.pad_ms))
        self._end_silence = max(1, self._frames(self.config.end_silence_ms))
        self._min_voiced = self._frames(self.config.min_speech_ms)
        self._max_frames = max(1, round(self.config.max_utterance_s * 1000 / self.config.frame_ms))
        self._pending = np.zeros(0, dtype=np.float32)
        self._index = 0  # frames classified so far
        self._recent: deque[tuple[np.ndarray, bool, bool]] = deque(maxlen=self._pad)
        self._frames_in: list[np.ndarray] | None = None  # the utterance being heard, if any
        self._start = 0  # its first frame's index
        self._voiced = 0  # its voiced frames
        self._peaked = False  # whether one of them is peaked enough for speech (max_flatness)
        self._silence = 0  # unvoiced frames since its last voiced one

    def _frames(self, ms: float) -> int:
        return round(ms / self.config.frame_ms)

    @property
    def in_speech(self) -> bool:
        """Whether an utterance has started and not yet ended."""
        return self._frames_in is not None

    @property
    def pause_ms(self) -> int:
        """Silence since the last voiced frame of the utterance in progress (0 when none)."""
        return self._silence * self.config.frame_ms if self._frames_in is not None else 0

    def peek(self) -> SpeechSpan | None:
        """The utterance in progress as `flush` would close it now, without closing it."""
        if self._frames_in is None or not self._peaked:
            return None
        keep = self._kept()
        return self._utterance(self._frames_in[:keep], self._start)

    def feed(self, samples: np.ndarray) -> list[SpeechSpan]:
        """Classify the whole frames now available; return the utterances they complete."""
        block = np.asarray(samples, dtype=np.float32).reshape(-1)
        buffer = np.concatenate([self._pending, block]) if self._pending.size else block
        whole = buffer.size // self.frame
        ended = []
        for i in range(whole):
            ended += self._step(buffer[i * self.frame:(i + 1) * self.frame])
        self._pending = buffer[whole * self.frame:].copy()
        return ended

    def flush(self) -> list[SpeechSpan]:
        """End of stream: close the utterance in progress, if it holds enough speech."""
        if self._frames_in is None:
            return []
        return self._close(self._kept())

    def _kept(self) -> int:
        """Frames of the open utterance to keep: its speech and at most `pad` of the silence
        after it."""
        return len(self._frames_in) - self._silence + min(self._silence, self._pad)

    def _step(self, frame: np.ndarray) -> list[SpeechSpan]:
        pcm = (np.clip(frame, -1.0, 1.0) * 32767).astype("<i2").tobytes()
        voiced = self._vad.is_speech(pcm, self.sample_rate)
        peaked = voiced and (self.config.max_flatness >= 1
                             or spectral_flatness(frame, self.sample_rate)
                             < self.config.max_flatness)
        self._index += 1
        if self._frames_in is None:
            self._recent.append((frame, voiced, peaked))
            if sum(v for _, v, _ in self._recent) >= self.config.start_frames:
                self._frames_in = [f for f, _, _ in self._recent]
                self._start = self._index - len(self._recent)
                self._voiced = sum(v for _, v, _ in self._recent)
                self._peaked = any(p for _, _, p in self._recent)
                self._silence = 0
                self._recent.clear()
            return []
        self._frames_in.append(frame)
        self._voiced += voiced
        self._peaked |= peaked
        self._silence = 0 if voiced else self._silence + 1
        if not self._peaked and len(self._frames_in) > 2 * self._pad:
            self._frames_in.pop(0)  # noise so far: only the last 2 x pad_ms stay, as lead-in
            self._start += 1
            self._voiced = min(self._voiced, len(self._frames_in))
        if self._silence >= self._end_silence:
            return self._close(self._kept())
        if len(self._frames_in) >= self._max_frames:
            return self._cut()
        return []

    def _close(self, keep: int) -> list[SpeechSpan]:
        """End the utterance after its first `keep` frames; drop it if it is only a click."""
        frames, start, voiced = self._frames_in, self._start, self._voiced
        self._frames_in = None
        tail = frames[keep:]
        self._recent.extend((f, False, False) for f in tail[-self._pad:])
        if voiced < max(1, self._min_voiced) or not self._peaked:
            return []  # a click, or noise
        return [self._utterance(frames[:keep], start)]

    def _cut(self) -> list[SpeechSpan]:
        """Speech that will not stop: emit what we have and go on listening, still in speech
        (noise that will not stop: drop it and go on)."""
        frames, start, peaked = self._frames_in, self._start, self._peaked
        self._frames_in, self._start, self._voiced, self._silence = [], self._index, 0, 0
        self._peaked = False
        return [self._utterance(frames, start)] if peaked else []

    def _utterance(self, frames: list[np.ndarray], start: int) -> SpeechSpan:
        seconds = self.frame / self.sample_rate
        return SpeechSpan(round(start * seconds, 3), round((start + len(frames)) * seconds, 3),
                         np.concatenate(frames))


def spectral_flatness(frame: np.ndarray, sample_rate: int) -> float:
    """Geometric over arithmetic mean of a Hann-windowed frame's power, 200-6000 Hz: near 0
    for harmonics (voiced speech), about 0.56 for white noise."""
    window, in_band = _spectrum_setup(len(frame), sample_rate)
    band = (np.abs(np.fft.rfft(frame * window)) ** 2 + 1e-12)[in_band]
    return float(np.exp(np.log(band).mean()) / band.mean())


@functools.lru_cache(maxsize=8)
def _spectrum_setup(length: int, sample_rate: int) -> tuple[np.ndarray, np.ndarray]:
    """The Hann window and the 200-6000 Hz bins of a frame length, made once, not per frame."""
    freqs = np.fft.rfftfreq(length, 1 / sample_rate)
    return np.hanning(length), (freqs >= 200) & (freqs <= 6000)


def split_utterances(blocks: Iterable[np.ndarray], sample_rate: int,
                     config: VADConfig | None = None) -> Iterator[SpeechSpan]:
    """Utterances of a stream given as blocks (e.g. `soundfile.blocks`), in bounded memory."""
    endpointer = Endpointer(sample_rate, config)
    for block in blocks:
        yield from endpointer.feed(block)
    yield from endpointer.flush()

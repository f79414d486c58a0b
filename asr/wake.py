"""Wake words: any phrase, given as text, heard in a stream by the model's CTC head, with no
training (as sherpa-onnx's keyword spotter takes its keywords as text).

    from asr.wake import WakeWordDetector
    detector = WakeWordDetector(["computer", "hey jarvis"], sensitivity=0.5)
    index = detector.process(frame)      # 512 samples of 16 kHz audio -> a phrase's index or -1
    for found in detector.detect("room.wav"):   # a file of any length, in bounded memory
        print(found.time, found.phrase, found.score)

The encoder (full attention, utterance mean normalisation) runs on a window of the last
`WakeConfig.window_s` of audio every `hop_s`; the CTC head's log-probabilities of that window
are searched for each phrase's pieces anywhere in it (`PhraseTrellis`: a keyword CTC with a
free path on either side). A phrase's score is the log-likelihood ratio of its best span: the
phrase's path over those frames against the best free path over the same frames (the CTC head's
most likely piece on every frame, as `asr.decoding.garbage_ratio` compares a grammar sentence
with it), in nats: 0 when the phrase explains its frames as well as anything could, more
negative the more they say something else. A phrase is heard when its score is at least
`-margin`; `sensitivity` sets the margin around the one calibrated on held-out speakers and
background speech, stored beside the model (DIR/wake.json, `calibrated_margin`). Memory is the
window and the search's few states, whatever the length of the stream.

A phrase is written by the model's tokenizer (a phrase it cannot write is refused); `|` gives
it other spellings, each searched ("thinkengine|think engine": the first names the phrase).
"""

import json
import math
from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import torch

from asr.checkpoint import ModelDirError
from asr.models import model_path
from asr.stream import stream_array, stream_file
from asr.text import normalize_text
from asr.tokenizer import BOS_ID, EOS_ID, PAD_ID, UNK_ID, Tokenizer
from asr.transcriber import Transcriber
from asr.untrusted import UntrustedInputError, check_fields, check_ranges, first_line, read_text

FRAME_LENGTH = 512  # samples a `process` call takes: 32 ms at 16 kHz (Porcupine's frame)
WAKE_FILE = "wake.json"  # the calibrated margin, beside the model's weights
DEFAULT_MARGIN = 3.0  # nats below a perfect match, for a model without a calibration
DEFAULT_SENSITIVITY = 0.5  # the sensitivity the stored margin was calibrated for
SENSITIVITY_RANGE = 4.0  # sensitivity 0 divides the margin by this, 1 multiplies it
MIN_WINDOW_S = 0.5  # audio heard before the first window is searched
SILENCE_RMS = 1e-4  # a window quieter than this (about -80 dBFS) is not searched
_NEG = -1e30  # log-probability of a state not reached


@dataclass
class WakeConfig:
    """How the stream is searched; one detector's settings."""

    window_s: float = 1.6  # audio the encoder sees at once: longer than any phrase said
    hop_s: float = 0.32  # the window moves on by this much (cost: about window / hop encodings)
    refractory_s: float = 0.5  # after a detection, spans starting this soon after it ends are
                               # the same words heard again
    tail_s: float = 0.2  # what follows the phrase starts this long after its span's end (CTC's
                         # spans end early: the phrase's last sound is still there)

    def __post_init__(self) -> None:
        check_fields(self, "wake")
        check_ranges(self, "wake", window_s=(0.5, 10.0), hop_s=(0.01, 10.0),
                     refractory_s=(0.0, 10.0), tail_s=(0.0, 2.0))
        if self.hop_s > self.window_s - MIN_WINDOW_S + 1e-9:
            raise ValueError(f"wake.hop_s ({self.hop_s}) must leave {MIN_WINDOW_S} s of overlap "
                             f"within wake.window_s ({self.window_s})")


@dataclass(frozen=True)
class Detection:
    """A phrase heard: which, where in the stream (seconds), and how well it matched."""

    index: int  # the phrase's place in the detector's list
    phrase: str
    start: float  # the span the phrase's pieces were found in
    time: float  # its end
    score: float  # log-likelihood ratio against the free path, nats (0: a perfect match)
    heard_at: float  # stream seconds when it was detected (`time` plus the wait for the window)


@dataclass(frozen=True)
class Window:
    """One searched window: when it ended (stream seconds) and, per phrase, its best score
    and that span's start and end."""

    time: float
    scores: np.ndarray
    starts: np.ndarray
    ends: np.ndarray


class PhraseTrellis:
    """The best span of each spelling in a window's CTC log-probabilities: a sub-sequence
    Viterbi over every spelling's states at once (blank, piece, blank, ... as CTC's), entered
    from the free path on any frame and left on any frame."""

    def __init__(self, spellings: list[list[int]]) -> None:
        labels, first, last, skip = [], [], [], []
        for ids in spellings:
            base = len(labels)
            states = [PAD_ID]
            for piece in ids:
                states += [piece, PAD_ID]
            labels += states
            first.append(base)
            last.append(base + len(states) - 1)
            skip += [i >= 3 and i % 2 == 1 and states[i] != states[i - 2]
                     for i in range(len(states))]
        self.labels = np.array(labels)
        self.last = np.array(last)
        n = len(labels)
        self.entry = np.zeros(n, bool)
        self.entry[first] = True
        self.entry[np.array(first) + 1] = True
        self.step = np.ones(n, bool)  # may come from the state before
        self.step[first] = False
        self.skip = np.array(skip)

    def best(self, log_probs: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """Each spelling's best score (nats against the free path), its span's first frame and
        its last frame, in a (frames, vocab) array of CTC log-probabilities."""
        emit = log_probs[:, self.labels] - log_probs.max(1, keepdims=True)
        n = len(self.labels)
        alpha, began = np.full(n, _NEG), np.zeros(n, int)
        top = np.full(len(self.last), _NEG)
        start, end = np.zeros(len(self.last), int), np.zeros(len(self.last), int)
        entry_score = np.where(self.entry, 0.0, _NEG)
        for frame, row in enumerate(emit):
            score, origin = alpha, began
            for shift, allowed in ((1, self.step), (2, self.skip)):
                moved = np.full(n, _NEG)
                moved[shift:] = alpha[:-shift]
                came = np.zeros(n, int)
                came[shift:] = began[:-shift]
                better = allowed & (moved > score)
                score, origin = np.where(better, moved, score), np.where(better, came, origin)
            better = entry_score > score
            score, origin = np.where(better, entry_score, score), np.where(better, frame, origin)
            alpha, began = score + row, origin
            which = np.where(alpha[self.last] >= alpha[self.last - 1], self.last, self.last - 1)
            done = alpha[which]
            better = done > top
            top = np.where(better, done, top)
            start = np.where(better, began[which], start)
            end = np.where(better, frame, end)
        return top, start, end


def spellings(phrase: object, tokenizer: Tokenizer) -> list[list[int]]:
    """The tokenizer's pieces of each `|`-separated spelling of a phrase; a phrase it cannot
    write (empty, or letters it lacks) is a ValueError naming it."""
    if not isinstance(phrase, str):
        raise ValueError(f"a wake phrase must be text, got {phrase!r}")
    found = []
    for spelling in phrase.split("|"):
        text = normalize_text(spelling)
        ids = tokenizer.encode(text)
        if not ids:
            raise ValueError(f"wake phrase {phrase!r} has no words to listen for")
        if any(i in (UNK_ID, BOS_ID, EOS_ID, PAD_ID) for i in ids):
            lacks = sorted({c for c in text if c != " " and UNK_ID in tokenizer.encode(c)})
            raise ValueError(f"wake phrase {phrase!r}: this model cannot write "
                             f"{''.join(lacks) or text!r} (letters its tokenizer lacks)")
        found.append(ids)
    return found


def calibrated_margin(model_dir: str | Path) -> float:
    """The margin calibrated for this model at DEFAULT_SENSITIVITY (DIR/wake.json), else
    DEFAULT_MARGIN. The file is untrusted: a bad one is a one-line ModelDirError."""
    path = model_path(model_dir) / WAKE_FILE
    if not path.is_file():
        return DEFAULT_MARGIN
    try:
        value = json.loads(read_text(path, 1 << 16, "the wake-word calibration")).get("margin")
    except (UntrustedInputError, json.JSONDecodeError, AttributeError, RecursionError) as err:
        raise ModelDirError(f"{path}: not a wake-word calibration ({first_line(err)})") from None
    if isinstance(value, bool) or not isinstance(value, int | float) or not 0 < value <= 100:
        raise ModelDirError(f"{path}: margin must be a number in (0, 100], got {value!r}")
    return float(value)


def margin_for(sensitivity: object, calibrated: float) -> float:
    """The margin of a sensitivity in [0, 1]: the calibrated one at DEFAULT_SENSITIVITY,
    SENSITIVITY_RANGE times smaller at 0 and larger at 1 (geometrically in between)."""
    if isinstance(sensitivity, bool) or not isinstance(sensitivity, int | float) \
            or not 0 <= sensitivity <= 1:
        raise ValueError(f"sensitivity must be a number in [0, 1], got {sensitivity!r}")
    return calibrated * SENSITIVITY_RANGE ** ((sensitivity - DEFAULT_SENSITIVITY) * 2)


class WakeWordDetector:
    """Listens for any of `phrases` in 512-sample frames of 16 kHz audio (`process`), or in a
    whole file or stream (`detect`), as Porcupine's and sherpa-onnx's spotters do.

    `model` is a model directory, a shipped model's name, or a loaded `Transcriber` (whose
    network serves the detector too: the demo's). `sensitivity` in [0, 1]: higher hears more
    (more misses avoided, more false alarms); 0.5 is the calibrated default.
    """

    frame_length = FRAME_LENGTH

    def __init__(self, phrases: Iterable[str], sensitivity: float = DEFAULT_SENSITIVITY,
                 model: str | Path | Transcriber = "base", config: WakeConfig | None = None,
                 sample_rate: int = 16000, device: str = "cpu",
                 margin: float | None = None) -> None:
        """`margin`: the margin to scale by `sensitivity` in place of the model directory's
        `calibrated_margin` (DEFAULT_MARGIN for a loaded `Transcriber`)."""
        phrases = [phrases] if isinstance(phrases, str) else list(phrases)
        if not phrases:
            raise ValueError("no wake phrase given: name at least one")
        margin_for(sensitivity, DEFAULT_MARGIN)  # checked before the model loads
        self.config = config or WakeConfig()
        if margin is None:
            margin = DEFAULT_MARGIN if isinstance(model, Transcriber) else calibrated_margin(model)
        self.transcriber = model if isinstance(model, Transcriber) else \
            Transcriber.from_pretrained(model, device=device, vad=None)
        if not self.transcriber.network.has_ctc:
            raise ValueError("wake words need a model with a CTC head")
        self.sample_rate = self.transcriber.sample_rate
        if sample_rate != self.sample_rate:
            raise ValueError(f"frames must be at {self.sample_rate} Hz, got {sample_rate} Hz: "
                             "resample them first (detect() resamples a file)")
        written = [spellings(p, self.transcriber.tokenizer) for p in phrases]
        self.phrases = [p.split("|")[0].strip() for p in phrases]
        self.owner = np.array([i for i, ids in enumerate(written) for _ in ids])
        self.trellis = PhraseTrellis([ids for each in written for ids in each])
        self.sensitivity = float(sensitivity)
        self.margin = margin_for(sensitivity, margin)
        self._size = round(self.config.window_s * self.sample_rate)
        self._hop = round(self.config.hop_s * self.sample_rate)
        self.reset()

    def reset(self) -> None:
        """Forget the stream heard so far (a new stream starts at time 0)."""
        self._ring = np.zeros(self._size, np.float32)
        self.heard = 0  # samples heard
        self._due = max(self._hop, round(MIN_WINDOW_S * self.sample_rate))
        self._last_end = -math.inf
        self.last: Detection | None = None

    @property
    def seconds(self) -> float:
        """Stream time: seconds of audio heard."""
        return self.heard / self.sample_rate

    def process(self, frame: np.ndarray) -> int:
        """One frame of `frame_length` samples (int16, or float32 in [-1, 1]) -> the index of
        the phrase heard in it, or -1. `last` then holds the detection."""
        self._feed(check_frame(frame, self.frame_length))
        found = self._search() if self.heard >= self._due else None
        return -1 if found is None else found.index

    def detect(self, source: str | Path | np.ndarray | torch.Tensor | Iterable[np.ndarray],
               sample_rate: int | None = None) -> Iterator[Detection]:
        """The phrases heard in a file (any format and rate: streamed, bounded memory), an
        array (at `sample_rate`), or blocks of float samples at the detector's rate; a new
        stream from time 0."""
        for window in self.scan(source, sample_rate):
            if window is not None and (found := self._decide(window)) is not None:
                yield found

    def scan(self, source: str | Path | np.ndarray | torch.Tensor | Iterable[np.ndarray],
             sample_rate: int | None = None) -> Iterator["Window | None"]:
        """`detect`'s windows before any decision: each phrase's best score and span in each
        (None: a silent window, not searched). For tuning and benchmarks."""
        self.reset()
        for block in self._blocks(source, sample_rate):
            yield from self._windows(block)

    def accept(self, samples: np.ndarray) -> list[Detection]:
        """Samples of any length (float32 at the detector's rate) -> the detections they
        complete, searching at each hop as `process` does."""
        return [found for window in self._windows(np.asarray(samples, np.float32).reshape(-1))
                if window is not None and (found := self._decide(window)) is not None]

    def _windows(self, block: np.ndarray) -> Iterator["Window | None"]:
        at = 0
        while at < len(block):
            take = min(len(block) - at, self._due - self.heard)
            self._feed(block[at:at + take])
            at += take
            if self.heard >= self._due:
                yield self._window()

    def _blocks(self, source, sample_rate: int | None) -> Iterable[np.ndarray]:
        if isinstance(source, str | Path):
            return stream_file(source, self.sample_rate)
        if isinstance(source, np.ndarray | torch.Tensor):
            if sample_rate is None:
                raise ValueError("an array needs its sample_rate")
            return stream_array(source, sample_rate, self.sample_rate, max_seconds=None)
        return (np.asarray(block, np.float32).reshape(-1) for block in source)

    def _feed(self, samples: np.ndarray) -> None:
        n = min(len(samples), self._size)
        if n == 0:
            return
        self._ring = np.roll(self._ring, -n)
        self._ring[-n:] = samples[len(samples) - n:]
        self.heard += len(samples)

    def after(self, found: Detection) -> np.ndarray:
        """The samples heard after a detected phrase (`tail_s` past its span's end), at most a
        window's: the start of what was said next."""
        return self.recent(found.time + self.config.tail_s)

    def recent(self, since: float) -> np.ndarray:
        """The samples heard since stream time `since` (at most a window's)."""
        keep = min(self._size, self.heard, max(0, self.heard - round(since * self.sample_rate)))
        return self._ring[self._size - keep:].copy()

    def _search(self) -> Detection | None:
        window = self._window()
        return None if window is None else self._decide(window)

    def _window(self) -> "Window | None":
        """Search the window ending now (None when it is silent)."""
        self._due += self._hop
        if self._due <= self.heard:  # a hop shorter than the frames fed
            self._due = self.heard + self._hop
        filled = min(self.heard, self._size)
        wave = self._ring[self._size - filled:]
        if float(np.sqrt(np.mean(wave ** 2))) < SILENCE_RMS:
            return None
        scores, first, last = self.trellis.best(self.log_probs(wave))
        best = [int(np.argmax(np.where(self.owner == i, scores, -np.inf)))
                for i in range(len(self.phrases))]
        origin = self.seconds - filled / self.sample_rate
        step = self.transcriber.network.frame_seconds
        return Window(self.seconds, scores[best], origin + first[best] * step,
                      origin + (last[best] + 1) * step)

    def _decide(self, window: "Window") -> Detection | None:
        """The best phrase over the margin, unless its span is the last detection's words
        heard again (it starts within `refractory_s` of their end)."""
        fresh = window.starts >= self._last_end + self.config.refractory_s
        heard = np.where(fresh & (window.scores >= -self.margin), window.scores, -np.inf)
        index = int(heard.argmax())
        if not np.isfinite(heard[index]):
            return None
        self._last_end = float(window.ends[index])
        self.last = Detection(index, self.phrases[index], round(float(window.starts[index]), 3),
                              round(float(window.ends[index]), 3),
                              round(float(window.scores[index]), 3), round(window.time, 3))
        return self.last

    @torch.inference_mode()
    def log_probs(self, wave: np.ndarray) -> np.ndarray:
        """The CTC head's (frames, vocab) log-probabilities of one stretch of audio."""
        network = self.transcriber.network
        samples = torch.from_numpy(np.ascontiguousarray(wave))[None].to(network.device)
        memory, _ = network.encode(samples, torch.tensor([samples.shape[1]], device=network.device))
        return network.ctc_logits(memory)[0].float().log_softmax(-1).cpu().numpy()

    def spot(self, wave: np.ndarray) -> list[Detection]:
        """Offline: the best span of each phrase heard in a whole utterance (encoded at once,
        no window), over the margin, best first."""
        scores, first, last = self.trellis.best(self.log_probs(np.asarray(wave, np.float32)))
        step = self.transcriber.network.frame_seconds
        found = {}
        for row in np.argsort(-scores):
            index = int(self.owner[row])
            if scores[row] >= -self.margin and index not in found:
                found[index] = Detection(index, self.phrases[index], round(first[row] * step, 3),
                                         round((last[row] + 1) * step, 3),
                                         round(float(scores[row]), 3), round(len(wave) / self.sample_rate, 3))
        return list(found.values())


def check_frame(frame: object, length: int) -> np.ndarray:
    """A frame as float32 in [-1, 1]; a frame of another length, shape or dtype is a
    ValueError saying what was expected."""
    if not isinstance(frame, np.ndarray):
        raise ValueError(f"a frame must be a numpy array of {length} int16 or float32 samples, "
                         f"got {type(frame).__name__}")
    if frame.ndim != 1 or len(frame) != length:
        raise ValueError(f"a frame must be {length} samples (1-D), got shape {frame.shape}")
    if frame.dtype == np.int16:
        return frame.astype(np.float32) / 32768
    if frame.dtype != np.float32:
        raise ValueError(f"a frame must be int16 or float32 samples, got {frame.dtype}")
    if not np.isfinite(frame).all():
        raise ValueError("a frame holds NaN or infinite samples")
    return frame

"""Manifests and batches: JSON lines -> utterances -> padded waveform batches.

A manifest line is NeMo's convention: {"audio_filepath": ..., "text": ..., "duration": ...};
relative paths resolve against the manifest's folder so a corpus can be moved as a whole.
Batches group utterances of similar duration (less padding) and are reshuffled per epoch from
a seed, so a resumed run sees the same order; `rank`/`world_size` split them for DDP.

With `buckets` (`data.buckets`), training batches take a few static shapes instead: the
utterances fall into duration buckets of equal counts, every batch of a bucket holds the same
number of utterances, and `StaticShapes` pads its waveforms to the bucket's length and its
tokens to a multiple of a few. A compiled step then builds one graph per shape and can run
as a CUDA graph (`trainer.compile_mode=reduce-overhead`); padding changes no loss (the model
masks it).
"""

import json
import math
import random
import sys
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path

import torch
import torch.nn.functional as F
from torch.nn.utils.rnn import pad_sequence
from torch.utils.data import Dataset, Sampler

from asr.audio import AudioError, load_audio
from asr.text import normalize_text
from asr.tokenizer import PAD_ID, Tokenizer

REQUIRED_KEYS = ("audio_filepath", "text", "duration")


class ManifestError(ValueError):
    """A manifest line that cannot be used; the message names the file and line."""


@dataclass(frozen=True)
class Utterance:
    audio_filepath: str
    text: str
    duration: float


def read_manifest(path: str | Path, on_error: str = "raise",
                  on_skip: Callable[[str], None] | None = None) -> list[Utterance]:
    """Parse and check a manifest.

    With on_error="raise" the first bad line raises; with "skip" bad lines are left out and
    each one's problem ("FILE:LINE: problem") is passed to `on_skip` (default: a warning on
    stderr), so the caller can count and report them.
    """
    skipped: list[str] = []
    utterances = list(iter_manifest(path, skipped.append if on_error == "skip" else None))
    for problem in skipped:
        (on_skip or _warn)(problem)
    if not utterances:
        raise ManifestError(f"{path}: no utterances")
    return utterances


def iter_manifest(path: str | Path, on_bad: Callable[[str], None] | None = None,
                  ) -> Iterator[Utterance]:
    """Stream a manifest's utterances line by line, in constant memory whatever its size.

    A bad line raises ManifestError("FILE:LINE: problem"), or, given `on_bad`, is passed to
    it as that message and left out.
    """
    path = Path(path)
    if path.is_dir():
        raise ManifestError(f"{path}: is a directory, not a manifest")
    if not path.is_file():
        raise ManifestError(f"{path}: manifest not found")
    try:
        with path.open("rb") as lines:
            for number, raw in enumerate(lines, start=1):
                try:
                    utterance = _parse_line(raw, path.parent)
                except ManifestError as err:
                    if on_bad is None:
                        raise ManifestError(f"{path}:{number}: {err}") from None
                    on_bad(f"{path}:{number}: {err}")
                    continue
                if utterance is not None:
                    yield utterance
    except OSError as err:
        raise ManifestError(f"{path}: cannot read ({err.strerror or err})") from None


def _warn(problem: str) -> None:
    print(f"warning: skipped {problem}", file=sys.stderr)


def _parse_line(raw: bytes, root: Path) -> Utterance | None:
    """One manifest line -> an utterance (None for a blank line); ManifestError if unusable."""
    try:
        line = raw.decode("utf-8")
    except UnicodeDecodeError:
        raise ManifestError("not UTF-8 text") from None
    if not line.strip():
        return None
    try:
        entry = json.loads(line)
    except json.JSONDecodeError as err:
        raise ManifestError(f"bad JSON ({err.msg})") from None
    except RecursionError:
        raise ManifestError("bad JSON (nested too deeply)") from None
    if not isinstance(entry, dict):
        raise ManifestError("expected a JSON object")
    missing = [k for k in REQUIRED_KEYS if k not in entry]
    if missing:
        raise ManifestError(f"missing key(s) {', '.join(missing)}")
    text, duration = _text(entry["text"]), _duration(entry["duration"])
    return Utterance(audio_path(entry["audio_filepath"], root), text, duration)


def audio_path(value: object, root: Path) -> str:
    """An existing file; relative paths resolve against the manifest's folder."""
    if not isinstance(value, str) or not value or "\0" in value:
        raise ManifestError(f"audio_filepath must be a file name, got {value!r}")
    audio = Path(value) if Path(value).is_absolute() else root / value
    try:
        if audio.is_file():
            return str(audio)
        problem = "audio path is not a file" if audio.exists() else "audio file not found"
    except OSError as err:  # e.g. a name too long for the file system
        problem = f"audio file not usable ({err.strerror})"
    raise ManifestError(f"{problem}: {audio}")


def _text(value: object) -> str:
    """A transcript: "" for audio with no speech (noise, silence: the model must learn to say
    nothing), else at least one word once normalised (punctuation alone is a broken line)."""
    if not isinstance(value, str):
        raise ManifestError("text must be a string")
    try:
        value.encode("utf-8")
    except UnicodeEncodeError:  # a lone surrogate: JSON allows "\\ud800", UTF-8 does not
        raise ManifestError("text is not valid Unicode") from None
    if value and not normalize_text(value):
        raise ManifestError(f"text has no words (use \"\" for audio without speech): {value!r}")
    return value


def _duration(value: object) -> float:
    if isinstance(value, int | float) and not isinstance(value, bool):
        seconds = float(value) if abs(value) < 1e300 else math.inf
        if math.isfinite(seconds) and seconds > 0:
            return seconds
    raise ManifestError(f"duration must be a positive number, got {value!r}")


class SpeechDataset(Dataset):
    """Utterances -> (waveform at the model's rate, token ids).

    A file that cannot be used yields its AudioError message instead of raising, so that the
    training loop, not the DataLoader (whose workers would re-raise it wrapped in a traceback),
    decides whether the utterance is skipped or the run stops (`data.on_error`).
    `augment` (training only, e.g. `asr.augment.Augmenter`) transforms each loaded waveform.
    """

    def __init__(self, utterances: list[Utterance], tokenizer: Tokenizer, sample_rate: int,
                 augment: Callable[[torch.Tensor], torch.Tensor] | None = None):
        self.utterances, self.tokenizer, self.sample_rate = utterances, tokenizer, sample_rate
        self.augment = augment

    def __len__(self) -> int:
        return len(self.utterances)

    def __getitem__(self, index: int) -> tuple[torch.Tensor, torch.Tensor] | str:
        utt = self.utterances[index]
        try:
            wave = load_audio(utt.audio_filepath, self.sample_rate)
        except AudioError as err:
            return str(err)
        if self.augment is not None:
            wave = self.augment(wave)
        return wave, torch.tensor(self.tokenizer.encode(utt.text), dtype=torch.long)


@dataclass(frozen=True)
class StaticShapes:
    """The padded sizes of bucketed batches: waveforms to the shortest of `samples` (the
    buckets' lengths) that holds the longest one, tokens to a multiple of `token_multiple`. A
    waveform longer than every bucket (speed perturbation beyond the headroom) is padded to a
    multiple of the longest bucket, a rare shape of its own."""

    samples: tuple[int, ...]
    token_multiple: int = 16

    @classmethod
    def of_buckets(cls, durations: list[float], buckets: int, sample_rate: int,
                   token_multiple: int, stretch: float = 1.0) -> "StaticShapes":
        """The shapes of `duration_buckets`: each bucket's longest utterance, `stretch` times
        longer (speed perturbation's slowest factor), and 10 ms more (manifests round)."""
        return cls(tuple(math.ceil((durations[part[-1]] * stretch + 0.01) * sample_rate)
                         for part in duration_buckets(durations, buckets)), token_multiple)

    def wave_length(self, longest: int) -> int:
        fits = [n for n in self.samples if n >= longest]
        return min(fits) if fits else math.ceil(longest / self.samples[-1]) * self.samples[-1]

    def token_length(self, longest: int) -> int:
        return max(1, math.ceil(longest / self.token_multiple)) * self.token_multiple


def collate(items: list[tuple[torch.Tensor, torch.Tensor] | str],
            shapes: StaticShapes | None = None) -> dict:
    """Pad waveforms with zeros and tokens with PAD_ID (to `shapes`' sizes when given, else to
    the longest); "bad" lists unusable items' errors.

    A batch whose items were all unusable has only "bad".
    """
    batch: dict = {"bad": [item for item in items if isinstance(item, str)]}
    usable = [item for item in items if not isinstance(item, str)]
    if usable:
        waves, tokens = zip(*usable, strict=True)
        wave = pad_sequence(list(waves), batch_first=True)
        token_ids = pad_sequence(list(tokens), batch_first=True, padding_value=PAD_ID)
        if shapes is not None:
            wave = F.pad(wave, (0, shapes.wave_length(wave.shape[1]) - wave.shape[1]))
            width = shapes.token_length(token_ids.shape[1]) - token_ids.shape[1]
            token_ids = F.pad(token_ids, (0, width), value=PAD_ID)
        batch.update(wave=wave, lengths=torch.tensor([len(w) for w in waves]), tokens=token_ids)
    return batch


class DurationBatchSampler(Sampler[list[int]]):
    """Batches of similar-duration utterances, capped by count and by total padded seconds.

    The batches are fixed once (utterances sorted by duration, cut where a cap would be
    passed), so padding stays small; each epoch shuffles their order from `seed + epoch`.
    With `buckets`, the batches are `bucket_batches`' (a few static shapes).
    `sortagrad` keeps the first epoch in increasing length (Amodei et al., Deep Speech 2):
    short utterances first while the model is fragile.

    For DDP every rank builds the same shuffled list and takes every `world_size`-th batch
    from `rank` on. Training (`drop_last`) leaves out the last `len % world_size` batches of
    the epoch so all ranks run the same number of steps (a rank waiting for a peer that has
    finished would hang); evaluation keeps every batch (ranks may differ by one).
    """

    def __init__(self, durations: list[float], batch_size: int, max_duration: float | None = None,
                 shuffle: bool = True, seed: int = 0, rank: int = 0, world_size: int = 1,
                 sortagrad: bool = False, drop_last: bool = True, buckets: int = 0):
        self.batches = bucket_batches(durations, buckets, batch_size, max_duration)[0] \
            if buckets else _make_batches(durations, batch_size, max_duration)
        self.shuffle, self.seed, self.epoch, self.start = shuffle, seed, 0, 0
        self.rank, self.world_size = rank, world_size
        self.sortagrad, self.drop_last = sortagrad, drop_last

    def set_epoch(self, epoch: int, start: int = 0) -> None:
        """Iterate epoch `epoch`'s order from batch `start` (a resumed run skips those done)."""
        self.epoch, self.start = epoch, start

    def __iter__(self) -> Iterator[list[int]]:
        order = list(range(len(self.batches)))  # batches are built in increasing duration
        if self.shuffle and not (self.sortagrad and self.epoch == 0):
            random.Random(self.seed + self.epoch).shuffle(order)
        usable = len(order) - len(order) % self.world_size if self.drop_last else len(order)
        for i in order[self.rank:usable:self.world_size][self.start:]:
            yield self.batches[i]

    def __len__(self) -> int:
        if self.drop_last:
            return len(self.batches) // self.world_size
        return len(range(self.rank, len(self.batches), self.world_size))


def padding_fraction(batches: list[list[int]], durations: list[float]) -> float:
    """Share of the padded batch seconds that is padding (what duration bucketing keeps low)."""
    padded = sum(max(durations[i] for i in batch) * len(batch) for batch in batches)
    return 1 - sum(durations[i] for batch in batches for i in batch) / padded


def _make_batches(durations: list[float], batch_size: int,
                  max_duration: float | None) -> list[list[int]]:
    """Walk utterances sorted by duration, closing a batch when either cap would be passed."""
    batches, current, longest = [], [], 0.0
    for index in sorted(range(len(durations)), key=durations.__getitem__):
        longest_if_added = max(longest, durations[index])
        too_long = max_duration is not None and longest_if_added * (len(current) + 1) > max_duration
        if current and (len(current) == batch_size or too_long):
            batches.append(current)
            current, longest_if_added = [], durations[index]
        current.append(index)
        longest = longest_if_added
    if current:
        batches.append(current)
    return batches


def duration_buckets(durations: list[float], buckets: int) -> list[list[int]]:
    """Utterance indices in `buckets` buckets of (nearly) equal counts, each in increasing
    duration, shortest bucket first."""
    order = sorted(range(len(durations)), key=durations.__getitem__)
    count = min(buckets, len(order))
    return [order[len(order) * k // count:len(order) * (k + 1) // count] for k in range(count)]


def bucket_batches(durations: list[float], buckets: int, batch_size: int,
                   max_duration: float | None) -> tuple[list[list[int]], list[float]]:
    """Batches of the `duration_buckets`, and each bucket's longest duration. A bucket's
    batches all hold the same number of utterances: `batch_size`, or fewer where
    `max_duration` / its longest duration allows fewer (at least one); its last batch is filled
    up with the bucket's shortest utterances, so a few are heard twice an epoch."""
    batches, longest = [], []
    for part in duration_buckets(durations, buckets):
        top = durations[part[-1]]
        size = batch_size if max_duration is None else \
            max(1, min(batch_size, math.floor(max_duration / max(top, 1e-9))))
        size = min(size, len(part))
        filled = part + part[:-len(part) % size] if len(part) % size else part
        batches += [filled[i:i + size] for i in range(0, len(filled), size)]
        longest.append(top)
    return batches, longest

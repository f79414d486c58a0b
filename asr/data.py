"""Manifests and batches: JSON lines -> utterances -> padded waveform batches.

A manifest line is NeMo's convention: {"audio_filepath": ..., "text": ..., "duration": ...};
relative paths resolve against the manifest's folder so a corpus can be moved as a whole.
Batches group utterances of similar duration (less padding) and are reshuffled per epoch from
a seed, so a resumed run sees the same order; `rank`/`world_size` split them for DDP.
"""

import json
import math
import random
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path

import torch
from torch.nn.utils.rnn import pad_sequence
from torch.utils.data import Dataset, Sampler

from asr.audio import load_audio
from asr.tokenizer import PAD_ID, Tokenizer

REQUIRED_KEYS = ("audio_filepath", "text", "duration")


class ManifestError(ValueError):
    """A manifest line that cannot be used; the message names the file and line."""


@dataclass(frozen=True)
class Utterance:
    audio_filepath: str
    text: str
    duration: float


def read_manifest(path: str | Path, on_error: str = "raise") -> list[Utterance]:
    """Parse and check a manifest; with on_error="skip", bad lines are left out (and counted)."""
    path = Path(path)
    if not path.is_file():
        raise ManifestError(f"{path}: manifest not found")
    utterances, skipped = [], 0
    with path.open(encoding="utf-8", errors="strict") as lines:
        try:
            for number, line in enumerate(lines, start=1):
                if not line.strip():
                    continue
                try:
                    utterances.append(_parse_line(line, path.parent))
                except ManifestError as err:
                    if on_error != "skip":
                        raise ManifestError(f"{path}:{number}: {err}") from None
                    skipped += 1
        except UnicodeDecodeError:
            raise ManifestError(f"{path}: not UTF-8 text") from None
    if skipped:
        print(f"{path}: skipped {skipped} bad line(s)")
    if not utterances:
        raise ManifestError(f"{path}: no utterances")
    return utterances


def _parse_line(line: str, root: Path) -> Utterance:
    try:
        entry = json.loads(line)
    except json.JSONDecodeError as err:
        raise ManifestError(f"bad JSON ({err.msg})") from None
    if not isinstance(entry, dict):
        raise ManifestError("expected a JSON object")
    missing = [k for k in REQUIRED_KEYS if k not in entry]
    if missing:
        raise ManifestError(f"missing key(s) {', '.join(missing)}")
    duration = entry["duration"]
    if not isinstance(duration, int | float) or not math.isfinite(duration) or duration <= 0:
        raise ManifestError(f"duration must be a positive number, got {duration!r}")
    if not isinstance(entry["text"], str):
        raise ManifestError("text must be a string")
    audio = Path(str(entry["audio_filepath"]))
    audio = audio if audio.is_absolute() else root / audio
    return Utterance(str(audio), entry["text"], float(duration))


class SpeechDataset(Dataset):
    """Utterances -> (waveform at the model's rate, token ids).

    `augment` (training only, e.g. `asr.augment.Augmenter`) transforms each loaded waveform.
    """

    def __init__(self, utterances: list[Utterance], tokenizer: Tokenizer, sample_rate: int,
                 augment: Callable[[torch.Tensor], torch.Tensor] | None = None):
        self.utterances, self.tokenizer, self.sample_rate = utterances, tokenizer, sample_rate
        self.augment = augment

    def __len__(self) -> int:
        return len(self.utterances)

    def __getitem__(self, index: int) -> tuple[torch.Tensor, torch.Tensor]:
        utt = self.utterances[index]
        wave = load_audio(utt.audio_filepath, self.sample_rate)
        if self.augment is not None:
            wave = self.augment(wave)
        return wave, torch.tensor(self.tokenizer.encode(utt.text), dtype=torch.long)


def collate(items: list[tuple[torch.Tensor, torch.Tensor]]) -> dict[str, torch.Tensor]:
    """Pad waveforms with zeros and tokens with PAD_ID.

    Tokens keep at least one column: a batch of empty transcripts (silence) still has a
    position for the model's end-of-sentence target.
    """
    waves, tokens = zip(*items, strict=True)
    padded = pad_sequence(list(tokens), batch_first=True, padding_value=PAD_ID)
    if padded.shape[1] == 0:
        padded = torch.full((len(tokens), 1), PAD_ID, dtype=torch.long)
    return {
        "wave": pad_sequence(list(waves), batch_first=True),
        "lengths": torch.tensor([len(w) for w in waves]),
        "tokens": padded,
    }


class DurationBatchSampler(Sampler[list[int]]):
    """Batches of similar-duration utterances, capped by count and by total seconds."""

    def __init__(self, durations: list[float], batch_size: int, max_duration: float | None = None,
                 shuffle: bool = True, seed: int = 0, rank: int = 0, world_size: int = 1):
        self.batches = _make_batches(durations, batch_size, max_duration)
        self.shuffle, self.seed, self.epoch = shuffle, seed, 0
        self.rank, self.world_size = rank, world_size

    def set_epoch(self, epoch: int) -> None:
        self.epoch = epoch

    def __iter__(self) -> Iterator[list[int]]:
        order = list(range(len(self.batches)))
        if self.shuffle:
            random.Random(self.seed + self.epoch).shuffle(order)
        usable = len(order) - len(order) % self.world_size if self.world_size > 1 else len(order)
        for i in order[self.rank:usable:self.world_size]:
            yield self.batches[i]

    def __len__(self) -> int:
        return len(self.batches) // self.world_size


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

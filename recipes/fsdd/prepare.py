"""Free Spoken Digit Dataset: isolated digits plus TIDIGITS-like digit strings, split by speaker.

    python -m recipes.fsdd.prepare --root ../shared/data/fsdd --out data/fsdd
    python -m recipes.fsdd.prepare --out data/fsdd        # downloads FSDD from GitHub first

FSDD holds `recordings/{digit}_{speaker}_{take}.wav`: one speaker saying one digit, 8 kHz.
A recogniser of isolated words never learns where one word ends and the next begins, so the
recipe also joins 1-7 recordings of the *same* speaker with short random pauses into digit
strings ("four two nine"), as TIDIGITS does, written at the model's rate (16 kHz).

Splits (the held-out WER must measure speakers the model never heard):
- test: every recording of the `test_speakers` (default yweweler) and strings made of them;
- dev: the first `dev_takes` takes (0-4, FSDD's own suggested test takes) of the remaining
  speakers plus the `dev_speakers` (none by default), and strings made of them;
- train: the other takes of the remaining speakers, and strings made of them.
With only four speakers, a dev speaker of its own would leave two voices to learn from; dev
therefore tracks training on unseen *takes* and test alone measures an unseen *speaker*.

Writes OUT/{train,dev,test}.jsonl (isolated digits point at the FSDD files; strings at
OUT/wavs/{split}/*.wav), each line with `speaker`, `kind` ("digit" or "string") and
`sources` (the joined files).

`--rehearse MANIFEST [...]` also puts into *train* every utterance of other corpora whose
text says a digit (kind "rehearsal"), e.g. the synthetic voice-command corpus that the
fine-tuned model started from and synthetic digit strings (`recipes.common.synthetic`): three
training speakers are few, and hearing the digits from hundreds of synthetic voices as well
keeps the fine-tuned model from narrowing to those three (each training speaker held out in
turn; the figures: recipes/fsdd/RESULTS.md). Real people count for more: Speech Commands'
training manifest brings its 105 digit clips of other speakers (a manifest listed three times
is heard three times an epoch).
"""

import argparse
import json
import shutil
from collections import defaultdict
from collections.abc import Iterable, Mapping
from pathlib import Path

import numpy as np
import soundfile as sf

from asr.audio import load_audio
from asr.checkpoint import save_text
from asr.progress import progress
from recipes.common import (
    SPLITS,
    download,
    manifest_line,
    named_split,
    rehearsal,
    write_manifests,
)
from recipes.common.corpora import DIGIT_SET, DIGITS, recordings

URL = "https://github.com/Jakobovski/free-spoken-digit-dataset/archive/refs/heads/master.zip"
TEST_SPEAKERS = ("yweweler",)
STRINGS = {"train": 2000, "dev": 200, "test": 300}
MAX_DIGITS = 7
PAUSE_S = (0.05, 0.3)  # between digits
EDGE_S = (0.05, 0.25)  # before the first and after the last digit
DITHER = 3e-4  # low noise in the gaps: real recordings are never digitally silent


def split_of(speaker: str, take: int, test_speakers: Iterable[str], dev_speakers: Iterable[str],
             dev_takes: int) -> str:
    """Test by speaker; dev by speaker or by take (see the module docstring)."""
    split = named_split(speaker, dev_speakers, test_speakers)
    return "dev" if split == "train" and take < dev_takes else split


def make_string(sources: list[Path], rng: np.random.Generator,
                sample_rate: int) -> np.ndarray:
    """Recordings at `sample_rate` joined by random pauses, with a little dither throughout."""
    pieces = [np.zeros(int(rng.uniform(*EDGE_S) * sample_rate), dtype=np.float32)]
    for index, path in enumerate(sources):
        if index:
            pieces.append(np.zeros(int(rng.uniform(*PAUSE_S) * sample_rate), dtype=np.float32))
        pieces.append(load_audio(path, sample_rate).numpy())
    pieces.append(np.zeros(int(rng.uniform(*EDGE_S) * sample_rate), dtype=np.float32))
    wave = np.concatenate(pieces)
    return wave + rng.normal(0.0, DITHER, wave.size).astype(np.float32)


def says_a_digit(text: str) -> bool:
    """Whether a rehearsed utterance is worth hearing here: it says at least one digit."""
    return not DIGIT_SET.isdisjoint(text.split())


def prepare(root: Path | None, out: Path, *, test_speakers: Iterable[str] = TEST_SPEAKERS,
            dev_speakers: Iterable[str] = (), dev_takes: int = 5,
            strings: Mapping[str, int] = STRINGS, seed: int = 0,
            sample_rate: int = 16000, rehearse: Iterable[Path] = ()) -> dict[str, Path]:
    """Write the manifests (and string audio) into `out`; their paths by split.

    `root` is an FSDD checkout (or its `recordings/` folder); None downloads it into
    `out/download`. Everything random is drawn from `seed`. `rehearse`: manifests whose
    utterances that say a digit join the training split.
    """
    out = Path(out)
    extra = rehearsal(rehearse, says_a_digit)  # errors first
    if root is None:
        root = download(URL, out / "download", marker="recordings")
    test_speakers, dev_speakers = tuple(test_speakers), tuple(dev_speakers)
    by_split: dict[str, list] = defaultdict(list)
    for path, digit, speaker, take in recordings(Path(root)):
        split = split_of(speaker, take, test_speakers, dev_speakers, dev_takes)
        by_split[split].append((path, digit, speaker))
    entries: dict[str, list[dict]] = {}
    for split_index, split in enumerate(SPLITS):
        isolated = [manifest_line(path, DIGITS[digit], sf.info(str(path)).duration,
                                  speaker=speaker, kind="digit", sources=[path.name])
                    for path, digit, speaker in by_split[split]]
        rng = np.random.default_rng([seed, split_index])
        entries[split] = isolated + _strings(by_split[split], strings.get(split, 0), split,
                                             out, rng, sample_rate)
    entries["train"] += extra
    return write_manifests(out, entries)


def _strings(items: list[tuple[Path, int, str]], count: int, split: str, out: Path,
             rng: np.random.Generator, sample_rate: int) -> list[dict]:
    """`count` digit strings of one speaker each, speakers taken in turn."""
    folder = out / "wavs" / split
    shutil.rmtree(folder, ignore_errors=True)
    if not items or count == 0:
        return []
    folder.mkdir(parents=True)
    by_speaker: dict[str, list[tuple[Path, int]]] = defaultdict(list)
    for path, digit, speaker in items:
        by_speaker[speaker].append((path, digit))
    speakers = sorted(by_speaker)
    entries = []
    for index in progress(range(count), f"{split} digit strings", unit="utt"):
        speaker = speakers[index % len(speakers)]
        pool = by_speaker[speaker]
        chosen = [pool[i] for i in rng.choice(len(pool), size=rng.integers(1, MAX_DIGITS + 1))]
        wave = make_string([path for path, _ in chosen], rng, sample_rate)
        target = folder / f"{split}_{index:05d}.wav"
        sf.write(str(target), wave, sample_rate, subtype="PCM_16")
        entries.append(manifest_line(target.resolve(), " ".join(DIGITS[d] for _, d in chosen),
                                     wave.size / sample_rate, speaker=speaker, kind="string",
                                     sources=[path.name for path, _ in chosen]))
    return entries


def summary(paths: Mapping[str, Path]) -> str:
    lines = ["FSDD:"]
    for split, path in paths.items():
        rows = [json.loads(line) for line in path.read_text().splitlines()]
        minutes = sum(r["duration"] for r in rows) / 60
        lines.append(f"  {split:5s}: {len(rows):5d} utterances, {minutes:5.1f} min, speakers "
                     f"{', '.join(sorted({r['speaker'] for r in rows}))}")
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--root", type=Path, help="local FSDD copy (default: download it)")
    parser.add_argument("--out", type=Path, default=Path("data/fsdd"))
    parser.add_argument("--test-speakers", nargs="+", default=list(TEST_SPEAKERS))
    parser.add_argument("--dev-speakers", nargs="*", default=[])
    parser.add_argument("--dev-takes", type=int, default=5)
    for split, count in STRINGS.items():
        parser.add_argument(f"--{split}-strings", type=int, default=count)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--rehearse", type=Path, nargs="+", default=[],
                        help="manifests whose utterances that say a digit join train")
    args = parser.parse_args(argv)
    strings = {split: getattr(args, f"{split}_strings") for split in SPLITS}
    paths = prepare(args.root, args.out, test_speakers=args.test_speakers,
                    dev_speakers=args.dev_speakers, dev_takes=args.dev_takes, strings=strings,
                    seed=args.seed, rehearse=args.rehearse)
    save_text(json.dumps(vars(args), default=str, indent=1) + "\n", args.out / "settings.json")
    print(summary(paths))


if __name__ == "__main__":
    main()

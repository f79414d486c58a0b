"""LibriSpeech: read audiobooks, 960 h of training speech (Panayotov et al. 2015, CC BY 4.0).

    python -m recipes.librispeech.prepare --root /data/LibriSpeech --out data/librispeech
    python -m recipes.librispeech.prepare --out data/librispeech        # downloads from openslr
    python -m recipes.librispeech.prepare --out data/librispeech --train train-clean-100

The layout is upstream's: `ROOT/{split}/SPEAKER/CHAPTER/SPEAKER-CHAPTER-NNNN.flac` and one
`SPEAKER-CHAPTER.trans.txt` per chapter, a line `SPEAKER-CHAPTER-NNNN TRANSCRIPT` per
utterance (upper case, apostrophes, no other punctuation). Transcripts go through
`asr.text.normalize_text`, the one normaliser of training, decoding and scoring.

Writes OUT/train.jsonl (the --train splits together), OUT/dev.jsonl (dev-clean + dev-other,
as ESPnet validates) and one manifest per evaluation split (dev_clean.jsonl,
test_other.jsonl, ...); each line also has `speaker`, `chapter` and `split`. Durations come
from the FLAC headers (threads: the files are many and small).
"""

import argparse
import json
from collections.abc import Iterable
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import soundfile as sf

from asr.checkpoint import save_text
from asr.progress import progress
from asr.text import normalize_text
from recipes.common import download, manifest_line, write_manifests

URL = "https://www.openslr.org/resources/12/{split}.tar.gz"
TRAIN = ("train-clean-100", "train-clean-360", "train-other-500")
EVAL = ("dev-clean", "dev-other", "test-clean", "test-other")
# The archives' SHA-256, as torchaudio's LibriSpeech dataset publishes them; by URL, so that
# an archive fetched from elsewhere (a mirror, a test) is not held to them.
SHA256 = {URL.format(split=split): digest for split, digest in {
    "dev-clean": "76f87d090650617fca0cac8f88b9416e0ebf80350acb97b343a85fa903728ab3",
    "dev-other": "12661c48e8c3fe1de2c1caa4c3e135193bfb1811584f11f569dd12645aa84365",
    "test-clean": "39fde525e59672dc6d1551919b1478f724438a95aa55f874b576be21967e6c23",
    "test-other": "d09c181bba5cf717b3dee7d4d592af11a3ee3a09e08ae025c5506f6ebe961c29",
    "train-clean-100": "d4ddd1d5a6ab303066f14971d768ee43278a5f2a0aa43dc716b0e64ecbbbf6e2",
    "train-clean-360": "146a56496217e96c14334a160df97fffedd6e0a04e66b9c5af0d40be3c792ecf",
    "train-other-500": "ddb22f27f96ec163645d53215559df6aa36515f26e01dd70798188350adcb6d2",
}.items()}


def chapter_utterances(trans: Path) -> list[tuple[Path, str, str]]:
    """(audio, utterance id, normalised text) of one chapter's transcript file."""
    rows = []
    for number, line in enumerate(trans.read_text(encoding="utf-8").splitlines(), start=1):
        utt_id, _, text = line.strip().partition(" ")
        if not line.strip():
            continue
        audio = trans.parent / f"{utt_id}.flac"
        if not utt_id.startswith(trans.name.removesuffix(".trans.txt") + "-") or not text:
            raise SystemExit(f"error: {trans}:{number}: expected 'SPEAKER-CHAPTER-NNNN TEXT', "
                             f"got {line.strip()[:60]!r}")
        if not audio.is_file():
            raise SystemExit(f"error: {trans}:{number}: audio file not found: {audio}")
        rows.append((audio, utt_id, normalize_text(text)))
    return rows


def split_entries(folder: Path, split: str) -> list[dict]:
    """Manifest entries of one split folder (`.../dev-clean`), in utterance-id order."""
    transcripts = sorted(folder.glob("*/*/*.trans.txt"))
    if not transcripts:
        raise SystemExit(f"error: {folder}: no SPEAKER/CHAPTER/SPEAKER-CHAPTER.trans.txt files")
    utterances = [u for trans in transcripts for u in chapter_utterances(trans)]
    with ThreadPoolExecutor(8) as pool:
        durations = list(progress(pool.map(lambda u: sf.info(str(u[0])).duration, utterances),
                                  f"{split}: reading headers", total=len(utterances), unit="file"))
    entries = []
    for (audio, utt_id, text), duration in zip(utterances, durations, strict=True):
        speaker, chapter, _ = utt_id.split("-")
        entries.append(manifest_line(audio.resolve(), text, duration, speaker=speaker,
                                     chapter=chapter, split=split))
    return entries


def split_folder(root: Path | None, out: Path, split: str) -> Path:
    """ROOT/{split}, or the split downloaded from openslr and unpacked into
    OUT/download/{split}/{split} (each archive also holds LibriSpeech's README and lists)."""
    if root is not None:
        return Path(root) / split
    url = URL.format(split=split)
    return download(url, out / "download" / split, marker=split, sha256=SHA256.get(url)) / split


def prepare(root: Path | None, out: Path, train: Iterable[str] = TRAIN,
            evaluation: Iterable[str] = EVAL) -> dict[str, Path]:
    """Write the manifests (see the module's docstring); their paths by name."""
    out, train, evaluation = Path(out), list(train), list(evaluation)
    unknown = sorted(set(train + evaluation) - set(TRAIN + EVAL))
    if unknown:
        raise SystemExit(f"error: unknown LibriSpeech split(s): {', '.join(unknown)} (known: "
                         f"{', '.join(TRAIN + EVAL)})")
    entries = {"train": [e for split in train
                         for e in split_entries(split_folder(root, out, split), split)]}
    for split in evaluation:
        entries[split.replace("-", "_")] = split_entries(split_folder(root, out, split), split)
    entries["dev"] = entries.get("dev_clean", []) + entries.get("dev_other", [])
    return write_manifests(out, entries, names=entries.keys())


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--root", type=Path, help="local LibriSpeech folder holding the split "
                        "folders (default: download them)")
    parser.add_argument("--out", type=Path, default=Path("data/librispeech"))
    parser.add_argument("--train", nargs="+", default=list(TRAIN), metavar="SPLIT")
    parser.add_argument("--eval", nargs="+", default=list(EVAL), metavar="SPLIT")
    args = parser.parse_args(argv)
    paths = prepare(args.root, args.out, args.train, args.eval)
    save_text(json.dumps(vars(args), default=str, indent=1) + "\n", args.out / "settings.json")
    for name, path in paths.items():
        rows = [json.loads(line) for line in path.read_text().splitlines()]
        print(f"{name:10s}: {len(rows):7d} utterances, {sum(r['duration'] for r in rows) / 3600:7.1f} h")


if __name__ == "__main__":
    main()

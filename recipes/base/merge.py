"""Join base corpora prepared with different seeds into one, so that training hears more
synthetic speech without making again what the cache and the first corpus already hold:

    python -m recipes.base.prepare --out data/base --seed 0
    python -m recipes.base.prepare --out data/base_s1 --seed 1     # other sentences and voices
    python -m recipes.base.merge data/base data/base_s1 --out data/base_all

OUT/train.jsonl holds every corpus's synthetic training speech, and the real people and the
noise clips once (they are the same in every corpus); dev, the tests, noise and babble are the
first corpus's, so scores stay comparable with models trained on it alone. Sentences are held out by a hash of
their text, not by the seed, so no test sentence of any corpus is trained on; a word that one
seed's word lines hold out may be heard inside another seed's training sentences (the synthetic
test, not the people's, may then be a little easier). Audio paths are written absolute: the
WAVs stay where their corpus put them. --out must be new, empty or a merge's: a corpus of
another recipe (a prepare's, whose manifests it would replace) or any other folder is refused,
as a prepare claims its own; a bad manifest line is one error line naming file and line.
"""

import argparse
import json
import math
import sys
from pathlib import Path

from asr.checkpoint import save_text
from asr.data import ManifestError
from recipes.common.ownership import claim

RECIPE = "base_merge"  # the owner a merged corpus is marked with (recipes/common/ownership.py)

SHARED = ("dev", "test", "test_words", "test_read", "test_phone", "noise", "babble")


def rows(manifest: Path) -> list[dict]:
    """The manifest's lines, each audio path made absolute; a ManifestError naming the file
    and line for one that is not a JSON object with an audio_filepath and a duration."""
    try:
        text = manifest.read_bytes().decode("utf-8")
    except FileNotFoundError:
        raise ManifestError(f"{manifest}: no such manifest (a prepared corpus has one)") from None
    except OSError as err:
        raise ManifestError(f"{manifest}: cannot read ({err.strerror or err})") from None
    except UnicodeDecodeError as err:
        raise ManifestError(f"{manifest}: not UTF-8 text (byte {err.start})") from None
    found = []
    for number, line in enumerate(text.splitlines(), 1):
        if line.strip():
            row = _row(line, f"{manifest}:{number}")
            path = Path(row["audio_filepath"])
            row["audio_filepath"] = str(path if path.is_absolute()
                                        else (manifest.parent / path).resolve())
            found.append(row)
    return found


def _row(line: str, where: str) -> dict:
    try:
        row = json.loads(line)
    except (ValueError, RecursionError):
        raise ManifestError(f"{where}: not a JSON line") from None
    if not isinstance(row, dict):
        raise ManifestError(f"{where}: not a JSON object")
    if not isinstance(row.get("audio_filepath"), str) or not row["audio_filepath"]:
        raise ManifestError(f"{where}: no audio_filepath")
    duration = row.get("duration")
    if isinstance(duration, bool) or not isinstance(duration, int | float) \
            or not 0 < duration < math.inf:
        raise ManifestError(f"{where}: no positive duration")
    return row


def merged(corpora: list[Path]) -> dict[str, list[dict]]:
    """The joined manifests by name."""
    train = rows(corpora[0] / "train.jsonl")
    for corpus in corpora[1:]:
        train += [row for row in rows(corpus / "train.jsonl")
                  if row.get("engine") != "real" and row.get("kind") != "noise"]
    out = {"train": train}
    for name in SHARED:
        if (corpora[0] / f"{name}.jsonl").is_file():
            out[name] = rows(corpora[0] / f"{name}.jsonl")
    return out


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("corpora", nargs="+", type=Path, help="prepared base corpora")
    parser.add_argument("--out", type=Path, required=True)
    args = parser.parse_args(argv)
    for corpus in args.corpora:
        if not (corpus / ".done").is_file():
            sys.exit(f"error: {corpus}: not a prepared base corpus (no .done; "
                     f"python -m recipes.base.prepare --out {corpus})")
    if args.out.resolve() in {corpus.resolve() for corpus in args.corpora}:
        sys.exit(f"error: --out {args.out} is one of the corpora it joins")
    try:
        manifests = merged(args.corpora)
    except ManifestError as err:
        sys.exit(f"error: {err}")
    claim(args.out, RECIPE, [])  # a merge replaces only a merge's manifests
    for name, lines in manifests.items():
        save_text("".join(json.dumps(row, ensure_ascii=False) + "\n" for row in lines),
                  args.out / f"{name}.jsonl")
    train = manifests["train"]
    hours = sum(row["duration"] for row in train) / 3600
    print(f"{args.out}: {len(train)} training utterances, {hours:.2f} h, from "
          f"{len(args.corpora)} corpora")


if __name__ == "__main__":
    main()

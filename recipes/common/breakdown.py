"""WER per group of a scored manifest: `python -m recipes.common.breakdown RESULTS.json MANIFEST KEY`.

`asr.evaluate --json` writes every utterance's error counts; the recipes' manifests carry
extra keys (`kind`, `speaker`, ...). This joins the two and prints the WER of each group,
e.g. commands vs unknown words vs silence, or isolated digits vs digit strings.
"""

import argparse
import json
from collections import defaultdict
from pathlib import Path

from asr.data import read_manifest


def breakdown(results: Path, manifest: Path, key: str) -> dict[str, dict[str, float]]:
    """{group: {"utterances", "words", "errors", "wer", "insertions"}} over the scored rows."""
    entries = [json.loads(line) for line in manifest.read_text().splitlines() if line.strip()]
    paths = [u.audio_filepath for u in read_manifest(manifest)]
    groups = {path: str(entry.get(key, "?")) for path, entry in zip(paths, entries, strict=True)}
    totals: dict[str, dict[str, float]] = defaultdict(lambda: defaultdict(float))
    for row in json.loads(results.read_text())["results"]:
        words, total = row["words"], totals[groups[row["audio_filepath"]]]
        total["utterances"] += 1
        total["words"] += words["reference_length"]
        total["insertions"] += words["insertions"]
        total["errors"] += words["substitutions"] + words["deletions"] + words["insertions"]
    for total in totals.values():
        total["wer"] = total["errors"] / total["words"] if total["words"] else float("nan")
    return {name: dict(total) for name, total in sorted(totals.items())}


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("results", type=Path, help="JSON written by asr.evaluate --json")
    parser.add_argument("manifest", type=Path, help="the manifest that was scored")
    parser.add_argument("key", help="manifest key to group by (kind, speaker, ...)")
    args = parser.parse_args(argv)
    for name, total in breakdown(args.results, args.manifest, args.key).items():
        print(f"{name:12s} {int(total['utterances']):5d} utterances {int(total['words']):5d} words "
              f"{int(total['errors']):5d} errors ({int(total['insertions'])} insertions) "
              f"WER {100 * total['wer']:.2f}%")


if __name__ == "__main__":
    main()

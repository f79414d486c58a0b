"""Word error rate per kind of speaker: which voices does the model still fail on?

    python -m recipes.voice_commands.breakdown exp/voice_commands/test_results.json \
        data/voice_commands/test.jsonl --by engine

Joins `asr.evaluate --json` results with the manifest they scored (by audio path) and prints
one WER per value of a manifest field: `engine` (espeak-ng, flite, real), `source`
(speech_commands, fsdd), `voice` or `intent`.
"""

import argparse
import json
from collections import defaultdict
from pathlib import Path


def group_rates(results: dict, manifest: Path, key: str) -> dict[str, tuple[int, float]]:
    """{value of `key`: (utterances, WER)}, values sorted by name."""
    entries = {}
    for line in manifest.read_text(encoding="utf-8").splitlines():
        if line.strip():
            entry = json.loads(line)
            path = Path(entry["audio_filepath"])
            entries[str(path if path.is_absolute() else manifest.parent / path)] = entry
    errors: dict[str, int] = defaultdict(int)
    words: dict[str, int] = defaultdict(int)
    counts: dict[str, int] = defaultdict(int)
    for row in results["results"]:
        value = str(entries[row["audio_filepath"]].get(key, "?"))
        w = row["words"]
        errors[value] += w["substitutions"] + w["deletions"] + w["insertions"]
        words[value] += w["reference_length"]
        counts[value] += 1
    return {value: (counts[value], errors[value] / max(words[value], 1))
            for value in sorted(counts)}


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("results", type=Path, help="JSON written by asr.evaluate --json")
    parser.add_argument("manifest", type=Path, help="the manifest those results scored")
    parser.add_argument("--by", default="engine", help="manifest field to group by")
    args = parser.parse_args(argv)
    rates = group_rates(json.loads(args.results.read_text()), args.manifest, args.by)
    for value, (count, wer) in rates.items():
        print(f"  {args.by} {value}: WER {100 * wer:.2f}% ({count} utterances)")


if __name__ == "__main__":
    main()

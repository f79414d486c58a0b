"""The targets of issue #51 from the reports `recipes/base/score.sh` writes, one line each:

    python -m recipes.base.summary exp/base_conv/candidate/scores
"""

import argparse
import json
import sys
from pathlib import Path

# report name -> (what it measures, the figure, the target)
INTENTS = {"commands": ("people's one-word commands", "command_acceptance", ">= 92%"),
           "other_speech": ("other speech accepted", "false_acceptance", "<= 1%"),
           "coffee": ("coffee example, synthetic test", "command_acceptance", ">= 95%"),
           "pv_coffee": ("Picovoice coffee maker, synthetic test", "command_acceptance", ">= 95%")}
TRANSCRIPTS = {"test_words": ("people's WER, held-out Speech Commands and FSDD", "<= 8%"),
               "test_read": ("read sentences (cathy, held-out prompts)", "1.5x Whisper tiny.en")}


def summary_lines(scores: Path) -> list[str]:
    """One line per report found in `scores`: what, the figure in %, of how many, the target."""
    lines = []
    for name, (what, key, target) in INTENTS.items():
        report = _read(scores / f"{name}.json")
        if report is not None:
            count = report["non_commands" if key == "false_acceptance" else "commands"]
            lines.append(f"{what}: {100 * report[key]:.2f}% of {count} (target {target})")
    for name, (what, target) in TRANSCRIPTS.items():
        report = _read(scores / f"{name}.json")
        if report is not None:
            lines.append(f"{what}: WER {100 * report['wer']:.2f}%, CER {100 * report['cer']:.2f}% "
                         f"of {report['utterances']}, RTF {report['rtf']:.4f} (target {target})")
    return lines


def _read(path: Path) -> dict | None:
    try:
        return json.loads(path.read_text())
    except FileNotFoundError:
        return None
    except (OSError, json.JSONDecodeError) as err:
        sys.exit(f"error: {path}: cannot read the report: {err}")


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("scores", type=Path, help="the folder of reports (OUT/scores)")
    args = parser.parse_args(argv)
    lines = summary_lines(args.scores)
    if not lines:
        sys.exit(f"error: {args.scores}: no reports of recipes/base/score.sh in it")
    print("\n".join(lines))


if __name__ == "__main__":
    main()

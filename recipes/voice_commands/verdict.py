"""The main job's last line: done, or why not, in one line.

    python -m recipes.voice_commands.verdict --model exp/coffee --seconds 312 \
        --again "bash recipes/voice_commands/run.sh GRAMMAR=coffee.yaml"

A model is done when its training ran its epochs (or stopped early on its own) and it accepts
at least MIN_ACCEPTANCE of its dev commands (DIR/intents.json, written by `asr-intents
calibrate`). A run that its time budget ended is not called done: the line says so, with the dev
acceptance and the command that continues it (`--again` with twice the budget: a budget
counts the minutes of every resumed part; and with twice the epochs when the budget cut the
last planned one, since a resumed run starts at the next epoch). A model that accepts (almost)
nothing fails the job (exit 1), whatever its training did.
"""

import argparse
import json
import sys
from pathlib import Path

from asr.checkpoint import CONFIG, METRICS, ModelDirError, load_config

MIN_ACCEPTANCE = 0.5  # of dev commands, below which the model is not usable
CALIBRATION = "intents.json"


def verdict(model: Path, seconds: int, again: str) -> tuple[str, int]:
    """(the line, the exit status)."""
    metrics = json.loads((model / METRICS).read_text())
    dev = json.loads((model / CALIBRATION).read_text())["dev"]
    accepted = dev["command_acceptance"]
    epochs, planned = len(metrics.get("epochs", [])), metrics.get("max_epochs")
    took = f"{seconds // 60} min {seconds % 60} s"
    budget = load_config(model / CONFIG).trainer.max_minutes
    if budget:
        again = f"{again} MINUTES={2 * budget:g}"
    if planned and epochs >= planned:  # a resumed run with its epochs spent would train nothing
        again = f"{again} trainer.max_epochs={2 * planned}"
    acceptance = f"dev command acceptance {100 * accepted:.1f}% of {dev['commands']}"
    if accepted < MIN_ACCEPTANCE:
        return (f"main job failed after {took}: the model is not usable yet ({acceptance}, "
                f"{epochs} epochs trained); continue training with: {again}"), 1
    if metrics.get("stopped_by_budget"):
        return (f"main job stopped at its time budget after {took}, {epochs} of {planned} epochs: "
                f"not converged ({acceptance}); continue with: {again}"), 0
    return f"main job done in {took}: {acceptance}", 0


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--model", type=Path, required=True)
    parser.add_argument("--seconds", type=int, required=True, help="the job's wall time so far")
    parser.add_argument("--again", required=True,
                        help="the command that continues the run, less its MINUTES=")
    args = parser.parse_args(argv)
    try:
        line, status = verdict(args.model, args.seconds, args.again)
    except (OSError, ValueError, KeyError, ModelDirError) as err:
        sys.exit(f"error: {args.model}: cannot read the run's metrics or calibration ({err})")
    print(line)
    sys.exit(status)


if __name__ == "__main__":
    main()

"""Average the weights of several epochs of a training run into a new model directory.

    python -m tools.average_checkpoints --model exp/fsdd --last 5 [--out exp/fsdd/averaged]
    python -m tools.average_checkpoints --model exp/fsdd --best 5 --out exp/fsdd_best5

The run must have kept its per-epoch weights (`trainer.keep_checkpoints=N`, at least the
number averaged); `--best` ranks epochs by the dev WER in its metrics.json (ties by dev loss).
Training can do the same at its end with `trainer.average_checkpoints=N trainer.average_by=last|best`.
The result is an ordinary model directory: score it with `python -m asr.evaluate --model OUT ...`.
"""

import argparse
from pathlib import Path

from asr.averaging import AVERAGED, average_model_dir
from asr.checkpoint import ModelDirError


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--model", type=Path, required=True, help="a training run's model directory")
    which = parser.add_mutually_exclusive_group(required=True)
    which.add_argument("--last", type=int, metavar="N", help="average the last N epochs")
    which.add_argument("--best", type=int, metavar="N", help="average the N best epochs by dev WER")
    parser.add_argument("--out", type=Path, help="model directory to write (default: MODEL/averaged)")
    args = parser.parse_args(argv)
    n, by = (args.last, "last") if args.last is not None else (args.best, "best")
    if n < 1:
        parser.error(f"--{by} must be at least 1")
    out = args.out or args.model / AVERAGED
    try:
        epochs = average_model_dir(args.model, n, by, out)
    except (ModelDirError, ValueError) as err:
        raise SystemExit(f"error: {err}") from None
    print(f"averaged epochs {', '.join(map(str, epochs))} of {args.model} ({by} {n}) -> {out}")


if __name__ == "__main__":
    main()

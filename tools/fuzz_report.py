"""Bad inputs, tried as an attacker and a careless user would: a count of what went wrong.

    python tools/fuzz_report.py [--timeout 10] [--only SUBSTRING]

Builds a tiny untrained model directory (and a language model, a grammar, a 1 s clip of real
speech), then runs each case against a fresh copy of them: a spoiled model directory
(config.yaml, weights, tokenizer, language model), spoiled ONNX exports and export folders
that must not be written into, bad command-line arguments to every CLI, bad calls to the
Python API, unusual but valid inputs whose result must still be right, output files that must
not replace an input, and training directories that must not be overwritten or hang a run.
Every CLI runs in-process through its
`main(argv)`, in a worker process that is killed and replaced when a case runs over the
timeout (a hang). Each case ends as one of:

    ok          the one-line error expected (exit 1 or 2), or the right result
    traceback   an exception escaped (or "Traceback" was printed)
    hang        over the timeout
    silent      no error where one was due, or a wrong result
    messy       an error, but not on exactly one line (or with another exit status)

Prints a line per case that is not ok, then the counts. The cases live in tools/fuzz/, one
module per kind (config, weights, tokenizer, lm, cli, grammar, assistant, api, train, export,
arrays, outputs, rundirs); tools/fuzz/runner.py runs and judges them.
"""

import argparse
import importlib
import sys
import tempfile
from collections import Counter
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path[:0] = [str(ROOT), str(ROOT / "tests")]

from fuzz.case import CASES  # noqa: E402
from fuzz.runner import Outcome, Worker, prepare, worker  # noqa: E402

# The case modules, in the order the report numbers and lists their cases.
CASE_MODULES = ("config", "weights", "tokenizer", "lm", "cli", "grammar", "assistant", "api",
                "train", "export", "arrays", "outputs", "rundirs")
for _kind in CASE_MODULES:
    importlib.import_module(f"fuzz.{_kind}")


def run_cases(chosen: list[int], shared: Path, scratch: Path, default_timeout: float,
              verbose: bool) -> Counter:
    """Run the chosen cases in a worker process, printing each that is not ok; the verdicts' counts."""
    pool, counts = Worker(shared, scratch), Counter()
    for index in chosen:
        c = CASES[index]
        timeout = c.limit or default_timeout
        outcome = pool.run(index, timeout + 5)
        if outcome is None:
            outcome = Outcome("hang", f"still running after {timeout + 5:.0f} s", timeout)
            pool = Worker(shared, scratch)
        elif outcome.verdict == "ok" and outcome.seconds > timeout:
            outcome = Outcome("hang", f"took {outcome.seconds:.1f} s", outcome.seconds)
        if outcome.verdict == "traceback" and "worker died" in outcome.detail:
            pool = Worker(shared, scratch)
        counts[outcome.verdict] += 1
        if outcome.verdict != "ok" or verbose:
            print(f"{outcome.verdict:9s} [{c.kind}] {c.name} ({outcome.seconds:.1f} s): "
                  f"{outcome.detail}", flush=True)
    pool.close()
    return counts


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--timeout", type=float, default=10.0, help="seconds a case may take")
    parser.add_argument("--only", default="", help="run the cases whose name contains this")
    parser.add_argument("--verbose", action="store_true", help="print every case's outcome")
    parser.add_argument("--worker", nargs=2, help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.worker:
        worker(Path(args.worker[0]), Path(args.worker[1]))
        return 0
    with tempfile.TemporaryDirectory() as tmp:
        shared, scratch = Path(tmp) / "shared", Path(tmp) / "scratch"
        shared.mkdir()
        scratch.mkdir()
        prepare(shared)
        chosen = [i for i, c in enumerate(CASES) if args.only in f"{c.kind} {c.name}"]
        kinds = Counter(CASES[i].kind for i in chosen)
        print(f"{len(chosen)} cases ({', '.join(f'{n} {k}' for k, n in kinds.items())})")
        counts = run_cases(chosen, shared, scratch, args.timeout, args.verbose)
    slowest = "all within the timeout" if not counts["hang"] else f"{counts['hang']} over it"
    print(f"{len(chosen)} bad inputs: {counts['ok']} ok, {counts['traceback']} tracebacks, "
          f"{counts['hang']} hangs, {counts['silent']} silently wrong, {counts['messy']} messy "
          f"({slowest})")
    return 0 if counts["ok"] == len(chosen) else 1


if __name__ == "__main__":
    sys.exit(main())

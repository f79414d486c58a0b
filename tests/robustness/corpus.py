"""The whole corpus: every case module registered in order (a case's number is its place in
`robustness.case.CASES`), and the pool that runs cases in a worker process, replacing it when
a case hangs or kills it.

    python -m robustness.corpus --worker SHARED SCRATCH    # the worker (runner.Worker starts it)
"""

import argparse
import importlib
import sys
from pathlib import Path

from robustness.case import CASES, Case
from robustness.runner import Outcome, Worker, worker

# The case modules, in the order their cases are numbered.
CASE_MODULES = ("config", "weights", "tokenizer", "lm", "cli", "grammar", "assistant", "api",
                "train", "export", "arrays", "outputs", "rundirs", "round_five")
for _kind in CASE_MODULES:
    importlib.import_module(f"robustness.{_kind}")
DEFAULT_TIMEOUT = 10.0  # seconds a case may take, unless it says otherwise (`Case.limit`)


def module_of(case: Case) -> str:
    """The case module that registered `case` (`CASE_MODULES`)."""
    return getattr(case.run, "__module__", "").rpartition(".")[2]


class Corpus:
    """Runs cases by number in a worker process; a hang (over the case's limit) or a worker's
    death is an outcome, and the next case gets a fresh worker."""

    def __init__(self, shared: Path, scratch: Path) -> None:
        self.shared, self.scratch = shared, scratch
        self.pool = Worker(shared, scratch)

    def run(self, index: int) -> Outcome:
        timeout = CASES[index].limit or DEFAULT_TIMEOUT
        outcome = self.pool.run(index, timeout + 5)
        if outcome is None:
            outcome = Outcome("hang", f"still running after {timeout + 5:.0f} s", timeout)
            self.pool = Worker(self.shared, self.scratch)
        elif outcome.verdict == "ok" and outcome.seconds > timeout:
            outcome = Outcome("hang", f"took {outcome.seconds:.1f} s", outcome.seconds)
        if outcome.verdict == "traceback" and "worker died" in outcome.detail:
            self.pool = Worker(self.shared, self.scratch)
        return outcome

    def close(self) -> None:
        self.pool.close()


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--worker", nargs=2, required=True, metavar=("SHARED", "SCRATCH"),
                        help="run the cases whose numbers arrive on stdin")
    args = parser.parse_args()
    worker(Path(args.worker[0]), Path(args.worker[1]))
    sys.exit(0)

"""The GPU check's run (benchmarks/gpu_check.py): its steps' results, the budget, and each step as a
process of its own, killed with everything it started when the budget ends."""

import gc
import json
import logging
import os
import signal
import subprocess
import time
import traceback
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import asdict
from pathlib import Path

import torch

from benchmarks.gpu_data import FULL, ROOT, TOY, Clip, load_clips, write_manifest

RESULT_ENV = "GPU_CHECK_RESULT"  # where a step run as its own process writes its result
log = logging.getLogger("gpu_check")


class CheckFailed(Exception):
    """A step's check did not hold: why, and what was measured."""

    def __init__(self, reason: str, details: dict | None = None) -> None:
        super().__init__(reason)
        self.reason, self.details = reason, details or {}



class Check:
    """The steps of one run, their results, and where they are written."""

    def __init__(self, out: Path, data: Path, toy: bool, budget: float, work: Path) -> None:
        self.out, self.toy, self.budget, self.work = out, toy, budget, work
        self.sizes = TOY if toy else FULL
        self.device = torch.device("cuda" if torch.cuda.is_available() and not toy else "cpu")
        self.work.mkdir(parents=True, exist_ok=True)
        self.clips = load_clips(data, self.sizes)
        self.train = write_manifest(self.work / "train.jsonl", self.split("train"))
        self.test = write_manifest(self.work / "test.jsonl", self.split("test"))
        self.models: dict[str, Path] = {}  # precision -> a trained model directory
        self.started = time.monotonic()
        self.results: list[dict] = []
        self.info = {"toy": toy, "device": str(self.device), "data": str(data), "work": str(work),
                     "budget_s": budget, "clips": {s: len(self.split(s)) for s in
                                                   ("train", "test", "sentence")},
                     "sizes": asdict(self.sizes)}

    def split(self, name: str) -> list[Clip]:
        return [c for c in self.clips if c.split == name]

    def run(self, name: str, step: Callable[[], dict]) -> None:
        """Run one step in this process and record it: pass, fail (with the reason) or skip
        (out of time). A step that ignores the deadline's signal is not stopped: `main` runs
        each step in a process of its own (`run_process`)."""
        left = self.left()
        if left is not None and left <= 0:
            self.skip(name)
            return
        log.info(f"== {name}")
        started = time.monotonic()
        with deadline(left or 0.0):
            status, reason, details = outcome(step)
        self.record(name, status, reason, details, time.monotonic() - started)
        release_memory()

    def run_process(self, name: str, argv: list[str]) -> None:
        """Run one step as the process `argv` and record what it wrote to the file named by
        $GPU_CHECK_RESULT; killed, with every process it started, when the budget ends, so
        that the whole check ends by then whatever a step does (a compile that ignores
        signals, a hung collective)."""
        left = self.left()
        if left is not None and left <= 0:
            self.skip(name)
            return
        log.info(f"== {name}")
        result = self.work / "results" / f"{name}.json"
        result.parent.mkdir(parents=True, exist_ok=True)
        result.unlink(missing_ok=True)
        started = time.monotonic()
        child = subprocess.Popen(argv, start_new_session=True, cwd=ROOT,
                                 env={**os.environ, RESULT_ENV: str(result)})
        try:
            child.wait(timeout=left)
        except subprocess.TimeoutExpired:
            os.killpg(child.pid, signal.SIGKILL)
            child.wait()
            self.record(name, "fail", f"killed when the time budget ran out ({left:.0f} s left "
                        "at its start)", {}, time.monotonic() - started)
            return
        try:
            found = json.loads(result.read_text())
            status, reason, details = found["status"], found["reason"], found["details"]
        except (OSError, ValueError, KeyError, TypeError):
            status, reason, details = "fail", (f"its process ended (exit {child.returncode}) "
                                               "without a result"), {}
        self.record(name, status, reason, details, time.monotonic() - started)

    def left(self) -> float | None:
        """Seconds of the budget left (None: no budget)."""
        return self.budget - (time.monotonic() - self.started) if self.budget else None

    def skip(self, name: str) -> None:
        elapsed = time.monotonic() - self.started
        self.record(name, "skip", f"time budget: {elapsed:.0f} s of {self.budget:.0f} s "
                                  "spent before it started", {}, 0.0)

    def record(self, name: str, status: str, reason: str, details: dict, seconds: float) -> None:
        self.results.append({"name": name, "status": status, "reason": reason,
                             "seconds": round(seconds, 2), "details": details})
        log.info(f"{name}: {status.upper()}{' - ' + reason if reason else ''} ({seconds:.1f} s)")
        self.write()

    def write(self) -> None:
        counts = {s: sum(r["status"] == s for r in self.results) for s in ("pass", "fail", "skip")}
        summary = {**self.info, "elapsed_s": round(time.monotonic() - self.started, 1),
                   **counts, "steps": self.results}
        path = self.out / "gpu_check.json"
        tmp = path.with_suffix(".tmp")
        tmp.write_text(json.dumps(summary, indent=2, default=str) + "\n")
        tmp.replace(path)

    @property
    def failed(self) -> bool:
        return any(r["status"] == "fail" for r in self.results)


class OutOfTime(Exception):
    """A step still running when the run's time budget ran out."""


@contextmanager
def deadline(seconds: float) -> Iterator[None]:
    """Raise OutOfTime in the step if it runs past `seconds` (0: no limit), so that one slow
    step (a compile) cannot take the time of the report."""
    if seconds <= 0:
        yield
        return

    def stop(signum, frame) -> None:
        raise OutOfTime(f"still running when the time budget ran out ({seconds:.0f} s left "
                        "at its start)")

    previous = signal.signal(signal.SIGALRM, stop)
    signal.setitimer(signal.ITIMER_REAL, max(seconds, 1.0))
    try:
        yield
    finally:
        signal.setitimer(signal.ITIMER_REAL, 0)
        signal.signal(signal.SIGALRM, previous)


def outcome(step: Callable[[], dict]) -> tuple[str, str, dict]:
    """Run a step: ("pass", "", its details), or ("fail", why, what it measured)."""
    try:
        return "pass", "", step()
    except CheckFailed as failed:
        return "fail", failed.reason, failed.details
    except (Exception, SystemExit) as err:  # a step's crash is its failure, not the run's
        log.error(traceback.format_exc())
        return "fail", f"{type(err).__name__}: {first_line(err)}", {}


def first_line(err: BaseException) -> str:
    lines = str(err).strip().splitlines()
    return lines[0] if lines else repr(err)


def release_memory() -> None:
    gc.collect()
    if torch.cuda.is_available():
        torch.cuda.empty_cache()

"""Running a case in a worker process and judging its outcome; replacing a worker that hangs."""

import contextlib
import importlib
import io
import json
import os
import select
import shutil
import subprocess
import sys
import tempfile
import time
import traceback
from dataclasses import dataclass
from pathlib import Path

from helpers import COMMANDS, write_untrained_lm, write_untrained_model
from robustness.case import CASES, DEMO, EVALUATE, GRAMMAR, INTENTS, TRAIN, TRANSCRIBE, Case, Cli, Work

ROOT = Path(__file__).resolve().parents[2]
# The worker runs `robustness.corpus` (which registers every case, in order) with tests/ and the
# repository on its path, from the repository root.
WORKER = [sys.executable, "-m", "robustness.corpus", "--worker"]
PRELOADED = (DEMO, EVALUATE, INTENTS, TRAIN, TRANSCRIBE)


@dataclass
class Outcome:
    verdict: str
    detail: str
    seconds: float


def _expected_errors() -> tuple[type[BaseException], ...]:
    """The errors a bad input may raise through the Python API (or training) instead of a traceback."""
    from asr.audio import AudioError
    from asr.checkpoint import ModelDirError
    grammar_error = importlib.import_module(GRAMMAR).GrammarError
    return AudioError, ModelDirError, grammar_error, ValueError, RuntimeError


def run_case(index: int, shared: Path, scratch: Path) -> Outcome:
    """Run one case in this process and judge it."""
    expected = _expected_errors()
    c = CASES[index]
    folder = Path(tempfile.mkdtemp(dir=scratch))
    work = Work(shared, folder)
    started = time.perf_counter()
    out, err = io.StringIO(), io.StringIO()
    status = None
    try:
        with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
            spec = c.run(work)
            if isinstance(spec, Cli):
                status = _call_main(spec)
    except expected as error:
        return _judge_error(c, error, started)
    except BaseException:  # noqa: BLE001 - the point: anything else escaped
        return Outcome("traceback", _last_line(traceback.format_exc()), _since(started))
    finally:
        shutil.rmtree(folder, ignore_errors=True)
    seconds = _since(started)
    if not isinstance(spec, Cli):  # an API call that returned
        right = spec is True if c.expect == "ok" else False
        return Outcome("ok" if right else "silent", f"returned {str(spec)[:120]!r}", seconds)
    return _judge_cli(spec, status, out.getvalue(), err.getvalue(), seconds)


def _call_main(spec: Cli) -> int | None:
    """Run the CLI's main(argv); its exit status (a SystemExit's message goes to stderr)."""
    module, function = spec.main.split(":")
    main = getattr(__import__(module, fromlist=[function]), function)
    try:
        return main(spec.argv)
    except SystemExit as stop:
        if isinstance(stop.code, str):
            print(stop.code, file=sys.stderr)
        return stop.code if isinstance(stop.code, int) else 1


def _judge_error(c: Case, error: BaseException, started: float) -> Outcome:
    """An expected error class raised: fine from the API or training, with a one-line message.

    Called while `error` is being handled, so that a traceback can still be formatted.
    """
    if c.kind not in ("api", "train") or (isinstance(error, RuntimeError)
                                          and type(error).__name__ != "TrainingError"):
        return Outcome("traceback", _last_line(traceback.format_exc()), _since(started))
    message = str(error)
    verdict = "ok" if c.expect == "error" and message and "\n" not in message else (
        "messy" if c.expect == "error" else "silent")
    return Outcome(verdict, message[:160], _since(started))


def _judge_cli(spec: Cli, status: int | None, stdout: str, stderr: str, seconds: float) -> Outcome:
    """A CLI that ran to its end: its own check, else one line of error and exit 1 or 2."""
    if "Traceback" in stderr:
        return Outcome("traceback", _last_line(stderr), seconds)
    if spec.check is not None:
        right = spec.check(status, stdout, stderr)
        return Outcome("ok" if right else "silent", f"exit {status}: {stderr.strip()[:160]!r} "
                       f"{stdout.strip()[:160]!r}", seconds)
    lines = stderr.splitlines()
    if status == 0:
        return Outcome("silent", f"exit 0, printed {stdout.strip()[:120]!r}", seconds)
    if status in (1, 2) and len(lines) == 1:
        return Outcome("ok", lines[0][:200], seconds)
    return Outcome("messy", f"exit {status}, {len(lines)} stderr lines: {stderr[:200]!r}", seconds)


def _since(started: float) -> float:
    return round(time.perf_counter() - started, 2)


def _last_line(text: str) -> str:
    lines = [line for line in text.strip().splitlines() if line.strip()]
    return lines[-1][:200] if lines else ""


def worker(shared: Path, scratch: Path) -> None:
    """Run the cases whose numbers arrive on stdin; one JSON outcome per line on stdout."""
    import torch

    for module in PRELOADED:
        importlib.import_module(module)  # before "ready": a case's time is its own
    torch.set_num_threads(1)
    report = sys.stdout
    report.write("ready\n")
    report.flush()
    for line in sys.stdin:
        outcome = run_case(int(line), shared, scratch)
        report.write(json.dumps(outcome.__dict__) + "\n")
        report.flush()


def prepare(shared: Path) -> None:
    """The inputs every case copies: an untrained model directory, a language model, a clip."""
    model = write_untrained_model(shared)
    write_untrained_lm(model, shared / "lm")
    shutil.copy(sorted((COMMANDS / "yes").glob("*.wav"))[0], shared / "clip.wav")


class Worker:
    """A worker process; replaced when a case hangs."""

    def __init__(self, shared: Path, scratch: Path) -> None:
        path = os.pathsep.join([str(ROOT / "tests"), str(ROOT),
                                *filter(None, [os.environ.get("PYTHONPATH")])])
        self.process = subprocess.Popen([*WORKER, str(shared), str(scratch)],
                                        stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                                        stderr=subprocess.DEVNULL, text=True, cwd=ROOT,
                                        env={**os.environ, "PYTHONPATH": path})
        assert self.process.stdout.readline() == "ready\n", "the worker did not start"

    def run(self, index: int, timeout: float) -> Outcome | None:
        self.process.stdin.write(f"{index}\n")
        self.process.stdin.flush()
        ready, _, _ = select.select([self.process.stdout], [], [], timeout)
        if not ready:
            self.process.kill()
            self.process.wait()
            return None
        line = self.process.stdout.readline()
        if not line:  # the worker died (e.g. killed for memory)
            self.process.wait()
            return Outcome("traceback", f"worker died with status {self.process.returncode}",
                           timeout)
        return Outcome(**json.loads(line))

    def close(self) -> None:
        self.process.stdin.close()
        self.process.wait()

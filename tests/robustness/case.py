"""A case, what it runs (a CLI's `main(argv)` or a Python call) and the inputs it may spoil."""

import os
import shutil
import sys
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

# The modules the cases call, one constant each, so that a module's new home is one edit here.
TRANSCRIBE = "asr.transcribe"
EVALUATE = "asr.evaluate"
TRAIN = "asr.train"
INTENTS = "asr.assistant.intents"
GRAMMAR = "asr.grammar"
ACTIONS = "asr.assistant.actions"
DEMO = "asr.assistant.demo"

# YAML's "billion laughs": 11 levels of aliases, each six of the one before.
BOMB = "\nlol0: &a0 [x, x, x, x, x, x, x, x, x]\n" + "".join(
    f"lol{i}: &a{i} [*a{i - 1}, *a{i - 1}, *a{i - 1}, *a{i - 1}, *a{i - 1}, *a{i - 1}]\n"
    for i in range(1, 12))


@dataclass
class Work:
    """One case's fresh copies of the shared inputs, in its own folder."""

    shared: Path
    folder: Path

    @property
    def model(self) -> Path:
        return self._copy("model")

    @property
    def lm(self) -> Path:
        return self._copy("lm")

    def _copy(self, name: str) -> Path:
        """The case's own copy (made once: a case may delete it)."""
        target = self.folder / name
        if not (self.folder / f".{name}.copied").exists():
            shutil.copytree(self.shared / name, target)
            (self.folder / f".{name}.copied").touch()
        return target

    @property
    def clip(self) -> Path:
        return self.shared / "clip.wav"

    def file(self, name: str, data: bytes | str = b"") -> Path:
        path = self.folder / name
        path.write_bytes(data.encode() if isinstance(data, str) else data)
        return path

    def fifo(self, name: str = "fifo") -> Path:
        path = self.folder / name
        os.mkfifo(path)
        return path


@dataclass
class Case:
    kind: str
    name: str
    run: Callable[[Work], object]  # a Cli, or an API call returning its result
    expect: str = "error"  # "error", or "ok": the run's own check must pass
    limit: float | None = None  # seconds (default: --timeout)


@dataclass
class Cli:
    main: str  # "module:function"
    argv: list[str]
    check: Callable[[int, str, str], bool] | None = None  # (status, stdout, stderr) -> right?
    stdin: bytes = b""


CASES: list[Case] = []


def run_cli(spec: Cli) -> tuple[int | None, str, str]:
    """Run a Cli now, in this process: its status, stdout and stderr. For a case that must look
    at the files the command left (the runner judges after the case's folder is gone)."""
    import contextlib
    import io
    module, function = spec.main.split(":")
    main = getattr(__import__(module, fromlist=[function]), function)
    out, err = io.StringIO(), io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        try:
            status = main(spec.argv)
        except SystemExit as stop:
            status = stop.code if isinstance(stop.code, int) else 1
            if isinstance(stop.code, str):
                print(stop.code, file=sys.stderr)
    return status, out.getvalue(), err.getvalue()


def case(kind: str, name: str, expect: str = "error", limit: float | None = None):
    def register(make: Callable[[Work], object]):
        CASES.append(Case(kind, name, make, expect, limit))
        return make
    return register


def transcribe(w: Work, *extra: str, model: Path | None = None) -> Cli:
    return Cli(f"{TRANSCRIBE}:main", ["--model", str(model or w.model), *extra, str(w.clip)])


def state(path: Path) -> dict:
    """A torch file's contents, loaded as the library loads them (tensors and plain types only)."""
    import torch
    return torch.load(path, weights_only=True)


def save(path: Path, obj: object) -> None:
    import torch
    torch.save(obj, path)


class Payload:
    """Unpickled, it runs a shell command: a weights file an attacker wrote."""

    def __reduce__(self):
        return os.system, ("touch /tmp/fuzz_report_pwned",)

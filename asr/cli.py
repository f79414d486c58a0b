"""What the command lines share: one-line errors and arguments checked as they are parsed.

Every problem a command line reports is one line on stderr and a non-zero status: 2 for a
malformed command (argparse's usage errors), 1 for inputs that cannot be used. Names from the
outside (file names, transcripts) can hold newlines, tabs or terminal escapes, so they are
escaped wherever a line-oriented format would break: in error lines and tab-separated output.
A command whose output pipe closes early (`| head -1`) ends quietly (`quiet_pipe`).
"""

import argparse
import contextlib
import functools
import json
import os
import signal
import sys
import warnings
from collections.abc import Callable, Iterator
from pathlib import Path

from asr.checkpoint import save_text
from asr.outputs import output_problem

# Control characters (C0, DEL, C1) and Unicode's line and paragraph separators: whatever a
# terminal or a line-splitting reader could take for the end of a line or an escape sequence.
CLOSED_PIPE = 128 + signal.SIGPIPE  # the status a shell reports for a command SIGPIPE ended
_CONTROL = {code: f"\\x{code:02x}" for code in [*range(32), *range(127, 160)]} | {
    9: "\\t", 10: "\\n", 13: "\\r", 0x2028: "\\u2028", 0x2029: "\\u2029"}


class ArgumentParser(argparse.ArgumentParser):
    """argparse, with its usage errors on one line (exit status 2)."""

    def error(self, message: str) -> None:
        self.exit(2, f"{self.prog}: error: {one_line(message)} (see --help)\n")


def one_line(text: str) -> str:
    """`text` with control characters (newlines, tabs, escapes) written as `\\n`, `\\x1b`..."""
    return text.translate(_CONTROL)


def tsv_field(text: str) -> str:
    """A field of tab-separated output: backslashes doubled, control characters escaped, so
    that every record is one line and has its own number of fields; bytes of a file name that
    are not UTF-8 as `\\udcXX`."""
    escaped = one_line(text.replace("\\", "\\\\"))
    return escaped.encode("utf-8", "backslashreplace").decode("utf-8")


def print_error(problem: object) -> None:
    """`error: problem` on stderr, on one line."""
    print(f"error: {one_line(str(problem))}", file=sys.stderr, flush=True)


def int_in(low: int, high: int):
    """An argparse type: a whole number in [low, high]."""
    def parse(text: str) -> int:
        try:
            value = int(text)
        except ValueError:
            raise argparse.ArgumentTypeError(f"expected a whole number, got {text!r}") from None
        if not low <= value <= high:
            raise argparse.ArgumentTypeError(f"must be in [{low}, {high}], got {value}")
        return value
    return parse


def float_in(low: float, high: float):
    """An argparse type: a finite number in [low, high]."""
    def parse(text: str) -> float:
        try:
            value = float(text)
        except ValueError:
            raise argparse.ArgumentTypeError(f"expected a number, got {text!r}") from None
        if not low <= value <= high:  # NaN fails here too
            raise argparse.ArgumentTypeError(f"must be in [{low:g}, {high:g}], got {text}")
        return value
    return parse


def check_output(parser: argparse.ArgumentParser, option: str, path: str | Path,
                 reads: list[str]) -> None:
    """A usage error, before any work, for an output that would replace a file the command
    reads (`reads`: its inputs and the model's files, `asr.outputs.model_files`), is a
    folder, or lies in no folder. Every command that writes a file checks it here."""
    problem = output_problem(Path(path), reads)
    if problem is not None:
        parser.error(f"{option} {path} {problem}")


def save_report(report: dict, path: str | Path) -> None:
    """Write a JSON report atomically; a ValueError naming the path if it cannot be written."""
    try:
        save_text(json.dumps(report, indent=2) + "\n", Path(path))
    except OSError as err:
        raise ValueError(f"{path}: cannot write the report ({err.strerror or err})") from None


def quiet_pipe(main: Callable[..., int]) -> Callable[..., int]:
    """`main`, ending quietly when the reader of its output goes away (`... | head -1`), as
    Unix tools do: no traceback, stdout silenced (`silence_stdout`), status CLOSED_PIPE."""
    @functools.wraps(main)
    def run(*args, **kwargs) -> int:
        try:
            with one_line_warnings():
                return main(*args, **kwargs)
        except BrokenPipeError:
            silence_stdout()
            return CLOSED_PIPE
    return run


@contextlib.contextmanager
def one_line_warnings() -> Iterator[None]:
    """A library warning (a grammar word the model cannot write, say) as one `warning: ...`
    line on stderr, as every other message of a command line is, not Python's two lines with
    the source file."""
    def show(message, category, filename, lineno, file=None, line=None) -> None:
        print(f"warning: {one_line(str(message))}", file=sys.stderr, flush=True)

    with warnings.catch_warnings():
        warnings.showwarning = show
        yield


def silence_stdout() -> None:
    """Point stdout at /dev/null, so that nothing more written to it (Python's last flush
    included) finds the closed pipe."""
    try:
        stdout = sys.stdout.fileno()
    except (AttributeError, OSError, ValueError):  # not a file (a test's buffer)
        return
    devnull = os.open(os.devnull, os.O_WRONLY)
    os.dup2(devnull, stdout)
    os.close(devnull)

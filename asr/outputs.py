"""Where a command may write: never over a file it reads, never over a model's own files, and
only where a file can be written; checked before any work, so that a bad output path fails in
one line at once instead of after the whole input was decoded (and never destroys a model).

Files are told apart by inode (through links and `..`), and a file that does not exist yet by
its folder's inode and its name, so every spelling of a path is caught.
"""

import os
from pathlib import Path

from asr.checkpoint import (
    CALIBRATION_FILE,
    CHECKPOINT,
    CONFIG,
    GRAMMAR_FILE,
    METRICS,
    TOKENIZER,
    TRAINING,
    WEIGHTS,
)
from asr.models import inside_package, package_problem

STDIN = "-"  # the name that stands for standard input
# A model directory's own files: no report may replace them (metrics.json is an input name's
# json output away: an audio file named metrics.wav).
MODEL_FILES = (CONFIG, WEIGHTS, TOKENIZER, METRICS, CHECKPOINT, GRAMMAR_FILE, CALIBRATION_FILE,
               TRAINING)


def model_files(model: Path) -> list[str]:
    """The files of a model directory that no output may replace."""
    return [str(model / name) for name in MODEL_FILES]


def output_problem(path: Path, reads: list[str]) -> str | None:
    """Why `path` cannot take an output, if it cannot: it is one of the files read (`reads`),
    a folder, or its folder does not exist."""
    found = replaced(path, input_keys(reads))
    if found is not None:
        return f"is {found}: the output would replace it"
    if inside_package(path):
        return package_problem(path)
    if path.is_dir():
        return "is a folder"
    if not path.parent.is_dir():
        return f"cannot be written: {path.parent} is not a folder"
    return None


def input_keys(names: list[str]) -> dict[tuple, str]:
    """`file_keys` of each named file (stdin has none) -> its name."""
    return {key: name for name in names if name != STDIN for key in file_keys(Path(name))}


def replaced(path: Path, inputs: dict[tuple, str]) -> str | None:
    """The input that writing `path` would replace: the same file, or the same name in the
    same folder (an audio file named x.tsv), through links and `..` alike."""
    return next((inputs[key] for key in file_keys(path) if key in inputs), None)


def file_keys(path: Path) -> list[tuple]:
    """What tells a file apart: its inode (through links), and its folder's inode with its
    name (for a file that does not exist yet)."""
    keys: list[tuple] = []
    for target, name in ((path, None), (path.parent, path.name)):
        try:
            info = os.stat(target)
        except (OSError, ValueError):  # ValueError: a NUL in the name
            continue
        keys.append((info.st_dev, info.st_ino, name))
    return keys

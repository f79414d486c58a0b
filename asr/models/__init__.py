"""Models shipped inside the package, by name: `Transcriber.from_pretrained("base")`,
`asr-transcribe x.wav` (no --model), `asr-intents --grammar coffee.yaml x.wav`.

"base" is one general English acoustic model (recipes/base: broad text in many synthetic
voices plus real people), so that a grammar given at load time constrains its search and works
with no training; fine-tuning starts from it (`trainer.init_from=base`). Its folder is an
ordinary model directory (weights in fp16, config, tokenizer, its default grammar, the
grammar search's calibrated threshold, and in lm/ the language model its config fuses into free
transcription); `TRAINING.json` beside them says what it was trained on and for how long.

Nothing writes into this folder (`package_problem`): a calibration, a training run, an export
or a grown model there would change the model for every user of the install. Copy the model
first (`cp -r .../base mine/`) and write into the copy.

A name wins over a folder of the same name in the working directory, as whisper's model names
do: write `./base` for such a folder.
"""

import os
from pathlib import Path

FOLDER = Path(__file__).resolve().parent
NAMES = ("base",)
DEFAULT = "base"


def model_path(name_or_dir: str | Path) -> Path:
    """The folder of a shipped model's name, or the model directory given."""
    if isinstance(name_or_dir, str) and name_or_dir in NAMES:
        return FOLDER / name_or_dir
    return Path(name_or_dir)


def inside_package(path: str | Path) -> bool:
    """Whether `path` (made absolute, its links followed; one that does not exist yet by the
    folders above it) is the package's models folder or lies in it. Folders are also compared
    by inode, so a bind mount of the package is caught too."""
    resolved = Path(os.path.realpath(path))
    if resolved.is_relative_to(FOLDER):
        return True
    try:
        package = os.stat(FOLDER)
    except OSError:
        return False
    for folder in (resolved, *resolved.parents):
        try:
            found = os.stat(folder)
        except OSError:
            continue
        if (found.st_dev, found.st_ino) == (package.st_dev, package.st_ino):
            return True
    return False


def package_problem(path: str | Path, what: str = "an output") -> str | None:
    """Why `path` cannot take `what` (an output, a training run, ...), if it lies in the
    installed package's models folder (`inside_package`): what follows its name in the error
    line, with the hint."""
    if not inside_package(path):
        return None
    return (f"is inside the installed package's models ({FOLDER}): {what} there would "
            f"change the shipped model for every user of this install; copy the model first: "
            f"cp -r {FOLDER / DEFAULT} mine/ (then use mine)")

"""A corpus folder belongs to the recipe that made it: a prepare wipes only its own.

`claim` runs before a prepare deletes anything in its `--out`: the folder must be new, empty,
or marked (OWNER_FILE, written at creation) as a corpus of the same recipe; a link, a file,
or a folder of anything else is refused in one line, so that `--out data/fsdd` (another
recipe's corpus) or `--out .` (the checkout) loses nothing. A corpus made before the marker
existed is recognised by its `.done` settings.
"""

import json
import sys
from pathlib import Path

from asr.checkpoint import save_text

OWNER_FILE = ".corpus"
# What a recipe's `.done` holds that another's does not: corpora older than OWNER_FILE.
LEGACY_KEYS = {"voice_commands": "grammar", "base": "text"}


def owner(folder: Path) -> str | None:
    """The recipe whose corpus `folder` is (None: not a corpus of a recipe that marks it)."""
    marker = folder / OWNER_FILE
    if marker.is_file() and not marker.is_symlink():
        return marker.read_text(encoding="utf-8", errors="replace").strip()[:100]
    try:
        settings = json.loads((folder / ".done").read_text(encoding="utf-8"))
    except (OSError, ValueError, RecursionError):
        return None
    if not isinstance(settings, dict):
        return None
    return next((recipe for recipe, key in LEGACY_KEYS.items() if key in settings), None)


def claim(folder: Path, recipe: str, wiped: list[str]) -> None:
    """Make `folder` `recipe`'s corpus, or exit with one line saying why it cannot be; the
    subfolders in `wiped` (relative paths) must not be links, since a prepare deletes them."""
    if folder.is_symlink():
        sys.exit(f"error: --out {folder} is a link; name the folder itself")
    if folder.exists() and not folder.is_dir():
        sys.exit(f"error: --out {folder} is not a folder")
    if folder.is_dir() and any(folder.iterdir()):
        found = owner(folder)
        if found != recipe:
            what = f"a {found} corpus" if found else "files that no prepare of ours made"
            sys.exit(f"error: --out {folder} holds {what}, not a {recipe} corpus; choose "
                     "another --out (or empty it)")
    for name in wiped:
        path = folder
        for part in Path(name).parts:
            path = path / part
            if path.is_symlink():
                sys.exit(f"error: {path} is a link; a prepare deletes and rewrites it, so it "
                         "must be a folder of its own")
    folder.mkdir(parents=True, exist_ok=True)
    save_text(recipe + "\n", folder / OWNER_FILE)


def rebuilt(folder: Path, done: Path, wanted: dict) -> None:
    """Say so when a prepare rebuilds a corpus it made before with other settings (another
    grammar, other sizes): the old corpus is deleted, and a run trained on it (resumed by the
    recipe's run.sh) would train on another corpus."""
    try:
        before = json.loads(done.read_text(encoding="utf-8"))
    except (OSError, ValueError, RecursionError):
        return
    if not isinstance(before, dict):
        return
    changed = sorted(k for k in {*before, *wanted} if before.get(k) != wanted.get(k))
    if changed:
        print(f"{folder}: prepared before with other settings ({', '.join(changed)}); deleting "
              "it and preparing it again", file=sys.stderr)

"""The files the assistant may show: the home-folder sandbox, listings, and browsing them.

Files are only read inside the configured home folder: every path is resolved (symlinks and
`..` followed) and must stay inside it (`inside_home`), and directory walks never follow
links. Slots come from the grammar's fixed words, so a spoken "/etc" cannot even become an
argument; the check is the second wall.
"""

import datetime as dt
import os
from pathlib import Path

# File kinds of the grammar -> what counts as one. "files" is every file; "directories" are
# folders; "downloads" are the files of the downloads folder.
KIND_EXTENSIONS = {
    "photos": {".jpg", ".jpeg", ".png", ".gif", ".bmp", ".tif", ".tiff", ".webp", ".heic", ".raw"},
    "documents": {".pdf", ".txt", ".md", ".doc", ".docx", ".odt", ".rtf", ".xls", ".xlsx", ".ods",
                  ".ppt", ".pptx", ".odp", ".csv", ".tex"},
    "music": {".mp3", ".flac", ".ogg", ".oga", ".opus", ".wav", ".m4a", ".aac", ".wma"},
    "videos": {".mp4", ".mkv", ".webm", ".avi", ".mov", ".m4v", ".mpg", ".mpeg", ".wmv"},
}
KINDS = ("files", "directories", "downloads", *KIND_EXTENSIONS)
WHEN = ("from today", "from yesterday", "from last week")  # what `time_window` knows
DIGIT_VALUES = {word: value for value, word in enumerate(
    "zero one two three four five six seven eight nine".split())} | {
    str(value): value for value in range(10)}  # as Rhino's number slots report them
_NOUNS = {"music": ("music file", "music files"), "directories": ("directory", "directories")}
MAX_SCREENS = 20  # listings kept for "go back" (each may hold max_scanned paths)


class SandboxError(PermissionError):
    """A path outside the configured home folder."""


def inside_home(home: Path, relative: str | Path) -> Path:
    """`home / relative`, resolved; refuses anything that resolves outside home, or not at
    all (a loop of symbolic links)."""
    root = resolved(home)
    path = resolved(root / relative)
    if not path.is_relative_to(root):
        raise SandboxError(f"{relative}: outside the home folder {root}; refused")
    return path


def resolved(path: Path) -> Path:
    """`path` with links and `..` resolved; a SandboxError for a loop of symbolic links."""
    try:
        return path.resolve()
    except (OSError, RuntimeError) as err:  # RuntimeError: a symlink loop, before Python 3.13
        raise SandboxError(f"{path}: cannot be resolved ({err}); refused") from None


def list_files(home: Path, kind: str, folder: str | Path = ".", since: float | None = None,
               until: float | None = None, limit: int | None = None) -> tuple[list[Path], bool]:
    """Files (or folders) of a kind under `home / folder`, newest first, as paths inside home,
    and whether every entry was looked at: the walk stops after `limit` entries, so that a
    folder of millions of files answers at once (with what it found so far).

    Hidden entries are skipped; symbolic links are neither followed nor listed, so a link
    inside home cannot expose what lies outside it. `since`/`until` bound the modification time.
    """
    root = inside_home(home, folder)
    if not root.is_dir():
        return [], True
    found, seen = [], 0
    for top, dirs, files in os.walk(root, followlinks=False):
        seen += len(dirs) + len(files)
        if limit is not None and seen > limit:
            break
        dirs[:] = sorted(d for d in dirs if not d.startswith(".") and not Path(top, d).is_symlink())
        names = dirs if kind == "directories" else files
        for name in names:
            path = Path(top, name)
            if name.startswith(".") or path.is_symlink():
                continue
            if kind in KIND_EXTENSIONS and path.suffix.lower() not in KIND_EXTENSIONS[kind]:
                continue
            try:
                mtime = path.stat().st_mtime
            except OSError:  # gone or unreadable since the walk saw it
                continue
            if (since is None or mtime >= since) and (until is None or mtime < until):
                found.append((mtime, path))
    complete = limit is None or seen <= limit
    return [path for _, path in sorted(found, key=lambda pair: (-pair[0], pair[1]))], complete


def time_window(when: str | None, now: dt.datetime) -> tuple[float | None, float | None]:
    """"from today" / "from yesterday" / "from last week" -> (since, until) as timestamps."""
    midnight = now.replace(hour=0, minute=0, second=0, microsecond=0)
    if when == "from today":
        return midnight.timestamp(), None
    if when == "from yesterday":
        return (midnight - dt.timedelta(days=1)).timestamp(), midnight.timestamp()
    if when == "from last week":
        return (now - dt.timedelta(days=7)).timestamp(), None
    return None, None


def _counted(count: int, kind: str) -> str:
    """"1 photo", "3 photos", "2 music files"."""
    one, many = _NOUNS.get(kind, (kind.removesuffix("s"), kind))
    return f"{count} {one if count == 1 else many}"


class FileBrowser:
    """The listings shown, the last on screen: each a title, its items and the page shown."""

    def __init__(self, home: Path, downloads: str, page_size: int, max_scanned: int) -> None:
        self.home, self.downloads = home, downloads
        self.page_size, self.max_scanned = page_size, max_scanned
        self.screens: list[tuple[str, list[Path], int]] = []

    def show(self, kind: str, when: str | None = None) -> str:
        """List the files of a kind (modified `when`), newest first, and show the first page."""
        if kind not in KINDS:
            return (f"I know no kind of file called {kind!r} (only {', '.join(KINDS)}); "
                    "nothing shown.")
        if when is not None and when not in WHEN:
            return (f"I cannot tell which files are {when!r} (only {', '.join(WHEN)}); "
                    "nothing shown.")
        folder = self.downloads if kind == "downloads" else "."
        since, until = time_window(when, dt.datetime.now())
        try:
            items, complete = list_files(self.home, "files" if kind == "downloads" else kind,
                                         folder, since, until, self.max_scanned)
        except SandboxError as err:
            return str(err)
        where = inside_home(self.home, folder)
        among = "" if complete else f" among the first {self.max_scanned} entries"
        title = f"{_counted(len(items), kind)}{' ' + when if when else ''} in {where}{among}"
        self.screens = self.screens[1 - MAX_SCREENS:] + [(title, items, 0)]
        return self._page()

    def _page(self) -> str:
        title, items, page = self.screens[-1]
        size = self.page_size
        shown = items[page * size:(page + 1) * size]
        if not shown:
            return f"{title}." if not items else f"{title}: no more."
        names = ", ".join(f"{page * size + i + 1}. {path.relative_to(self.home)}"
                          for i, path in enumerate(shown))
        more = f" (scroll down for {len(items) - (page + 1) * size} more)" \
            if len(items) > (page + 1) * size else ""
        return f"{title}: {names}{more}"

    def scroll(self, direction: str) -> str:
        if direction not in ("up", "down", "left", "right"):
            return f"Cannot scroll {direction!r} (up, down, left or right); nothing done."
        if direction in ("left", "right"):
            return f"Scrolled {direction} (simulated: listings have one column)."
        if not self.screens:
            return "Nothing to scroll: show some files first."
        title, items, page = self.screens[-1]
        pages = max(1, -(-len(items) // self.page_size))
        page = min(page + 1, pages - 1) if direction == "down" else max(page - 1, 0)
        self.screens[-1] = (title, items, page)
        return self._page()

    def go_back(self) -> str:
        if len(self.screens) < 2:
            return "Nothing to go back to."
        self.screens.pop()
        return "Back to " + self._page()

    def pick(self, digit: str) -> str:
        """A digit picks an item of the listing on screen (1 = the first)."""
        value = DIGIT_VALUES.get(digit)
        if value is None:
            return f"Heard {digit!r}, which is no digit; nothing picked."
        if not self.screens:
            return f"Heard {digit}; nothing on screen to pick."
        _, items, _ = self.screens[-1]
        if not 1 <= value <= len(items):
            return f"There is no item {value}."
        return f"Item {value}: {items[value - 1]}"

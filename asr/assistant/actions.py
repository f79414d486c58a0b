"""What the voice-command demo does for each intent: a whitelist of plain Python functions.

Safety rests on three rules, each enforced here rather than trusted to the recogniser:
- An intent runs only if it is in `ACTIONS` (the whitelist) and enabled in the config; nothing
  is looked up by name from the transcript, and no text reaches a shell or `eval`.
- Files are only read inside the configured home folder: every path is resolved (symlinks
  and `..` followed) and must stay inside it (`inside_home`), and directory walks never
  follow links. Slots come from the grammar's fixed words, so a spoken "/etc" cannot even
  become an argument; the check is the second wall.
- Programs are launched only when `launch` is on, only from the configured `apps` table
  (an argv list, run without a shell), and only after a spoken "yes" that is the very next
  utterance, within `confirm_seconds` of the question: any other utterance drops the
  question, and "go" is not "yes".
Devices (volume, lights, radio, wifi, music player) are simulated: their state lives here.
"""

import datetime as dt
import os
import subprocess
import threading
import time
from collections import deque
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

from asr.untrusted import check_fields, check_ranges

# File kinds of the grammar -> what counts as one. "files" is every file; "directories" are
# folders; "downloads" are the files of the downloads folder.
KIND_EXTENSIONS = {
    "photos": {".jpg", ".jpeg", ".png", ".gif", ".bmp", ".tif", ".tiff", ".webp", ".heic", ".raw"},
    "documents": {".pdf", ".txt", ".md", ".doc", ".docx", ".odt", ".rtf", ".xls", ".xlsx", ".ods",
                  ".ppt", ".pptx", ".odp", ".csv", ".tex"},
    "music": {".mp3", ".flac", ".ogg", ".oga", ".opus", ".wav", ".m4a", ".aac", ".wma"},
    "videos": {".mp4", ".mkv", ".webm", ".avi", ".mov", ".m4v", ".mpg", ".mpeg", ".wmv"},
}
NUMBER_VALUES = {word: value for value, word in enumerate(
    "one two three four five six seven eight nine ten eleven twelve thirteen fourteen fifteen "
    "sixteen seventeen eighteen nineteen twenty".split(), start=1)} | {
    "thirty": 30, "forty": 40, "fifty": 50, "sixty": 60}
DIGIT_VALUES = {word: value for value, word in enumerate(
    "zero one two three four five six seven eight nine".split())}


@dataclass(frozen=True)
class Question:
    """A yes/no question the assistant asked: what it is about, what "yes" runs, when."""

    what: str
    run: Callable[[], str]
    asked: float


class SandboxError(PermissionError):
    """A path outside the configured home folder."""


@dataclass
class ActionsConfig:
    """conf/demo.yaml's `actions`: what the demo may do and where."""

    home: str = "~"  # the only folder whose files are listed or read
    downloads: str = "Downloads"  # the downloads folder, relative to home
    enabled: list[str] = field(default_factory=lambda: sorted(ACTIONS))
    page_size: int = 5  # files shown at a time (scroll for more)
    max_scanned: int = 20000  # a listing looks at no more entries than this (a huge home)
    launch: bool = False  # really start programs on "open the ..." (after a spoken yes)
    apps: dict[str, list[str]] = field(default_factory=dict)  # app -> argv, never a shell
    program: str = "firefox"  # the process "check whether the program ran" looks for
    program_log: str = "program.log"  # relative to home: "check the program log"
    power_supply: str = "/sys/class/power_supply"  # where Linux shows batteries
    low_battery: int = 10  # percent at or below which the battery "ran down"
    volume_step: int = 10
    confirm_seconds: float = 8.0  # a yes/no question expires this long after it is asked

    def __post_init__(self) -> None:
        check_fields(self, "actions")
        check_ranges(self, "actions", page_size=(1, 1000), max_scanned=(1, 10_000_000),
                     low_battery=(0, 100), volume_step=(0, 100), confirm_seconds=(0, 3600))


def inside_home(home: Path, relative: str | Path) -> Path:
    """`home / relative`, resolved; refuses anything that resolves outside home."""
    root = home.resolve()
    path = (root / relative).resolve()
    if not path.is_relative_to(root):
        raise SandboxError(f"{relative}: outside the home folder {root}; refused")
    return path


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


def read_batteries(power_supply: Path) -> list[tuple[str, int | None, str]]:
    """(name, percent, status) for each battery Linux reports under /sys/class/power_supply."""
    batteries = []
    for supply in sorted(power_supply.glob("*")) if power_supply.is_dir() else []:
        if _read(supply / "type") != "Battery":
            continue
        capacity = _read(supply / "capacity")
        batteries.append((supply.name, int(capacity) if capacity.isdigit() else None,
                          _read(supply / "status") or "Unknown"))
    return batteries


def running_processes(name: str, proc: Path = Path("/proc")) -> list[int]:
    """PIDs of other processes called `name` (their comm, or the file name of their argv[0])."""
    pids = []
    for entry in proc.iterdir():
        if not entry.name.isdigit() or int(entry.name) == os.getpid():
            continue
        argv0 = _read(entry / "cmdline").split("\0", 1)[0]
        if name in (_read(entry / "comm"), Path(argv0).name):
            pids.append(int(entry.name))
    return sorted(pids)


def _read(path: Path) -> str:
    """A small system file's text, or "" when it is gone (processes end, batteries unplug)."""
    try:
        return path.read_text(errors="replace").strip()
    except OSError:
        return ""


_NOUNS = {"music": ("music file", "music files"), "directories": ("directory", "directories")}


def _count(count: int, kind: str) -> str:
    """"1 photo", "3 photos", "2 music files"."""
    one, many = _NOUNS.get(kind, (kind.removesuffix("s"), kind))
    return f"{count} {one if count == 1 else many}"


class Assistant:
    """Carries out intents and keeps the state they act on; every result is one line of text.

    `announce` receives what happens later, outside any command (a timer running out); it is
    called from a timer thread.
    """

    def __init__(self, config: ActionsConfig, announce: Callable[[str], None] = print,
                 clock: Callable[[], float] = time.monotonic) -> None:
        self.config, self.clock = config, clock
        self.home = Path(config.home).expanduser().resolve()
        self.announce = announce
        unknown = set(config.enabled) - set(ACTIONS)
        if unknown:
            raise ValueError(f"actions.enabled names unknown actions: {sorted(unknown)}; "
                             f"known: {sorted(ACTIONS)}")
        self.enabled = frozenset(config.enabled)
        self.volume, self.devices = 50, {"lights": "off", "radio": "off", "wifi": "on"}
        self.player = {"state": "stopped", "track": 0}
        self.timers: list[tuple[str, threading.Timer]] = []
        self.launched: dict[str, subprocess.Popen] = {}
        self.pending: Question | None = None  # a question awaiting yes/no
        self.screens: list[tuple[str, list[Path], int]] = []  # listings shown: title, items, page

    def act(self, name: str, slots: dict[str, str]) -> str:
        """Run the whitelisted action for an intent; refuse anything else.

        A pending question is answered by this utterance or dropped: only the very next
        utterance can answer it."""
        question, self.pending = self.pending, None
        if question is not None and (answer := self._answer(question, name, slots)):
            return answer
        action = ACTIONS.get(name)
        if action is None:
            return f"No action called {name!r}; nothing done."
        if name not in self.enabled:
            return f"The {name} action is disabled in the config; nothing done."
        return action(self, **slots)

    def not_understood(self) -> None:
        """An utterance that was no command: it too drops a pending question."""
        self.pending = None

    def _ask(self, what: str, run: Callable[[], str]) -> None:
        self.pending = Question(what, run, self.clock())

    def _answer(self, question: "Question", name: str, slots: dict[str, str]) -> str | None:
        """The result of answering `question`, or None when this is no answer to it."""
        word = slots.get("word") if name == "word" else name
        if word not in ("yes", "no", "stop", "cancel"):
            return None
        if self.clock() - question.asked > self.config.confirm_seconds:
            return f"The question has expired ({question.what}); say the command again."
        return question.run() if word == "yes" else f"Cancelled: {question.what}."

    # ------------------------------------------------------------------ files

    def show_files(self, kind: str) -> str:
        return self._listing(kind, None)

    def find_files(self, kind: str, when: str | None = None) -> str:
        return self._listing(kind, when)

    def _listing(self, kind: str, when: str | None) -> str:
        folder = self.config.downloads if kind == "downloads" else "."
        since, until = time_window(when, dt.datetime.now())
        try:
            items, complete = list_files(self.home, "files" if kind == "downloads" else kind,
                                         folder, since, until, self.config.max_scanned)
        except SandboxError as err:
            return str(err)
        where = inside_home(self.home, folder)
        among = "" if complete else f" among the first {self.config.max_scanned} entries"
        title = f"{_count(len(items), kind)}{' ' + when if when else ''} in {where}{among}"
        self.screens.append((title, items, 0))
        return self._page()

    def _page(self) -> str:
        title, items, page = self.screens[-1]
        size = self.config.page_size
        shown = items[page * size:(page + 1) * size]
        if not shown:
            return f"{title}." if not items else f"{title}: no more."
        names = ", ".join(f"{page * size + i + 1}. {path.relative_to(self.home)}"
                          for i, path in enumerate(shown))
        more = f" (scroll down for {len(items) - (page + 1) * size} more)" \
            if len(items) > (page + 1) * size else ""
        return f"{title}: {names}{more}"

    def scroll(self, direction: str) -> str:
        if direction in ("left", "right"):
            return f"Scrolled {direction} (simulated: listings have one column)."
        if not self.screens:
            return "Nothing to scroll: show some files first."
        title, items, page = self.screens[-1]
        pages = max(1, -(-len(items) // self.config.page_size))
        page = min(page + 1, pages - 1) if direction == "down" else max(page - 1, 0)
        self.screens[-1] = (title, items, page)
        return self._page()

    def go_back(self) -> str:
        if len(self.screens) < 2:
            return "Nothing to go back to."
        self.screens.pop()
        return "Back to " + self._page()

    def digit(self, digit: str) -> str:
        """A digit picks an item of the listing on screen (1 = the first)."""
        value = DIGIT_VALUES[digit]
        if not self.screens:
            return f"Heard {digit}; nothing on screen to pick."
        _, items, _ = self.screens[-1]
        if not 1 <= value <= len(items):
            return f"There is no item {value}."
        return f"Item {value}: {items[value - 1]}"

    # ------------------------------------------------------------------ status checks

    def check_status(self, thing: str) -> str:
        return self._battery() if thing == "battery" else self._program()

    def check_log(self, thing: str) -> str:
        if thing == "battery":
            return self._battery() + " (Linux keeps no battery log; this is the current reading)"
        try:
            log = inside_home(self.home, self.config.program_log)
        except SandboxError as err:
            return str(err)
        if not log.is_file():
            return f"No program log at {log}."
        with log.open(errors="replace") as f:
            lines = deque(f, maxlen=1)  # the last line, in bounded memory
        written = dt.datetime.fromtimestamp(log.stat().st_mtime).strftime("%Y-%m-%d %H:%M")
        last = lines[-1].strip() if lines else "(empty)"
        return f"{log.name}, last written {written}, ends with: {last}"

    def _battery(self) -> str:
        root = Path(self.config.power_supply)
        batteries = read_batteries(root)
        if not batteries:
            return f"No battery found (nothing reports one under {root})."
        parts = []
        for name, percent, status in batteries:
            ran_down = percent is not None and percent <= self.config.low_battery
            level = f"{percent}%" if percent is not None else "unknown level"
            parts.append(f"{name} {'has' if ran_down else 'has not'} run down: {level}, "
                         f"{status.lower()}")
        return "; ".join(parts) + "."

    def _program(self) -> str:
        name = self.config.program
        pids = running_processes(name)
        if not pids:
            return f"No process called {name} is running."
        return f"{name} is running (pid {', '.join(map(str, pids))})."

    # ------------------------------------------------------------------ apps

    def open_app(self, app: str) -> str:
        argv = self.config.apps.get(app)
        if not argv:
            return f"No program is configured for the {app}."
        if not self.config.launch:
            return f"Would open the {app}: {' '.join(argv)} (launching is off: actions.launch)."
        self._ask(f"open the {app}", lambda: self._launch(app, argv))
        return f"Open the {app} ({' '.join(argv)})? Say yes or no."

    def _launch(self, app: str, argv: list[str]) -> str:
        try:
            process = subprocess.Popen(argv, shell=False, stdin=subprocess.DEVNULL,
                                       stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
                                       start_new_session=True, cwd=self.home)
        except OSError as err:
            return f"Could not open the {app}: {err.strerror or err}"
        self.launched[app] = process
        return f"Opened the {app} (pid {process.pid})."

    def close_app(self, app: str) -> str:
        process = self.launched.pop(app, None)
        if process is None:
            return f"Would close the {app} (only programs this demo opened are closed)."
        process.terminate()
        return f"Closed the {app} (pid {process.pid})."

    # ------------------------------------------------------------------ timers

    def timer(self, amount: str, unit: str) -> str:
        seconds = NUMBER_VALUES[amount] * (60 if unit.startswith("minute") else 1)
        label = f"{amount} {unit}"
        ends = (dt.datetime.now() + dt.timedelta(seconds=seconds)).strftime("%H:%M:%S")
        timer = threading.Timer(seconds, self._ring, args=(label,))
        timer.daemon = True
        self.timers = [(name, t) for name, t in self.timers if t.is_alive()] + [(label, timer)]
        timer.start()
        return f"Timer set for {label}; it rings at {ends}."

    def _ring(self, label: str) -> None:
        self.announce(f"Time is up: the timer for {label} has run out.")

    def running_timers(self) -> list[str]:
        return [label for label, timer in self.timers if timer.is_alive()]

    def cancel(self) -> str:
        alive = [(label, timer) for label, timer in self.timers if timer.is_alive()]
        if not alive:
            return "Nothing to cancel."
        label, timer = alive[-1]
        timer.cancel()
        self.timers.remove((label, timer))
        return f"Cancelled the timer for {label}."

    # ------------------------------------------------------------------ simulated devices

    def volume_change(self, direction: str) -> str:
        step = self.config.volume_step if direction == "up" else -self.config.volume_step
        self.volume = min(100, max(0, self.volume + step))
        return f"Volume {direction}: {self.volume}% (simulated)."

    def switch(self, state: str, device: str) -> str:
        before, self.devices[device] = self.devices[device], state
        again = " (it already was)" if before == state else ""
        return f"The {device} {'is' if device == 'wifi' else 'are'} {state}{again} (simulated)."

    def music(self, action: str) -> str:
        self.player["state"] = {"play": "playing", "pause": "paused", "stop": "stopped"}[action]
        return f"Music {self.player['state']}: track {self.player['track'] + 1} (simulated player)."

    def next_song(self) -> str:
        self.player["track"] += 1
        self.player["state"] = "playing"
        return f"Next song: playing track {self.player['track'] + 1} (simulated player)."

    # ------------------------------------------------------------------ time, words

    def time(self) -> str:
        return f"It is {dt.datetime.now().strftime('%H:%M')}."

    def date(self) -> str:
        return f"Today is {dt.datetime.now().strftime('%A, %d %B %Y')}."

    def word(self, word: str) -> str:
        """Single words: answers to a question, scrolling, stopping."""
        if word in ("yes", "no", "go"):
            return f"{word.capitalize()}: nothing is waiting for an answer."
        if word == "stop":
            return self.music("stop")
        if word in ("up", "down", "left", "right"):
            return self.scroll(word)
        return f"Turn what {word}? Say e.g. 'turn {word} the lights'."


# The whitelist: intent name -> the function that carries it out (every grammar intent).
ACTIONS: dict[str, Callable[..., str]] = {
    "show_files": Assistant.show_files,
    "find_files": Assistant.find_files,
    "check_status": Assistant.check_status,
    "check_log": Assistant.check_log,
    "open_app": Assistant.open_app,
    "close_app": Assistant.close_app,
    "timer": Assistant.timer,
    "volume": Assistant.volume_change,
    "switch": Assistant.switch,
    "time": Assistant.time,
    "date": Assistant.date,
    "music": Assistant.music,
    "next_song": Assistant.next_song,
    "go_back": Assistant.go_back,
    "cancel": Assistant.cancel,
    "scroll": Assistant.scroll,
    "word": Assistant.word,
    "digit": Assistant.digit,
}

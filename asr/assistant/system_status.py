"""What the assistant reports about the machine: batteries, a program, the program's log.

Everything is read from what Linux shows as files (/sys/class/power_supply, /proc), so no
program is run to find out; the log is read only inside the home folder.
"""

import datetime as dt
import os
from pathlib import Path

from asr.assistant.home_files import SandboxError, inside_home

TAIL_BYTES = 500  # of a log, the end read for its last line


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


def last_line(path: Path) -> str:
    """The last line of a file, read from its end (a log may be gigabytes long, or one line
    of gigabytes), at most TAIL_BYTES of it."""
    with path.open("rb") as f:
        size = f.seek(0, os.SEEK_END)
        f.seek(max(0, size - TAIL_BYTES))
        tail = f.read(TAIL_BYTES).decode("utf-8", "replace")
    lines = tail.splitlines()
    return lines[-1].strip() if lines else ""


def _read(path: Path) -> str:
    """A small system file's text, or "" when it is gone (processes end, batteries unplug)."""
    try:
        return path.read_text(errors="replace").strip()
    except OSError:
        return ""


THINGS = ("battery", "program")  # what can be checked


def _unknown(thing: str) -> str:
    return f"I cannot check the {thing!r} (only the {' or the '.join(THINGS)}); nothing done."


class StatusChecks:
    """Answers "check the battery / the program" and "check the ... log"."""

    def __init__(self, home: Path, program: str, program_log: str, power_supply: str,
                 low_battery: int) -> None:
        self.home, self.program, self.program_log = home, program, program_log
        self.power_supply, self.low_battery = power_supply, low_battery

    def check(self, thing: str) -> str:
        if thing not in THINGS:
            return _unknown(thing)
        return self._battery() if thing == "battery" else self._program()

    def log(self, thing: str) -> str:
        if thing not in THINGS:
            return _unknown(thing)
        if thing == "battery":
            return self._battery() + " (Linux keeps no battery log; this is the current reading)"
        try:
            log = inside_home(self.home, self.program_log)
        except SandboxError as err:
            return str(err)
        if not log.is_file():
            return f"No program log at {log}."
        try:
            last = last_line(log)
            written = dt.datetime.fromtimestamp(log.stat().st_mtime).strftime("%Y-%m-%d %H:%M")
        except OSError as err:
            return f"Cannot read the program log {log}: {err.strerror or err}."
        return f"{log.name}, last written {written}, ends with: {last or '(empty)'}"

    def _battery(self) -> str:
        root = Path(self.power_supply)
        batteries = read_batteries(root)
        if not batteries:
            return f"No battery found (nothing reports one under {root})."
        parts = []
        for name, percent, status in batteries:
            ran_down = percent is not None and percent <= self.low_battery
            level = f"{percent}%" if percent is not None else "unknown level"
            parts.append(f"{name} {'has' if ran_down else 'has not'} run down: {level}, "
                         f"{status.lower()}")
        return "; ".join(parts) + "."

    def _program(self) -> str:
        name = self.program
        pids = running_processes(name)
        if not pids:
            return f"No process called {name} is running."
        return f"{name} is running (pid {', '.join(map(str, pids))})."

"""Timers: "set a timer for five minutes" rings through `announce` when it runs out."""

import datetime as dt
import threading
from collections.abc import Callable

NUMBER_VALUES = {word: value for value, word in enumerate(
    "one two three four five six seven eight nine ten eleven twelve thirteen fourteen fifteen "
    "sixteen seventeen eighteen nineteen twenty".split(), start=1)} | {
    "thirty": 30, "forty": 40, "fifty": 50, "sixty": 60}


class Timers:
    """The timers set, each a label and its thread; `announce` is called from that thread."""

    def __init__(self, announce: Callable[[str], None]) -> None:
        self.announce = announce
        self.timers: list[tuple[str, threading.Timer]] = []

    def start(self, amount: str, unit: str) -> str:
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

    def running(self) -> list[str]:
        return [label for label, timer in self.timers if timer.is_alive()]

    def cancel(self) -> str:
        alive = [(label, timer) for label, timer in self.timers if timer.is_alive()]
        if not alive:
            return "Nothing to cancel."
        label, timer = alive[-1]
        timer.cancel()
        self.timers.remove((label, timer))
        return f"Cancelled the timer for {label}."

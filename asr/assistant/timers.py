"""Timers: "set a timer for five minutes" rings through `announce` when it runs out.

Time is the assistant's clock: by default the wall clock, each timer ringing from a
background thread; the demo's clock is the audio stream's (seconds heard), which it advances
block by block, calling `ring_due` as it goes, so that a file read faster than real time
rings its timers where the stream reaches them.

The amount and the unit are slot values as a grammar writes them: number words up to ninety
nine or digits ("25", as Rhino's number slots report them), and seconds, minutes or hours.
Anything else is refused with a message, never taken for something else.
"""

import datetime as dt
import threading
from collections.abc import Callable
from dataclasses import dataclass

from asr.text import number_words

NUMBER_VALUES = {number_words(value): value for value in range(100)}
UNIT_SECONDS = {"second": 1, "minute": 60, "hour": 3600}
MAX_SECONDS = 7 * 24 * 3600  # a timer of more than a week is refused


def timer_seconds(amount: str, unit: str) -> int | str:
    """The seconds `amount` `unit` last, or why they cannot be a timer."""
    value = int(amount) if amount.isascii() and amount.isdigit() and len(amount) <= 6 \
        else NUMBER_VALUES.get(amount.lower())
    if value is None:
        return f"Cannot count {amount!r} (a number up to ninety nine, or digits); no timer set."
    scale = UNIT_SECONDS.get(unit.lower().removesuffix("s"))
    if scale is None:
        return f"Timers count seconds, minutes or hours, not {unit!r}; no timer set."
    if value * scale > MAX_SECONDS:
        return f"{amount} {unit} is longer than a week; no timer set."
    return value * scale


@dataclass(eq=False)
class _Timer:
    label: str
    ends: float  # on the clock
    thread: threading.Timer | None = None  # on the wall clock: the thread that rings it


class Timers:
    """The timers set and not yet rung, each a label and the time it ends on `clock`;
    `announce` is called from a timer thread on the wall clock."""

    def __init__(self, announce: Callable[[str], None], clock: Callable[[], float],
                 background: bool = True) -> None:
        """`background`: ring from threads (a wall clock); else the caller runs `ring_due`."""
        self.announce, self.clock, self.background = announce, clock, background
        self.timers: list[_Timer] = []
        self._lock = threading.Lock()  # timer threads remove what they ring

    def start(self, amount: str, unit: str) -> str:
        seconds = timer_seconds(amount, unit)
        if isinstance(seconds, str):
            return seconds
        timer = _Timer(f"{amount} {unit}", self.clock() + seconds)
        if self.background:
            timer.thread = threading.Timer(seconds, self._ring, args=(timer,))
            timer.thread.daemon = True
        with self._lock:
            self.timers.append(timer)
        if timer.thread is not None:
            timer.thread.start()
        return f"Timer set for {timer.label}: it rings in {dt.timedelta(seconds=seconds)}."

    def _ring(self, timer: _Timer) -> None:
        with self._lock:
            if timer not in self.timers:  # cancelled
                return
            self.timers.remove(timer)
        self.announce(f"Time is up: the timer for {timer.label} has run out.")

    def ring_due(self) -> None:
        """Ring the timers whose time on the clock is up, in the order they end."""
        now = self.clock()
        with self._lock:
            due = sorted((t for t in self.timers if t.ends <= now), key=lambda t: t.ends)
        for timer in due:
            self._ring(timer)

    def running(self) -> list[str]:
        with self._lock:
            return [timer.label for timer in self.timers]

    def cancel(self) -> str:
        with self._lock:
            if not self.timers:
                return "Nothing to cancel."
            timer = self.timers.pop()
        if timer.thread is not None:
            timer.thread.cancel()
        return f"Cancelled the timer for {timer.label}."

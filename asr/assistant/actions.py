"""What the voice-command demo does for each intent: a whitelist of plain Python functions.

Safety rests on three rules, each enforced in code rather than trusted to the recogniser:
- An intent runs only if it is in `ACTIONS` (the whitelist) and enabled in the config; nothing
  is looked up by name from the transcript, and no text reaches a shell or `eval`.
- Files are only read inside the configured home folder (`asr.assistant.home_files`: every
  path is resolved and must stay inside it; directory walks never follow links).
- Programs are launched only when `launch` is on, only from the configured `apps` table
  (`asr.assistant.apps`: an argv list, run without a shell), and only after a spoken "yes"
  that is the very next utterance, within `confirm_seconds` of the question: any other
  utterance drops the question, and "go" is not "yes".
Devices (volume, lights, radio, wifi, music player) are simulated (`asr.assistant.devices`).

Any grammar that reads may drive the assistant: an intent with no action here, or with other
slots than its action takes, is answered with a line saying so and nothing is done; a slot
value an action does not know ("spreadsheets", "sideways", "fortnights") is refused by the
action with a message, never taken for another.

`Assistant` holds the dialogue (the question awaiting yes/no) and the parts each intent acts
on: the file browser, status checks, apps, timers and devices. Its time is a clock: the wall
clock by default; the demo sets the audio stream's (`set_clock`), so that a question expires
and a timer rings after so many seconds of audio, however fast a file is read.
"""

import datetime as dt
import inspect
import subprocess
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

from asr.assistant.apps import Apps
from asr.assistant.devices import SimulatedDevices
from asr.assistant.home_files import FileBrowser, SandboxError, resolved
from asr.assistant.system_status import StatusChecks
from asr.assistant.timers import Timers
from asr.untrusted import check_fields, check_ranges


@dataclass(frozen=True)
class Question:
    """A yes/no question the assistant asked: what it is about, what "yes" runs, when."""

    what: str
    run: Callable[[], str]
    asked: float  # on the assistant's clock


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


class Assistant:
    """Carries out intents and keeps the state they act on; every result is one line of text.

    `announce` receives what happens later, outside any command (a timer running out); on the
    wall clock it is called from a timer thread.
    """

    def __init__(self, config: ActionsConfig, announce: Callable[[str], None] = print) -> None:
        self.config, self.clock = config, time.monotonic
        try:
            self.home = resolved(Path(config.home).expanduser())
        except SandboxError as err:
            raise ValueError(f"actions.home: {err}") from None
        unknown = set(config.enabled) - set(ACTIONS)
        if unknown:
            raise ValueError(f"actions.enabled names unknown actions: {sorted(unknown)}; "
                             f"known: {sorted(ACTIONS)}")
        self.enabled = frozenset(config.enabled)
        self.files = FileBrowser(self.home, config.downloads, config.page_size, config.max_scanned)
        self.status = StatusChecks(self.home, config.program, config.program_log,
                                   config.power_supply, config.low_battery)
        self.apps = Apps(self.home, config.apps, config.launch, self._ask)
        self.timers = Timers(announce, time.monotonic)
        self.devices = SimulatedDevices(config.volume_step)
        self.pending: Question | None = None  # a question awaiting yes/no

    @property
    def launched(self) -> dict[str, subprocess.Popen]:
        """The programs opened (app -> process)."""
        return self.apps.launched

    def set_clock(self, clock: Callable[[], float]) -> None:
        """Keep time by `clock` from now on, questions and timers alike: the caller advances
        it and calls `tick` as it does (no timer may be running yet)."""
        if self.timers.running():
            raise ValueError("set_clock: timers are running on the old clock")
        self.clock = clock
        self.timers = Timers(self.timers.announce, clock, background=False)

    def tick(self) -> None:
        """Ring the timers whose time is up on a clock set by `set_clock`."""
        self.timers.ring_due()

    def running_timers(self) -> list[str]:
        return self.timers.running()

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
        problem = slot_problem(action, slots)
        if problem:
            return f"The {name} action {problem}; nothing done."
        return action(self, **slots)

    def confirm(self, name: str, slots: dict[str, str], what: str) -> str:
        """Ask before acting on an intent the recogniser is unsure of ("did you mean ...?"):
        "yes" as the next utterance acts on it, anything else drops it."""
        question, self.pending = self.pending, None
        if question is not None and (answer := self._answer(question, name, slots)):
            return answer
        self._ask(what, lambda: self.act(name, slots))
        return f"Did you mean: {what}? Say yes or no."

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

    def time(self) -> str:
        return f"It is {dt.datetime.now().strftime('%H:%M')}."

    def date(self) -> str:
        return f"Today is {dt.datetime.now().strftime('%A, %d %B %Y')}."

    def word(self, word: str) -> str:
        """Single words: answers to a question, scrolling, stopping."""
        if word in ("yes", "no", "go"):
            return f"{word.capitalize()}: nothing is waiting for an answer."
        if word == "stop":
            return self.devices.music("stop")
        if word in ("up", "down", "left", "right"):
            return self.files.scroll(word)
        if word in ("on", "off"):
            return f"Turn what {word}? Say e.g. 'turn {word} the lights'."
        return f"Heard {word!r}: no action for that word; nothing done."


def slot_problem(action: Callable[..., str], slots: dict[str, str]) -> str | None:
    """What is wrong with calling `action` with these slots (None: nothing): a slot it does
    not take, or one it needs and did not get."""
    parameters = list(inspect.signature(action).parameters.values())[1:]  # after the assistant
    names = [p.name for p in parameters]
    needed = [p.name for p in parameters if p.default is inspect.Parameter.empty]
    if set(slots) <= set(names) and set(needed) <= set(slots):
        return None
    takes = ", ".join(names) if names else "no slots"
    return f"takes {takes} (got {', '.join(slots) if slots else 'no slots'})"


# The whitelist: intent name -> what carries it out, called with the assistant and the
# intent's slots (every grammar intent).
ACTIONS: dict[str, Callable[..., str]] = {
    "show_files": lambda a, kind: a.files.show(kind),
    "find_files": lambda a, kind, when=None: a.files.show(kind, when),
    "check_status": lambda a, thing: a.status.check(thing),
    "check_log": lambda a, thing: a.status.log(thing),
    "open_app": lambda a, app: a.apps.open(app),
    "close_app": lambda a, app: a.apps.close(app),
    "timer": lambda a, amount, unit: a.timers.start(amount, unit),
    "volume": lambda a, direction: a.devices.volume_change(direction),
    "switch": lambda a, state, device: a.devices.switch(state, device),
    "time": Assistant.time,
    "date": Assistant.date,
    "music": lambda a, action: a.devices.music(action),
    "next_song": lambda a: a.devices.next_song(),
    "go_back": lambda a: a.files.go_back(),
    "cancel": lambda a: a.timers.cancel(),
    "scroll": lambda a, direction: a.files.scroll(direction),
    "word": Assistant.word,
    "digit": lambda a, digit: a.files.pick(digit),
}

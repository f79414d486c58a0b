"""The voice-command grammar: every sentence a voice-controlled computer should understand.

The grammar is small and closed so that a corpus can be synthesised from it and split by
sentence: a model is scored on combinations it never heard (e.g. "open the editor please" when
training only had "open the editor" and "close the editor please"). Text is written the way the
model should output it: lower-case words separated by single spaces, no punctuation, numbers as
words ("twenty"), "wifi" as one word.

Each sentence is a `Command`: its text, an intent name (used to stratify the splits and by the
demo to act on it), the slots that fill the intent, and its core (the text without "please",
"could you" or "hey computer"), so the splits can keep every bare command in training.
"""

from dataclasses import dataclass, field
from functools import cache

FILE_KINDS = ("files", "photos", "directories", "documents", "downloads", "music", "videos")
WHEN = ("from today", "from yesterday", "from last week")
APPS = ("browser", "terminal", "calculator", "editor", "settings")
DEVICES = ("lights", "radio", "wifi")
DIRECTIONS = ("up", "down", "left", "right")
TIMER_NUMBERS = (
    "one two three four five six seven eight nine ten eleven twelve thirteen fourteen fifteen "
    "sixteen seventeen eighteen nineteen twenty thirty forty fifty sixty"
).split()
WORDS = ("yes", "no", "up", "down", "left", "right", "on", "off", "stop", "go")
DIGITS = ("zero", "one", "two", "three", "four", "five", "six", "seven", "eight", "nine")

# Polite wrappers (prefix, suffix). Requests take all of them; questions and noun phrases
# ("what time is it", "next song") cannot take "could you". "please ... please" is left out.
REQUEST_WRAPPERS = tuple(
    (prefix, suffix)
    for prefix in ("", "please", "could you", "hey computer", "hey computer please",
                   "hey computer could you")
    for suffix in ("", "please")
    if not ("please" in prefix and suffix)
)
PHRASE_WRAPPERS = tuple(
    (prefix, suffix) for prefix in ("", "hey computer") for suffix in ("", "please")
)

# Intents whose sentences are one bare word: a closed set, never wrapped.
SINGLE_WORD_INTENTS = ("word", "digit")


@dataclass(frozen=True)
class Command:
    """One sentence of the grammar and what it means."""

    text: str
    intent: str
    slots: dict = field(default_factory=dict, hash=False)
    core: str = ""


def _core_commands() -> list[tuple[str, str, dict, bool]]:
    """(core text, intent, slots, is a request) for every command before wrapping."""
    cores = []
    for kind in FILE_KINDS:
        cores.append((f"show me my {kind}", "show_files", {"kind": kind}, True))
        cores.append((f"find my {kind}", "find_files", {"kind": kind}, True))
        cores += [(f"find my {kind} {when}", "find_files", {"kind": kind, "when": when}, True)
                  for when in WHEN]
    for thing, outcome in (("battery", "ran down"), ("program", "ran")):
        slots = {"thing": thing}
        cores.append((f"check whether the {thing} {outcome}", "check_status", slots, True))
        cores.append((f"check the {thing} log and find out whether it {outcome}", "check_log",
                      slots, True))
    for action in ("open", "close"):
        cores += [(f"{action} the {app}", f"{action}_app", {"app": app}, True) for app in APPS]
    for number in TIMER_NUMBERS:
        for unit in ("seconds", "minutes"):
            unit = unit.removesuffix("s") if number == "one" else unit
            cores.append((f"set a timer for {number} {unit}", "timer",
                          {"amount": number, "unit": unit}, True))
    for direction in ("up", "down"):
        cores.append((f"turn the volume {direction}", "volume", {"direction": direction}, True))
    for state in ("on", "off"):
        cores += [(f"turn {state} the {device}", "switch", {"state": state, "device": device}, True)
                  for device in DEVICES]
    cores.append(("what time is it", "time", {}, False))
    cores.append(("what is the date today", "date", {}, False))
    cores += [(f"{action} the music", "music", {"action": action}, True)
              for action in ("play", "pause", "stop")]
    cores.append(("next song", "next_song", {}, False))
    cores.append(("go back", "go_back", {}, True))
    cores.append(("cancel", "cancel", {}, True))
    cores += [(f"scroll {d}", "scroll", {"direction": d}, True) for d in DIRECTIONS]
    return cores


def _wrap(prefix: str, core: str, suffix: str) -> str:
    return " ".join(part for part in (prefix, core, suffix) if part)


@cache
def commands() -> tuple[Command, ...]:
    """Every command the grammar produces, sorted by text (deterministic)."""
    result = [Command(word, "word", {"word": word}, word) for word in WORDS]
    result += [Command(digit, "digit", {"digit": digit}, digit) for digit in DIGITS]
    for core, intent, slots, request in _core_commands():
        wrappers = REQUEST_WRAPPERS if request else PHRASE_WRAPPERS
        result += [Command(_wrap(prefix, core, suffix), intent, slots, core)
                   for prefix, suffix in wrappers]
    return tuple(sorted(result, key=lambda command: command.text))


@cache
def _by_text() -> dict[str, Command]:
    return {command.text: command for command in commands()}


def all_sentences() -> list[str]:
    """Every distinct sentence of the grammar, sorted."""
    return list(_by_text())


def parse(text: str) -> Command | None:
    """The command for an exact sentence of the grammar, or None (e.g. for a misrecognition)."""
    return _by_text().get(" ".join(text.lower().split()))


def sentence_intent(text: str) -> str:
    """The intent name of a grammar sentence ("show_files", "timer", "word", ...)."""
    command = parse(text)
    if command is None:
        raise KeyError(f"not a sentence of the voice-command grammar: {text!r}")
    return command.intent


def intents() -> list[str]:
    """All intent names, sorted."""
    return sorted({command.intent for command in commands()})

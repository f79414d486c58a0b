"""Transcript -> intent: which command of the voice-command grammar a transcript means, how surely.

The grammar (recipes/voice_commands/grammar.py) is closed, so understanding is matching. The
transcript loses its polite wrappers ("hey computer", "could you", "please") and is compared,
character by character with difflib, to each bare command of the grammar ("show me my photos",
"set a timer for five minutes", ...). The closest command gives the intent and its slots; the
similarity ratio is the confidence. A small recognition error ("show me my fotos", "turn of the
lights") still lands on the right command with a high ratio; a request outside the grammar
("delete all my files") matches nothing well and falls below the threshold, and so does a
transcript that sits halfway between two commands that mean different things.

Slot values always come from the grammar, never from the transcript: whatever was heard, an
action only ever receives one of the grammar's fixed words ("photos", "browser", "five"), so no
spoken text can become a path, a program name or code.
"""

import difflib
from dataclasses import dataclass, field
from functools import cache

from asr.text import normalize_text
from recipes.voice_commands.grammar import REQUEST_WRAPPERS, commands

# Words of the polite wrappers; a transcript's leading ones and its trailing "please" are dropped.
_PREFIX_WORDS = frozenset(word for prefix, _ in REQUEST_WRAPPERS for word in prefix.split())
_SUFFIX_WORDS = frozenset(word for _, suffix in REQUEST_WRAPPERS for word in suffix.split())
_WRAPPER_SIMILARITY = 0.8  # "computa" is still "computer"; "cancel" is not "could"


@dataclass(frozen=True)
class Intent:
    """What a transcript asks for: the intent, its slots and how sure the match is (0..1)."""

    name: str | None  # None: nothing in the grammar matched well enough
    slots: dict[str, str] = field(default_factory=dict)
    confidence: float = 0.0
    text: str = ""  # the transcript, normalised
    command: str = ""  # the bare grammar command it matched (or came closest to)

    @property
    def understood(self) -> bool:
        return self.name is not None

    def describe(self) -> str:
        """`show_files kind=photos`: the intent and slots on one line."""
        slots = " ".join(f"{key}={value}" for key, value in self.slots.items())
        return " ".join(part for part in (self.name or "(none)", slots) if part)


@cache
def _cores() -> dict[str, tuple[str, dict[str, str]]]:
    """Every bare command of the grammar -> (intent, slots)."""
    return {command.core: (command.intent, dict(command.slots)) for command in commands()}


def strip_wrappers(text: str) -> str:
    """Drop leading wrapper words and a trailing "please", tolerating small misspellings.

    A transcript made only of wrapper words ("please") is returned unchanged, so it is matched
    (and rejected) as a whole instead of becoming an empty command.
    """
    words = text.split()

    def is_wrapper(word: str, vocabulary: frozenset[str]) -> bool:
        return bool(difflib.get_close_matches(word, vocabulary, n=1, cutoff=_WRAPPER_SIMILARITY))

    start, end = 0, len(words)
    while start < end - 1 and is_wrapper(words[start], _PREFIX_WORDS):
        start += 1
    while end > start + 1 and is_wrapper(words[end - 1], _SUFFIX_WORDS):
        end -= 1
    return " ".join(words[start:end])


@dataclass(frozen=True)
class IntentParser:
    """Matches transcripts to grammar commands; `threshold` (conf/demo.yaml: intents) is the
    lowest similarity accepted as understanding."""

    threshold: float = 0.85

    def parse(self, text: str) -> Intent:
        heard = normalize_text(text)
        core = strip_wrappers(heard)
        if not core:
            return Intent(None, text=heard)
        score, best = closest(core, list(_cores()))
        name, slots = _cores()[best]
        if score < self.threshold:
            return Intent(None, {}, score, heard, best)
        return Intent(name, dict(slots), score, heard, best)


def closest(text: str, candidates: list[str]) -> tuple[float, str]:
    """The candidate most similar to `text` and its difflib ratio.

    The exact ratio is computed in order of difflib's cheap upper bound (`quick_ratio`) and
    stops once no remaining bound can beat the best ratio found: a few exact comparisons
    instead of one per command.
    """
    matcher = difflib.SequenceMatcher(None, autojunk=False)
    matcher.set_seq2(text)  # difflib caches its analysis of the second sequence
    bounds = []
    for candidate in candidates:
        matcher.set_seq1(candidate)
        bounds.append((matcher.quick_ratio(), candidate))
    best_score, best = -1.0, ""
    for bound, candidate in sorted(bounds, key=lambda pair: -pair[0]):
        if bound <= best_score:
            break
        matcher.set_seq1(candidate)
        score = matcher.ratio()
        if score > best_score:
            best_score, best = score, candidate
    return best_score, best

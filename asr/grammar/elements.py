"""The parts of a grammar expression, and the slot types every grammar has.

An expression is a sequence of elements: a `Word`, a `Choice` among sequences (optional or
not; a macro is a choice too), or a `Slot` whose values come from a slot type. The built-in
slot types are Picovoice Rhino's number slots, spoken as words and reported as digits.
"""

from dataclasses import dataclass, field

from asr.text import number_words, ordinal_words

# What a grammar may ask for, so that every part that walks it is bounded in memory, time and
# recursion: brackets nested this deep (real grammars nest two or three), and sentences of
# this many words (no spoken command is that long; longer ones could never be parsed).
MAX_NESTING = 16
MAX_SENTENCE_WORDS = 100


@dataclass(frozen=True)
class Word:
    text: str  # one normalised word


@dataclass(frozen=True)
class Choice:
    options: tuple[tuple, ...]  # each option a sequence of elements
    optional: bool = False


@dataclass(frozen=True)
class Slot:
    type: str
    name: str


@dataclass(frozen=True)
class Expression:
    intent: str
    elements: tuple
    line: int
    source: str
    # Slots every sentence of the expression fills with no word said (Home Assistant's
    # `slots: {domain: light}` beside a block of sentences): (name, value) pairs.
    fixed: tuple[tuple[str, str], ...] = ()


@dataclass(frozen=True)
class Sentence:
    """One sentence of the grammar: its text, meaning, and whether it is a core (no optional
    part said: "set a timer for five minutes", not "could you set a timer ... please")."""

    text: str
    intent: str
    slots: dict[str, str] = field(default_factory=dict, hash=False, compare=False)
    core: bool = True


SlotTypes = dict[str, tuple[tuple[str, str], ...]]  # slot type -> its (spoken, value) pairs

BUILTIN_SLOTS: SlotTypes = {
    "pv.SingleDigitInteger": tuple((number_words(n), str(n)) for n in range(10)),
    "pv.TwoDigitInteger": tuple((number_words(n), str(n)) for n in range(100)),
    "pv.SingleDigitOrdinal": tuple((ordinal_words(number_words(n)), str(n)) for n in range(1, 10)),
    "pv.TwoDigitOrdinal": tuple((ordinal_words(number_words(n)), str(n)) for n in range(1, 100)),
}

"""Measuring a grammar expression without expanding it: one walk, many measures.

What a grammar would cost (the words of its sentences, the nodes of its word graphs, the arcs
of its automaton) is a sum over each sequence's elements, where a slot's share depends only on
its type and a choice's only on its options' shares. `measure` walks a sequence once with a
`Measure` saying how, and remembers in a `Memo` what it has measured: per slot type, and per
choice object, as a macro is one choice used many times (its options are walked once, however
often the macro is used).
"""

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Generic, TypeVar

from asr.grammar.elements import Choice, Slot, Word

T = TypeVar("T")


@dataclass(frozen=True)
class Measure(Generic[T]):
    """How to measure: `zero` and `add` sum a sequence's elements, a word counts `word`, a
    slot `slot(type)`, a choice `choice(choice, its options' measures)`."""

    zero: T
    add: Callable[[T, T], T]
    word: T
    slot: Callable[[str], T]
    choice: Callable[[Choice, list[T]], T]


@dataclass
class Memo(Generic[T]):
    """What one measure has found so far, shared over the expressions of a grammar: by slot
    type, and by choice object (its id: the expressions hold the objects while they are
    walked)."""

    slots: dict[str, T] = field(default_factory=dict)
    choices: dict[int, T] = field(default_factory=dict)


def measure(elements: tuple, how: Measure[T], memo: Memo[T]) -> T:
    """The measure of a sequence of elements. It loops over the sequence and recurses only
    into brackets, whose nesting the reader bounds."""
    total = how.zero
    for element in elements:
        if isinstance(element, Word):
            part = how.word
        elif isinstance(element, Slot):
            if element.type not in memo.slots:
                memo.slots[element.type] = how.slot(element.type)
            part = memo.slots[element.type]
        else:
            if id(element) not in memo.choices:
                memo.choices[id(element)] = how.choice(
                    element, [measure(option, how, memo) for option in element.options])
            part = memo.choices[id(element)]
        total = how.add(total, part)
    return total


def _plus(a: int, b: int) -> int:
    return a + b


def count(word: int, slot: Callable[[str], int], choice: Callable[[Choice, list[int]], int],
          ) -> Measure[int]:
    """A measure that is a count: zero, and summed."""
    return Measure(0, _plus, word, slot, choice)

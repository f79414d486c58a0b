"""A grammar expression's sentences: counted without expanding them, enumerated, or drawn.

Each function walks an expression's elements (`asr.grammar.elements`) with the
grammar's slot types (`slots`: type -> (spoken, value) pairs) and yields (words, slots, core)
triples: the words said, the slot values filled, and whether no optional part was said.
They loop over a sequence and recurse only into brackets, whose nesting the reader bounds.
"""

import itertools
import random
from collections.abc import Iterator
from functools import lru_cache

from asr.grammar.elements import Choice, Slot, Word
from asr.grammar.measure import Measure, Memo, measure

Expansion = tuple[tuple[str, ...], tuple[tuple[str, str], ...], bool]


def weighted_index(counts: list[int], rng: random.Random) -> int:
    """An index drawn with probability proportional to its count."""
    pick = rng.randrange(sum(counts))
    for index, count in enumerate(counts):
        if pick < count:
            return index
        pick -= count
    raise AssertionError("unreachable")


@lru_cache(maxsize=1 << 16)  # bounded: a long-lived process may load many grammars
def count_expansions(elements: tuple, slot_counts: tuple[tuple[str, int], ...]) -> int:
    """How many expansions a sequence has (`slot_counts`: slot type -> number of values)."""
    total = 1
    for element in elements:
        total *= _element_count(element, slot_counts)
    return total


def _element_count(element, slot_counts: tuple[tuple[str, int], ...]) -> int:
    if isinstance(element, Word):
        return 1
    if isinstance(element, Slot):
        return dict(slot_counts)[element.type]
    return (sum(count_expansions(option, slot_counts) for option in element.options)
            + element.optional)


Span = tuple[int, int]  # the fewest and the most words


def sentence_words(elements: tuple, slots: dict, memo: Memo[Span] | None = None) -> Span:
    """The fewest and the most words a sequence's sentences have, found without expanding
    them (`memo`: shared over the expressions of one grammar)."""
    def slot(type_: str) -> Span:
        lengths = [len(spoken.split()) for spoken, _ in slots[type_]]
        return min(lengths), max(lengths)

    def choice(element: Choice, spans: list[Span]) -> Span:
        return (0 if element.optional else min(low for low, _ in spans),
                max(high for _, high in spans))

    how = Measure((0, 0), lambda a, b: (a[0] + b[0], a[1] + b[1]), (1, 1), slot, choice)
    return measure(elements, how, Memo() if memo is None else memo)


def expand(elements: tuple, slots: dict) -> Iterator[Expansion]:
    """Every (words, slots, core) of a sequence, depth first (the first element varies
    slowest)."""
    for parts in itertools.product(*(list(_alternatives(e, slots)) for e in elements)):
        yield (tuple(word for part in parts for word in part[0]),
               tuple(filled for part in parts for filled in part[1]),
               all(part[2] for part in parts))


def _alternatives(element, slots: dict) -> Iterator[Expansion]:
    if isinstance(element, Word):
        yield (element.text,), (), True
    elif isinstance(element, Slot):
        for spoken, value in slots[element.type]:
            yield tuple(spoken.split()), ((element.name, value),), True
    else:
        if element.optional:
            yield (), (), True
        for option in element.options:
            for words, filled, core in expand(option, slots):
                yield words, filled, core and not element.optional


def draw(elements: tuple, slots: dict, rng: random.Random,
         counts: tuple[tuple[str, int], ...] | None = None) -> Expansion:
    """One expansion, uniformly among all of the sequence's. `counts`: each slot type's number
    of values, as `count_expansions` takes them (computed from `slots` when not given)."""
    words: tuple[str, ...] = ()
    filled: tuple[tuple[str, str], ...] = ()
    core = True
    if counts is None:
        counts = tuple((name, len(values)) for name, values in sorted(slots.items()))
    for element in elements:
        if isinstance(element, Word):
            words += (element.text,)
        elif isinstance(element, Slot):
            spoken, value = rng.choice(slots[element.type])
            words, filled = words + tuple(spoken.split()), filled + ((element.name, value),)
        else:
            weights = [count_expansions(option, counts) for option in element.options]
            pick = weighted_index(weights + [1] * element.optional, rng)
            if pick < len(element.options):
                more = draw(element.options[pick], slots, rng, counts)
                words, filled = words + more[0], filled + more[1]
                core = core and more[2] and not element.optional
    return words, filled, core

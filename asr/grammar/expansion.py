"""A grammar expression's sentences: counted without expanding them, enumerated, or drawn.

Each function walks an expression's elements (`asr.grammar.elements`) with the
grammar's slot types (`slots`: type -> (spoken, value) pairs) and yields (words, slots, core)
triples: the words said, the slot values filled, and whether no optional part was said.
"""

import random
from collections.abc import Iterator
from functools import cache

from asr.grammar.elements import Slot, Word

Expansion = tuple[tuple[str, ...], tuple[tuple[str, str], ...], bool]


def weighted_index(counts: list[int], rng: random.Random) -> int:
    """An index drawn with probability proportional to its count."""
    pick = rng.randrange(sum(counts))
    for index, count in enumerate(counts):
        if pick < count:
            return index
        pick -= count
    raise AssertionError("unreachable")


@cache
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


def expand(elements: tuple, slots: dict) -> Iterator[Expansion]:
    """Every (words, slots, core) of a sequence, depth first."""
    if not elements:
        yield (), (), True
        return
    for head in _alternatives(elements[0], slots):
        for tail in expand(elements[1:], slots):
            yield head[0] + tail[0], head[1] + tail[1], head[2] and tail[2]


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


def draw(elements: tuple, slots: dict, rng: random.Random) -> Expansion:
    """One expansion, uniformly among all of the sequence's."""
    words: tuple[str, ...] = ()
    filled: tuple[tuple[str, str], ...] = ()
    core = True
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
                more = draw(element.options[pick], slots, rng)
                words, filled = words + more[0], filled + more[1]
                core = core and more[2] and not element.optional
    return words, filled, core

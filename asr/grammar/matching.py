"""Matching a transcript to a grammar expression without expanding it.

Each expression becomes a word graph (`WordGraph`); a transcript is aligned to it by a
word-level edit distance, whose least-cost path gives the nearest grammar sentence and the
slot values on it. `WordIndex` shortlists the expressions worth aligning.

A word graph spells out every value of every slot where the slot is used, and an alignment
costs (words heard) x (nodes) steps, so the graphs are sized before they are built
(`nodes_needed`): a grammar is matched only when they have at most MAX_MATCH_NODES nodes in
all, and only transcripts of at most MAX_SENTENCE_WORDS words are aligned.
"""

import difflib
import math
from dataclasses import dataclass
from functools import lru_cache

from asr.grammar.elements import Slot, Word
from asr.grammar.measure import Memo, count, measure

MAX_MATCH_NODES = 10_000  # past this a transcript's alignment against them takes too long


def nodes_needed(elements: tuple, slots: dict, memo: Memo[int] | None = None) -> int:
    """The nodes a `WordGraph` of these elements has, counted without building it (`memo`:
    shared over the expressions of one grammar)."""
    how = count(1, lambda type_: 1 + sum(1 + len(spoken.split()) for spoken, _ in slots[type_]),
                lambda choice, options: 1 + sum(1 + nodes for nodes in options))
    return measure(elements, how, Memo() if memo is None else memo)


@dataclass(frozen=True)
class Alignment:
    similarity: float
    words: tuple[str, ...]
    slots: dict[str, str]


@lru_cache(maxsize=1 << 16)  # bounded: the heard words of a long-running demo are endless
def _substitution(heard: str, written: str) -> float:
    """Cost of hearing `heard` for the grammar's `written`: 0 when equal, at most 0.5 for a
    near spelling ("fotos" for "photos"), 1.5 otherwise: more than leaving a grammar word out
    (1), so an unrelated word is never taken for the one it replaces when it can be matched
    elsewhere, and less than inserting one word and deleting another (2)."""
    if heard == written:
        return 0.0
    ratio = difflib.SequenceMatcher(None, heard, written, autojunk=False).ratio()
    return 1.0 - ratio if ratio >= 0.5 else 1.5


class WordGraph:
    """An expression as a word graph: nodes in topological order, edges that say a word, or
    nothing (a choice, a skipped optional), or enter a slot value (a tag)."""

    def __init__(self, elements: tuple, slots: dict) -> None:
        self.edges: list[list[tuple[int, str | None, tuple[str, str] | None]]] = [[]]
        self.end = self._build(elements, 0, slots)
        self.vocabulary = frozenset(w for edges in self.edges for _, w, _ in edges if w)

    def _node(self) -> int:
        self.edges.append([])
        return len(self.edges) - 1

    def _build(self, elements: tuple, start: int, slots: dict) -> int:
        for element in elements:
            if isinstance(element, Word):
                node = self._node()
                self.edges[start].append((node, element.text, None))
                start = node
            elif isinstance(element, Slot):
                ends = []
                for spoken, value in slots[element.type]:
                    node = self._node()
                    self.edges[start].append((node, None, (element.name, value)))
                    ends.append(self._build(tuple(map(Word, spoken.split())), node, slots))
                start = self._join(start, ends, False)
            else:
                ends = []
                for option in element.options:
                    node = self._node()
                    self.edges[start].append((node, None, None))
                    ends.append(self._build(option, node, slots))
                start = self._join(start, ends, element.optional)
        return start

    def _join(self, start: int, ends: list[int], optional: bool) -> int:
        node = self._node()
        for end in ends + ([start] if optional else []):
            self.edges[end].append((node, None, None))
        return node

    def align(self, heard: list[str]) -> Alignment:
        """The least-cost path against the heard words (insertions and deletions cost 1, a
        substitution `_substitution`); similarity is 1 - cost / max(words heard, on path)."""
        size, inf = len(self.edges), math.inf
        cost = [[inf] * size for _ in range(len(heard) + 1)]
        back: list[list[tuple | None]] = [[None] * size for _ in range(len(heard) + 1)]
        cost[0][0] = 0.0
        for i in range(len(heard) + 1):
            row = cost[i]
            for node in range(size):
                if i and cost[i - 1][node] + 1 < row[node]:  # a heard word the grammar lacks
                    row[node], back[i][node] = cost[i - 1][node] + 1, (i - 1, node, None, None)
                here = row[node]
                if here == inf:
                    continue
                for target, word, tag in self.edges[node]:
                    if word is None:
                        _relax(cost, back, i, target, here, (i, node, None, tag))
                        continue
                    _relax(cost, back, i, target, here + 1, (i, node, word, None))  # not said
                    if i < len(heard):
                        _relax(cost, back, i + 1, target, here + _substitution(heard[i], word),
                               (i, node, word, None))
        return self._trace(back, cost[len(heard)][self.end], len(heard))

    def _trace(self, back: list, total: float, heard: int) -> Alignment:
        words, slots, i, node = [], {}, heard, self.end
        while back[i][node] is not None:
            i, node, word, tag = back[i][node]
            if word:
                words.append(word)
            if tag:
                slots[tag[0]] = tag[1]
        words.reverse()
        length = max(heard, len(words), 1)
        return Alignment(max(0.0, 1.0 - total / length), tuple(words), dict(reversed(slots.items())))


def _relax(cost: list, back: list, i: int, node: int, value: float, step: tuple) -> None:
    if value < cost[i][node]:
        cost[i][node], back[i][node] = value, step


class WordIndex:
    """Which expressions share the most informative words with a transcript; a heard word
    that is no grammar word stands for the grammar words spelt most like it."""

    def __init__(self, vocabularies: list[frozenset[str]]) -> None:
        self.vocabularies = vocabularies
        counts: dict[str, int] = {}
        for vocabulary in vocabularies:
            for word in vocabulary:
                counts[word] = counts.get(word, 0) + 1
        self.weight = {w: math.log(1 + len(vocabularies) / n) for w, n in counts.items()}

    def candidates(self, words: list[str], limit: int) -> list[int]:
        heard = set()
        for word in words:
            heard.update([word] if word in self.weight else
                         difflib.get_close_matches(word, self.weight, n=3, cutoff=0.5))
        scores = [sum(self.weight[w] for w in heard & vocabulary) - 0.01 * len(vocabulary)
                  for vocabulary in self.vocabularies]
        return sorted(range(len(scores)), key=lambda i: -scores[i])[:limit]

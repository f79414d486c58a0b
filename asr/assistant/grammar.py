"""Command grammars as data: Picovoice Rhino's context YAML, parsed, expanded, sampled, matched.

    context:
      expressions:
        orderDrink:
          - "(could you) [make, brew] me a $size:size $drink:drink (please)"
          - "@polite $drink:drink"
      slots:
        size: [small, medium, large]
        drink: [latte, "flat white", espresso]
      macros:
        polite: ["i would like a", "can i have a"]

Inside an expression `[a, b c]` is a choice of phrases, `(a, b)` an optional choice, `$type:name`
a slot (any value of slot type `type`, reported under `name`) and `@macro` a choice of the
macro's phrases. Slot types are the file's `slots` or the built-in `pv.SingleDigitInteger`
(zero to nine), `pv.TwoDigitInteger` (zero to ninety nine), `pv.SingleDigitOrdinal` and
`pv.TwoDigitOrdinal` (first ...), whose values are reported as digits ("25"). A Rhino user's file
works unchanged.

The grammar turns into three things: `sentences()` enumerates a small grammar and samples a
large one (a coffee machine's can expand to millions of sentences), for synthesising a training
corpus; `count()` says how many there are without expanding them; and `match()` finds the
grammar sentence nearest to a transcript, by a word-level edit distance between the transcript
and each expression's word graph, so a large grammar is matched without being expanded. Slot
values come back exactly as the file writes them, never from the transcript.

The file is untrusted input: its size is bounded, YAML aliases are refused (they can expand a
few hundred bytes into gigabytes), and every problem is one `GrammarError` line naming the file,
the line and what is wrong.

The parts: `grammar_elements` (what an expression is made of), `grammar_reader` (the file),
`grammar_expansion` (counting, enumerating, sampling) and `grammar_matching` (transcript ->
nearest sentence); `Grammar` puts them together.
"""

import random
from dataclasses import dataclass
from pathlib import Path

from asr.assistant.grammar_elements import BUILTIN_SLOTS, Expression, Sentence, SlotTypes
from asr.assistant.grammar_expansion import count_expansions, draw, expand, weighted_index
from asr.assistant.grammar_matching import WordGraph, WordIndex
from asr.assistant.grammar_reader import GrammarError, read_grammar
from asr.text import normalize_text
from asr.untrusted import UntrustedInputError, read_text

__all__ = ["MAX_BYTES", "Grammar", "GrammarError", "Match", "Sentence"]

MAX_BYTES = 1 << 20  # a grammar file larger than this is refused


class Grammar:
    """Intents, their expressions, and the slot types they use."""

    def __init__(self, expressions: list[Expression], slots: SlotTypes,
                 source: str = "<grammar>") -> None:
        self.expressions, self.slots, self.source = expressions, {**BUILTIN_SLOTS, **slots}, source
        self._graphs = [WordGraph(e.elements, self.slots) for e in expressions]
        self._index = WordIndex([graph.vocabulary for graph in self._graphs])

    @classmethod
    def load(cls, path: str | Path) -> "Grammar":
        """Read and check a grammar file; any problem is a one-line GrammarError."""
        try:
            text = read_text(path, MAX_BYTES, "the grammar")
        except UntrustedInputError as err:
            raise GrammarError(str(err)) from None
        return cls.from_yaml(text, str(path))

    @classmethod
    def from_yaml(cls, text: str, source: str = "<grammar>") -> "Grammar":
        expressions, slots = read_grammar(text, source)
        return cls(expressions, slots, source)

    @property
    def intents(self) -> list[str]:
        return sorted({e.intent for e in self.expressions})

    def count(self, intent: str | None = None) -> int:
        """How many sentences the expressions (of one intent) expand to, counted without
        expanding them; a sentence that two expressions both produce counts twice."""
        return sum(count_expansions(e.elements, self._slot_counts()) for e in self.expressions
                   if intent is None or e.intent == intent)

    def _slot_counts(self) -> tuple[tuple[str, int], ...]:
        return tuple((name, len(values)) for name, values in sorted(self.slots.items()))

    def sentences(self, intent: str, limit: int, rng: random.Random) -> list[Sentence]:
        """Every distinct sentence of an intent when there are at most `limit`, otherwise
        `limit` draws (each expression by its share of the sentences, then uniformly within
        it), deduplicated. Sorted by text, so the result depends only on the grammar and rng."""
        expressions = [e for e in self.expressions if e.intent == intent]
        counts = [count_expansions(e.elements, self._slot_counts()) for e in expressions]
        found: dict[str, Sentence] = {}
        if sum(counts) <= limit:
            for expression in expressions:
                for words, slots, core in expand(expression.elements, self.slots):
                    _keep(found, Sentence(" ".join(words), intent, dict(slots), core))
        else:
            for _ in range(limit):
                expression = expressions[weighted_index(counts, rng)]
                words, slots, core = draw(expression.elements, self.slots, rng)
                _keep(found, Sentence(" ".join(words), intent, dict(slots), core))
        return sorted(found.values(), key=lambda s: s.text)

    def match(self, text: str, shortlist: int = 8) -> "Match | None":
        """The grammar sentence nearest to `text` (normalised) by word edit distance, with its
        intent and slots; None for an empty text. Only the `shortlist` expressions sharing
        the most (rare) words with the text are searched."""
        words = normalize_text(text).split()
        if not words:
            return None
        best: Match | None = None
        for index in self._index.candidates(words, shortlist):
            found = self._graphs[index].align(words)
            if best is None or found.similarity > best.similarity:
                best = Match(self.expressions[index].intent, found.slots, found.similarity,
                             " ".join(found.words))
        return best


@dataclass(frozen=True)
class Match:
    intent: str
    slots: dict[str, str]
    similarity: float  # 1.0: the text is a sentence of the grammar
    sentence: str  # the grammar sentence it came closest to


def _keep(found: dict[str, Sentence], sentence: Sentence) -> None:
    """First spelling wins; a sentence is a core if any expression says it without extras."""
    old = found.get(sentence.text)
    if old is None or (sentence.core and not old.core):
        found[sentence.text] = sentence

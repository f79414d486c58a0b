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

The grammar turns into four things: `automaton`, a word graph that a search walks lazily (the
decoder's grammar search, `asr.search.GrammarConstraint`, writes only its sentences);
`parse()`, the intent and slots read off a sentence's path; `sentences()` enumerates a small
grammar and samples a large one (a coffee machine's can expand to millions of sentences), for
synthesising a training corpus, and `count()` says how many there are without expanding them;
and `match()`, for a free transcript, finds the nearest grammar sentence by a word-level edit
distance against each expression's word graph. Slot values come back exactly as the file
writes them, never from the transcript.

The file is untrusted input: its size is bounded, YAML aliases are refused (they can expand a
few hundred bytes into gigabytes), and so is whatever would make a walk of the grammar run out
of memory, time or stack: brackets nested deeper than MAX_NESTING, an expression with a
sentence longer than MAX_SENTENCE_WORDS words (none could be parsed) or with a sentence of no
words (silence would be a command), a search graph of more than `automaton.MAX_ARCS` arcs
(a long macro used many times), and, for `match`, word graphs of more than
`matching.MAX_MATCH_NODES` nodes. Every problem is one `GrammarError` line naming the file, the
line and what is wrong.

The parts: `elements` (what an expression is made of), `reader` (the file), `automaton` (the
search's graph and parsing), `expansion` (counting, enumerating, sampling) and `matching` (free
transcript -> nearest sentence); `Grammar` puts them together.
"""

import random
import warnings
from dataclasses import dataclass
from functools import cached_property
from pathlib import Path

from asr.grammar.automaton import GrammarTooLarge, Reading, WordAutomaton
from asr.grammar.elements import BUILTIN_SLOTS, MAX_SENTENCE_WORDS, Expression, Sentence, SlotTypes
from asr.grammar.expansion import count_expansions, draw, expand, sentence_words, weighted_index
from asr.grammar.matching import MAX_MATCH_NODES, WordGraph, WordIndex, nodes_needed
from asr.grammar.measure import Memo
from asr.grammar.reader import GrammarError, read_grammar, shown
from asr.text import normalize_text
from asr.untrusted import UntrustedInputError, read_text

__all__ = ["MAX_BYTES", "Grammar", "GrammarError", "Match", "Reading", "Sentence"]

MAX_BYTES = 1 << 20  # a grammar file larger than this is refused


class Grammar:
    """Intents, their expressions, and the slot types they use."""

    def __init__(self, expressions: list[Expression], slots: SlotTypes,
                 source: str = "<grammar>") -> None:
        self.expressions, self.slots, self.source = expressions, {**BUILTIN_SLOTS, **slots}, source
        self._check_sentences()
        try:
            self.automaton = WordAutomaton(expressions, self.slots)
        except GrammarTooLarge as err:
            raise GrammarError(f"{source}: {err}") from None

    def _check_sentences(self) -> None:
        """Every expression says at least one word and at most MAX_SENTENCE_WORDS."""
        memo: Memo[tuple[int, int]] = Memo()
        for e in self.expressions:
            fewest, most = sentence_words(e.elements, self.slots, memo)
            if not fewest:
                raise GrammarError(f"{self.source}:{e.line}: every part of {shown(e.source)} is "
                                   "optional: silence would be this command")
            if most > MAX_SENTENCE_WORDS:
                raise GrammarError(f"{self.source}:{e.line}: {shown(e.source)} has sentences of "
                                   f"{most} words; at most {MAX_SENTENCE_WORDS} are allowed")

    def check_matchable(self) -> None:
        """Refuse a grammar whose word graphs for `match` (the free search) would be too large
        to align a transcript against in a second."""
        memo: Memo[int] = Memo()
        needed = sum(1 + nodes_needed(e.elements, self.slots, memo) for e in self.expressions)
        if needed > MAX_MATCH_NODES:
            raise GrammarError(f"{self.source}: too large for the free search (its word graphs "
                               f"would have {needed} nodes, more than {MAX_MATCH_NODES}); use "
                               "the grammar search")

    @cached_property
    def _graphs(self) -> list[WordGraph]:
        """Each expression's graph for `match` (built on first use: the search needs none)."""
        self.check_matchable()
        return [WordGraph(e.elements, self.slots) for e in self.expressions]

    @cached_property
    def _index(self) -> WordIndex:
        return WordIndex([graph.vocabulary for graph in self._graphs])

    @classmethod
    def load(cls, path: str | Path, home: str | Path | None = None) -> "Grammar":
        """Read and check a grammar file; any problem is a one-line GrammarError. Home
        Assistant's sentences (`hassil`: "ha:en", a custom_sentences folder, or a file with
        `intents:`) are read too, their {name}, {area} and {floor} from the `home` file."""
        from asr.grammar.hassil import is_hassil, load_hassil  # hassil: an optional extra

        text = None
        if not is_hassil(path):
            try:
                text = read_text(path, MAX_BYTES, "the grammar")
            except UntrustedInputError as err:
                raise GrammarError(str(err)) from None
        if is_hassil(path, text):
            return cls(*load_hassil(path, home), str(path))
        if home is not None:
            raise GrammarError(f"{path}: a home file names Home Assistant's lists; this grammar "
                               "is Rhino's, with none")
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
        slot_counts = self._slot_counts()
        counts = [count_expansions(e.elements, slot_counts) for e in expressions]
        found: dict[str, Sentence] = {}
        if sum(counts) <= limit:
            for expression in expressions:
                for words, slots, core in expand(expression.elements, self.slots):
                    _keep(found, Sentence(" ".join(words), intent, dict(slots), core))
        else:
            for _ in range(limit):
                expression = expressions[weighted_index(counts, rng)]
                words, slots, core = draw(expression.elements, self.slots, rng, slot_counts)
                _keep(found, Sentence(" ".join(words), intent, dict(slots), core))
        return sorted(found.values(), key=lambda s: s.text)

    def parse(self, text: str) -> Reading | None:
        """The intent and slots of a grammar sentence (normalised), read off its path; None
        when the text is no sentence of the grammar."""
        return self.automaton.parse(normalize_text(text).split())

    def readings(self, text: str) -> list[Reading]:
        """Every intent and slots a grammar sentence (normalised) may mean, in the file's
        order: one for most sentences, more where two expressions say the same words."""
        return list(self.automaton.readings(normalize_text(text).split()))

    def warn_shared_sentences(self) -> None:
        """Warn when two intents share a sentence (the shortest one found is named): the
        search cannot tell them apart, and the first in the file would always win."""
        shared = self.automaton.shared_sentence()
        if shared is not None:
            sentence, intents = shared
            warnings.warn(f"{self.source}: {sentence!r} is a sentence of {' and '.join(intents)}"
                          ": heard, it is either (each reading is an alternative)", stacklevel=2)

    def match(self, text: str, shortlist: int = 8) -> "Match | None":
        """The grammar sentence nearest to `text` (normalised), with its intent and slots: the
        text itself when it is a sentence (similarity 1), else the nearest by word edit
        distance, searched in the `shortlist` expressions sharing the most (rare) words with
        the text. None for an empty text, and for one of more than MAX_SENTENCE_WORDS words
        (no command is that long)."""
        words = normalize_text(text).split()
        if not words or len(words) > MAX_SENTENCE_WORDS:
            return None
        exact = self.automaton.parse(words)
        if exact is not None:
            return Match(exact.intent, exact.values, 1.0, " ".join(words))
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

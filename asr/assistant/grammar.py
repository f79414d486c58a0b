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
"""

import difflib
import math
import random
import re
from collections.abc import Iterator
from dataclasses import dataclass, field
from functools import cache
from pathlib import Path

import yaml

from asr.text import normalize_text
from asr.untrusted import UntrustedInputError, check_yaml, read_text

MAX_BYTES = 1 << 20  # a grammar file larger than this is refused
_TOKEN = re.compile(r"\s*(?:(?P<punct>[\[\](),])|(?P<slot>\$[\w.]*(?::\w*)?)|(?P<macro>@\w*)"
                    r"|(?P<word>[^\s\[\](),$@]+))")
_ONES = ("zero one two three four five six seven eight nine ten eleven twelve thirteen "
         "fourteen fifteen sixteen seventeen eighteen nineteen").split()
_TENS = "_ _ twenty thirty forty fifty sixty seventy eighty ninety".split()


class GrammarError(ValueError):
    """A problem in a grammar file: `file:line: problem`, one line."""


# ---------------------------------------------------------------------------- elements


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


@dataclass(frozen=True)
class Sentence:
    """One sentence of the grammar: its text, meaning, and whether it is a core (no optional
    part said: "set a timer for five minutes", not "could you set a timer ... please")."""

    text: str
    intent: str
    slots: dict[str, str] = field(default_factory=dict, hash=False, compare=False)
    core: bool = True


def _number_words(value: int) -> str:
    if value < 20:
        return _ONES[value]
    tens, ones = divmod(value, 10)
    return _TENS[tens] + (f" {_ONES[ones]}" if ones else "")


def _ordinal(words: str) -> str:
    head, _, last = words.rpartition(" ")
    special = {"one": "first", "two": "second", "three": "third", "five": "fifth",
               "eight": "eighth", "nine": "ninth", "twelve": "twelfth"}
    last = special.get(last) or (last[:-1] + "ieth" if last.endswith("y") else last + "th")
    return f"{head} {last}".strip()


BUILTIN_SLOTS: dict[str, tuple[tuple[str, str], ...]] = {
    "pv.SingleDigitInteger": tuple((_number_words(n), str(n)) for n in range(10)),
    "pv.TwoDigitInteger": tuple((_number_words(n), str(n)) for n in range(100)),
    "pv.SingleDigitOrdinal": tuple((_ordinal(_number_words(n)), str(n)) for n in range(1, 10)),
    "pv.TwoDigitOrdinal": tuple((_ordinal(_number_words(n)), str(n)) for n in range(1, 100)),
}


# ---------------------------------------------------------------------------- the grammar


class Grammar:
    """Intents, their expressions, and the slot types they use."""

    def __init__(self, expressions: list[Expression],
                 slots: dict[str, tuple[tuple[str, str], ...]], source: str = "<grammar>") -> None:
        self.expressions, self.slots, self.source = expressions, {**BUILTIN_SLOTS, **slots}, source
        self._graphs = [_Graph(e.elements, self.slots) for e in expressions]
        self._index = _WordIndex([graph.vocabulary for graph in self._graphs])

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
        return _Reader(text, source).grammar()

    @property
    def intents(self) -> list[str]:
        return sorted({e.intent for e in self.expressions})

    def count(self, intent: str | None = None) -> int:
        """How many sentences the expressions (of one intent) expand to, counted without
        expanding them; a sentence that two expressions both produce counts twice."""
        return sum(_count(e.elements, self._slot_counts()) for e in self.expressions
                   if intent is None or e.intent == intent)

    def _slot_counts(self) -> tuple[tuple[str, int], ...]:
        return tuple((name, len(values)) for name, values in sorted(self.slots.items()))

    def sentences(self, intent: str, limit: int, rng: random.Random) -> list[Sentence]:
        """Every distinct sentence of an intent when there are at most `limit`, otherwise
        `limit` draws (each expression by its share of the sentences, then uniformly within
        it), deduplicated. Sorted by text, so the result depends only on the grammar and rng."""
        expressions = [e for e in self.expressions if e.intent == intent]
        counts = [_count(e.elements, self._slot_counts()) for e in expressions]
        found: dict[str, Sentence] = {}
        if sum(counts) <= limit:
            for expression in expressions:
                for words, slots, core in _expand(expression.elements, self.slots):
                    _keep(found, Sentence(" ".join(words), intent, dict(slots), core))
        else:
            for _ in range(limit):
                expression = expressions[_weighted(counts, rng)]
                words, slots, core = _draw(expression.elements, self.slots, rng)
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


def _weighted(counts: list[int], rng: random.Random) -> int:
    pick = rng.randrange(sum(counts))
    for index, count in enumerate(counts):
        if pick < count:
            return index
        pick -= count
    raise AssertionError("unreachable")


# ---------------------------------------------------------------------------- expansion


@cache
def _count(elements: tuple, slot_counts: tuple[tuple[str, int], ...]) -> int:
    total = 1
    for element in elements:
        total *= _element_count(element, slot_counts)
    return total


def _element_count(element, slot_counts: tuple[tuple[str, int], ...]) -> int:
    if isinstance(element, Word):
        return 1
    if isinstance(element, Slot):
        return dict(slot_counts)[element.type]
    return sum(_count(option, slot_counts) for option in element.options) + element.optional


Expansion = tuple[tuple[str, ...], tuple[tuple[str, str], ...], bool]


def _expand(elements: tuple, slots: dict) -> Iterator[Expansion]:
    """Every (words, slots, core) of a sequence, depth first."""
    if not elements:
        yield (), (), True
        return
    for head in _alternatives(elements[0], slots):
        for tail in _expand(elements[1:], slots):
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
            for words, filled, core in _expand(option, slots):
                yield words, filled, core and not element.optional


def _draw(elements: tuple, slots: dict, rng: random.Random) -> Expansion:
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
            weights = [_count(option, counts) for option in element.options]
            pick = _weighted(weights + [1] * element.optional, rng)
            if pick < len(element.options):
                more = _draw(element.options[pick], slots, rng)
                words, filled = words + more[0], filled + more[1]
                core = core and more[2] and not element.optional
    return words, filled, core


# ---------------------------------------------------------------------------- matching


@dataclass(frozen=True)
class _Alignment:
    similarity: float
    words: tuple[str, ...]
    slots: dict[str, str]


@cache
def _substitution(heard: str, written: str) -> float:
    """Cost of hearing `heard` for the grammar's `written`: 0 when equal, at most 0.5 for a
    near spelling ("fotos" for "photos"), 1.5 otherwise: more than leaving a grammar word out
    (1), so an unrelated word is never taken for the one it replaces when it can be matched
    elsewhere, and less than inserting one word and deleting another (2)."""
    if heard == written:
        return 0.0
    ratio = difflib.SequenceMatcher(None, heard, written, autojunk=False).ratio()
    return 1.0 - ratio if ratio >= 0.5 else 1.5


class _Graph:
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

    def align(self, heard: list[str]) -> _Alignment:
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

    def _trace(self, back: list, total: float, heard: int) -> _Alignment:
        words, slots, i, node = [], {}, heard, self.end
        while back[i][node] is not None:
            i, node, word, tag = back[i][node]
            if word:
                words.append(word)
            if tag:
                slots[tag[0]] = tag[1]
        words.reverse()
        length = max(heard, len(words), 1)
        return _Alignment(max(0.0, 1.0 - total / length), tuple(words), dict(reversed(slots.items())))


def _relax(cost: list, back: list, i: int, node: int, value: float, step: tuple) -> None:
    if value < cost[i][node]:
        cost[i][node], back[i][node] = value, step


class _WordIndex:
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


# ---------------------------------------------------------------------------- reading the file


class _Reader:
    """YAML text -> Grammar, with the line of every problem."""

    def __init__(self, text: str, source: str) -> None:
        self.text, self.source = text, source

    def fail(self, line: int | None, problem: str) -> GrammarError:
        where = f"{self.source}:{line}" if line else self.source
        return GrammarError(f"{where}: {problem}")

    def grammar(self) -> Grammar:
        root = self._compose()
        context = _mapping_get(root, "context")
        if context is None or not isinstance(context, yaml.MappingNode):
            raise self.fail(_line(root), "no 'context:' mapping (expected context: expressions: "
                            "{intent: [expression, ...]}, slots: {type: [value, ...]})")
        unknown = [k for k, _ in context.value if k.value not in ("expressions", "slots", "macros")]
        if unknown:
            raise self.fail(_line(unknown[0]), f"unknown section {unknown[0].value!r} under "
                            "context (expected expressions, slots, macros)")
        slots = self._slots(_mapping_get(context, "slots"))
        macros = self._macros(_mapping_get(context, "macros"), slots)
        expressions = self._expressions(_mapping_get(context, "expressions"), slots, macros)
        return Grammar(expressions, slots, self.source)

    def _compose(self) -> yaml.Node:
        try:
            check_yaml(self.text, self.source)
            root = yaml.compose(self.text, Loader=yaml.SafeLoader)
        except UntrustedInputError as err:
            raise self.fail(err.line, err.problem) from None
        except yaml.YAMLError as err:  # what composing finds beyond the parse (tags)
            raise self.fail(None, f"not valid YAML: {str(err).splitlines()[0]}") from None
        if root is None:
            raise self.fail(None, "empty file")
        return root

    def _slots(self, node: yaml.Node | None) -> dict[str, tuple[tuple[str, str], ...]]:
        slots = {}
        for name, values in self._named_lists(node, "slots"):
            spoken: dict[str, str] = {}
            for value in values:
                said = normalize_text(value.value)
                if not said:
                    raise self.fail(_line(value), f"slot {name!r} has a value with no words: "
                                    f"{value.value!r}")
                if said in spoken:
                    raise self.fail(_line(value), f"slot {name!r} lists {value.value!r} twice")
                spoken[said] = str(value.value)
            slots[name] = tuple(spoken.items())
        return slots

    def _macros(self, node: yaml.Node | None, slots: dict) -> dict[str, Choice]:
        macros: dict[str, Choice] = {}
        for name, phrases in self._named_lists(node, "macros"):
            options = tuple(_Expr(self, p.value, _line(p), slots, {}).sequence() for p in phrases)
            macros[name] = Choice(options)
        return macros

    def _expressions(self, node: yaml.Node | None, slots: dict, macros: dict) -> list[Expression]:
        found = [Expression(intent, _Expr(self, e.value, _line(e), slots, macros).sequence(),
                            _line(e), e.value)
                 for intent, items in self._named_lists(node, "expressions") for e in items]
        if not found:
            raise self.fail(_line(node) if node else None, "no expressions: a grammar needs "
                            "context: expressions: {intent: [expression, ...]}")
        return found

    def _named_lists(self, node: yaml.Node | None, section: str
                     ) -> Iterator[tuple[str, list[yaml.ScalarNode]]]:
        """(name, items) of a section that maps names to lists of strings."""
        if node is None or (isinstance(node, yaml.ScalarNode) and node.value == ""):
            return
        if not isinstance(node, yaml.MappingNode):
            raise self.fail(_line(node), f"'{section}' must map names to lists")
        seen = set()
        for key, items in node.value:
            name = key.value if isinstance(key, yaml.ScalarNode) else ""
            if not re.fullmatch(r"[A-Za-z_][\w.]*", name):
                raise self.fail(_line(key), f"bad name {name!r} in '{section}' (letters, digits, "
                                "_ and . only)")
            if name in seen:
                raise self.fail(_line(key), f"{name!r} appears twice in '{section}'")
            seen.add(name)
            if not isinstance(items, yaml.SequenceNode) or not items.value:
                raise self.fail(_line(items), f"{section} {name!r} must be a non-empty list")
            for item in items.value:
                if not isinstance(item, yaml.ScalarNode) or not str(item.value).strip():
                    raise self.fail(_line(item), f"{section} {name!r}: each item must be a "
                                    "non-empty string")
            yield name, items.value


def _line(node: yaml.Node) -> int:
    return node.start_mark.line + 1


def _mapping_get(node: yaml.Node, key: str) -> yaml.Node | None:
    if isinstance(node, yaml.MappingNode):
        for k, v in node.value:
            if isinstance(k, yaml.ScalarNode) and k.value == key:
                return v
    return None


class _Expr:
    """Recursive-descent parser of one expression string."""

    def __init__(self, reader: _Reader, text: str, line: int, slots: dict, macros: dict) -> None:
        self.reader, self.text, self.line, self.slots, self.macros = reader, text, line, slots, macros
        self.tokens = self._tokens()
        self.at = 0
        self.names: set[str] = set()

    def fail(self, problem: str) -> GrammarError:
        return self.reader.fail(self.line, f"{problem} in {self.text!r}")

    def _tokens(self) -> list[tuple[str, str]]:
        tokens, position, text = [], 0, self.text.strip()
        while position < len(text):
            found = _TOKEN.match(text, position)
            if found is None or found.end() == position:
                raise self.fail(f"unexpected {text[position:].split()[0]!r}")
            kind = found.lastgroup or "word"
            tokens.append((kind, found.group(kind)))
            position = found.end()
        return tokens

    def sequence(self) -> tuple:
        elements = self._sequence()
        if self.at < len(self.tokens):
            token = self.tokens[self.at][1]
            raise self.fail(f"unmatched {token!r}" if token in "])" else
                            f"{token!r} outside brackets")
        if not elements:
            raise self.fail("empty expression")
        return elements

    def _sequence(self) -> tuple:
        elements: list = []
        while self.at < len(self.tokens):
            kind, value = self.tokens[self.at]
            if kind == "punct" and value in "[(":
                self.at += 1
                elements.append(self._choice("]" if value == "[" else ")", value == "("))
            elif kind == "punct":
                break
            else:
                self.at += 1
                elements += self._atom(kind, value)
        return tuple(elements)

    def _choice(self, close: str, optional: bool) -> Choice:
        options = []
        while True:
            option = self._sequence()
            if not option:
                raise self.fail(f"empty choice in {'(...)' if optional else '[...]'}")
            options.append(option)
            if self.at >= len(self.tokens):
                raise self.fail(f"unclosed {'(' if optional else '['}")
            token = self.tokens[self.at][1]
            self.at += 1
            if token == close:
                return Choice(tuple(options), optional)
            if token != ",":
                raise self.fail(f"{token!r} where {close!r} or ',' was expected")

    def _atom(self, kind: str, value: str) -> list:
        if kind == "slot":
            slot_type, _, name = value[1:].partition(":")
            if not slot_type or not name:
                raise self.fail(f"bad slot {value!r} (write $type:name)")
            if slot_type not in self.slots and slot_type not in BUILTIN_SLOTS:
                raise self.fail(f"unknown slot type {slot_type!r}")
            if name in self.names:
                raise self.fail(f"slot name {name!r} used twice")
            self.names.add(name)
            return [Slot(slot_type, name)]
        if kind == "macro":
            if value[1:] not in self.macros:
                raise self.fail(f"unknown macro {value!r}")
            return [self.macros[value[1:]]]
        words = normalize_text(value).split()
        if not words:
            raise self.fail(f"{value!r} is not a word")
        return [Word(word) for word in words]

"""A grammar as a word automaton that a search walks lazily, and as the token rule built on it.

`WordAutomaton` compiles a grammar's expressions into one nondeterministic word graph (as
Kaldi or Vosk compile a JSGF grammar into an FST, here without expanding it): a word is an
arc, a choice or a skipped optional is an empty arc, and a slot is one arc into its type's
value trie, shared by every use of the slot, so the graph grows with the grammar's text, not
with its sentences (millions of sentences are a few thousand arcs). A
macro is copied where it is used, so a few kilobytes of text that use a long macro many times
could ask for millions of arcs: the arcs are counted before any is built, and a grammar that
needs more than MAX_ARCS is refused.

A search never sees the graph: it holds a state (the set of graph positions its words so far
reach) and asks which words may follow, which state a word leads to, and whether a sentence
may end there. States are built on first use and remembered (a lazy subset construction), so
a grammar of any number of sentences costs what the searches visit.

`parse` reads the intent and every slot of a grammar sentence off its path, with the words
each slot spans. `TokenGrammar` lifts the automaton to sentencepiece tokens for the decoder's
search (`asr.search.GrammarConstraint`): the tokens a hypothesis may write next, cached
per (state, partial word).
"""

from collections import deque
from collections.abc import Iterator
from dataclasses import dataclass, field

import torch
from torch import Tensor

from asr.grammar.elements import MAX_SENTENCE_WORDS, Choice, Expression, Slot, SlotTypes, Word
from asr.grammar.measure import Memo, count, measure
from asr.tokenizer import EOS_ID, WORD_START

MAX_ARCS = 200_000  # a grammar whose graph needs more arcs is refused (its memory and build time)
MAX_STATES = 100_000  # remembered search states; past this their memory starts again (`forget`)
MAX_POSITIONS = 2_000_000  # ... or past this many graph positions held in them all
DEAD = -1  # the state of a word sequence that leaves the grammar


class GrammarTooLarge(ValueError):
    """The grammar's graph would need more than MAX_ARCS arcs."""


def arcs_needed(expressions: list[Expression]) -> int:
    """The arcs `WordAutomaton` builds for these expressions, counted without building them:
    one per word and per slot (its values share one trie), two per option of a choice and
    one to skip an optional one."""
    how = count(1, lambda type_: 1,
                lambda choice, options: choice.optional + sum(2 + arcs for arcs in options))
    memo: Memo[int] = Memo()
    return sum(1 + measure(e.elements, how, memo) for e in expressions)


@dataclass(frozen=True)
class SlotSpan:
    """A slot filled on a sentence's path: its value as the grammar writes it, and the words
    (indices, end exclusive) that said it."""

    name: str
    value: str
    start: int
    end: int


@dataclass(frozen=True)
class Reading:
    """What a grammar sentence means: the expression (and so the intent) its path runs
    through, and the slots on that path."""

    intent: str
    expression: int
    slots: tuple[SlotSpan, ...] = field(default=())
    fixed: tuple[tuple[str, str], ...] = ()  # the expression's `fixed` slots

    @property
    def values(self) -> dict[str, str]:
        return {**dict(self.fixed), **{span.name: span.value for span in self.slots}}


class _Trie:
    """A slot type's spoken values, word by word: node 0 is the root."""

    def __init__(self, values: tuple[tuple[str, str], ...]) -> None:
        self.children: list[dict[str, int]] = [{}]
        self.value: list[str | None] = [None]
        for spoken, value in values:
            node = 0
            for word in spoken.split():
                if word not in self.children[node]:
                    self.children[node][word] = len(self.children)
                    self.children.append({})
                    self.value.append(None)
                node = self.children[node][word]
            self.value[node] = value


class WordAutomaton:
    """The grammar's word graph, and the search states over it (see the module docstring).

    Graph positions are ints (a node) or (slot arc, trie node) pairs (inside a slot value).
    A state is an int naming a set of positions; state 0 is the start.
    """

    def __init__(self, expressions: list[Expression], slots: SlotTypes) -> None:
        needed = arcs_needed(expressions)
        if needed > MAX_ARCS:
            raise GrammarTooLarge(f"the grammar's graph would need {needed} arcs, more than "
                                  f"{MAX_ARCS} (a long macro used many times?); refused")
        self.expressions = expressions
        self.empty: list[list[int]] = [[]]  # node -> targets of its empty arcs
        self.words: list[dict[str, list[int]]] = [{}]  # node -> word -> targets
        self.slot_arcs: list[list[int]] = [[]]  # node -> the slot arcs leaving it
        self.slot_arc: list[tuple[Slot, int]] = []  # slot arc -> (slot, target node)
        self.final: dict[int, int] = {}  # end node -> expression index
        self.tries = {name: _Trie(values) for name, values in slots.items()}
        self.arcs = needed
        for index, expression in enumerate(expressions):
            start = self._node()
            self._arc(0, start)
            self.final[self._build(expression.elements, start)] = index
        self._states: list[frozenset] = []
        self._positions = 0  # held in the states remembered
        self._ids: dict[frozenset, int] = {}
        self._next: dict[tuple[int, str], int] = {}
        self._allowed: dict[int, frozenset[str]] = {}
        self.generation = 0  # how often the memory of states started again (`forget`)
        self._add_state(self._closure([0]))

    def vocabulary(self) -> set[str]:
        """Every word a sentence may hold: the graph's and the values' of the slot types it
        uses."""
        words = {word for arcs in self.words for word in arcs}
        used = {slot.type for slot, _ in self.slot_arc}
        return words | {word for name in used for node in self.tries[name].children
                        for word in node}

    # ---------------------------------------------------------------- the graph

    def _node(self) -> int:
        self.empty.append([])
        self.words.append({})
        self.slot_arcs.append([])
        return len(self.empty) - 1

    def _arc(self, source: int, target: int, word: str | None = None) -> None:
        if word is None:
            self.empty[source].append(target)
        else:
            self.words[source].setdefault(word, []).append(target)

    def _build(self, elements: tuple, start: int) -> int:
        for element in elements:
            end = self._node()
            if isinstance(element, Word):
                self._arc(start, end, element.text)
            elif isinstance(element, Slot):
                self.slot_arcs[start].append(len(self.slot_arc))
                self.slot_arc.append((element, end))
            else:
                self._choice(element, start, end)
            start = end
        return start

    def _choice(self, choice: Choice, start: int, end: int) -> None:
        for option in choice.options:
            first = self._node()
            self._arc(start, first)
            self._arc(self._build(option, first), end)
        if choice.optional:
            self._arc(start, end)

    # ---------------------------------------------------------------- search states

    def _closure(self, positions: list) -> frozenset:
        """The positions reachable by empty arcs (and by ending a slot value); only those that
        say something or end a sentence are kept, so equal futures make equal states."""
        seen, stack = set(), list(positions)
        while stack:
            position = stack.pop()
            if position in seen:
                continue
            seen.add(position)
            if isinstance(position, int):
                stack += self.empty[position]
            else:
                arc, node = position
                if self.slot_trie(arc).value[node] is not None:
                    stack.append(self.slot_arc[arc][1])
        return frozenset(p for p in seen if not isinstance(p, int) or self.words[p]
                         or self.slot_arcs[p] or p in self.final)

    def _add_state(self, positions: frozenset) -> int:
        if not positions:
            return DEAD
        if positions not in self._ids:
            self._ids[positions] = len(self._states)
            self._states.append(positions)
            self._positions += len(positions)
        return self._ids[positions]

    def slot_trie(self, arc: int) -> _Trie:
        """The trie of the values a slot arc's slot type may say."""
        return self.tries[self.slot_arc[arc][0].type]

    @property
    def states_held(self) -> int:
        """Search states remembered now (each built on first use, `forget` starts again)."""
        return len(self._states)

    def forget(self) -> None:
        """Start the memory of states again once it holds more than MAX_STATES, or more than
        MAX_POSITIONS graph positions in all (a large grammar's states are large). Every state
        handed out before is then void, so this runs only where no caller holds one: as a
        search starts (`TokenGrammar.start`) and as `accepts` begins, never inside a search,
        whose own states are bounded by its beam and length."""
        if len(self._states) > MAX_STATES or self._positions > MAX_POSITIONS:
            self._states, self._ids, self._next, self._allowed = [], {}, {}, {}
            self._positions = 0
            self._add_state(self._closure([0]))
            self.generation += 1

    def step(self, state: int, word: str) -> int:
        """The state after `word` (DEAD: the grammar does not allow it here)."""
        if state == DEAD:
            return DEAD
        key = (state, word)
        if key not in self._next:
            self._next[key] = self._add_state(self._closure(self._moves(state, word)))
        return self._next[key]

    def _moves(self, state: int, word: str) -> list:
        moves: list = []
        for position in self._states[state]:
            if isinstance(position, int):
                moves += self.words[position].get(word, [])
                for arc in self.slot_arcs[position]:
                    child = self.slot_trie(arc).children[0].get(word)
                    if child is not None:
                        moves.append((arc, child))
            else:
                arc, node = position
                child = self.slot_trie(arc).children[node].get(word)
                if child is not None:
                    moves.append((arc, child))
        return moves

    def allowed(self, state: int) -> frozenset[str]:
        """The words that may follow in this state."""
        if state == DEAD:
            return frozenset()
        if state not in self._allowed:
            words: set[str] = set()
            for position in self._states[state]:
                if isinstance(position, int):
                    words.update(self.words[position])
                    for arc in self.slot_arcs[position]:
                        words.update(self.slot_trie(arc).children[0])
                else:
                    arc, node = position
                    words.update(self.slot_trie(arc).children[node])
            self._allowed[state] = frozenset(words)
        return self._allowed[state]

    def can_end(self, state: int) -> bool:
        """Whether the words so far are a whole sentence of the grammar."""
        return state != DEAD and any(p in self.final for p in self._states[state])

    def accepts(self, words: list[str]) -> bool:
        return self.can_end(self._state_after(words))

    def _state_after(self, words: list[str]) -> int:
        self.forget()
        state = 0
        for word in words:
            state = self.step(state, word)
        return state

    # ---------------------------------------------------------------- parsing

    def parse(self, words: list[str]) -> Reading | None:
        """The meaning of a grammar sentence read off its path (the first expression, in the
        file's order, whose path says these words); None when it is no sentence. Only the
        expressions whose end the words reach are walked (a grammar may have thousands)."""
        return next(self.readings(words), None)

    def readings(self, words: list[str]) -> Iterator[Reading]:
        """Every meaning of a grammar sentence, one per expression whose path says these
        words, in the file's order (most sentences have one)."""
        if len(words) > MAX_SENTENCE_WORDS:
            return
        state = self._state_after(words)
        ends = [] if state == DEAD else [self.final[p] for p in self._states[state]
                                         if p in self.final]
        for index in sorted(ends):
            found = self._walk(self.empty[0][index], tuple(words), index)
            if found is not None:
                expression = self.expressions[index]
                yield Reading(expression.intent, index, found, expression.fixed)

    def shared_sentence(self, max_states: int = 2000) -> tuple[str, list[str]] | None:
        """A sentence that two intents both have, with those intents (None: none found among
        the first `max_states` search states, breadth first: the shortest such sentence)."""
        self.forget()
        queue, seen = deque([(0, ())]), {0}
        while queue and len(seen) <= max_states:
            state, said = queue.popleft()
            intents = sorted({self.expressions[self.final[p]].intent
                              for p in self._states[state] if p in self.final})
            if len(intents) > 1:
                return " ".join(said), intents
            for word in sorted(self.allowed(state)):
                after = self.step(state, word)
                if after not in seen:
                    seen.add(after)
                    queue.append((after, (*said, word)))
        return None

    def _walk(self, start: int, words: tuple[str, ...],
              expression: int) -> tuple[SlotSpan, ...] | None:
        """The slots on a path from `start` that says `words` and ends the expression: depth
        first over an acyclic graph, with a stack of its own (a path may be thousands of arcs
        long), remembering the (node, words said) that lead nowhere."""
        failed: set[tuple[int, int]] = set()
        stack = [(start, 0, self._steps(start, 0, words))]
        spans: list[SlotSpan | None] = []  # what each step on the path filled
        while stack:
            node, at, steps = stack[-1]
            if at == len(words) and self.final.get(node) == expression:
                return tuple(span for span in spans if span is not None)
            step = next((s for s in steps if (s[0], s[1]) not in failed), None)
            if step is None:
                failed.add((node, at))
                stack.pop()
                if spans:
                    spans.pop()
                continue
            target, end, span = step
            stack.append((target, end, self._steps(target, end, words)))
            spans.append(span)
        return None

    def _steps(self, node: int, at: int, words: tuple[str, ...]
               ) -> Iterator[tuple[int, int, SlotSpan | None]]:
        """(target, words said after it, slot filled) for each arc out of `node`: words, then
        empty arcs, then slot values."""
        if at < len(words):
            for target in self.words[node].get(words[at], []):
                yield target, at + 1, None
        for target in self.empty[node]:
            yield target, at, None
        for arc in self.slot_arcs[node]:
            slot, target = self.slot_arc[arc]
            for value, end in self._slot_values(slot.type, words, at):
                yield target, end, SlotSpan(slot.name, value, at, end)

    def _slot_values(self, slot_type: str, words: tuple[str, ...], at: int):
        """(value, end) for each value of the slot type that words[at:end] say."""
        trie, node = self.tries[slot_type], 0
        for end in range(at, len(words)):
            node = trie.children[node].get(words[end])
            if node is None:
                return
            if trie.value[node] is not None:
                yield trie.value[node], end + 1


class TokenGrammar:
    """The automaton over a tokenizer's pieces: which token ids a hypothesis may write next.

    A hypothesis is a state of the automaton (its complete words) and the piece-spelt start of
    its current word. A piece inside a word must keep that start a prefix of a word allowed
    next; a piece that starts a word (sentencepiece's WORD_START) needs the current word to be
    whole and allowed, and its own letters to begin a word allowed after it; EOS needs the
    current word whole and the sentence complete. Any segmentation of an allowed word is
    allowed: the model's scores prefer the one it was trained on.
    """

    def __init__(self, automaton: WordAutomaton, pieces: list[str]) -> None:
        self.automaton, self.pieces = automaton, pieces
        self.ids: dict[str, int] = {}
        for index, piece in enumerate(pieces):
            self.ids.setdefault(piece, index)
        self._masks: dict[tuple[int, str | None], Tensor] = {}
        self._generation = automaton.generation  # of the automaton states the masks are for

    def unwritable(self) -> list[str]:
        """The grammar's words the pieces cannot spell (a letter no piece holds: a Cyrillic
        look-alike, an accent, a script the tokenizer never saw): no sentence holding one
        can ever be written."""
        letters = {c for piece in self.pieces for c in piece.replace(WORD_START, "")}
        return sorted(w for w in self.automaton.vocabulary() if not set(w) <= letters)

    def start(self) -> tuple[int, None]:
        """The state of a search's empty hypothesis (the automaton's memory of states may
        start again here, between searches)."""
        self.automaton.forget()
        return 0, None

    def advance(self, state: tuple[int, str | None], token: int) -> tuple[int, str | None]:
        """The (automaton state, current word) after writing `token`."""
        automaton_state, word = state
        piece = self.pieces[token]
        if piece.startswith(WORD_START):
            if word is not None:
                automaton_state = self.automaton.step(automaton_state, word)
            return automaton_state, piece[1:]
        return automaton_state, (word or "") + piece

    def mask(self, state: tuple[int, str | None]) -> Tensor:
        """(vocab,) True where the token keeps the hypothesis inside the grammar."""
        if self._generation != self.automaton.generation:  # keyed by states now void
            self._masks.clear()
            self._generation = self.automaton.generation
        if state not in self._masks:
            if len(self._masks) >= MAX_STATES:
                self._masks.clear()
            allowed = torch.zeros(len(self.pieces), dtype=torch.bool)
            allowed[self._allowed_ids(*state)] = True
            self._masks[state] = allowed
        return self._masks[state]

    def _allowed_ids(self, state: int, word: str | None) -> list[int]:
        automaton, ids = self.automaton, []
        if word is None:  # nothing written yet: a first word starts (or the empty sentence)
            ids = self._word_starts(state)
            return ids + [EOS_ID] if automaton.can_end(state) else ids
        for option in automaton.allowed(state):
            if option.startswith(word):
                rest = option[len(word):]
                ids += [self.ids[rest[:n]] for n in range(1, len(rest) + 1) if rest[:n] in self.ids]
        if word in automaton.allowed(state):
            after = automaton.step(state, word)
            ids += self._word_starts(after)
            if automaton.can_end(after):
                ids.append(EOS_ID)
        return ids

    def _word_starts(self, state: int) -> list[int]:
        allowed = self.automaton.allowed(state)  # none: the sentence may only end here
        ids = [self.ids[WORD_START]] if WORD_START in self.ids and allowed else []
        for option in allowed:
            ids += [self.ids[WORD_START + option[:n]] for n in range(1, len(option) + 1)
                    if WORD_START + option[:n] in self.ids]
        return ids

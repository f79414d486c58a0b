"""Rules applied to the next-token scores before each choice of a search.

Suppressed tokens, repetition loops, with `decode.words` a closed vocabulary (only listed
words may be written) and with `decode.grammar` a grammar (only its sentences may be written,
as a recogniser with a task grammar: `GrammarConstraint`).
"""

import math

import torch
from torch import Tensor

from asr.grammar.automaton import TokenGrammar
from asr.text import normalize_text
from asr.tokenizer import EOS_ID, UNK_ID, WORD_START


class LogitFilter:
    """A rule applied to next-token log-probabilities (hyps, vocab) before a choice, in place."""

    def apply(self, log_probs: Tensor, tokens: Tensor) -> None:
        raise NotImplementedError


class SuppressTokens(LogitFilter):
    """Tokens the decoder must never emit (padding/CTC blank, BOS)."""

    def __init__(self, ids: list[int]) -> None:
        self.ids = ids

    def apply(self, log_probs: Tensor, tokens: Tensor) -> None:
        log_probs[:, self.ids] = -math.inf


class RepetitionLimit(LogitFilter):
    """Forbid the token that would make a hypothesis end in more than `max_repeats` copies of
    one token sequence back to back: the loop an attention decoder can fall into.

    Appending c to y (length L) ends it in R + 1 copies of a span of s tokens exactly when
    y's last R * s - 1 tokens repeat with period s and c equals y[L - s].
    """

    def __init__(self, max_repeats: int) -> None:
        self.max_repeats = max_repeats

    def apply(self, log_probs: Tensor, tokens: Tensor) -> None:
        ids = tokens[:, 1:]  # without BOS
        length, repeats = ids.shape[1], self.max_repeats
        for span in range(1, (length + 1) // (repeats + 1) + 1):
            first = length + 1 - (repeats + 1) * span
            periodic = (ids[:, first:length - span] == ids[:, first + span:]).all(-1)
            penalty = torch.where(periodic, -math.inf, 0.0)[:, None].to(log_probs.dtype)
            log_probs.scatter_add_(1, ids[:, length - span, None], penalty)


class WordList(LogitFilter):
    """Only the listed words may be written, in any order and number (or nothing at all): a
    closed vocabulary, as the word list of a task grammar (pocketsphinx's JSGF `w1 | w2 | ...`).

    sentencepiece marks a word's first piece (WORD_START). A hypothesis may go on with a piece
    that keeps its last word a prefix of a listed word, start a new word (or end, EOS) only once
    that word is complete. Which tokens are allowed depends only on the last word so far, so
    each such prefix's mask over the vocabulary is computed once.
    """

    def __init__(self, words: list[str], pieces: list[str]) -> None:
        self.words = {w for text in words for w in normalize_text(text).split()}
        self.prefixes = {w[:i] for w in self.words for i in range(len(w) + 1)}
        self.pieces = pieces
        self.masks: dict[str | None, Tensor] = {}

    def apply(self, log_probs: Tensor, tokens: Tensor) -> None:
        rows = [self._mask(self._last_word(ids)) for ids in tokens[:, 1:].tolist()]
        allowed = torch.stack(rows).to(log_probs.device)
        log_probs.masked_fill_(~allowed, -math.inf)

    def _last_word(self, ids: list[int]) -> str | None:
        """The (partial) last word of a hypothesis; None before its first word."""
        word = ""
        for token in reversed(ids):
            piece = self.pieces[token]
            if piece.startswith(WORD_START):
                return piece[1:] + word
            word = piece + word
        return None

    def _mask(self, word: str | None) -> Tensor:
        if word not in self.masks:
            complete = word is None or word in self.words  # a new word may start, or EOS
            allowed = [self._allowed(piece, word, complete) for piece in self.pieces]
            allowed[EOS_ID], allowed[UNK_ID] = complete, False
            self.masks[word] = torch.tensor(allowed)
        return self.masks[word]

    def _allowed(self, piece: str, word: str | None, complete: bool) -> bool:
        if piece.startswith(WORD_START):
            return complete and piece[1:] in self.prefixes
        return word is not None and word + piece in self.prefixes


class GrammarConstraint(LogitFilter):
    """Only sentences of a grammar may be written: each hypothesis may go on only with the
    tokens that keep it on a path of the grammar's automaton, and end only where a sentence
    ends (`asr.grammar.automaton.TokenGrammar`: the rule, its masks cached per state).

    A hypothesis's state follows from its parent's and its last token, remembered per token
    prefix for the length of one search, so each step costs one automaton move per new
    hypothesis.
    """

    def __init__(self, grammar: TokenGrammar) -> None:
        self.grammar = grammar
        self.states: dict[tuple[int, ...], tuple[int, str | None]] = {(): grammar.start()}

    def apply(self, log_probs: Tensor, tokens: Tensor) -> None:
        rows = [self.grammar.mask(self._state(tuple(ids))) for ids in tokens[:, 1:].tolist()]
        allowed = torch.stack(rows).to(log_probs.device)
        log_probs.masked_fill_(~allowed, -math.inf)

    def _state(self, ids: tuple[int, ...]) -> tuple[int, str | None]:
        if ids not in self.states:
            self.states[ids] = self.grammar.advance(self._state(ids[:-1]), ids[-1])
        return self.states[ids]

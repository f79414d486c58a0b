"""The search: what to do (`DecodingOptions`), the rules on each step's scores, and the greedy
and beam searches over a `Network`, one decoder call per step for every hypothesis.

- `DecodingOptions`: what to do (`conf/decode/*.yaml` fill it).
- `Scorer` gives each hypothesis's next-token scores: the attention decoder (`asr.network`),
  fused with a token language model (`LanguageModel`, shallow fusion) if given, the logit
  filters, the length limit, and optionally the CTC prefix score. `GreedySearch` and
  `BeamSearch` advance every hypothesis of every utterance together, through the same scorer,
  cache and filters, and return each utterance's finished hypotheses best first (the n-best
  list), with their scores.
- Logit filters, applied to the scores before each choice: suppressed tokens, repetition
  loops, with `words` a closed vocabulary (`WordList`) and with `grammar` a task grammar, only
  its sentences (`GrammarConstraint`, over `asr.grammar.automaton.TokenGrammar`).
- `CTCPrefixScorer`: the CTC head's prefix score (Watanabe et al. 2017), for joint
  CTC/attention decoding: a hypothesis scores (1 - w) log P_att + w log P_ctc(prefix). CTC
  must account for every stretch of audio, so it vetoes what the attention decoder alone
  might add or drop ("what time is it" for "what time is it please"), and loops.
"""

import math
from dataclasses import dataclass
from typing import Protocol

import torch
from torch import Tensor

from asr.grammar.automaton import TokenGrammar
from asr.lm import TokenLM
from asr.network import Network
from asr.text import normalize_text
from asr.tokenizer import BOS_ID, EOS_ID, PAD_ID, UNK_ID, WORD_START
from asr.untrusted import check_fields, check_ranges

MODES = ("attention", "ctc_greedy")


@dataclass
class DecodingOptions:
    """How to search; `conf/decode/*.yaml` fill it."""

    mode: str = "attention"  # "attention": decoder search; "ctc_greedy": CTC best path only
    beam_size: int = 1  # 1 = greedy
    length_penalty: float = 1.0  # a finished hypothesis scores log P / length ** length_penalty
    max_len_ratio: float = 1.0  # at most this many tokens per encoder frame
    ctc_weight: float = 0.0  # joint decoding: (1 - w) log P_att + w log P_ctc (needs a CTC head)
    pre_beam_ratio: float = 1.5  # CTC scores the ceil(ratio * beam) best next tokens (grammar: all)
    max_repeats: int = 3  # a token sequence may occur at most this often back to back (0: no limit)
    kv_cache: bool = True  # reuse keys/values between steps (False: recompute, for reference)
    ctc_no_speech: bool = True  # an utterance whose CTC best path is empty (all blank) is silent
    encoder_batch: int = 8  # encode at most this many at once (CPU: bigger batches spill caches)
    lead_in_ms: float = 0.0  # silence put before each utterance (for clips cut tight to the speech)
    words: list[str] | None = None  # write only these words (any order, any number; None: any)
    lm: str | None = None  # language model (asr.train_lm) fused into free search, never a grammar's
    lm_weight: float = 1.0  # log P_att + lm_weight * log P_lm, when `lm` is given
    grammar: str | None = None  # a grammar file (Rhino context YAML): write only its sentences

    def __post_init__(self) -> None:
        if isinstance(self.words, list | tuple):  # YAML reads `yes`, `on` and numbers as such
            self.words = [w if isinstance(w, str) else str(w) for w in self.words]
        check_fields(self, "decode")
        if self.mode not in MODES:
            raise ValueError(f"decode.mode must be one of {MODES}, got {self.mode!r}")
        # Bounded so that no setting can make a search run for minutes or exhaust memory.
        check_ranges(self, "decode", beam_size=(1, 64), length_penalty=(0, 10),
                     max_len_ratio=(0.01, 2), pre_beam_ratio=(1, 10), max_repeats=(0, 100),
                     encoder_batch=(1, 1024), lead_in_ms=(0, 5000), lm_weight=(0, 100))
        if self.words is not None:
            if not any(normalize_text(w) for w in self.words):
                raise ValueError("decode.words must name at least one word")
            if self.mode == "ctc_greedy":
                raise ValueError("decode.words constrains the attention search, not "
                                 "decode.mode=ctc_greedy")
        for name in ("grammar", "lm"):  # a file named by an empty string: a blank CLI argument
            if isinstance(getattr(self, name), str) and not getattr(self, name).strip():
                raise ValueError(f"decode.{name} is an empty file name (null: none)")
        if self.grammar is not None and (self.mode == "ctc_greedy" or self.words is not None):
            raise ValueError("decode.grammar constrains the attention search: not with "
                             "decode.mode=ctc_greedy nor decode.words")
        if self.lm is not None and self.mode == "ctc_greedy":
            raise ValueError("decode.lm fuses with the attention search, not decode.mode=ctc_greedy")
        if not 0.0 <= self.ctc_weight < 1.0:
            raise ValueError(f"decode.ctc_weight must be in [0, 1), got {self.ctc_weight} "
                             f"(decode.mode=ctc_greedy decodes with CTC alone)")


Ranked = list[tuple[list[int], float]]  # an utterance's hypotheses (ids, total score), best first


class LanguageModel:
    """Next-token log-probabilities of a token LM for the hypotheses, through its own cache
    (rows follow the hypotheses as the decoder's cache does)."""

    def __init__(self, lm: TokenLM) -> None:
        self.lm, self.cache = lm, lm.new_cache()

    def log_probs(self, tokens: Tensor) -> Tensor:
        logits = self.lm(tokens[:, self.cache.offset:], self.cache)
        return logits[:, -1].float().log_softmax(-1)

    def select(self, rows: Tensor) -> None:
        self.cache.select(rows)



class Task(Protocol):
    """What a search reads of its decoding task (`asr.decoding.DecodingTask`): the network,
    the options, the tokenizer's pieces, the loaded language model and token grammar."""

    network: Network
    options: DecodingOptions
    pieces: list[str] | None
    lm: TokenLM | None
    token_grammar: TokenGrammar | None


class Scorer:
    """Joint next-token scores for a batch of hypotheses of a `DecodingTask`: attention decoder
    (through a cache or not) fused with its language model if given (not inside a grammar,
    whose sentences are the search's language), logit filters, length limit, and optionally
    the CTC prefix score (from the batch's CTC `logits`). With the task's
    grammar only its sentences may be written; no repetition limit then: the grammar bounds
    what may repeat."""

    def __init__(self, task: Task, memory: Tensor, memory_lengths: Tensor,
                 logits: Tensor | None, group: int) -> None:
        network, options = task.network, task.options
        self.inference = network.inference(memory, memory_lengths, options.kv_cache)
        self.group = group
        fuse = task.lm is not None and options.lm_weight > 0 and task.token_grammar is None
        self.lm = LanguageModel(task.lm) if fuse else None
        self.lm_weight = options.lm_weight
        self.filters: list[LogitFilter] = [SuppressTokens([PAD_ID, BOS_ID])]
        self.in_grammar = task.token_grammar is not None
        if task.token_grammar is not None:
            self.filters.append(GrammarConstraint(task.token_grammar))
        elif options.max_repeats > 0:
            self.filters.append(RepetitionLimit(options.max_repeats))
        if options.words is not None:
            self.filters.append(WordList(options.words, task.pieces))
        use_ctc = options.ctc_weight > 0 and logits is not None
        self.ctc_weight = options.ctc_weight if use_ctc else 0.0
        self.ctc = CTCPrefixScorer(logits, memory_lengths, group) if use_ctc else None
        self.pre_beam = math.ceil(options.pre_beam_ratio * group) if use_ctc else 2 * group
        self.pre_beam = min(max(self.pre_beam, 2), network.dims.n_vocab)

    def candidates(self, tokens: Tensor, at_limit: Tensor,
                   att_scores: Tensor) -> tuple[Tensor, Tensor, Tensor]:
        """The `pre_beam` best next tokens of each hypothesis: (tokens, cumulative attention
        log P, joint score), each (hyps, pre_beam); `att_scores` is each prefix's log P_att."""
        log_probs = self.inference.log_probs(tokens)
        if self.lm is not None:
            log_probs += self.lm_weight * self.lm.log_probs(tokens)
        for f in self.filters:
            f.apply(log_probs, tokens)
        ends = at_limit  # out of room: the hypothesis must end, inside a grammar only where
        if self.in_grammar:  # a sentence is complete (elsewhere it dies: no sentence fits)
            ends = at_limit & (log_probs[:, EOS_ID] > -math.inf)
        log_probs[at_limit] = -math.inf
        log_probs[ends, EOS_ID] = 0.0
        top, candidates = log_probs.topk(self.width(log_probs), dim=-1)
        att = att_scores[:, None] + top
        if self.ctc is None:
            return candidates, att, att
        ctc = self.ctc.score(candidates)
        return candidates, att, (1 - self.ctc_weight) * att + self.ctc_weight * ctc

    def width(self, log_probs: Tensor) -> int:
        """How many next tokens per hypothesis the joint score sees: the `pre_beam` best by
        attention, and inside a grammar every token it allows (few at any point of a
        sentence). The attention decoder is a language model of its training sentences: ranked
        by it alone, a slot value it rarely saw ("ristretto") falls out of a pre-beam before
        the CTC head, which hears the audio, could score it."""
        if not self.in_grammar or self.ctc is None:
            return self.pre_beam
        allowed = int((log_probs > -math.inf).sum(-1).max())
        return max(self.pre_beam, min(allowed, log_probs.shape[-1]))

    def select(self, rows: Tensor, choice: Tensor, reordered: bool = True) -> None:
        """Keep hypothesis rows[i] extended by its candidate choice[i], for every i
        (`reordered=False`: rows is every hypothesis in order, as in greedy search)."""
        if reordered:
            self.inference.select(rows)
            if self.lm is not None:
                self.lm.select(rows)
        if self.ctc is not None:
            self.ctc.select(rows, choice)

    def keep(self, utterances: Tensor) -> Tensor:
        """Drop the utterances that ended (keep these, in this order) so that later steps cost
        only what the live ones need; returns the rows of their hypotheses."""
        rows = (utterances[:, None] * self.group
                + torch.arange(self.group, device=utterances.device)).flatten()
        self.inference.keep(utterances, rows)
        if self.lm is not None:
            self.lm.select(rows)
        if self.ctc is not None:
            self.ctc.keep(rows)
        return rows


class GreedySearch:
    """The best next token, one hypothesis per utterance."""

    group = 1

    def run(self, scorer: Scorer, max_tokens: Tensor) -> list[Ranked]:
        device = max_tokens.device
        results: list[Ranked] = [[] for _ in max_tokens]
        active = torch.arange(len(max_tokens), device=device)  # utterance of each row
        tokens = torch.full((len(active), 1), BOS_ID, dtype=torch.long, device=device)
        att = torch.zeros(len(active), device=device)
        for step in range(int(max_tokens.max()) + 1):
            candidates, att_next, joint = scorer.candidates(tokens, step >= max_tokens, att)
            rows = torch.arange(len(active), device=device)
            choice = joint.argmax(-1)
            att, best = att_next[rows, choice], joint[rows, choice]
            tokens = torch.cat([tokens, candidates[rows, choice][:, None]], dim=1)
            done = (tokens[:, -1] == EOS_ID) & (best > -math.inf)
            for row in done.nonzero()[:, 0].tolist():
                results[int(active[row])] = [(_strip(tokens[row, 1:].tolist()), float(best[row]))]
            done |= best == -math.inf  # nothing may follow (a grammar's dead end): no result
            if done.all():
                break
            scorer.select(rows, choice, reordered=False)
            if done.any():  # go on with the utterances still speaking only
                live = (~done).nonzero()[:, 0]
                tokens, att, max_tokens, active = (tokens[live], att[live], max_tokens[live],
                                                   active[live])
                scorer.keep(live)
        return results


class BeamSearch:
    """Keep the `beam_size` best prefixes per utterance until no live one can win.

    An utterance is done once it has `beam_size` finished hypotheses and its best live prefix
    already scores below its best finished one, unnormalised (scores only fall as a prefix
    grows). The winner is then chosen by score / length ** length_penalty, so this stop is a
    heuristic, as whisper's and ESPnet's are: with a length penalty a longer hypothesis the
    search gave up on could still have won.

    `exact` (the grammar search's) stops only when no live prefix can win after normalising:
    its score, which can only fall, spread over the longest length it may reach, must be
    below the best finished normalised score. Free text could run on to the length limit, so
    the heuristic serves there; every grammar sentence ends, and inside a grammar many
    hypotheses finish early, one slot short of the sentence said, where the heuristic would
    stop before the right, longer one ends.
    """

    def __init__(self, beam_size: int, length_penalty: float, exact: bool = False) -> None:
        self.group, self.length_penalty, self.exact = beam_size, length_penalty, exact

    def run(self, scorer: Scorer, max_tokens: Tensor) -> list[Ranked]:
        batch, beam, device = len(max_tokens), self.group, max_tokens.device
        limit = max_tokens.repeat_interleave(beam)
        tokens = torch.full((batch * beam, 1), BOS_ID, dtype=torch.long, device=device)
        att = torch.zeros(batch * beam, device=device)
        alive = torch.zeros(batch, beam, device=device)
        alive[:, 1:] = -math.inf  # all beams start identical: expand only the first
        finished = [_Finished(int(n) + 1 if self.exact else None, self.length_penalty)
                    for n in max_tokens.tolist()]
        active = list(range(batch))  # utterance of each group of `beam` rows
        for step in range(int(max_tokens.max()) + 1):
            candidates, att_next, joint = scorer.candidates(tokens, step >= limit, att)
            pre_beam = candidates.shape[1]
            joint = (joint + alive.reshape(-1, 1)).reshape(len(active), -1)
            top_scores, top_index = joint.topk(min(2 * beam, joint.shape[1]), dim=1)
            picked, alive = self._select(top_scores, top_index, candidates, tokens,
                                         [finished[b] for b in active], step)
            if all(f.done for f in finished):
                break
            rows, choice = picked // pre_beam, picked % pre_beam
            att = att_next[rows, choice]
            tokens = torch.cat([tokens[rows], candidates[rows, choice][:, None]], dim=1)
            scorer.select(rows, choice)
            live = [i for i, b in enumerate(active) if not finished[b].done]
            if len(live) < len(active):  # go on with the utterances still searching only
                rows = scorer.keep(torch.tensor(live, device=device))
                tokens, att, limit = tokens[rows], att[rows], limit[rows]
                alive, active = alive[live], [active[i] for i in live]
        return [f.ranked() for f in finished]

    def _select(self, top_scores: Tensor, top_index: Tensor, candidates: Tensor, tokens: Tensor,
                finished: list["_Finished"], step: int) -> tuple[Tensor, Tensor]:
        """Move candidates ending in EOS to `finished`; the best others become the next beams.

        Each utterance's candidates come sorted by score: the first `beam_size` that do not
        end become its beams, the ending ones ranked above the last of them are finished.
        Returns, for each next beam, its index into the flattened (hyps, pre_beam)
        candidates, and the beams' -inf/0 liveness. Utterances that are done keep dead
        beams so shapes stay fixed. Tensor operations throughout: only the (few) ending
        candidates are visited in Python.
        """
        batch, beam, device = len(finished), self.group, tokens.device
        pre_beam = candidates.shape[1]
        base = torch.arange(batch, device=device)[:, None] * (beam * pre_beam)
        index = top_index + base
        searching = torch.tensor([not f.done for f in finished], device=device)[:, None]
        usable = (top_scores > -math.inf) & searching
        ends = candidates.reshape(-1)[index] == EOS_ID
        goes_on = usable & ~ends
        ranked_before = goes_on.cumsum(1) - goes_on.long()  # beams taken before this one
        considered = usable & (ranked_before < beam)
        live = goes_on & considered
        for b, k in (ends & considered).nonzero().tolist():
            row = int(index[b, k]) // pre_beam
            finished[b].add(float(top_scores[b, k]), _strip(tokens[row, 1:].tolist()), step + 1)
        best_live = torch.where(live, top_scores, -math.inf).amax(1).tolist()
        # the live candidates first, in score order; dead beams (padding) after them
        position = torch.arange(live.shape[1], device=device).expand_as(live)
        order = torch.where(live, position, live.shape[1]).sort(1).values[:, :beam]
        taken = order < live.shape[1]
        picked = torch.where(taken, index.gather(1, order.clamp(max=live.shape[1] - 1)), base)
        alive = torch.where(taken, 0.0, -math.inf)
        for b, f in enumerate(finished):
            f.update(best_live[b], beam)
        done = torch.tensor([f.done for f in finished], device=device)
        return picked.flatten(), alive.masked_fill(done[:, None], -math.inf)


class _Finished:
    """An utterance's ended hypotheses: (length-normalised score, score, token ids)."""

    def __init__(self, limit: int | None = None, length_penalty: float = 1.0) -> None:
        self.hypotheses: list[tuple[float, float, list[int]]] = []
        self.best_score = -math.inf  # the best unnormalised score: what a live prefix must beat
        self.best_normalised = -math.inf
        self.limit, self.length_penalty = limit, length_penalty  # limit: `exact` stops
        self.done = False

    def add(self, score: float, ids: list[int], length: int) -> None:
        self.hypotheses.append((score / length**self.length_penalty, score, ids))
        self.best_score = max(self.best_score, score)
        self.best_normalised = max(self.best_normalised, self.hypotheses[-1][0])

    def update(self, best_live: float, beam: int) -> None:
        """Done once nothing live can win, or nothing is live (a grammar with fewer sentences
        than the beam has them all)."""
        if self.limit is not None:  # exact: the best a live prefix could still normalise to
            can_win = best_live / self.limit**self.length_penalty > self.best_normalised
        else:
            can_win = best_live >= self.best_score
        self.done = best_live == -math.inf or (len(self.hypotheses) >= beam and not can_win)

    def ranked(self) -> Ranked:
        """(ids, score) of each distinct transcript, best (by length-normalised score) first;
        the score is its total log-probability, so a softmax over them compares readings."""
        best: dict[tuple[int, ...], tuple[float, float]] = {}
        for normalised, score, ids in self.hypotheses:
            best[tuple(ids)] = max(best.get(tuple(ids), (-math.inf, -math.inf)), (normalised, score))
        ranked = sorted(best.items(), key=lambda h: -h[1][0])
        return [(list(ids), score) for ids, (_, score) in ranked]


def _strip(ids: list[int]) -> list[int]:
    """Cut at the first EOS and drop padding."""
    if EOS_ID in ids:
        ids = ids[: ids.index(EOS_ID)]
    return [i for i in ids if i not in (PAD_ID, BOS_ID)]


# ---------------------------------------------------------------------------- logit filters


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


def _mask_rows(log_probs: Tensor, rows: list[Tensor]) -> None:
    """Rule out, in each hypothesis's row, the tokens its mask (a bool row per hypothesis,
    True: allowed) does not allow."""
    allowed = torch.stack(rows).to(log_probs.device)
    log_probs.masked_fill_(~allowed, -math.inf)


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
        _mask_rows(log_probs, [self._mask(self._last_word(ids)) for ids in tokens[:, 1:].tolist()])

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
        _mask_rows(log_probs, [self.grammar.mask(self._state(tuple(ids)))
                               for ids in tokens[:, 1:].tolist()])

    def _state(self, ids: tuple[int, ...]) -> tuple[int, str | None]:
        if ids not in self.states:
            self.states[ids] = self.grammar.advance(self._state(ids[:-1]), ids[-1])
        return self.states[ids]


# ---------------------------------------------------------------------------- CTC prefix score


class CTCPrefixScorer:
    """log P_ctc(prefix) of each hypothesis extended by candidate tokens, in one batched step.

    For a prefix g, r_n[t] / r_b[t] are the log-probabilities that the frames 0..t emit
    exactly g, ending in a non-blank / blank frame. Extending g by c (Watanabe et al. 2017,
    as ESPnet's CTCPrefixScore) follows two linear recursions over t; written as cumulative
    sums and `logcumsumexp` they run over all frames at once instead of a Python loop.
    Float64 keeps those cumulative sums exact enough (1e-9 nats on 10^4 frames).
    """

    def __init__(self, logits: Tensor, lengths: Tensor, group: int) -> None:
        log_probs = logits.double().log_softmax(-1)  # (batch, frames, vocab)
        frames = log_probs.shape[1]
        valid = torch.arange(frames, device=logits.device)[None] < lengths[:, None]
        # (batch, vocab, frames): a candidate's log-probabilities over time are one contiguous
        # row, so gathering them for every hypothesis copies rows, not single numbers
        by_token = log_probs.transpose(1, 2)
        self.log_probs = by_token.masked_fill(~valid[:, None], 0.0).contiguous()  # sums stay finite
        self.emits = by_token.masked_fill(~valid[:, None], -math.inf).contiguous()  # no path there
        self.utt = torch.arange(len(lengths), device=logits.device).repeat_interleave(group)
        self.frames = frames  # frames still needed (of the longest utterance still searching)
        self.last_frame = (lengths - 1)[self.utt]
        blank = self.log_probs[self.utt, PAD_ID]
        self.blank_cum = blank.cumsum(-1)  # B[t] = sum of blank log-probs up to t
        self.r_n = torch.full_like(blank, -math.inf)  # the empty prefix: all frames blank
        self.r_b = self.blank_cum.clone()
        self.last = torch.full_like(self.utt, BOS_ID)
        self.empty = torch.ones_like(self.utt, dtype=torch.bool)
        self._pending: tuple[Tensor, Tensor] | None = None

    def score(self, candidates: Tensor) -> Tensor:
        """(hyps, K) candidate tokens -> (hyps, K) log P_ctc(prefix + candidate).

        For EOS the score is the full-sequence probability of the prefix itself. The prefix
        score needs only phi (the paths into the new token); the forward variables, the
        costly part, are computed in `select` for the chosen candidates alone.
        """
        x = self.emits[:, :, :self.frames][self.utt[:, None], candidates]  # (hyps, K, frames)
        both = torch.logaddexp(self.r_n, self.r_b)
        phi = torch.where((candidates == self.last[:, None])[..., None], self.r_b[:, None],
                          both[:, None])  # paths into c: a repeat of the last token needs a blank
        first = x[..., :1] + self._start()[:, None, None]  # c emitted at frame 0
        starts = torch.cat([first, phi[..., :-1] + x[..., 1:]], -1)  # c first emitted at t
        psi = starts.logsumexp(-1)
        ended = both.gather(1, self.last_frame[:, None])  # g complete: EOS
        psi = torch.where(candidates == EOS_ID, ended, psi)
        self._pending = (candidates, phi)
        return psi.float()

    def select(self, rows: Tensor, choice: Tensor) -> None:
        """Hypothesis i now is row rows[i] of the last `score` extended by its candidate choice[i]."""
        candidates, phi = self._pending
        chosen = candidates[rows, choice]
        x = self.log_probs[:, :, :self.frames][self.utt[rows], chosen]
        phi, start = phi[rows, choice], self._start()[rows, None]
        cum = x.cumsum(-1)
        self.r_n = cum + torch.cat([start, phi[:, :-1] - cum[:, :-1]], -1).logcumsumexp(-1)
        blank = self.blank_cum[rows]
        self.r_b = blank + torch.cat([torch.full_like(start, -math.inf),
                                      self.r_n[:, :-1] - blank[:, :-1]], -1).logcumsumexp(-1)
        self.last = chosen
        self.empty = torch.zeros_like(self.empty)

    def keep(self, rows: Tensor) -> None:
        """Go on with these hypotheses (those of the utterances still searching) only, and only
        as many frames as the longest of them: later frames never change earlier forward
        variables."""
        frames = self.frames = int(self.last_frame[rows].max()) + 1
        self.utt = self.utt[rows]  # the emissions stay as they are: rows index into them
        self.blank_cum = self.blank_cum[rows, :frames]
        self.r_n, self.r_b = self.r_n[rows, :frames], self.r_b[rows, :frames]
        self.last_frame, self.last, self.empty = self.last_frame[rows], self.last[rows], self.empty[rows]
        self._pending = None

    def _start(self) -> Tensor:
        """log P of reaching frame 0 with nothing emitted: 0 for the empty prefix only."""
        return torch.where(self.empty, 0.0, -math.inf).to(self.r_n.dtype)

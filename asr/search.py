"""Greedy and beam search over a `Network`, one decoder call per step for every hypothesis.

`Scorer` gives each hypothesis's next-token scores: the attention decoder (`asr.network`),
fused with a token language model (`LanguageModel`, shallow fusion) if given, the logit
filters (`asr.logit_filters`: with a grammar, only its sentences), the length limit, and
optionally the CTC prefix score (`asr.ctc_prefix`). `GreedySearch` and `BeamSearch` advance
every hypothesis of every utterance together, through the same scorer, cache and filters, and
return each utterance's finished hypotheses best first (the n-best list), with their scores.
"""

import math
from typing import TYPE_CHECKING

import torch
from torch import Tensor

from asr.ctc_prefix import CTCPrefixScorer
from asr.grammar.automaton import TokenGrammar
from asr.lm import TokenLM
from asr.logit_filters import GrammarConstraint, LogitFilter, RepetitionLimit, SuppressTokens, WordList
from asr.network import Network
from asr.tokenizer import BOS_ID, EOS_ID, PAD_ID

if TYPE_CHECKING:
    from asr.decoding import DecodingOptions  # which imports this module

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



class Scorer:
    """Joint next-token scores for a batch of hypotheses: attention decoder (through a cache
    or not) fused with a language model if given, logit filters, length limit, and optionally
    the CTC prefix score. With a `grammar` (the loaded `options.grammar`) only its sentences
    may be written; no repetition limit then: the grammar bounds what may repeat."""

    def __init__(self, network: Network, memory: Tensor, memory_lengths: Tensor,
                 group: int, options: "DecodingOptions", pieces: list[str] | None = None,
                 lm: TokenLM | None = None, grammar: TokenGrammar | None = None) -> None:
        self.inference = network.inference(memory, memory_lengths, options.kv_cache)
        self.group = group
        if options.lm is not None and lm is None:
            raise ValueError("decode.lm is set but no language model was loaded")
        self.lm = LanguageModel(lm) if lm is not None and options.lm_weight > 0 else None
        self.lm_weight = options.lm_weight
        if options.grammar is not None and grammar is None:
            raise ValueError("decode.grammar is set but no grammar was loaded")
        self.filters: list[LogitFilter] = [SuppressTokens([PAD_ID, BOS_ID])]
        self.in_grammar = grammar is not None
        if grammar is not None:
            self.filters.append(GrammarConstraint(grammar))
        elif options.max_repeats > 0:
            self.filters.append(RepetitionLimit(options.max_repeats))
        if options.words is not None:
            if pieces is None:
                raise ValueError("decode.words needs the tokenizer's pieces")
            self.filters.append(WordList(options.words, pieces))
        use_ctc = options.ctc_weight > 0 and network.has_ctc
        self.ctc_weight = options.ctc_weight if use_ctc else 0.0
        self.ctc = CTCPrefixScorer(network.ctc_logits(memory), memory_lengths, group) \
            if use_ctc else None
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
        top, candidates = log_probs.topk(self.pre_beam, dim=-1)
        att = att_scores[:, None] + top
        if self.ctc is None:
            return candidates, att, att
        ctc = self.ctc.score(candidates)
        return candidates, att, (1 - self.ctc_weight) * att + self.ctc_weight * ctc

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
    """

    def __init__(self, beam_size: int, length_penalty: float) -> None:
        self.group, self.length_penalty = beam_size, length_penalty

    def run(self, scorer: Scorer, max_tokens: Tensor) -> list[Ranked]:
        batch, beam, device = len(max_tokens), self.group, max_tokens.device
        limit = max_tokens.repeat_interleave(beam)
        tokens = torch.full((batch * beam, 1), BOS_ID, dtype=torch.long, device=device)
        att = torch.zeros(batch * beam, device=device)
        alive = torch.zeros(batch, beam, device=device)
        alive[:, 1:] = -math.inf  # all beams start identical: expand only the first
        finished = [_Finished() for _ in range(batch)]
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
            finished[b].add(float(top_scores[b, k]), _strip(tokens[row, 1:].tolist()), step + 1,
                            self.length_penalty)
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

    def __init__(self) -> None:
        self.hypotheses: list[tuple[float, float, list[int]]] = []
        self.best_score = -math.inf  # the best unnormalised score: what a live prefix must beat
        self.done = False

    def add(self, score: float, ids: list[int], length: int, length_penalty: float) -> None:
        self.hypotheses.append((score / length**length_penalty, score, ids))
        self.best_score = max(self.best_score, score)

    def update(self, best_live: float, beam: int) -> None:
        """Done once nothing live can win, or nothing is live (a grammar with fewer sentences
        than the beam has them all)."""
        self.done = best_live == -math.inf or (len(self.hypotheses) >= beam
                                               and best_live < self.best_score)

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

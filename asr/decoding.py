"""Search for the most likely transcript: batched greedy search and batched beam search.

Both advance every hypothesis of every utterance in one decoder call per step. The longest
transcript allowed for an utterance is tied to its encoder length, so search always ends.
Beam search can rescore its finished hypotheses with the model's CTC head: the attention
decoder alone leans towards sentences it saw in training ("what time is it" for "what time is
it please"), while CTC must account for every stretch of the audio.
"""

from dataclasses import dataclass

import torch
import torch.nn.functional as F
from torch import Tensor
from torch.nn.utils.rnn import pad_sequence

from asr.model import SpeechTransformer
from asr.tokenizer import BOS_ID, EOS_ID, PAD_ID


@dataclass
class DecodingOptions:
    """How to search; `conf/decode/*.yaml` fill it."""

    beam_size: int = 1  # 1 = greedy
    length_penalty: float = 1.0  # a finished hypothesis scores log P / length ** length_penalty
    max_len_ratio: float = 1.0  # at most this many tokens per encoder frame
    ctc_weight: float = 0.0  # beam search: final score = (1 - w) log P_att + w log P_ctc


@torch.no_grad()
def decode(model: SpeechTransformer, wave: Tensor, lengths: Tensor,
           options: DecodingOptions) -> list[list[int]]:
    """Token ids (no BOS/EOS) of the best transcript of each waveform in the batch."""
    memory, memory_lengths = model.encode(wave, lengths)
    max_tokens = (memory_lengths.float() * options.max_len_ratio).ceil().long().clamp(min=1)
    if options.beam_size <= 1:
        return greedy_search(model, memory, memory_lengths, max_tokens)
    finished = beam_search(model, memory, memory_lengths, max_tokens, options)
    if options.ctc_weight > 0 and model.ctc is not None:
        return ctc_rescore(model, memory, memory_lengths, finished, options)
    return [f.best() for f in finished]


def greedy_search(model: SpeechTransformer, memory: Tensor, memory_lengths: Tensor,
                  max_tokens: Tensor) -> list[list[int]]:
    """Pick the most likely next token until every utterance has emitted EOS."""
    batch = memory.shape[0]
    tokens = torch.full((batch, 1), BOS_ID, dtype=torch.long, device=memory.device)
    done = torch.zeros(batch, dtype=torch.bool, device=memory.device)
    for step in range(int(max_tokens.max()) + 1):
        logits = model.decoder(tokens, memory, memory_lengths)[:, -1]
        next_token = logits.argmax(-1)
        next_token = torch.where(step >= max_tokens, EOS_ID, next_token)
        next_token = torch.where(done, PAD_ID, next_token)
        tokens = torch.cat([tokens, next_token[:, None]], dim=1)
        done |= next_token == EOS_ID
        if done.all():
            break
    return [_strip(row[1:].tolist()) for row in tokens]


def beam_search(model: SpeechTransformer, memory: Tensor, memory_lengths: Tensor,
                max_tokens: Tensor, options: DecodingOptions) -> list["_Finished"]:
    """Keep the `beam_size` best prefixes per utterance until no live one can win.

    An utterance is done once it has `beam_size` finished hypotheses and its best live prefix
    already scores below its best finished one (log P only falls as a prefix grows).
    """
    batch, beam = memory.shape[0], options.beam_size
    memory = memory.repeat_interleave(beam, 0)
    memory_lengths = memory_lengths.repeat_interleave(beam)
    limit = max_tokens.repeat_interleave(beam)
    tokens = torch.full((batch * beam, 1), BOS_ID, dtype=torch.long, device=memory.device)
    scores = torch.full((batch, beam), float("-inf"), device=memory.device)
    scores[:, 0] = 0.0  # all beams start identical: expand only the first
    finished = [_Finished() for _ in range(batch)]
    for step in range(int(max_tokens.max()) + 1):
        logits = model.decoder(tokens, memory, memory_lengths)[:, -1].float()
        logp = logits.log_softmax(-1)
        at_limit = step >= limit
        logp[at_limit] = float("-inf")
        logp[at_limit, EOS_ID] = 0.0
        candidates = (scores.reshape(-1, 1) + logp).reshape(batch, -1)
        top_scores, top_index = candidates.topk(2 * beam, dim=1)
        rows, next_tokens, scores = _select(top_scores, top_index, logp.shape[-1], tokens,
                                            finished, beam, step, options.length_penalty)
        tokens = torch.cat([tokens[rows], next_tokens[:, None]], dim=1)
        if all(f.done for f in finished):
            break
    return finished


def ctc_rescore(model: SpeechTransformer, memory: Tensor, memory_lengths: Tensor,
                finished: list["_Finished"], options: DecodingOptions) -> list[list[int]]:
    """Pick each utterance's hypothesis by (1 - w) log P_att + w log P_ctc, length-normalised.

    log P_ctc is the CTC forward score of the whole hypothesis (all alignments), from
    `F.ctc_loss`; a hypothesis CTC cannot align at all scores -inf.
    """
    log_probs = model.ctc(memory).float().log_softmax(-1)
    best = []
    for b, done in enumerate(finished):
        if not done.hypotheses:
            best.append([])
            continue
        ids = [h[2] for h in done.hypotheses]
        frames = int(memory_lengths[b])
        targets = pad_sequence([torch.tensor(i or [PAD_ID], dtype=torch.long) for i in ids],
                               batch_first=True, padding_value=PAD_ID).to(memory.device)
        ctc = -F.ctc_loss(log_probs[b, :frames, None].expand(-1, len(ids), -1), targets,
                          torch.full((len(ids),), frames, dtype=torch.long),
                          torch.tensor([len(i) for i in ids], dtype=torch.long),
                          blank=PAD_ID, reduction="none")
        best.append(done.best(ctc.tolist(), options.ctc_weight))
    return best


class _Finished:
    """An utterance's ended hypotheses: (length-normalised score, log P, token ids, the
    length normaliser length ** length_penalty)."""

    def __init__(self) -> None:
        self.hypotheses: list[tuple[float, float, list[int], float]] = []
        self.done = False

    def add(self, log_prob: float, ids: list[int], length: int, length_penalty: float) -> None:
        norm = length**length_penalty
        self.hypotheses.append((log_prob / norm, log_prob, ids, norm))

    def update(self, best_live: float, beam: int) -> None:
        best_finished = max((h[1] for h in self.hypotheses), default=float("-inf"))
        self.done = len(self.hypotheses) >= beam and best_live < best_finished

    def best(self, ctc: list[float] | None = None, weight: float = 0.0) -> list[int]:
        """The top hypothesis; with `ctc` (log P_ctc per hypothesis) by the joint score
        ((1 - weight) log P_att + weight log P_ctc) / length ** length_penalty."""
        if not self.hypotheses:
            return []
        if ctc is None:
            return max(self.hypotheses, key=lambda h: h[0])[2]
        joint = [((1 - weight) * h[1] + weight * c) / h[3]
                 for h, c in zip(self.hypotheses, ctc, strict=True)]
        return self.hypotheses[max(range(len(joint)), key=joint.__getitem__)][2]


def _select(top_scores: Tensor, top_index: Tensor, vocab: int, tokens: Tensor,
            finished: list[_Finished], beam: int, step: int,
            length_penalty: float) -> tuple[Tensor, Tensor, Tensor]:
    """Move candidates ending in EOS to `finished`; the best others become the next beams.

    Returns, for each next beam, the row of `tokens` it extends, its new token and the
    beams' scores. Utterances that are done keep dead (-inf) beams so shapes stay fixed.
    """
    batch = top_scores.shape[0]
    rows, next_tokens = [], []
    scores = torch.full((batch, beam), float("-inf"), device=top_scores.device)
    for b in range(batch):
        kept = 0
        for score, index in zip(top_scores[b].tolist(), top_index[b].tolist(), strict=True):
            if kept == beam or score == float("-inf") or finished[b].done:
                break
            row, token = b * beam + index // vocab, index % vocab
            if token == EOS_ID:
                finished[b].add(score, _strip(tokens[row, 1:].tolist()), step + 1, length_penalty)
                continue
            scores[b, kept] = score
            rows.append(row)
            next_tokens.append(token)
            kept += 1
        for _ in range(beam - kept):  # pad with dead beams
            rows.append(b * beam)
            next_tokens.append(PAD_ID)
        finished[b].update(scores[b].max().item(), beam)
        if finished[b].done:
            scores[b] = float("-inf")
    device = tokens.device
    return torch.tensor(rows, device=device), torch.tensor(next_tokens, device=device), scores


def _strip(ids: list[int]) -> list[int]:
    """Cut at the first EOS and drop padding."""
    if EOS_ID in ids:
        ids = ids[: ids.index(EOS_ID)]
    return [i for i in ids if i not in (PAD_ID, BOS_ID)]

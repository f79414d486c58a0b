"""The CTC head's prefix score (Watanabe et al. 2017), for joint CTC/attention decoding.

A hypothesis scores (1 - w) log P_att + w log P_ctc(prefix). CTC must account for every
stretch of audio, so it vetoes what the attention decoder alone might add or drop ("what time
is it" for "what time is it please"), and loops.
"""

import math

import torch
from torch import Tensor

from asr.tokenizer import BOS_ID, EOS_ID, PAD_ID


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

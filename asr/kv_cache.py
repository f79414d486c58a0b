"""The key/value caches of incremental decoding (as whisper's `kv_cache`).

With them, `asr.model.TextDecoder` is fed only the tokens of each new step: self-attention
keeps the keys and values of the tokens seen so far, cross-attention the projected encoder
states.
"""

import torch
from torch import Tensor

from asr.attention import MultiHeadAttention


class KVCache:
    """One attention layer's projected keys and values, kept between decoding steps.

    Self-attention (`grows`) appends the keys/values of the tokens fed at each step, so each
    token is projected once; cross-attention projects the encoder states on the first step
    and reuses them to the end of the utterance (as whisper's `kv_cache`). A growing cache
    reorders its rows (the surviving beams) lazily, on the next append, so that reordering and
    appending copy the cache once per step instead of twice.
    """

    def __init__(self, grows: bool) -> None:
        self.grows = grows
        self.k: Tensor | None = None
        self.v: Tensor | None = None
        self.rows: Tensor | None = None  # pending `select` of a growing cache

    def keys_values(self, attn: MultiHeadAttention, source: Tensor,
                    positions: Tensor | None = None) -> tuple[Tensor, Tensor]:
        if self.k is not None and not self.grows:
            return self.k, self.v
        k, v = attn.project(source, positions)
        if self.k is not None:
            k, v = self._append(self.k, k), self._append(self.v, v)
            self.rows = None
        self.k, self.v = k, v
        return k, v

    def select(self, rows: Tensor) -> None:
        """Keep (and repeat) the given batch rows, e.g. the beams that survive a step."""
        if self.k is None:
            return
        if self.grows:
            self.rows = rows if self.rows is None else self.rows[rows]
        else:
            self.k, self.v = self.k.index_select(0, rows), self.v.index_select(0, rows)

    def _append(self, cached: Tensor, new: Tensor) -> Tensor:
        """The cached rows (reordered by the pending `select`) followed by `new` in time."""
        count = len(self.rows) if self.rows is not None else cached.shape[0]
        _, heads, length, dim = cached.shape
        out = cached.new_empty(count, heads, length + new.shape[2], dim)
        if self.rows is None:
            out[:, :, :length] = cached
        else:
            torch.index_select(cached, 0, self.rows, out=out[:, :, :length])
        out[:, :, length:] = new
        return out


class DecoderCache:
    """Everything the decoder computed for a batch of hypotheses in earlier steps.

    With it, `TextDecoder` is fed only the new tokens; `offset` (tokens already seen) places
    them. Hypotheses of one utterance share its encoder keys/values (one row per utterance).
    """

    def __init__(self, n_layers: int) -> None:
        self.self_attn = [KVCache(grows=True) for _ in range(n_layers)]
        self.cross_attn = [KVCache(grows=False) for _ in range(n_layers)]
        self.offset = 0

    def select(self, rows: Tensor) -> None:
        """Continue with the given hypotheses (rows of the batch), e.g. the surviving beams."""
        for cache in self.self_attn:
            cache.select(rows)

    def keep_sources(self, utterances: Tensor, frames: int) -> None:
        """Keep the encoder keys/values of these utterances, cut to `frames` (when the
        others, and with them the longest, have ended)."""
        for cache in self.cross_attn:
            cache.select(utterances)
            if cache.k is not None:
                cache.k, cache.v = cache.k[:, :, :frames], cache.v[:, :, :frames]

"""Multi-head attention (after openai/whisper's `MultiHeadAttention`) and the local window.

The common path is whisper's: project queries, keys and values, split the heads, attend with
torch's scaled dot-product attention (SDPA), merge the heads, project out. The options are
separate pieces that attention composes:

- positions inside attention (`model.pos`, `asr.positions`): RoPE rotates queries and keys
  (`Rotary`) before they meet; Shaw's relative embeddings change the scores and the outputs
  (`RelativePosition.attend`, in place of SDPA);
- the span (`model.attention`): `local_attention` lets position i see keys j with
  |i - j| <= window. It is computed over overlapping blocks (blocks of `window` queries
  against their `3 * window` keys), so memory grows linearly with length instead of with a
  T x T mask;
- a key/value cache supplies the keys and values of earlier decoding steps: `KVCache` for one
  layer, `DecoderCache` for a decoder's layers (as whisper's `kv_cache`). With them,
  `asr.model.TextDecoder` is fed only the tokens of each new step: self-attention keeps the
  keys and values of the tokens seen so far, cross-attention the projected encoder states.
"""

import torch
import torch.nn.functional as F
from torch import Tensor, nn

from asr.positions import RelativePosition, Rotary


class MultiHeadAttention(nn.Module):
    """Multi-head attention on top of `F.scaled_dot_product_attention`.

    No dropout on the attention weights (as in whisper): it would force SDPA's slow path on
    CPU, and the residual dropout around each layer regularises enough.

    `pos` ("rope" or "relative", None for neither) reads the absolute `positions` of the queries
    and `key_positions` of the keys (both default to 0, 1, ...). A caller that feeds only new
    tokens and keeps earlier keys (a KV cache) projects the new rows with their positions,
    appends them to the cached (already rotated) keys and values, and calls `attend` with the
    queries' positions and the positions of all keys. `window` > 0 gives local attention;
    `mask` must then be a key-padding mask (batch, 1, 1, keys).
    """

    def __init__(self, d_model: int, n_head: int, pos: str | None = None, max_distance: int = 16,
                 window: int = 0, cross: bool = False) -> None:
        """Self-attention projects queries, keys and values of its input by one packed linear
        layer (`qkv`); cross-attention (`cross`) projects queries of its input (`query`) and
        keys and values of the other sequence (`kv`). A small model's training step on a GPU
        is bound by kernel launches: one GEMM in place of three launches fewer kernels, forward
        and backward, and casts the input to bf16 once; on the CPU the packed layout is as
        fast (`benchmarks/launches.py` measures both)."""
        super().__init__()
        self.n_head, self.d_model = n_head, d_model
        query, key, value = (nn.Linear(d_model, d_model) for _ in range(3))
        self.qkv = None if cross else packed([query, key, value])
        self.query = query if cross else None
        self.kv = packed([key, value]) if cross else None
        self.out = nn.Linear(d_model, d_model)
        head_dim = d_model // n_head
        self.rotary = Rotary(head_dim) if pos == "rope" else None
        self.relative = RelativePosition(head_dim, max_distance) if pos == "relative" else None
        self.window = window

    def forward(self, x: Tensor, source: Tensor, mask: Tensor | None = None,
                positions: Tensor | None = None, key_positions: Tensor | None = None,
                cache: "KVCache | None" = None) -> Tensor:
        """`mask` broadcasts to (batch, heads, queries, keys); True means "may attend".

        `positions`/`key_positions` place the rows of `x`/`source` (RoPE, relative; default
        0, 1, ...). With a `cache`, `source` holds only the new rows and the keys seen so far
        come from the cache: they sit at positions 0, 1, ... of the sequence. `source` may
        hold fewer rows than `x` when several hypotheses of one utterance (beam search)
        attend to its encoder states: rows of `x` come in equal groups per source row.
        """
        if self.qkv is not None and source is x:  # self-attention: one projection
            q, k, v = (split_heads(t, self.n_head) for t in self.qkv(x).chunk(3, -1))
            q, k = self._rotated(q, positions), self._rotated(k, key_positions)
            if cache is not None:
                k, v = cache.extend(k, v)
        else:
            q = self.queries(x, positions)
            k, v = (cache.keys_values(self, source, key_positions) if cache is not None
                    else self.project(source, key_positions))
        if cache is not None:
            key_positions = None  # the cache holds every key from position 0 on
        group = q.shape[0] // k.shape[0]
        y = self.attend(fold_groups(q, group), k, v, mask, positions, key_positions)
        return self.out(merge_heads(unfold_groups(y, group)))

    def queries(self, x: Tensor, positions: Tensor | None = None) -> Tensor:
        """(batch, heads, time, head_dim), rotated to their `positions` for RoPE."""
        q = self.query(x) if self.query is not None else F.linear(
            x, self.qkv.weight[:self.d_model], self.qkv.bias[:self.d_model])
        return self._rotated(split_heads(q, self.n_head), positions)

    def project(self, source: Tensor, positions: Tensor | None = None) -> tuple[Tensor, Tensor]:
        """Keys and values (batch, heads, time, head_dim); keys rotated to `positions` for RoPE."""
        kv = self.kv(source) if self.kv is not None else F.linear(
            source, self.qkv.weight[self.d_model:], self.qkv.bias[self.d_model:])
        k, v = (split_heads(t, self.n_head) for t in kv.chunk(2, -1))
        return self._rotated(k, positions), v

    def projection_weights(self) -> dict[str, Tensor]:
        """Each projection's (d_model x d_model) weight by name (query, key, value, out): views
        into the packed layers, for an initialisation that treats them as separate layers."""
        packed = self.qkv.weight.split(self.d_model) if self.qkv is not None else \
            (self.query.weight, *self.kv.weight.split(self.d_model))
        return {**dict(zip(("query", "key", "value"), packed, strict=True)), "out": self.out.weight}

    def _rotated(self, t: Tensor, positions: Tensor | None) -> Tensor:
        return t if self.rotary is None else self.rotary(t, positions)

    def attend(self, q: Tensor, k: Tensor, v: Tensor, mask: Tensor | None,
               positions: Tensor | None = None, key_positions: Tensor | None = None) -> Tensor:
        """The heads' outputs (batch, heads, queries, head_dim): over the local window, with
        Shaw's relative embeddings, or (the common path) SDPA.

        SDPA at every length, on CPU too: a written-out softmax for short keys is no faster,
        in training or in a decoder step (`benchmarks/attention.py`; BENCHMARKS.md)."""
        if self.window:
            return local_attention(q, k, v, key_padding(mask, k), self.window, self.relative)
        if self.relative is not None:
            return self.relative.attend(q, k, v, mask, positions, key_positions)
        return F.scaled_dot_product_attention(q, k, v, attn_mask=mask)

    def attention_weights(self, x: Tensor, source: Tensor, mask: Tensor | None = None,
                          positions: Tensor | None = None,
                          key_positions: Tensor | None = None) -> Tensor:
        """Softmax weights (batch, heads, queries, keys) of full attention, for plots."""
        q, (k, _) = self.queries(x, positions), self.project(source, key_positions)
        if self.relative is not None:
            return self.relative.weights(q, k, mask, positions, key_positions)
        return attention_softmax(q, k, mask)


def split_heads(t: Tensor, n_head: int) -> Tensor:
    """(batch, time, d_model) -> (batch, heads, time, head_dim), a view.

    A reshape, not unflatten: traced for ONNX, the sizes after an unflatten are recorded as
    constants, and a later step that reads them would serve only the traced length."""
    return t.reshape(t.shape[0], t.shape[1], n_head, -1).transpose(1, 2)


def merge_heads(y: Tensor) -> Tensor:
    """(batch, heads, time, head_dim) -> (batch, time, d_model)."""
    return y.transpose(1, 2).flatten(2)


def fold_groups(q: Tensor, group: int) -> Tensor:
    """Queries of `group` hypotheses per source row (beam search over one utterance's encoder
    states) as one longer query sequence per source row: (rows * group, heads, length, d) ->
    (rows, heads, group * length, d), so the keys and values stay one copy per utterance."""
    if group == 1:
        return q
    _, heads, length, head_dim = q.shape
    return q.reshape(-1, group, heads, length, head_dim).transpose(1, 2).flatten(2, 3)


def unfold_groups(y: Tensor, group: int) -> Tensor:
    """The inverse of `fold_groups` on the heads' outputs."""
    if group == 1:
        return y
    rows, heads, _, head_dim = y.shape
    return y.reshape(rows, heads, group, -1, head_dim).transpose(1, 2).flatten(0, 1)


def attention_softmax(q: Tensor, k: Tensor, mask: Tensor | None) -> Tensor:
    """softmax(q k^T / sqrt(d)) over the keys `mask` allows: the weights SDPA applies to v,
    written out (for plots and guided attention)."""
    scores = (q * q.shape[-1] ** -0.5) @ k.transpose(-1, -2)
    if mask is not None:
        scores = scores.masked_fill(~mask, float("-inf"))
    return scores.softmax(-1)


def key_padding(mask: Tensor | None, k: Tensor) -> Tensor:
    """(batch, keys), True at real keys: a key-padding `mask` (batch, 1, 1, keys) flattened,
    or every key of `k` (batch, heads, keys, head_dim) when there is no mask."""
    if mask is not None:
        return mask.reshape(mask.shape[0], -1)
    return torch.ones(k.shape[0], k.shape[2], dtype=torch.bool, device=k.device)


def local_attention(q: Tensor, k: Tensor, v: Tensor, key_padding: Tensor, window: int,
                    relative: RelativePosition | None = None) -> Tensor:
    """Attention of (batch, heads, time, head_dim) where query i sees keys |i - j| <= window.

    `key_padding` (batch, time) is True at real positions. The sequence is cut into blocks of
    `window` queries; each block attends to the `3 * window` keys around it (SDPA over blocks),
    so the work and memory are time * 3 * window, not time^2. Every query also sees itself, so
    padded positions get finite (ignored) outputs rather than NaN.
    """
    batch, heads, time, head_dim = q.shape
    size = window
    n_blocks = (time + size - 1) // size  # not -(-time // size): ONNX divides negatives towards 0
    pad = n_blocks * size - time
    span = size + 2 * window

    # Each block's keys by index (not `unfold`: its sizes are not traceable for ONNX).
    around = (torch.arange(n_blocks, device=q.device)[:, None] * size
              + torch.arange(span, device=q.device))  # (blocks, span) padded positions

    def key_blocks(t: Tensor) -> Tensor:  # (batch, heads, time, d) -> (batch * blocks, heads, span, d)
        t = F.pad(t, (0, 0, window, pad + window))[:, :, around]  # (b, h, n, span, d)
        return t.transpose(1, 2).flatten(0, 1)

    queries = F.pad(q, (0, 0, 0, pad)).reshape(batch, heads, n_blocks, size, head_dim)
    queries = queries.transpose(1, 2).flatten(0, 1)
    valid = F.pad(key_padding.float(), (window, pad + window))[:, around] > 0
    distance = (torch.arange(span, device=q.device)[None, :] - window
                - torch.arange(size, device=q.device)[:, None])  # key minus query position
    mask = (distance.abs() <= window) & valid.flatten(0, 1)[:, None, None, :] | (distance == 0)
    if relative is not None:
        out = relative(queries, key_blocks(k), key_blocks(v), relative.bucket(distance), mask)
    else:
        out = F.scaled_dot_product_attention(queries, key_blocks(k), key_blocks(v), attn_mask=mask)
    out = out.reshape(batch, n_blocks, heads, size, head_dim).transpose(1, 2).flatten(2, 3)
    return out[:, :, :time]


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
        """Every key and value so far: a cross-attention cache's, projected on its first
        step; a growing one's with `source`'s rows projected and appended."""
        if self.k is not None and not self.grows:
            return self.k, self.v
        return self.extend(*attn.project(source, positions))

    def extend(self, k: Tensor, v: Tensor) -> tuple[Tensor, Tensor]:
        """The cached keys and values followed in time by these new ones, kept for the next
        step."""
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


def packed(layers: list[nn.Linear]) -> nn.Linear:
    """One linear layer computing `layers`' outputs side by side, with their initial weights:
    drawn as separate layers draw them, so a seed gives the model it gave the separate ones."""
    device = layers[0].weight.device
    forked = [device] if device.type == "cuda" else []
    with torch.random.fork_rng(devices=forked):  # its initial weights are replaced below
        layer = nn.Linear(layers[0].in_features, sum(x.out_features for x in layers),
                          device=device)
    with torch.no_grad():
        layer.weight.copy_(torch.cat([x.weight for x in layers]))
        layer.bias.copy_(torch.cat([x.bias for x in layers]))
    return layer

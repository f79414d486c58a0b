"""The Speech-Transformer, in one readable file (after openai/whisper's `model.py`).

dimensions -> attention -> residual block -> encoder -> decoder -> model. Feature frames are the
encoder's embeddings: stacked (or conv-subsampled), linearly projected, plus a sinusoidal position
code. The decoder embeds BPE tokens, attends causally to itself and to the encoder by
cross-attention, and reads its output through the transposed token embedding.

Options from the training literature (see the seeds and README): `norm` (Pre-LN, Post-LN or
T-Fixup's initialisation without LayerNorm), `pos` (sinusoidal, or relative/rotary inside
self-attention: asr/attention.py) and `attention` (full, or local in the encoder).
"""

import math
from contextlib import contextmanager
from dataclasses import dataclass

import torch
import torch.nn.functional as F
from torch import Tensor, nn

from asr.attention import RelativePosition, Rotary, local_attention
from asr.features import FeatureConfig, FrontEnd, padding_mask
from asr.tokenizer import BOS_ID, EOS_ID, PAD_ID
from asr.untrusted import check_fields, check_ranges


@dataclass
class ModelDimensions:
    """Sizes and options of the network; `conf/model/*.yaml` fill it."""

    n_vocab: int
    n_input: int = 80
    d_model: int = 256
    n_head: int = 4
    d_ff: int = 1024
    n_encoder_layers: int = 6
    n_decoder_layers: int = 3
    dropout: float = 0.1
    subsampling: str = "stack"  # "stack" (frame stacking), "conv2d" (4x) or "none"
    stack: int = 3  # frames stacked into one encoder position when subsampling == "stack"
    conv_channels: int = 64
    norm: str = "pre"  # "pre" (Pre-LN), "post" (Post-LN) or "tfixup" (no LayerNorm, T-Fixup init)
    ctc_weight: float = 0.3  # joint CTC loss weight; 0 removes the CTC head
    label_smoothing: float = 0.1
    # "sinusoidal" (added to the embeddings), "relative" (Shaw) or "rope" (both inside
    # self-attention), or the absolute code plus one of those: "sinusoidal+rope"
    pos: str = "sinusoidal"
    max_relative_distance: int = 16  # Shaw et al.'s clipping distance k, for pos == "relative"
    attention: str = "full"  # encoder self-attention span: "full" or "local"
    attention_window: int = 16  # local attention: positions seen on each side of a position
    # Guided attention (Tachibana et al. 2018): weight of a loss that charges the last decoder
    # layer's cross-attention for mass far from the diagonal (token n of N at frame t of T
    # costs 1 - exp(-(n/N - t/T)^2 / (2 width^2))), nudging it to a monotonic alignment.
    guided_attention: float = 0.0
    guided_attention_width: float = 0.2

    def __post_init__(self) -> None:
        check_fields(self, "model")
        check_ranges(self, "model", n_vocab=(5, 1 << 20), n_input=(1, 4096), d_model=(1, 16384),
                     n_head=(1, 256), d_ff=(1, 65536), n_encoder_layers=(0, 128),
                     n_decoder_layers=(0, 128), dropout=(0, 1), stack=(1, 64),
                     conv_channels=(1, 4096), ctc_weight=(0, 1), label_smoothing=(0, 1),
                     max_relative_distance=(1, 65536), attention_window=(0, 65536),
                     guided_attention=(0, 100), guided_attention_width=(1e-3, 10))
        if self.d_model % self.n_head:
            raise ValueError(f"model.n_head ({self.n_head}) must divide model.d_model "
                             f"({self.d_model})")
        if self.subsampling == "conv2d" and self.n_input < 7:
            raise ValueError(f"model.n_input must be >= 7 for conv2d subsampling, got "
                             f"{self.n_input}")
        for name, choices in (("subsampling", ("stack", "conv2d", "none")),
                              ("norm", ("pre", "post", "tfixup")),
                              ("pos", ("sinusoidal", "relative", "rope", "sinusoidal+relative",
                                       "sinusoidal+rope")),
                              ("attention", ("full", "local"))):
            if getattr(self, name) not in choices:
                raise ValueError(f"model.{name} must be {', '.join(choices[:-1])} or {choices[-1]}, "
                                 f"got {getattr(self, name)!r}")
        if self.attention == "local" and self.attention_window < 1:
            raise ValueError(f"model.attention_window must be >= 1, got {self.attention_window}")

    @property
    def absolute_pos(self) -> bool:
        """Whether the sinusoidal code is added to the encoder and decoder embeddings."""
        return self.pos.startswith("sinusoidal")

    @property
    def attention_pos(self) -> str | None:
        """"rope" or "relative" when positions act inside self-attention, else None."""
        inside = self.pos.removeprefix("sinusoidal").removeprefix("+")
        return inside or None


def sinusoids(length: int, channels: int, device: torch.device | None = None) -> Tensor:
    """Vaswani et al.'s position code: sin/cos at geometrically spaced wavelengths."""
    position = torch.arange(length, device=device, dtype=torch.float32)[:, None]
    inv_freq = torch.exp(-math.log(10000.0) * torch.arange(0, channels, 2, device=device) / channels)
    code = torch.zeros(length, channels, device=device)
    code[:, 0::2] = torch.sin(position * inv_freq)
    code[:, 1::2] = torch.cos(position * inv_freq)
    return code


# On CPU, SDPA's kernel (forward + backward, 16 x 4 heads x 36) is 1.2-1.6x slower than
# `attention_softmax(q, k, mask) @ v` for up to ~64 keys, and faster from ~128 (measured
# 2026-11-25, 2 threads).
SHORT_KEYS = 64


def attention_softmax(q: Tensor, k: Tensor, mask: Tensor | None) -> Tensor:
    """softmax(q k^T / sqrt(d)) over the keys `mask` allows: the weights SDPA applies to v,
    written out (for short key sequences on CPU, and for plots)."""
    scores = (q * q.shape[-1] ** -0.5) @ k.transpose(-1, -2)
    if mask is not None:
        scores = scores.masked_fill(~mask, float("-inf"))
    return scores.softmax(-1)


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
                 window: int = 0) -> None:
        super().__init__()
        self.n_head = n_head
        self.query = nn.Linear(d_model, d_model)
        self.key = nn.Linear(d_model, d_model)
        self.value = nn.Linear(d_model, d_model)
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
        if cache is None and source is x and key_positions is positions:
            q, k, v = self._self_projections(x, positions)
        elif cache is not None:
            q = self.queries(x, positions)
            k, v = cache.keys_values(self, source, key_positions)
            key_positions = None  # the cache holds every key from position 0 on
        else:
            q, (k, v) = self.queries(x, positions), self.project(source, key_positions)
        batch, heads, length, head_dim = q.shape
        group = batch // k.shape[0]
        if group > 1:  # fold each utterance's hypotheses into its query axis
            q = q.reshape(k.shape[0], group, heads, length, head_dim).transpose(1, 2).flatten(2, 3)
        y = self.attend(q, k, v, mask, positions, key_positions)
        if group > 1:
            y = y.reshape(k.shape[0], heads, group, length, head_dim).transpose(1, 2).flatten(0, 1)
        return self.out(y.transpose(1, 2).flatten(2))

    def queries(self, x: Tensor, positions: Tensor | None = None) -> Tensor:
        """(batch, heads, time, head_dim), rotated to their `positions` for RoPE."""
        q = self._split(self.query(x))
        if self.rotary is None:
            return q
        return self.rotary(q, _positions(positions, q.shape[2], x.device))

    def project(self, source: Tensor, positions: Tensor | None = None) -> tuple[Tensor, Tensor]:
        """Keys and values (batch, heads, time, head_dim); keys rotated to `positions` for RoPE."""
        k, v = self._split(self._linear(source, self.key, self.value), 2).unbind(0)
        if self.rotary is not None:
            k = self.rotary(k, _positions(positions, k.shape[2], source.device))
        return k, v

    def _self_projections(self, x: Tensor, positions: Tensor | None) -> tuple[Tensor, ...]:
        """Queries, keys and values of self-attention (as `queries` and `project` give them)."""
        qkv = self._split(self._linear(x, self.query, self.key, self.value), 3)
        if self.rotary is None:
            return qkv.unbind(0)
        qk = self.rotary(qkv[:2], _positions(positions, x.shape[1], x.device))
        return qk[0], qk[1], qkv[2]

    @staticmethod
    def _linear(x: Tensor, *layers: nn.Linear) -> Tensor:
        """Several projections of `x` as one GEMM: a wider product runs faster on CPU than
        three thin ones, and the weights keep their own names in checkpoints."""
        return F.linear(x, torch.cat([layer.weight for layer in layers]),
                        torch.cat([layer.bias for layer in layers]))

    def attend(self, q: Tensor, k: Tensor, v: Tensor, mask: Tensor | None,
               positions: Tensor | None = None, key_positions: Tensor | None = None) -> Tensor:
        if self.window:
            padding = mask.reshape(mask.shape[0], -1) if mask is not None \
                else torch.ones(k.shape[0], k.shape[2], dtype=torch.bool, device=k.device)
            return local_attention(q, k, v, padding, self.window, self.relative)
        if self.relative is not None:
            return self.relative(q, k, v, self._buckets(q, k, positions, key_positions), mask)
        if q.device.type == "cpu" and k.shape[2] <= SHORT_KEYS:
            return attention_softmax(q, k, mask) @ v
        return F.scaled_dot_product_attention(q, k, v, attn_mask=mask)

    def attention_weights(self, x: Tensor, source: Tensor, mask: Tensor | None = None,
                          positions: Tensor | None = None,
                          key_positions: Tensor | None = None) -> Tensor:
        """Softmax weights (batch, heads, queries, keys) of full attention, for plots."""
        q, (k, _) = self.queries(x, positions), self.project(source, key_positions)
        if self.relative is not None:
            buckets = self._buckets(q, k, positions, key_positions)
            return self.relative.scores(q, k, buckets, mask).softmax(-1)
        return attention_softmax(q, k, mask)

    def _buckets(self, q: Tensor, k: Tensor, positions: Tensor | None,
                 key_positions: Tensor | None) -> Tensor:
        positions = _positions(positions, q.shape[2], q.device)
        key_positions = _positions(key_positions, k.shape[2], q.device)
        return self.relative.bucket(key_positions[None, :] - positions[:, None])

    def _split(self, t: Tensor, parts: int = 0) -> Tensor:
        """(batch, time, [parts *] d_model) -> ([parts,] batch, heads, time, head_dim), a view.

        Reshapes, not unflatten: traced for ONNX, the sizes after an unflatten are recorded as
        constants, and a later step that reads them would serve only the traced length."""
        batch, time = t.shape[:2]
        if not parts:
            return t.reshape(batch, time, self.n_head, -1).transpose(1, 2)
        return t.reshape(batch, time, parts, self.n_head, -1).permute(2, 0, 3, 1, 4)


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


def _positions(given: Tensor | None, length: int, device: torch.device) -> Tensor:
    return given if given is not None else torch.arange(length, device=device)


class ResidualAttentionBlock(nn.Module):
    """Self-attention, optional cross-attention, feed-forward; each wrapped Pre-LN or Post-LN.

    T-Fixup has no LayerNorm: x + layer(x), its stability coming from the initialisation.
    """

    def __init__(self, dims: ModelDimensions, cross_attention: bool, window: int = 0) -> None:
        super().__init__()
        d = dims.d_model
        self.pre_norm = dims.norm != "post"
        norm = nn.LayerNorm if dims.norm != "tfixup" else (lambda _: nn.Identity())
        self.attn = MultiHeadAttention(d, dims.n_head, dims.attention_pos,
                                       dims.max_relative_distance, window)
        self.attn_ln = norm(d)
        self.cross_attn = MultiHeadAttention(d, dims.n_head) if cross_attention else None
        self.cross_attn_ln = norm(d) if cross_attention else None
        self.mlp = nn.Sequential(nn.Linear(d, dims.d_ff), nn.ReLU(), nn.Linear(dims.d_ff, d))
        self.mlp_ln = norm(d)
        self.drop = nn.Dropout(dims.dropout)

    def forward(self, x: Tensor, mask: Tensor | None, memory: Tensor | None = None,
                memory_mask: Tensor | None = None, positions: Tensor | None = None,
                cache: "tuple[KVCache, KVCache] | None" = None) -> Tensor:
        self_cache, cross_cache = cache if cache is not None else (None, None)
        x = self._residual(x, self.attn_ln,
                           lambda h: self.attn(h, h, mask, positions, positions, cache=self_cache))
        if self.cross_attn is not None:
            x = self._residual(x, self.cross_attn_ln,
                               lambda h: self.cross_attn(h, memory, memory_mask, cache=cross_cache))
        return self._residual(x, self.mlp_ln, self.mlp)

    def _residual(self, x: Tensor, norm: nn.Module, layer) -> Tensor:
        if self.pre_norm:
            return x + self.drop(layer(norm(x)))
        return norm(x + self.drop(layer(x)))


class AudioEncoder(nn.Module):
    """Feature frames -> subsampled embeddings -> Transformer encoder states."""

    def __init__(self, dims: ModelDimensions) -> None:
        super().__init__()
        self.dims = dims
        if dims.subsampling == "conv2d":
            c = dims.conv_channels
            self.conv = nn.Sequential(nn.Conv2d(1, c, 3, 2), nn.ReLU(), nn.Conv2d(c, c, 3, 2),
                                      nn.ReLU())
            in_features = c * (((dims.n_input - 1) // 2 - 1) // 2)
        else:
            self.conv = None
            in_features = dims.n_input * self.stride
        self.embed = nn.Linear(in_features, dims.d_model)
        # Scaled like token embeddings (so the position code does not dominate); T-Fixup sets
        # this layer's output scale through its initialisation instead.
        self.scale = math.sqrt(dims.d_model) if dims.norm != "tfixup" else 1.0
        self.drop = nn.Dropout(dims.dropout)
        window = dims.attention_window if dims.attention == "local" else 0
        self.blocks = nn.ModuleList(ResidualAttentionBlock(dims, cross_attention=False, window=window)
                                    for _ in range(dims.n_encoder_layers))
        self.ln_post = nn.LayerNorm(dims.d_model) if dims.norm == "pre" else nn.Identity()

    @property
    def stride(self) -> int:
        return self.dims.stack if self.dims.subsampling == "stack" else 1

    def subsample(self, feats: Tensor, lengths: Tensor) -> tuple[Tensor, Tensor]:
        """Reduce the frame rate; padding frames must be zero (the front end ensures it)."""
        if self.conv is not None:
            x = self.conv(feats.unsqueeze(1))  # (B, C, T', F')
            lengths = ((lengths - 1) // 2 - 1) // 2
            return x.permute(0, 2, 1, 3).flatten(2), lengths.clamp(min=1)
        s = self.stride
        pad = (-feats.shape[1]) % s
        x = F.pad(feats, (0, 0, 0, pad))
        x = x.reshape(x.shape[0], x.shape[1] // s, s * x.shape[2])  # not unflatten: see _split
        return x, (lengths + s - 1) // s

    def forward(self, feats: Tensor, lengths: Tensor) -> tuple[Tensor, Tensor]:
        if self.conv is not None and feats.shape[1] < 7:
            feats = F.pad(feats, (0, 0, 0, 7 - feats.shape[1]))
        x, lengths = self.subsample(feats, lengths)
        x = self.embed(x) * self.scale  # as token embeddings are scaled, so the position
        if self.dims.absolute_pos:  # code does not dominate
            x = x + sinusoids(x.shape[1], x.shape[2], x.device)
        x = self.drop(x)
        mask = padding_mask(lengths, x.shape[1])[:, None, None, :]
        for block in self.blocks:
            x = block(x, mask)
        return self.ln_post(x), lengths


class TextDecoder(nn.Module):
    """Token ids + encoder states -> next-token logits (output tied to the embedding).

    Without cross-attention (`cross_attention=False`, no `memory`) it is a language model over
    the same tokens (`asr.lm.TokenLM`), with the same key/value cache.
    """

    def __init__(self, dims: ModelDimensions, cross_attention: bool = True) -> None:
        super().__init__()
        self.scale = math.sqrt(dims.d_model)
        self.absolute = dims.absolute_pos
        self.token_embedding = nn.Embedding(dims.n_vocab, dims.d_model, padding_idx=PAD_ID)
        nn.init.normal_(self.token_embedding.weight, std=dims.d_model**-0.5)
        self.drop = nn.Dropout(dims.dropout)
        self.blocks = nn.ModuleList(ResidualAttentionBlock(dims, cross_attention)
                                    for _ in range(dims.n_decoder_layers))
        self.ln = nn.LayerNorm(dims.d_model) if dims.norm == "pre" else nn.Identity()

    def forward(self, tokens: Tensor, memory: Tensor | None, memory_lengths: Tensor | None,
                cache: DecoderCache | None = None) -> Tensor:
        """Logits for every position of `tokens`.

        With a `cache`, `tokens` are only the tokens after the `cache.offset` already seen
        (`offset` may be a traced size: the position arithmetic stays tensor arithmetic).
        `memory` may have one row per utterance for several rows (hypotheses) of `tokens`.
        """
        offset = cache.offset if cache is not None else 0
        length = tokens.shape[1]
        positions = torch.arange(offset, offset + length, device=tokens.device)
        x = self.token_embedding(tokens) * self.scale
        if self.absolute:
            x = x + sinusoids(offset + length, x.shape[-1], x.device)[offset:]
        x = self.drop(x)
        causal = None if length == 1 else (  # one new token may see all before it
            torch.arange(offset + length, device=x.device)[None, :] <= positions[:, None])
        memory_mask = None if memory_lengths is None else \
            padding_mask(memory_lengths, self._frames(memory, cache))[:, None, None, :]
        for i, block in enumerate(self.blocks):
            layer_cache = (cache.self_attn[i], cache.cross_attn[i]) if cache is not None else None
            x = block(x, causal, memory, memory_mask, positions, layer_cache)
        if cache is not None:
            cache.offset += length
        return self.ln(x) @ self.token_embedding.weight.T

    @staticmethod
    def _frames(memory: Tensor | None, cache: DecoderCache | None) -> int:
        """Encoder frames attended to: `memory` may be None when the cache already holds the
        cross-attention keys and values (as the exported decoder step is given them)."""
        return memory.shape[1] if memory is not None else cache.cross_attn[0].k.shape[2]


class SpeechTransformer(nn.Module):
    """Front end + encoder + decoder (+ CTC head): waveforms in, token scores out."""

    def __init__(self, dims: ModelDimensions, features: FeatureConfig,
                 frontend: FrontEnd | None = None) -> None:
        """`frontend`: one already built from `features` (the network's shapes are checked
        on the meta device, where the front end's filters cannot be computed)."""
        super().__init__()
        self.dims = dims
        self.frontend = frontend or FrontEnd(features)
        self.encoder = AudioEncoder(dims)
        self.decoder = TextDecoder(dims)
        self.ctc = nn.Linear(dims.d_model, dims.n_vocab) if dims.ctc_weight > 0 else None
        if dims.norm == "tfixup":
            self._tfixup_init()

    @torch.no_grad()
    def _tfixup_init(self) -> None:
        """Huang et al. 2020 (T-Fixup), after their reference code (layer6ai-labs/T-Fixup).

        Xavier for every linear layer; Gaussian N(0, d^-1/2) token embeddings; in each encoder
        block the value and output projections of attention and both MLP layers are scaled by
        0.67 N_e^-1/4, in each decoder block (self- and cross-attention) by (9 N_d)^-1/4, and
        the input embeddings by (9 N)^-1/4 of their own stack. Our encoder's "embedding" is a
        linear map of CMVN-normalised frames: Xavier, scaled by (9 N_e)^-1/4, and not multiplied
        by sqrt(d), which gives its outputs the per-entry scale of a scaled N(0, d^-1/2) token
        embedding times sqrt(d), with weights large enough for Adam's steps. (A first version
        drew its weights from N(0, (fan_in d)^-1/2): each Adam step of 2e-3 then exceeded the
        weights themselves and every run diverged.)
        """
        dims = self.dims
        for module in self.modules():
            if isinstance(module, nn.Linear):
                nn.init.xavier_uniform_(module.weight)
                nn.init.zeros_(module.bias)
        self.encoder.embed.weight.mul_((9 * dims.n_encoder_layers) ** -0.25)
        tokens = self.decoder.token_embedding.weight
        nn.init.normal_(tokens, std=dims.d_model**-0.5).mul_((9 * dims.n_decoder_layers) ** -0.25)
        tokens[PAD_ID] = 0.0
        for blocks, scale in ((self.encoder.blocks, 0.67 * dims.n_encoder_layers**-0.25),
                              (self.decoder.blocks, (9 * dims.n_decoder_layers) ** -0.25)):
            for block in blocks:
                for attn in (block.attn, block.cross_attn):
                    if attn is not None:
                        attn.value.weight.mul_(scale)
                        attn.out.weight.mul_(scale)
                block.mlp[0].weight.mul_(scale)
                block.mlp[2].weight.mul_(scale)

    @property
    def frame_seconds(self) -> float:
        """Seconds between encoder states (`frame_seconds`)."""
        return frame_seconds(self.dims, self.frontend.cfg)

    def encode(self, wave: Tensor, lengths: Tensor) -> tuple[Tensor, Tensor]:
        """Waveforms (batch, samples) -> encoder states and their lengths."""
        feats, frames = self.frontend(wave, lengths)
        return self.encoder(feats, frames)

    def forward(self, wave: Tensor, lengths: Tensor, targets: Tensor,
                shares: tuple[float, float] = (1.0, 1.0)) -> dict[str, Tensor]:
        """Training losses for padded token `targets` (batch, max_tokens), PAD_ID as padding.

        Returns the joint `loss` = (1 - w) * attention + w * CTC, both per target token, each
        weighted by its `shares`: this batch's share of the tokens of a larger step
        (`loss_tokens`), so that gradient accumulation and DDP sum to one big batch's loss.
        """
        memory, memory_lengths = self.encode(wave, lengths)
        target_lengths = (targets != PAD_ID).sum(1)
        bos = targets.new_full((len(targets), 1), BOS_ID)  # targets may be (B, 0): all silence
        decoder_in = torch.cat([bos, targets], dim=1)
        decoder_out = torch.cat([targets, torch.full_like(bos, PAD_ID)], dim=1)
        decoder_out[torch.arange(len(targets)), target_lengths] = EOS_ID
        alignment: list[Tensor] = []
        with self._cross_attention_kept(alignment):
            logits = self.decoder(decoder_in, memory, memory_lengths)
        att = F.cross_entropy(logits.flatten(0, 1).float(), decoder_out.flatten(),
                              ignore_index=PAD_ID, label_smoothing=self.dims.label_smoothing)
        losses = {"att": att}
        if alignment:
            losses["guide"] = guided_attention_loss(alignment[0], target_lengths + 1,
                                                    memory_lengths, self.dims.guided_attention_width)
            att = att + self.dims.guided_attention * losses["guide"]
        loss = att * shares[0]
        if self.ctc is not None:
            losses["ctc"] = self.ctc_loss(memory, memory_lengths, targets, target_lengths)
            w = self.dims.ctc_weight
            loss = (1 - w) * loss + w * (losses["ctc"] * shares[1])
        losses["loss"] = loss
        return losses

    @contextmanager
    def _cross_attention_kept(self, kept: list[Tensor]):
        """While training with guided attention, append the last decoder layer's
        cross-attention weights (batch, heads, tokens, frames) to `kept`."""
        if not (self.training and self.dims.guided_attention > 0):
            yield
            return

        def keep(module: MultiHeadAttention, args: tuple, kwargs: dict) -> None:
            kept.append(module.attention_weights(*args))  # kwargs: only the (unused) cache

        handle = self.decoder.blocks[-1].cross_attn.register_forward_pre_hook(keep,
                                                                              with_kwargs=True)
        try:
            yield
        finally:
            handle.remove()

    @staticmethod
    def loss_tokens(targets: Tensor) -> tuple[int, int]:
        """How many tokens `forward`'s two losses average over for these targets: the
        attention loss over targets plus one EOS per utterance, CTC over the targets (at least
        1). Training weights micro-batches by them, so accumulated steps equal one big batch."""
        count = int((targets != PAD_ID).sum())
        return count + len(targets), max(count, 1)

    def ctc_loss(self, memory: Tensor, memory_lengths: Tensor, targets: Tensor,
                 target_lengths: Tensor) -> Tensor:
        log_probs = self.ctc(memory).float().log_softmax(-1).transpose(0, 1)
        total = F.ctc_loss(log_probs, targets, memory_lengths, target_lengths, blank=PAD_ID,
                           reduction="sum", zero_infinity=True)
        return total / target_lengths.sum().clamp(min=1)


def frame_seconds(dims: ModelDimensions, features: FeatureConfig) -> float:
    """Seconds between encoder states: the front end's hop times the subsampling (frame
    stacking, or conv2d's two stride-2 layers). State k starts at k * frame_seconds."""
    factor = 4 if dims.subsampling == "conv2d" else dims.stack if dims.subsampling == "stack" \
        else 1
    return factor * features.hop_length / features.sample_rate


def guided_attention_loss(weights: Tensor, token_lengths: Tensor, frame_lengths: Tensor,
                          width: float) -> Tensor:
    """Mean over real tokens and heads of the attention mass off the diagonal band.

    `weights` (batch, heads, tokens, frames); token n of an utterance's N tokens attending to
    frame t of its T frames costs 1 - exp(-(n/N - t/T)^2 / (2 width^2)) per unit of weight.
    """
    heads, tokens, frames = weights.shape[1:]
    n = (torch.arange(tokens, device=weights.device) + 0.5) / token_lengths[:, None]
    t = (torch.arange(frames, device=weights.device) + 0.5) / frame_lengths[:, None]
    cost = 1 - torch.exp(-(n[:, :, None] - t[:, None, :]) ** 2 / (2 * width**2))
    real = torch.arange(tokens, device=weights.device) < token_lengths[:, None]
    per_token = (weights.float() * cost[:, None]).sum(-1)  # padded frames have weight 0
    return (per_token * real[:, None]).sum() / (real.sum().clamp(min=1) * heads)

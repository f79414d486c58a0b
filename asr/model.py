"""The Speech-Transformer (after openai/whisper's `model.py`).

dimensions -> residual block -> encoder -> decoder -> model. Feature frames are the encoder's
embeddings: stacked (or conv-subsampled), linearly projected, plus a sinusoidal position code.
The decoder embeds BPE tokens, attends causally to itself and to the encoder by
cross-attention, and reads its output through the transposed token embedding. Attention itself
is `asr.attention`, its key/value caches `asr.attention`.

Options from the training literature (see the seeds and README): `norm` (Pre-LN, Post-LN or
T-Fixup's initialisation without LayerNorm), `pos` (sinusoidal, or relative/rotary inside
self-attention: `asr.positions`), `attention` (full, or local in the encoder:
`asr.attention`) and `guided_attention` (a loss on cross-attention: `asr.guided_attention`).
"""

import math
from dataclasses import dataclass

import torch
import torch.nn.functional as F
from torch import Tensor, nn

from asr.attention import DecoderCache, KVCache, MultiHeadAttention
from asr.features import FeatureConfig, FrontEnd, padding_mask
from asr.guided_attention import guided_attention_loss, weights_kept
from asr.tokenizer import BOS_ID, EOS_ID, PAD_ID
from asr.untrusted import check_fields, check_ranges

CONV2D_MIN_FRAMES = 7  # the conv2d front end's two stride-2 3x3 convolutions need this many frames


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
        if self.subsampling == "conv2d" and self.n_input < CONV2D_MIN_FRAMES:
            raise ValueError(f"model.n_input must be >= {CONV2D_MIN_FRAMES} for conv2d subsampling, got "
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
        self.cross_attn = MultiHeadAttention(d, dims.n_head, cross=True) if cross_attention else None
        self.cross_attn_ln = norm(d) if cross_attention else None
        self.mlp = nn.Sequential(nn.Linear(d, dims.d_ff), nn.ReLU(), nn.Linear(dims.d_ff, d))
        self.mlp_ln = norm(d)
        self.drop = nn.Dropout(dims.dropout)

    def forward(self, x: Tensor, mask: Tensor | None, memory: Tensor | None = None,
                memory_mask: Tensor | None = None, positions: Tensor | None = None,
                cache: tuple[KVCache, KVCache] | None = None) -> Tensor:
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
        # a reshape, not unflatten: see asr.attention.split_heads
        x = x.reshape(x.shape[0], x.shape[1] // s, s * x.shape[2])
        return x, (lengths + s - 1) // s

    def forward(self, feats: Tensor, lengths: Tensor) -> tuple[Tensor, Tensor]:
        if self.conv is not None and feats.shape[1] < CONV2D_MIN_FRAMES:
            feats = F.pad(feats, (0, 0, 0, CONV2D_MIN_FRAMES - feats.shape[1]))
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
        embedding times sqrt(d), with weights large enough for Adam's steps: drawn from
        N(0, (fan_in d)^-1/2) instead, they are smaller than one Adam step of 2e-3, and
        training diverges.
        """
        dims = self.dims
        attention = [m for m in self.modules() if isinstance(m, MultiHeadAttention)]
        packed = {id(x) for m in attention for x in m.modules() if isinstance(x, nn.Linear)}
        for module in self.modules():
            if isinstance(module, MultiHeadAttention):  # each packed projection on its own
                for weight in module.projection_weights().values():
                    nn.init.xavier_uniform_(weight)
            if isinstance(module, nn.Linear):
                if id(module) not in packed:
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
                        weights = attn.projection_weights()
                        weights["value"].mul_(scale)
                        weights["out"].mul_(scale)
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
        with weights_kept(self._guided_layer(), alignment):
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

    def _guided_layer(self) -> MultiHeadAttention | None:
        """The layer guided attention charges while training with it: the last decoder
        layer's cross-attention (its weights: batch, heads, tokens, frames)."""
        guided = self.training and self.dims.guided_attention > 0
        return self.decoder.blocks[-1].cross_attn if guided else None

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

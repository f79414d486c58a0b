"""Where positions enter attention and how far it looks; used by `asr.model.MultiHeadAttention`.

Positions (`model.pos`): the sinusoidal code of Vaswani et al. is added to the embeddings (in
`asr/model.py`); the two variants here act inside self-attention instead. Rotary embeddings
(RoPE, Su et al.) rotate queries and keys by their absolute positions, so that q_i . k_j depends
on i - j only. Relative embeddings (Shaw et al. 2018) add learned vectors of the clipped distance
clip(j - i, k) to the keys (in the scores) and to the values (in the output). Both are given the
positions explicitly, so a decoder fed only its new tokens, with earlier keys kept in a cache,
stays exact.

Span (`model.attention`): local attention lets position i see keys j with |i - j| <= window. It is
computed over overlapping blocks (blocks of `window` queries against their `3 * window` keys), so
memory grows linearly with length instead of with a T x T mask.
"""

import torch
import torch.nn.functional as F
from torch import Tensor, nn


class Rotary(nn.Module):
    """RoPE: rotate each pair (x_2i, x_2i+1) of a head by the angle position * base^(-2i/d)."""

    def __init__(self, head_dim: int, base: float = 10000.0) -> None:
        super().__init__()
        if head_dim % 2:
            raise ValueError(f"model.pos=rope needs an even head size (d_model / n_head), got {head_dim}")
        inv_freq = base ** (-torch.arange(0, head_dim, 2, dtype=torch.float32) / head_dim)
        self.register_buffer("inv_freq", inv_freq, persistent=False)  # derived: not in checkpoints

    def forward(self, x: Tensor, positions: Tensor) -> Tensor:
        """`x` (..., time, head_dim) rotated at `positions` (time,).

        Each pair is one complex number turned by a unit phase: one multiply forward and one
        backward, instead of the dozen real slices, products and a stack it takes otherwise.
        """
        angle = positions.to(self.inv_freq.dtype)[:, None] * self.inv_freq
        if torch.onnx.is_in_onnx_export():  # ONNX has no complex numbers: the same product
            re, im = x.float().reshape(*x.shape[:-1], -1, 2).unbind(-1)
            cos, sin = angle.cos(), angle.sin()
            return torch.stack([re * cos - im * sin, re * sin + im * cos], -1).flatten(-2).type_as(x)
        pairs = torch.view_as_complex(x.float().unflatten(-1, (-1, 2)))
        turned = pairs * torch.polar(torch.ones_like(angle), angle)
        return torch.view_as_real(turned).flatten(-2).type_as(x)


class RelativePosition(nn.Module):
    """Shaw et al.'s learned embeddings a^K, a^V of the distance j - i clipped to [-k, k].

    Shared by the heads, as in the paper. Their value term needs the attention weights
    themselves, so this path computes the softmax explicitly rather than calling SDPA.
    """

    def __init__(self, head_dim: int, max_distance: int) -> None:
        super().__init__()
        if max_distance < 1:
            raise ValueError(f"model.max_relative_distance must be >= 1, got {max_distance}")
        self.max_distance = max_distance
        self.key = nn.Parameter(torch.randn(2 * max_distance + 1, head_dim) * head_dim**-0.5)
        self.value = nn.Parameter(torch.randn(2 * max_distance + 1, head_dim) * head_dim**-0.5)

    def bucket(self, distance: Tensor) -> Tensor:
        """Distances j - i (any shape) -> embedding rows 0 .. 2k."""
        return distance.clamp(-self.max_distance, self.max_distance) + self.max_distance

    def scores(self, q: Tensor, k: Tensor, buckets: Tensor, mask: Tensor | None) -> Tensor:
        """Masked logits q_i . (k_j + a^K_ij) / sqrt(d), shape (..., queries, keys)."""
        bias = (q @ self.key.T.to(q.dtype)).gather(-1, buckets.expand(*q.shape[:-1], k.shape[-2]))
        logits = (q @ k.transpose(-1, -2) + bias) * q.shape[-1] ** -0.5
        return logits if mask is None else logits.masked_fill(~mask, float("-inf"))

    def forward(self, q: Tensor, k: Tensor, v: Tensor, buckets: Tensor,
                mask: Tensor | None) -> Tensor:
        """sum_j alpha_ij (v_j + a^V_ij): the value term sums the weights per distance bucket."""
        weights = self.scores(q, k, buckets, mask).softmax(-1)
        per_bucket = weights.new_zeros(*weights.shape[:-1], self.value.shape[0])
        per_bucket.scatter_add_(-1, buckets.expand_as(weights), weights)
        return weights @ v + per_bucket @ self.value.to(weights.dtype)


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

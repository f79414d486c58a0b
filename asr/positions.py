"""Where positions enter attention (`model.pos`); `asr.attention.MultiHeadAttention` composes them.

The sinusoidal code of Vaswani et al. is added to the embeddings (`asr.model.sinusoids`); the
two schemes here act inside self-attention instead. Rotary embeddings (RoPE, Su et al.) rotate
queries and keys by their absolute positions, so that q_i . k_j depends on i - j only.
Relative embeddings (Shaw et al. 2018) add learned vectors of the clipped distance clip(j - i,
k) to the keys (in the scores) and to the values (in the output). Both are given the positions
explicitly (default 0, 1, ...), so a decoder fed only its new tokens, with earlier keys kept in
a cache, stays exact.
"""

import torch
from torch import Tensor, nn


def positions_or_default(given: Tensor | None, length: int, device: torch.device) -> Tensor:
    """`given`, or 0, 1, ..., length - 1."""
    return given if given is not None else torch.arange(length, device=device)


class Rotary(nn.Module):
    """RoPE: rotate each pair (x_2i, x_2i+1) of a head by the angle position * base^(-2i/d)."""

    def __init__(self, head_dim: int, base: float = 10000.0) -> None:
        super().__init__()
        if head_dim % 2:
            raise ValueError(f"model.pos=rope needs an even head size (d_model / n_head), got {head_dim}")
        inv_freq = base ** (-torch.arange(0, head_dim, 2, dtype=torch.float32) / head_dim)
        self.register_buffer("inv_freq", inv_freq, persistent=False)  # derived: not in checkpoints

    def forward(self, x: Tensor, positions: Tensor | None = None) -> Tensor:
        """`x` (..., time, head_dim) rotated at `positions` (time,; default 0, 1, ...).

        Each pair is one complex number turned by a unit phase: one multiply forward and one
        backward, instead of the dozen real slices, products and a stack it takes otherwise.
        """
        positions = positions_or_default(positions, x.shape[-2], x.device)
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


    def attend(self, q: Tensor, k: Tensor, v: Tensor, mask: Tensor | None,
               positions: Tensor | None = None, key_positions: Tensor | None = None) -> Tensor:
        """`forward` for queries and keys at these positions (default 0, 1, ...)."""
        return self(q, k, v, self.buckets(q, k, positions, key_positions), mask)

    def weights(self, q: Tensor, k: Tensor, mask: Tensor | None, positions: Tensor | None = None,
                key_positions: Tensor | None = None) -> Tensor:
        """The attention weights alpha_ij (..., queries, keys), for plots and guided attention."""
        return self.scores(q, k, self.buckets(q, k, positions, key_positions), mask).softmax(-1)

    def buckets(self, q: Tensor, k: Tensor, positions: Tensor | None,
                key_positions: Tensor | None) -> Tensor:
        """The embedding row of each (query, key) pair, (queries, keys)."""
        positions = positions_or_default(positions, q.shape[-2], q.device)
        key_positions = positions_or_default(key_positions, k.shape[-2], q.device)
        return self.bucket(key_positions[None, :] - positions[:, None])

"""Guided attention (Tachibana et al. 2018): a training loss on the last decoder layer's
cross-attention (`model.guided_attention`), nudging it to a monotonic alignment.

`SpeechTransformer.forward` keeps that layer's weights while it runs (`weights_kept`) and adds
`guided_attention_loss` of them, times its weight, to the attention loss.
"""

from collections.abc import Iterator
from contextlib import contextmanager

import torch
from torch import Tensor

from asr.attention import MultiHeadAttention


@contextmanager
def weights_kept(attn: MultiHeadAttention | None, kept: list[Tensor]) -> Iterator[None]:
    """While inside, append the softmax weights (batch, heads, queries, keys) of every call of
    `attn` to `kept` (with None, nothing)."""
    if attn is None:
        yield
        return

    def keep(module: MultiHeadAttention, args: tuple, kwargs: dict) -> None:
        kept.append(module.attention_weights(*args))  # kwargs: only the (unused) cache

    handle = attn.register_forward_pre_hook(keep, with_kwargs=True)
    try:
        yield
    finally:
        handle.remove()


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

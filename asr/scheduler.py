"""Learning-rate schedules, as multipliers of the optimiser's `lr` (torch's LambdaLR).

Each schedule is a function of the optimiser step t = 1, 2, ... (the step about to be taken);
the learning rate of that step is `optim.lr * factor(t)`. All but `noam` with an explicit
`scale` peak at 1, so `optim.lr` is the peak learning rate whatever the schedule. Why warm up at
all: early on, Adam's second-moment estimate rests on few gradients and its adaptive step has a
large variance (Liu et al. 2019); warmup (or RAdam's rectification, `optim=radam`) tames it.
"""

import math
from collections.abc import Callable

from torch.optim import Optimizer
from torch.optim.lr_scheduler import LambdaLR


def _schedule(optimizer: Optimizer, factor: Callable[[int], float]) -> LambdaLR:
    """LambdaLR counts from 0 (the first step); the formulas count steps from 1."""
    return LambdaLR(optimizer, lambda step: factor(step + 1))


def noam(optimizer: Optimizer, warmup_steps: int, d_model: int, scale: float | None = None) -> LambdaLR:
    """Vaswani et al.: d_model^-0.5 * min(t^-0.5, t * warmup^-1.5), times `scale`.

    `scale: null` (the default) sets scale = sqrt(d_model * warmup), which puts the peak (at
    t = warmup) at exactly 1, i.e. at `optim.lr`, as ESPnet's WarmupLR does: the paper's own
    numbers (peak 7e-4 for d = 512, warmup 4000) are then `optim.lr=1 scheduler.scale=1`.
    Normalised, it is the same curve as `warmup_inverse_sqrt`.
    """
    if scale is None:
        scale = math.sqrt(d_model * warmup_steps)
    return _schedule(optimizer, lambda t: scale * d_model**-0.5 * min(t**-0.5, t * warmup_steps**-1.5))


def warmup_inverse_sqrt(optimizer: Optimizer, warmup_steps: int) -> LambdaLR:
    """Linear warmup to 1 over `warmup_steps`, then decay as sqrt(warmup / t)."""
    return _schedule(optimizer, lambda t: min(t / warmup_steps, math.sqrt(warmup_steps / t)))


class WarmupCosine:
    """The factor of `warmup_cosine` at step t = 1, 2, ...; a callable object rather than a
    closure, so that the schedule's state (LambdaLR.state_dict) keeps its end, which a run under
    a time budget moves to where the budget ends (`set_schedule_end`)."""

    def __init__(self, warmup_steps: int, total_steps: int, final: float) -> None:
        self.warmup_steps, self.total_steps, self.final = warmup_steps, total_steps, final

    def __call__(self, step: int) -> float:
        t = step + 1  # LambdaLR counts from 0 (the first step)
        if t >= self.total_steps:  # also an end inside the warmup (a budget shorter than it)
            return self.final
        if t < self.warmup_steps:
            return t / self.warmup_steps
        progress = (t - self.warmup_steps) / (self.total_steps - self.warmup_steps)
        return self.final + (1 - self.final) * 0.5 * (1 + math.cos(math.pi * progress))


def warmup_cosine(optimizer: Optimizer, warmup_steps: int, total_steps: int,
                  final: float = 0.0) -> LambdaLR:
    """Linear warmup to 1, then a half cosine down to `final` at `total_steps` (flat after).

    `total_steps: null` in the config is filled in by training (trainer.max_steps, or epochs
    times batches per epoch); under a time budget (trainer.max_minutes) training moves it to
    the step the budget ends at.
    """
    if total_steps <= warmup_steps:
        raise ValueError(f"scheduler.total_steps ({total_steps}) must exceed "
                         f"scheduler.warmup_steps ({warmup_steps})")
    return LambdaLR(optimizer, WarmupCosine(warmup_steps, total_steps, final))


def schedule_end(scheduler: LambdaLR) -> int | None:
    """The step a schedule ends at, or None for one that has no end (noam, warmups)."""
    ends = [f.total_steps for f in scheduler.lr_lambdas if isinstance(f, WarmupCosine)]
    return ends[0] if ends else None


def set_schedule_end(scheduler: LambdaLR, steps: int) -> None:
    """Move the end of a schedule that has one; the learning rate of the steps after the next
    `scheduler.step()` follows it."""
    for factor in scheduler.lr_lambdas:
        if isinstance(factor, WarmupCosine):
            factor.total_steps = steps


def linear_warmup(optimizer: Optimizer, warmup_steps: int) -> LambdaLR:
    """min(1, t / tau): the plain linear warmup, then constant."""
    return _schedule(optimizer, lambda t: min(1.0, t / warmup_steps))


def exponential_warmup(optimizer: Optimizer, tau: float) -> LambdaLR:
    """1 - exp(-t / tau) (Ma & Yarats), then (asymptotically) constant."""
    return _schedule(optimizer, lambda t: 1 - math.exp(-t / tau))


def untuned_exponential(optimizer: Optimizer) -> LambdaLR:
    """Ma & Yarats' untuned exponential warmup: tau = 1 / (1 - beta2) of the optimiser's Adam."""
    return exponential_warmup(optimizer, 1 / (1 - _beta2(optimizer)))


def untuned_linear(optimizer: Optimizer) -> LambdaLR:
    """Ma & Yarats' untuned linear warmup: over 2 / (1 - beta2) steps, then constant."""
    return linear_warmup(optimizer, 2 / (1 - _beta2(optimizer)))


def constant(optimizer: Optimizer) -> LambdaLR:
    """No schedule: `optim.lr` throughout."""
    return LambdaLR(optimizer, lambda step: 1.0)


def _beta2(optimizer: Optimizer) -> float:
    betas = optimizer.defaults.get("betas")
    if betas is None:
        raise ValueError(f"untuned warmup reads beta2 from an Adam-type optimizer; "
                         f"{type(optimizer).__name__} has no betas")
    return betas[1]

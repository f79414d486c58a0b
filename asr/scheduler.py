"""Learning-rate schedules, as multipliers of the optimiser's `lr` (torch's LambdaLR).

`optim.lr` is therefore the peak learning rate, whatever the schedule.
"""

from torch.optim import Optimizer
from torch.optim.lr_scheduler import LambdaLR


def noam(optimizer: Optimizer, warmup_steps: int) -> LambdaLR:
    """Vaswani et al.'s schedule: linear warmup, then decay with the inverse square root of the step.

    The paper's lr = d_model^-0.5 * min(step^-0.5, step * warmup^-1.5) is this curve scaled so
    that its peak, reached at `warmup_steps`, equals `optim.lr` (as ESPnet's WarmupLR does).
    """

    def factor(step: int) -> float:
        step = max(step, 1)
        return warmup_steps**0.5 * min(step**-0.5, step * warmup_steps**-1.5)

    return LambdaLR(optimizer, factor)


def constant(optimizer: Optimizer) -> LambdaLR:
    """No schedule: `optim.lr` throughout."""
    return LambdaLR(optimizer, lambda step: 1.0)

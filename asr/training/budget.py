"""How long a run takes, and the time budget that bounds it (`trainer.max_minutes`).

`Clock` measures this process's speed (a resumed run may be on another machine): seconds per
optimiser step, data loading and saves included, and per dev evaluation. From them it
forecasts the run's end: where its epochs end (trainer.max_epochs, or trainer.max_steps) or
where the budget does, whichever comes first. The budget counts the wall time of training
since the run started, over every resumed part (`TrainState.run_seconds`): steps, dev
evaluations, saves; not the setup before the first step (data, tokenizer, CMVN statistics).

Under a budget the run stops between steps once the time left is what its end needs: a dev
evaluation of the weights it stopped with, and another of the averaged weights when
trainer.average_checkpoints asks. Until a dev evaluation has been timed, one is taken to cost
a training step per dev batch. The steps the time left holds (`budget_steps`) leave time for
the dev evaluation of each epoch that ends before the budget; a schedule that decays to an end
(cosine) is told to end there (`schedule_end`), estimated again after every step, so that its
learning rate reaches its final value at the budget's end whatever the machine's speed.

`Budget` is what the trainer holds: the clock, whether the budget is spent, where it cut the
epoch it stopped in and the schedule's end, decided by every rank together.
"""

import math
import time
from collections.abc import Callable
from dataclasses import dataclass

from torch.optim.lr_scheduler import LambdaLR

from asr.scheduler import set_schedule_end


@dataclass(frozen=True)
class Plan:
    """What the run is asked to do, from the config and the loaders."""

    max_epochs: int
    max_steps: int | None
    steps_per_epoch: int  # optimiser steps (groups of micro-batches)
    dev_batches: int
    final_evals: int  # dev evaluations after the last step: 1, or 2 with averaging
    limit: float | None  # seconds (trainer.max_minutes), None: no budget


@dataclass(frozen=True)
class Forecast:
    """When the run will end, at the speed measured so far, and what ends it."""

    epoch_seconds: float  # one epoch: its steps and its dev evaluation
    eval_seconds: float
    left: float  # seconds until the run ends (its final evaluations included)
    by_budget: bool  # the budget ends it before its epochs do
    epochs_left_seconds: float  # what the remaining epochs need, their evaluations included
    epochs_at_end: float  # epochs done by the end (fractional when the budget cuts one)


class Clock:
    """The run's elapsed time and measured speed; `before`: seconds of its earlier parts,
    `eval_time`: the seconds of their last dev evaluation (what a resumed run's end needs)."""

    def __init__(self, plan: Plan, before: float, eval_time: float | None = None,
                 now: Callable[[], float] = time.monotonic) -> None:
        self.plan, self.before, self.eval_time, self.now = plan, before, eval_time, now
        self.started = now()
        self.steps, self.step_time = 0, 0.0

    def elapsed(self) -> float:
        return self.before + self.now() - self.started

    def stepped(self, seconds: float) -> None:
        self.steps, self.step_time = self.steps + 1, self.step_time + seconds

    def evaluated(self, seconds: float) -> None:
        self.eval_time = seconds

    def step_seconds(self) -> float | None:
        return self.step_time / self.steps if self.steps else None

    def eval_seconds(self) -> float:
        """The last dev evaluation's seconds, or a training step's per dev batch before one."""
        if self.eval_time is not None:
            return self.eval_time
        return self.plan.dev_batches * (self.step_seconds() or 0.0)

    def time_left(self) -> float:
        """Seconds of the budget left for steps and epochs' evaluations (inf: no budget)."""
        if self.plan.limit is None:
            return math.inf
        return self.plan.limit - self.elapsed() - self.plan.final_evals * self.eval_seconds()

    def out_of_time(self) -> bool:
        """The run must stop now to end (final evaluations included) within the budget."""
        return self.time_left() <= 0

    def budget_steps(self, into_epoch: int) -> float | None:
        """Steps the budget's time left holds at the measured speed, `into_epoch` steps into
        the current epoch, each epoch that ends before the budget costing a dev evaluation
        (None: no budget, or no step timed yet in this process)."""
        per_step = self.step_seconds()
        if self.plan.limit is None or per_step is None:
            return None
        left, steps, evals = self.time_left(), self.plan.steps_per_epoch, self.eval_seconds()
        to_end = steps - into_epoch
        if left <= to_end * per_step:  # the budget ends in this epoch
            return max(0.0, left / per_step)
        left = max(0.0, left - to_end * per_step - evals)
        epochs, rest = divmod(left, steps * per_step + evals)
        return to_end + epochs * steps + min(rest / per_step, steps)

    def schedule_end(self, configured: int, step: int, into_epoch: int) -> int:
        """The step a decaying schedule ends at: `configured` (the epochs'), or earlier where
        the budget ends, `step` being the steps taken, `into_epoch` of them in this epoch."""
        fits = self.budget_steps(into_epoch)
        return configured if fits is None else min(configured, step + int(fits))

    def forecast(self, step: int, epoch: int) -> Forecast | None:
        """The end, seen after `epoch` epochs and `step` steps (None: no step timed yet)."""
        per_step, plan = self.step_seconds(), self.plan
        if per_step is None:
            return None
        steps = (plan.max_epochs - epoch) * plan.steps_per_epoch
        if plan.max_steps is not None:
            steps = min(steps, max(0, plan.max_steps - step))
        evals = math.ceil(steps / plan.steps_per_epoch) + plan.final_evals - 1
        epochs_left_seconds = steps * per_step + evals * self.eval_seconds()
        fits = self.budget_steps(0)
        by_budget = fits is not None and fits < steps
        if by_budget:
            left = self.plan.limit - self.elapsed()
            at_end = epoch + fits / plan.steps_per_epoch
        else:
            left, at_end = epochs_left_seconds, epoch + steps / plan.steps_per_epoch
        eval_seconds = self.eval_seconds()
        return Forecast(per_step * plan.steps_per_epoch + eval_seconds, eval_seconds, left,
                        by_budget, epochs_left_seconds, at_end)


Agree = Callable[[list[int]], list[int]]  # the element-wise minimum over every rank


class Budget:
    """The run's time budget (trainer.max_minutes) as the trainer holds it: its clock, whether
    it is spent, where it cut the epoch it stopped in (batches done, of how many), and the step
    a decaying schedule ends at. Without one (`limited` false) it never stops the run and the
    schedule ends where its config says (`configured_end`: 0 for a schedule with no end)."""

    def __init__(self, clock: Clock, configured_end: int) -> None:
        self.clock, self.configured_end = clock, configured_end
        self.spent = False
        self.cut: tuple[int, int] | None = None

    @property
    def limited(self) -> bool:
        """Whether the run has a budget: the one place that asks."""
        return self.clock.plan.limit is not None

    def start(self, scheduler: LambdaLR) -> None:
        """A resumed run that had a budget and has none now ends its schedule at the epochs'
        end again."""
        if not self.limited:
            set_schedule_end(scheduler, self.configured_end)

    def must_stop(self) -> bool:
        """Whether this process's clock says the run must stop now to end within the budget.
        Changes nothing: `sync_schedule` takes the decision with the other ranks."""
        return self.limited and self.clock.out_of_time()

    def sync_schedule(self, scheduler: LambdaLR, step: int, into_epoch: int,
                      agree: Agree | None) -> bool:
        """Under a budget: stop or go, and the schedule's end where the budget ends (`step`
        steps taken, `into_epoch` of them in this epoch), taken by every rank together (the
        earliest any sees, through `agree`; None: one process) so that they stop at the same
        step with the same learning rates. Moves the schedule's end, records whether the
        budget is spent and returns it."""
        if not self.limited:
            return False
        stop = self.must_stop()
        end = self.clock.schedule_end(self.configured_end, step, into_epoch)
        if agree is not None:
            going, end = agree([int(not stop), end])
            stop = not going
        set_schedule_end(scheduler, end)
        self.spent = stop
        return stop

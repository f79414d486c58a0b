"""Learning-rate schedules against their formulas, through the configs users pick them with."""

import math

import pytest
import torch
from hydra.utils import instantiate

from asr import CONF_DIR
from asr import scheduler as schedules
from asr.training.budget import Budget, Clock, Plan
from helpers import train_config

pytestmark = pytest.mark.tier("fast")


def lrs(make, steps: int, lr: float = 2e-3, betas=(0.9, 0.98), **kwargs) -> list[float]:
    """The learning rate each of the first `steps` optimiser steps really uses."""
    param = torch.zeros(1, requires_grad=True)
    optimizer = torch.optim.Adam([param], lr=lr, betas=betas)
    sched = make(optimizer, **kwargs)
    used = []
    for _ in range(steps):
        used.append(optimizer.param_groups[0]["lr"])
        optimizer.step()
        sched.step()
    return used


def test_noam_is_the_papers_formula_and_peaks_at_optim_lr_by_default():
    d, warmup = 512, 400
    exact = lrs(schedules.noam, 800, lr=1.0, warmup_steps=warmup, d_model=d, scale=1.0)
    for t in (1, 100, 400, 500, 800):
        assert exact[t - 1] == pytest.approx(d**-0.5 * min(t**-0.5, t * warmup**-1.5), rel=1e-9)
    assert max(exact) == pytest.approx(d**-0.5 * warmup**-0.5)
    peaked = lrs(schedules.noam, 800, lr=2e-3, warmup_steps=warmup, d_model=d)
    assert max(peaked) == pytest.approx(2e-3) and peaked.index(max(peaked)) == warmup - 1
    same = lrs(schedules.warmup_inverse_sqrt, 800, lr=2e-3, warmup_steps=warmup)
    assert same == pytest.approx(peaked, rel=1e-9)
    sgd = torch.optim.SGD([torch.zeros(1, requires_grad=True)], lr=1.0)
    seed_figure = schedules.noam(sgd, warmup_steps=4000, d_model=512, scale=1.0).lr_lambdas[0]
    assert seed_figure(3999) == pytest.approx(6.988e-4, rel=1e-3)  # step 4000: the peak


def test_inverse_sqrt_cosine_linear_exponential():
    inv = lrs(schedules.warmup_inverse_sqrt, 400, lr=1.0, warmup_steps=100)
    assert inv[49] == pytest.approx(0.5) and inv[399] == pytest.approx(math.sqrt(100 / 400))
    cos = lrs(schedules.warmup_cosine, 320, lr=1.0, warmup_steps=100, total_steps=300, final=0.1)
    assert cos[49] == pytest.approx(0.5) and cos[99] == pytest.approx(1.0)
    assert cos[199] == pytest.approx(0.1 + 0.9 * 0.5)  # half-way down the cosine
    assert cos[299] == pytest.approx(0.1) and cos[319] == pytest.approx(0.1)
    lin = lrs(schedules.linear_warmup, 200, lr=1.0, warmup_steps=100)
    assert lin[24] == pytest.approx(0.25) and lin[99] == lin[199] == 1.0
    exp = lrs(schedules.exponential_warmup, 300, lr=1.0, tau=50)
    for t in (1, 50, 300):
        assert exp[t - 1] == pytest.approx(1 - math.exp(-t / 50))


def test_untuned_warmups_read_beta2_from_the_optimizer():
    exp = lrs(schedules.untuned_exponential, 200, lr=1.0, betas=(0.9, 0.98))  # tau = 50
    assert exp[49] == pytest.approx(1 - math.exp(-1))
    lin = lrs(schedules.untuned_linear, 200, lr=1.0, betas=(0.9, 0.999))  # over 2000 steps
    assert lin[199] == pytest.approx(200 * 0.001 / 2)
    sgd = torch.optim.SGD([torch.zeros(1, requires_grad=True)], lr=1.0)
    with pytest.raises(ValueError, match="SGD has no betas"):
        schedules.untuned_linear(sgd)


def test_cosine_needs_an_end_after_its_warmup():
    sgd = torch.optim.SGD([torch.zeros(1, requires_grad=True)], lr=1.0)
    with pytest.raises(ValueError, match=r"total_steps \(100\) must exceed"):
        schedules.warmup_cosine(sgd, warmup_steps=100, total_steps=100)


def run_under_budget(step_seconds: list[float], eval_seconds: float, limit: float,
                     steps_per_epoch: int = 50) -> tuple[list[float], float]:
    """A cosine schedule in the trainer's loop under a time budget, on a clock that moves by
    `step_seconds` (cycled) per step and `eval_seconds` per epoch's dev evaluation: the
    learning rate of every step taken, and the elapsed time when the run stopped."""
    now = [0.0]
    plan = Plan(max_epochs=100, max_steps=None, steps_per_epoch=steps_per_epoch, dev_batches=5,
                final_evals=2, limit=limit)
    clock = Clock(plan, before=0.0, now=lambda: now[0])
    budget = Budget(clock, configured_end=5000)
    optimizer = torch.optim.Adam([torch.zeros(1, requires_grad=True)], lr=1.0)
    sched = schedules.warmup_cosine(optimizer, warmup_steps=20, total_steps=5000, final=0.1)
    used, step = [], 0
    while True:
        used.append(optimizer.param_groups[0]["lr"])
        optimizer.step()
        sched.step()
        seconds = step_seconds[step % len(step_seconds)]
        step += 1
        now[0] += seconds
        clock.stepped(seconds)
        if step % steps_per_epoch == 0:
            now[0] += eval_seconds
            clock.evaluated(eval_seconds)
        if budget.sync_schedule(sched, step, step % steps_per_epoch, agree=None):
            assert budget.spent
            return used, now[0]


def cosine(total_steps: int = 5000):
    optimizer = torch.optim.Adam([torch.zeros(1, requires_grad=True)], lr=1.0)
    return schedules.warmup_cosine(optimizer, warmup_steps=20, total_steps=total_steps, final=0.1)


def test_without_a_budget_the_run_never_stops_and_the_schedule_ends_where_configured():
    """A resumed run that had a budget (its schedule's end moved to 400) and has none now:
    the end goes back to the configured 5000, and the budget stops nothing."""
    plan = Plan(max_epochs=2, max_steps=None, steps_per_epoch=10, dev_batches=1, final_evals=1,
                limit=None)
    budget, sched = Budget(Clock(plan, before=1e9), configured_end=5000), cosine()
    schedules.set_schedule_end(sched, 400)
    budget.start(sched)
    assert sched.lr_lambdas[0].total_steps == 5000 and not budget.limited
    assert not budget.must_stop() and not budget.sync_schedule(sched, 10, 0, agree=None)
    assert not budget.spent and sched.lr_lambdas[0].total_steps == 5000


def test_must_stop_changes_nothing_and_the_ranks_agree_on_the_earliest_end():
    """must_stop reads the clock only; sync_schedule takes the stop and the end every rank
    agrees on (here another rank is still going, and ends the schedule earlier)."""
    now = [0.0]
    plan = Plan(max_epochs=100, max_steps=None, steps_per_epoch=50, dev_batches=5, final_evals=1,
                limit=10.0)
    budget, sched = Budget(Clock(plan, before=0.0, now=lambda: now[0]), 5000), cosine()
    budget.clock.stepped(0.1)
    now[0] = 20.0  # past the budget on this rank
    assert budget.must_stop() and budget.must_stop() and not budget.spent
    assert sched.lr_lambdas[0].total_steps == 5000
    seen = []
    agree = lambda values: seen.append(values) or [1, 123]  # noqa: E731 (the other rank goes on)
    assert budget.sync_schedule(sched, 7, 7, agree) is False and not budget.spent
    assert seen == [[0, 7]]  # this rank: stop, and no step left (the end at the step taken)
    assert sched.lr_lambdas[0].total_steps == 123


def test_a_time_budget_ends_the_cosine_at_its_final_value():
    """The epochs would take 5000 steps; a budget of 60 s holds about 400 at 0.1 s a step, 0.5 s
    per dev evaluation and two evaluations at the end: the run stops within a step of the
    time its end needs, on the schedule's final value, having decayed smoothly to it."""
    used, stopped = run_under_budget([0.1], eval_seconds=0.5, limit=60.0)
    assert 60.0 - 2 * 0.5 - 0.1 < stopped < 60.0 - 2 * 0.5 + 1e-6
    assert used[-1] == pytest.approx(0.1)
    assert max(used) == pytest.approx(1.0) and used.index(max(used)) == 19  # the warmup's end
    decay = used[19:]
    assert all(later <= earlier + 1e-12 for earlier, later in zip(decay[:-1], decay[1:], strict=True))
    assert decay[len(decay) // 2] == pytest.approx(0.55, abs=0.05)  # half-way: half-way down
    # steps whose time varies (a loaded machine): still on its final value at the budget's end
    uneven, _ = run_under_budget([0.05, 0.1, 0.2], eval_seconds=0.5, limit=60.0)
    assert uneven[-1] == pytest.approx(0.1) and min(uneven[19:]) == pytest.approx(0.1)


@pytest.mark.parametrize("name", sorted(p.stem for p in (CONF_DIR / "scheduler").glob("*.yaml")))
@pytest.mark.parametrize("optim", ["adam", "adamw", "radam"])
def test_every_config_choice_instantiates(tmp_path, name, optim):
    cfg = train_config(tmp_path, tmp_path / "unused.jsonl", f"scheduler={name}", f"optim={optim}")
    if "total_steps" in cfg.scheduler:
        cfg.scheduler.total_steps = 1000
    optimizer = instantiate(cfg.optim, params=[torch.zeros(1, requires_grad=True)])
    assert type(optimizer).__name__ == {"adam": "Adam", "adamw": "AdamW", "radam": "RAdam"}[optim]
    sched = instantiate(cfg.scheduler, optimizer=optimizer)
    lr = optimizer.param_groups[0]["lr"]
    assert 0 < lr <= cfg.optim.lr
    if name in ("none", "constant"):
        assert lr == cfg.optim.lr
    assert sched.get_last_lr()[0] == lr

"""Learning-rate schedules against their formulas, through the configs users pick them with."""

import math

import pytest
import torch
from hydra.utils import instantiate

from asr import CONF_DIR
from asr import scheduler as schedules
from conftest import train_config


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

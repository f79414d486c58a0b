"""Crash safety: training killed with SIGKILL at random points resumes to the same weights.

`python -m asr.train` runs a tiny model on four real utterances (CPU, one thread, dropout and
SpecAugment on, so the RNG states matter), saving its state after every step. It is killed
five times at random moments and resumed each time; every file it leaves behind loads, and
the final weights, and the training curves beside them, equal, bit for bit, those of a run that
was never interrupted.
"""

import json
import os
import random
import signal
import subprocess
import sys
import time

import pytest
import torch

from asr.checkpoint import CHECKPOINT, METRICS, WEIGHTS, load_model_dir, load_torch
from asr.curves import CSV_FILE, EPOCH_KEYS
from asr.train import LOCK
from helpers import ROOT, small_real_set, train_config, write_manifest

pytestmark = [pytest.mark.tier("fast"), pytest.mark.data]

RUN = ["model=tiny", "model.dropout=0.1", "tokenizer.vocab_size=30", "data.batch_size=1",
       "trainer.max_epochs=5", "trainer.save_every_steps=1", "trainer.num_threads=1",
       "trainer.log_every=3"]
STEPS = 20  # 4 utterances x 5 epochs


def launch(manifest, out) -> subprocess.Popen:
    return subprocess.Popen(
        [sys.executable, "-m", "asr.train", f"data.train_manifest={manifest}",
         f"data.dev_manifest={manifest}", f"trainer.out_dir={out}", "trainer.progress=false",
         "trainer.resume=true", *RUN], cwd=ROOT, stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT, text=True, env={**os.environ, "PYTHONUNBUFFERED": "1"})


def wait_for_step(out, step: int, run: subprocess.Popen) -> None:
    """Until the run has saved a checkpoint of its own, at `step` or later (or has stopped)."""
    def stamp():
        return (out / CHECKPOINT).stat().st_mtime_ns if (out / CHECKPOINT).exists() else None

    seen = before = stamp()
    while run.poll() is None:
        if stamp() != seen:
            seen = stamp()
            if seen != before and load_torch(out / CHECKPOINT)["state"]["step"] >= step:
                return
        time.sleep(0.01)


def check_everything_loads(out) -> list[str]:
    """Every file in the model directory loads; returns the temp files a kill left (if any)."""
    names = {p.name for p in out.iterdir()} - {"hydra"}
    partial = sorted(n for n in names if n.startswith(".") and n.endswith(".tmp"))
    if (out / WEIGHTS).exists():
        load_model_dir(out)  # config.yaml, model.pt, tokenizer.model
    if (out / CHECKPOINT).exists():
        assert set(load_torch(out / CHECKPOINT)) == {"model", "optimizer", "scheduler", "state",
                                                     "rng", "format"}
    if (out / METRICS).exists():
        json.loads((out / METRICS).read_text())
    if (out / CSV_FILE).exists():
        rows = (out / CSV_FILE).read_text().splitlines()
        assert rows[0] == "step,metric,value" and all(len(r.split(",")) == 3 for r in rows)
    assert names - set(partial) <= {"config.yaml", "model.pt", "tokenizer.model", "checkpoint.pt",
                                    "metrics.json", LOCK, CSV_FILE}
    return partial


@pytest.mark.train
def test_sigkill_five_times_then_resume_equals_an_uninterrupted_run(tmp_path):
    from asr.train import Trainer

    manifest = write_manifest(tmp_path / "train.jsonl", small_real_set()[:4])
    straight = Trainer(train_config(tmp_path / "straight", manifest, *RUN))
    straight.fit()

    out, rng = tmp_path / "killed", random.Random(8)
    # Kill after these steps plus a short random delay, far enough from the end that even a
    # fast machine cannot finish the run within the delay.
    targets = sorted(rng.sample(range(STEPS - 8), 5))
    resumed_at = []
    for target in targets:
        run = launch(manifest, out)
        wait_for_step(out, target, run)
        time.sleep(rng.uniform(0.0, 0.05))
        assert run.poll() is None, f"finished before it could be killed:\n{run.stdout.read()}"
        run.send_signal(signal.SIGKILL)
        output = run.communicate()[0]
        assert run.returncode == -signal.SIGKILL
        resumed_at += [line for line in output.splitlines() if "resumed from" in line]
        check_everything_loads(out)
    final = launch(manifest, out)
    output = final.communicate(timeout=300)[0]
    assert final.returncode == 0, output
    assert check_everything_loads(out) == []  # the killed writes' temp files are gone
    # every killed run after the first resumed from its predecessor's checkpoint
    assert len(resumed_at) == 4 and any(" 0 batch" not in line for line in resumed_at), resumed_at

    weights = load_torch(out / CHECKPOINT)["model"]
    for name, tensor in straight.model.state_dict().items():
        assert torch.equal(weights[name], tensor), name
    history = json.loads((out / METRICS).read_text())["epochs"]
    assert [(e["step"], e["train_loss"], e["dev_loss"]) for e in history] == \
        [(e["step"], e["train_loss"], e["dev_loss"]) for e in straight.state.history]
    curves = (out / CSV_FILE).read_text().splitlines()
    straight_curves = (tmp_path / "straight" / "model" / CSV_FILE).read_text().splitlines()
    different = {"epoch/audio_sec_per_sec"}  # a speed, measured by each run
    assert [r for r in curves if r.split(",")[1] not in different] == \
        [r for r in straight_curves if r.split(",")[1] not in different]
    assert len(curves) == 1 + 2 * (STEPS // 3) + 5 * len(EPOCH_KEYS)  # header, curve, epochs

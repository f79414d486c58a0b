"""Data-parallel training: two gloo processes under torchrun take the same steps as one process
accumulating their micro-batches, and gradient accumulation is the big batch it stands for."""

import json
import os
import subprocess
import sys

import pytest
import torch

from asr.checkpoint import CHECKPOINT, load_torch
from asr.train import Trainer
from helpers import COMMANDS, ROOT, small_real_set, train_config, write_manifest

pytestmark = [pytest.mark.tier("fast"), pytest.mark.data]

RUN = ["model=tiny", "tokenizer.vocab_size=30", "data.batch_size=1", "trainer.max_epochs=2",
       "trainer.num_threads=1", "scheduler.warmup_steps=2"]


def weights(out) -> dict[str, torch.Tensor]:
    return load_torch(out / CHECKPOINT)["model"]


def assert_same_weights(a: dict, b: dict, atol: float) -> None:
    """Equal to `atol`, except attention key biases (the middle third of a packed `qkv.bias`,
    the first half of a `kv.bias`): softmax ignores a shift shared by all keys, so their true
    gradient is 0 and what they get is float rounding noise, which Adam (dividing by its own
    RMS) turns into full-size steps that differ run to run."""
    assert a.keys() == b.keys()
    for name in a:
        x, y = without_key_biases(name, a[name]), without_key_biases(name, b[name])
        assert torch.allclose(x, y, atol=atol, rtol=0), (name, (x - y).abs().max().item())


def without_key_biases(name: str, t: torch.Tensor) -> torch.Tensor:
    if name.endswith("qkv.bias"):
        q, _, v = t.chunk(3)
        return torch.cat([q, v])
    return t.chunk(2)[1] if name.endswith(".kv.bias") else t


@pytest.mark.subprocess
@pytest.mark.train
def test_two_ranks_equal_one_process_over_the_same_global_batch(tmp_path):
    """2 ranks x 2 accumulated micro-batches == 1 process x 4: same steps, weights, dev scores.

    The 8 real utterances, one per micro-batch, make 2 steps per epoch either way."""
    manifest = write_manifest(tmp_path / "train.jsonl", small_real_set())
    ddp_out = tmp_path / "ddp"
    run = subprocess.run(
        [sys.executable, "-m", "torch.distributed.run", "--standalone", "--nproc_per_node=2",
         "-m", "asr.train", "trainer=ddp", f"data.train_manifest={manifest}",
         f"data.dev_manifest={manifest}", f"trainer.out_dir={ddp_out}", "trainer.progress=false",
         "trainer.accumulate_grad_batches=2", *RUN],
        cwd=ROOT, capture_output=True, text=True, timeout=300,
        env={**os.environ, "OMP_NUM_THREADS": "1"})
    assert run.returncode == 0, run.stdout[-2000:] + run.stderr[-3000:]
    assert run.stdout.count("epoch 2:") == 1  # rank 0 alone logs

    single = Trainer(train_config(tmp_path / "one", manifest, "trainer.accumulate_grad_batches=4",
                                  *RUN))
    single.fit()
    ddp_state = load_torch(ddp_out / CHECKPOINT)["state"]
    assert ddp_state["step"] == single.state.step == 4
    assert_same_weights(weights(ddp_out), weights(tmp_path / "one" / "model"), atol=1e-5)
    ddp_history = json.loads((ddp_out / "metrics.json").read_text())["epochs"]
    for ddp_epoch, epoch in zip(ddp_history, single.state.history, strict=True):
        assert abs(ddp_epoch["train_loss"] - epoch["train_loss"]) < 1e-4
        assert abs(ddp_epoch["dev_loss"] - epoch["dev_loss"]) < 1e-4  # dev: both ranks' shares
        assert ddp_epoch["dev_wer"] == epoch["dev_wer"]


@pytest.mark.subprocess
def test_ranks_stop_together_at_a_time_budget(tmp_path):
    """Under trainer.max_minutes every rank stops at the same step with the same schedule's
    end (the first rank to see the budget's end stops them all): the run ends, none left
    waiting on a collective the other has left."""
    manifest = write_manifest(tmp_path / "train.jsonl", small_real_set())
    out = tmp_path / "ddp"
    run = subprocess.run(
        [sys.executable, "-m", "torch.distributed.run", "--standalone", "--nproc_per_node=2",
         "-m", "asr.train", "trainer=ddp", f"data.train_manifest={manifest}",
         f"data.dev_manifest={manifest}", f"trainer.out_dir={out}", "trainer.progress=false",
         *(a for a in RUN if not a.startswith("trainer.max_epochs=")), "trainer.max_epochs=1000",
         "trainer.max_minutes=0.05", "scheduler=cosine"],
        cwd=ROOT, capture_output=True, text=True, timeout=300,
        env={**os.environ, "OMP_NUM_THREADS": "1"})
    assert run.returncode == 0, run.stdout[-2000:] + run.stderr[-3000:]
    assert run.stdout.count("stopped at the budget (trainer.max_minutes=0.05)") == 1
    assert load_torch(out / CHECKPOINT)["state"]["epoch"] < 1000


@pytest.mark.train
def test_accumulation_equals_the_batch_it_stands_for(tmp_path):
    """Two accumulated micro-batches of 2 give the weights of one batch of all 4: each
    micro-batch's per-token losses are weighted by its share of the step's tokens (the words
    have different token counts, so a plain 1/2 would not match). The 4 clips are all 1 s
    long, so the big batch has no padding that the small ones lack."""
    clips = [(sorted((COMMANDS / folder).glob(pattern))[0], word) for folder, pattern, word in [
        ("go", "*.wav", "go"), ("up", "*.wav", "up"), ("_unknown_", "backward_*.wav", "backward"),
        ("_unknown_", "visual_*.wav", "visual")]]
    manifest = write_manifest(tmp_path / "train.jsonl", clips)
    common = ["tokenizer.vocab_size=30", "trainer.max_epochs=1", "trainer.num_threads=1",
              "model=tiny", "trainer.progress=false"]
    big = Trainer(train_config(tmp_path / "big", manifest, "data.batch_size=4", *common))
    big.fit()
    small = Trainer(train_config(tmp_path / "small", manifest, "data.batch_size=2",
                                 "trainer.accumulate_grad_batches=2", *common))
    small.fit()
    counts = [small.model.loss_tokens(b["tokens"])[1] for b in small.train_loader]
    assert len(set(counts)) == 2  # the micro-batches hold different numbers of tokens
    assert big.state.step == small.state.step == 1
    assert abs(big.state.history[0]["train_loss"] - small.state.history[0]["train_loss"]) < 1e-5
    assert_same_weights(big.model.state_dict(), small.model.state_dict(), atol=1e-6)


@pytest.mark.train
def test_distributed_without_torchrun_says_how_to_start_it(tmp_path, monkeypatch):
    for name in ("RANK", "WORLD_SIZE", "LOCAL_RANK", "MASTER_ADDR"):
        monkeypatch.delenv(name, raising=False)
    manifest = write_manifest(tmp_path / "train.jsonl", small_real_set()[:2])
    with pytest.raises(ValueError, match=r"start training with torchrun --nproc_per_node=N -m "):
        Trainer(train_config(tmp_path, manifest, "trainer=ddp", *RUN))

"""Mixed-precision options: fp16's loss scaling leaves the arithmetic of a step unchanged (the
gradients are unscaled before clipping), and its state is saved for an exact resume."""

import pytest
import torch

from asr.checkpoint import CHECKPOINT, load_torch
from asr.train import Trainer, TrainingError
from helpers import small_real_set, train_config, write_manifest

pytestmark = [pytest.mark.tier("fast"), pytest.mark.data]

RUN = ["tokenizer.vocab_size=30", "data.batch_size=2", "trainer.max_epochs=1",
       "trainer.num_threads=1", "trainer.grad_clip=0.5"]  # clipping active: unscaling matters


@pytest.mark.train
def test_fp16_loss_scaling_changes_no_weight(tmp_path):
    """On CPU autocast stays off but the GradScaler runs (scale 2^16): scaling by a power of
    two and unscaling before clipping give the fp32 run's weights exactly."""
    manifest = write_manifest(tmp_path / "train.jsonl", small_real_set()[:4])
    fp32 = Trainer(train_config(tmp_path / "a", manifest, "trainer.precision=fp32", *RUN))
    fp32.fit()
    fp16 = Trainer(train_config(tmp_path / "b", manifest, "trainer.precision=fp16", *RUN))
    fp16.fit()
    assert fp16.scaler.is_enabled() and not fp32.scaler.is_enabled()
    for (name, a), b in zip(fp32.model.state_dict().items(), fp16.model.state_dict().values(),
                            strict=True):
        assert torch.equal(a, b), name
    saved = load_torch(tmp_path / "b" / "model" / CHECKPOINT)
    assert saved["scaler"]["scale"] == 2.0**16 and "scaler" not in load_torch(
        tmp_path / "a" / "model" / CHECKPOINT)


@pytest.mark.train
@pytest.mark.parametrize("minutes", ["inf", "nan", "1e400", "0", "1e308", "1000000.5", "-1"])
def test_a_budget_must_be_finite_and_positive(tmp_path, minutes):
    """1e308 minutes was accepted, then failed after the first epoch with "cannot convert float
    NaN to integer": a budget is bounded by 10^6 minutes."""
    manifest = write_manifest(tmp_path / "train.jsonl", small_real_set()[:2])
    with pytest.raises(TrainingError, match=r"trainer.max_minutes must be a positive number of "
                       r"minutes up to 1e\+06 \(or null: no budget\), got "):
        Trainer(train_config(tmp_path, manifest, f"trainer.max_minutes={minutes}", *RUN))


@pytest.mark.train
def test_unknown_precision_is_refused(tmp_path):
    manifest = write_manifest(tmp_path / "train.jsonl", small_real_set()[:2])
    with pytest.raises(TrainingError, match="trainer.precision must be one of bf16, fp16, fp32, "
                                            "got 'fp8'"):
        Trainer(train_config(tmp_path, manifest, "trainer.precision=fp8", *RUN))

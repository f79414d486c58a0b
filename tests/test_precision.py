"""Mixed-precision options: fp16's loss scaling leaves the arithmetic of a step unchanged (the
gradients are unscaled before clipping), and its state is saved for an exact resume."""

import pytest
import torch

from asr.checkpoint import CHECKPOINT, load_torch
from asr.train import Trainer, TrainingError
from asr.training.options import cpu_flags, step_precision
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
    with pytest.raises(TrainingError, match="trainer.precision must be one of auto, bf16, fp16, fp32, "
                                            "got 'fp8'"):
        Trainer(train_config(tmp_path, manifest, "trainer.precision=fp8", *RUN))


X86 = "processor\t: 0\nflags\t\t: fpu sse2 avx2 avx512f {extra}\n\nprocessor\t: 1\nflags\t\t: fpu\n"
ARM = "processor\t: 0\nFeatures\t: fp asimd {extra}\nCPU implementer\t: 0x41\n"


@pytest.mark.parametrize("text, extra, has_bf16", [
    (X86, "avx512_bf16", True), (X86, "amx_bf16 amx_tile", True), (X86, "avx512_vnni", False),
    (ARM, "bf16 i8mm", True), (ARM, "sve", False)])
def test_bf16_instructions_are_read_from_the_cpu_flags(tmp_path, text, extra, has_bf16):
    """bf16 on the CPU runs bf16 autocast only where the first CPU's flags name bf16
    instructions; elsewhere it falls back to fp32 with one warning line."""
    cpuinfo = tmp_path / "cpuinfo"
    cpuinfo.write_text(text.format(extra=extra))
    flags = cpu_flags(cpuinfo)
    assert set(extra.split()) <= flags and flags & {"fpu", "fp"}  # the first CPU's line
    precision, warning = step_precision("bf16", torch.device("cpu"), flags)
    if has_bf16:
        assert (precision, warning) == ("bf16", None)
    else:
        assert precision == "fp32" and warning == (
            "warning: trainer.precision=bf16: this CPU has no bf16 instructions (avx512_bf16, "
            "amx_bf16, bf16), so training runs in fp32")


def test_auto_precision_is_bf16_on_cuda_and_fp32_on_the_cpu(tmp_path):
    bf16 = frozenset({"avx512_bf16"})
    assert step_precision("auto", torch.device("cpu"), bf16) == ("fp32", None)
    assert step_precision("auto", torch.device("cuda"), frozenset()) == ("bf16", None)
    assert step_precision("fp16", torch.device("cpu"), frozenset()) == ("fp16", None)
    assert cpu_flags(tmp_path / "absent") == frozenset()  # not Linux: no flags, so fp32


def test_bf16_and_fp32_training_steps_agree_on_the_same_batches(tmp_path):
    """Two steps on the same real batches from the same weights: bf16 autocast's training
    losses are within 2% of fp32's (its matmuls round to 8 bits of mantissa). Dev is scored in
    fp32 on the CPU, as the model decodes there."""
    manifest = write_manifest(tmp_path / "train.jsonl", small_real_set()[:4])
    runs = {}
    for precision in ("fp32", "bf16"):
        trainer = Trainer(train_config(tmp_path / precision, manifest,
                                       f"trainer.precision={precision}", *RUN))
        trainer.fit()
        runs[precision] = trainer
    expected = "bf16" if step_precision("bf16", torch.device("cpu"))[0] == "bf16" else "fp32"
    assert runs["bf16"].optimize.precision == expected and runs["fp32"].optimize.precision == "fp32"
    fp32, bf16 = (runs[p].state.history[0] for p in ("fp32", "bf16"))
    assert bf16["train_loss"] == pytest.approx(fp32["train_loss"], rel=0.02)
    assert bf16["dev_loss"] == pytest.approx(fp32["dev_loss"], rel=0.02)

"""The trainer settings checked before any work, and the error of a run that cannot start."""

from pathlib import Path

import torch
from omegaconf import DictConfig

from asr.config import MAX_MINUTES
from asr.curves import LOGGERS, summary_writer

PRECISIONS = {"bf16": torch.bfloat16, "fp16": torch.float16, "fp32": torch.float32}
# trainer.precision's choices: auto is bf16 on CUDA and fp32 on the CPU, where bf16 autocast did
# not clearly beat fp32 at the base model's size (BENCHMARKS.md, "Training precision on the CPU")
CHOICES = ("auto", *PRECISIONS)


class TrainingError(RuntimeError):
    """A run that cannot start; the message says why and what to pass instead."""


def check_options(cfg: DictConfig) -> None:
    """A one-line TrainingError for a setting outside its choices, before anything is read."""
    if cfg.data.on_error not in ("raise", "skip"):
        raise TrainingError(f"data.on_error must be raise or skip, got {cfg.data.on_error!r}")
    if cfg.trainer.precision not in CHOICES:
        raise TrainingError(f"trainer.precision must be one of {', '.join(CHOICES)}, got "
                            f"{cfg.trainer.precision!r}")
    if cfg.trainer.accumulate_grad_batches < 1:
        raise TrainingError("trainer.accumulate_grad_batches must be at least 1, got "
                            f"{cfg.trainer.accumulate_grad_batches}")
    if cfg.trainer.max_minutes is not None and not 0 < cfg.trainer.max_minutes <= MAX_MINUTES:
        raise TrainingError(f"trainer.max_minutes must be a positive number of minutes up to "
                            f"{MAX_MINUTES:g} (or null: no budget), got {cfg.trainer.max_minutes}")
    if cfg.trainer.compile_mode not in COMPILE_MODES:
        raise TrainingError(f"trainer.compile_mode must be one of {', '.join(COMPILE_MODES)}, "
                            f"got {cfg.trainer.compile_mode!r}")
    if cfg.trainer.compile_mode == "reduce-overhead" and cfg.trainer.compile \
            and not cfg.data.buckets:
        raise TrainingError("trainer.compile_mode=reduce-overhead captures CUDA graphs for "
                            "static shapes: set data.buckets (e.g. data.buckets=4)")
    if cfg.data.buckets < 0 or cfg.data.bucket_tokens < 1:
        raise TrainingError("data.buckets must be 0 (off) or more and data.bucket_tokens at "
                            f"least 1, got {cfg.data.buckets} and {cfg.data.bucket_tokens}")
    if cfg.data.buckets and cfg.data.train_shards:
        raise TrainingError("data.buckets pads manifest batches; shards (data.train_shards) "
                            "batch as they are read: use one or the other")
    if cfg.trainer.average_by not in ("last", "best"):
        raise TrainingError(f"trainer.average_by must be last or best, got "
                            f"{cfg.trainer.average_by!r}")
    if cfg.trainer.logger not in LOGGERS:  # before any work; the curves start in fit
        raise TrainingError(f"trainer.logger must be csv, tensorboard or none, got "
                            f"{cfg.trainer.logger!r}")
    if cfg.trainer.logger == "tensorboard":  # before the run's first files are written
        try:
            summary_writer()
        except ValueError as err:
            raise TrainingError(str(err)) from None


# Inductor's loop reindexing after fusion (on by default) asserts in `get_pw_red_splits` on this
# model's training step on CUDA: a fused reduction's pointwise epilogue whose size is the
# reduction's (pytorch/pytorch#197077) aborts the compile after minutes. Turned off, Inductor
# keeps such epilogues apart; the CPU's C++ code generation never takes that path.
REINDEXING = "loop_reindexing_after_fusion"


COMPILE_MODES = ("default", "reduce-overhead", "max-autotune")


def inductor_options(mode: str = "default") -> dict[str, bool]:
    """What `torch.compile` is given for the training step: the settings of `mode`
    (trainer.compile_mode; torch takes a mode or options, not both), and Inductor's loop
    reindexing off where this torch has the switch."""
    import torch._inductor as inductor

    options = dict(inductor.list_mode_options(mode))
    return {**options, REINDEXING: False} if hasattr(inductor.config, REINDEXING) else options


def check_compile(compile: bool, device: torch.device) -> None:
    """`trainer.compile=true` on a CUDA device whose torch cannot turn Inductor's loop
    reindexing off (`inductor_options`): refused before anything is read, since its code
    generation would fail on the training step after minutes of compiling."""
    if compile and device.type == "cuda" and REINDEXING not in inductor_options():
        raise TrainingError("trainer.compile=true does not work on CUDA with this torch: "
                            f"its Inductor has no {REINDEXING} switch and its code generation "
                            "fails on the training step; train without it (trainer.compile=false)")


# The CPU instructions that compute in bf16 (in /proc/cpuinfo's flags): AVX-512 BF16 and AMX on
# x86, Armv8.6's BF16 extension on Arm. Without them torch emulates bf16 arithmetic in fp32,
# slower than fp32 itself, so a CPU run falls back to fp32 (`step_precision`).
BF16_FLAGS = ("avx512_bf16", "amx_bf16", "bf16")


def cpu_flags(cpuinfo: Path = Path("/proc/cpuinfo")) -> frozenset[str]:
    """The first CPU's instruction-set flags (x86 `flags`, Arm `Features`); none where the
    file does not exist (not Linux) or cannot be read."""
    try:
        lines = cpuinfo.read_text(encoding="ascii", errors="replace").splitlines()
    except OSError:
        return frozenset()
    for line in lines:
        key, _, value = line.partition(":")
        if key.strip() in ("flags", "Features"):
            return frozenset(value.split())
    return frozenset()


def step_precision(precision: str, device: torch.device,
                   flags: frozenset[str] | None = None) -> tuple[str, str | None]:
    """The precision the training step runs at for `trainer.precision` on `device`, and a
    one-line warning when it is not the one asked for: bf16 on a CPU without bf16
    instructions (`flags`, the CPU's: `cpu_flags()` when None) runs in fp32; auto is bf16 on
    CUDA, fp32 elsewhere."""
    if precision == "auto":
        return ("bf16" if device.type == "cuda" else "fp32"), None
    if precision != "bf16" or device.type != "cpu":
        return precision, None
    flags = cpu_flags() if flags is None else flags
    if any(flag in flags for flag in BF16_FLAGS):
        return precision, None
    return "fp32", ("warning: trainer.precision=bf16: this CPU has no bf16 instructions ("
                    f"{', '.join(BF16_FLAGS)}), so training runs in fp32")


def eval_precision(precision: str, device: torch.device) -> str:
    """The precision dev is scored at: the training step's on CUDA; fp32 on the CPU, where the
    shipped model decodes, so that dev WER is the figure a user gets."""
    return precision if device.type == "cuda" else "fp32"


def autocast(device: torch.device, precision: str) -> torch.autocast:
    """bf16 or fp16 autocast on CUDA, bf16 autocast on the CPU (`step_precision` says where
    the CPU can); fp32 and the CPU's fp16 (loss scaling only) compute in fp32; auto is bf16 on
    CUDA, fp32 on the CPU."""
    if precision == "auto":
        precision = "bf16" if device.type == "cuda" else "fp32"
    dtype = PRECISIONS[precision]
    enabled = dtype != torch.float32 and (device.type == "cuda" or dtype == torch.bfloat16)
    return torch.autocast(device.type, dtype=dtype, enabled=enabled)

"""The timed race of benchmarks/gpu_check.py: training steps of ours against SpeechBrain's
TransformerASR at equal sizes, on the same large duration-bucketed batches, with MFU.

Three contenders take forward (bf16 autocast on CUDA) + backward + clip + Adam over the same
batches in alternating rounds (benchmarks/harness.py `alternate`): ours as `model=s2t_s` is
configured (conv2d subsampling), ours with frame stacking, and SpeechBrain's TransformerASR with
the same stacking front end, sizes, heads and losses (benchmarks/training.py `PeerModel`), so
the last two differ only in their Transformer. FLOPs are counted by torch's FlopCounterMode over
one round; a dense matmul (bf16 on CUDA, fp32 on the CPU) is timed in the same rounds as the
peak that MFU divides by.
"""

import math
import random
import time
from collections.abc import Callable

import torch

from benchmarks.gpu_data import Clip, Sizes

# The toy benchmark's model: s2t_s's layout (conv2d front end) made narrow and shallow, so that
# the CPU runs its steps in seconds.
TOY_BENCH_MODEL = ["model.d_model=64", "model.d_ff=128", "model.n_encoder_layers=2",
                   "model.n_decoder_layers=1", "model.conv_channels=16"]
OURS, OURS_STACKED, SPEECHBRAIN = ("ours (s2t_s)", "ours (s2t_s sizes, stacking front end)",
                                   "SpeechBrain TransformerASR")
OURS_COMPILED = "ours (s2t_s), torch.compile"


def race(device: torch.device, sizes: Sizes, pool: list[Clip], toy: bool) -> dict:
    """Ours (`model=s2t_s`; narrow when `toy`) against SpeechBrain's TransformerASR on batches
    of `pool`: each contender's parameters, throughput, FLOPs, MFU and losses."""
    dims, features, train_cfg, batches, audio = race_setup(device, sizes, pool, toy)
    contenders, notes = bench_contenders(device, dims, features, batches)
    steppers = {name: DeviceStepper(m, batches, train_cfg, device)
                for name, m in contenders.items()}
    flops = {name: round_flops(s) for name, s in steppers.items()}
    timed = time_rounds(steppers, flops, audio, sizes, device)
    details = {"notes": notes, "batches": len(batches), "audio_s_per_round": round(audio, 1),
               "utterances_per_batch": [len(b["lengths"]) for b in batches],
               "precision": "bf16" if device.type == "cuda" else "fp32 (CPU)", **timed}
    models = details["models"]
    if SPEECHBRAIN in models:  # the same sizes, front end and batches: the Transformers race
        details["ours_speedup_vs_speechbrain"] = round(
            models[OURS_STACKED]["audio_s_per_s"] / models[SPEECHBRAIN]["audio_s_per_s"], 2)
    return details


def race_compiled(device: torch.device, sizes: Sizes, pool: list[Clip], toy: bool,
                  backend: str) -> dict:
    """Ours (`model=s2t_s`) eager against the same model under `torch.compile` (dynamic
    shapes, as `trainer.compile` compiles it) on the race's batches: the first compiled round
    (compiling included), then alternating rounds, and each one's time breakdown; the FLOPs
    are the eager model's (the same arithmetic)."""
    import copy

    from asr.model import SpeechTransformer
    from asr.training.options import inductor_options

    dims, features, train_cfg, batches, audio = race_setup(device, sizes, pool, toy)
    torch.manual_seed(0)
    eager = prepared(SpeechTransformer(dims, features), batches[0], device)
    options = inductor_options() if backend == "inductor" else {}
    compiled = torch.compile(copy.deepcopy(eager), dynamic=True, backend=backend, options=options)
    steppers = {OURS: DeviceStepper(eager, batches, train_cfg, device),
                OURS_COMPILED: DeviceStepper(compiled, batches, train_cfg, device)}
    started = time.perf_counter()
    steppers[OURS_COMPILED]()  # the compiling round, also the warm-up
    first = time.perf_counter() - started
    flops = round_flops(steppers[OURS])
    timed = time_rounds(steppers, dict.fromkeys(steppers, flops), audio, sizes, device, warmup=0)
    models = timed["models"]
    return {"backend": backend, "first_compiled_round_s": round(first, 2), **timed,
            "compiled_speedup": round(models[OURS_COMPILED]["audio_s_per_s"]
                                      / models[OURS]["audio_s_per_s"], 2)}


def race_setup(device: torch.device, sizes: Sizes, pool: list[Clip], toy: bool,
               narrow: list[str] | None = None) -> tuple:
    """What every race shares: `model=s2t_s`'s dimensions (changed by the `narrow` overrides,
    TOY_BENCH_MODEL's when `toy`), the front end's and training's configs, a tokenizer of the
    pool and its batches on the device, and the seconds of audio in one round of them."""
    from asr.model import ModelDimensions
    from asr.tokenizer import Tokenizer
    from benchmarks.training import default_config

    model_cfg, features, train_cfg = default_config(
        ["model=s2t_s", *(narrow if narrow is not None else TOY_BENCH_MODEL if toy else [])])
    tokenizer = Tokenizer.train([c.text for c in pool], train_cfg["tokenizer"]["vocab_size"])
    batches, audio = bench_batches(device, sizes, pool, tokenizer, features.sample_rate)
    dims = ModelDimensions(**{**model_cfg, "n_vocab": tokenizer.vocab_size})
    return dims, features, train_cfg, batches, audio


def time_rounds(steppers: dict[str, "DeviceStepper"], flops: dict[str, int], audio: float,
                sizes: Sizes, device: torch.device, warmup: int = 1) -> dict:
    """The contenders' rounds alternated with the matmul peak's: the peak, each contender's
    figures (`bench_row`) and each one's time breakdown."""
    from benchmarks.harness import alternate, median

    peak_call, peak_flops, peak_dtype = matmul_peak(device, sizes.peak_size)
    times = alternate({**steppers, "matmul": peak_call}, sizes.bench_rounds, warmup=warmup)
    peak = peak_flops / median(times["matmul"])
    return {"peak": {"dtype": peak_dtype, "size": sizes.peak_size,
                     "tflop_per_s": round(peak / 1e12, 3)},
            "models": {name: bench_row(s, times[name], flops[name], audio, peak)
                       for name, s in steppers.items()},
            "time_breakdown": {name: time_breakdown(s, device) for name, s in steppers.items()}}


def bench_row(stepper: "DeviceStepper", seconds: list[float], flops: int, audio: float,
              peak: float) -> dict:
    """One contender's figures: median round time, throughput, FLOPs and MFU."""
    from benchmarks.harness import median

    t, n = median(seconds), len(stepper.batches)
    return {"parameters": sum(p.numel() for p in stepper.model.parameters()),
            "round_seconds": [round(x, 4) for x in seconds], "steps_per_s": round(n / t, 2),
            "audio_s_per_s": round(audio / t, 1),
            "tflop_per_step": round(flops / n / 1e12, 4),
            "achieved_tflop_per_s": round(flops / t / 1e12, 3), "mfu": round(flops / t / peak, 4),
            "losses": [round(x, 3) for x in stepper.losses]}


def bench_batches(device: torch.device, sizes: Sizes, pool: list[Clip], tokenizer,
                  sample_rate: int) -> tuple[list[dict], float]:
    """Duration-bucketed batches of the pool (repeated to fill them), on the device, and the
    seconds of audio in one round of them."""
    import soundfile as sf
    from torch.nn.utils.rnn import pad_sequence

    from asr.audio import load_audio
    from asr.data import DurationBatchSampler
    from asr.tokenizer import PAD_ID

    waves = [load_audio(c.path, sample_rate) for c in pool]
    tokens = [torch.tensor(tokenizer.encode(c.text)) for c in pool]
    durations = [sf.info(str(c.path)).duration for c in pool]
    repeats = max(1, math.ceil(sizes.bench_batches * sizes.bench_seconds / sum(durations)))
    sampler = DurationBatchSampler(durations * repeats, sizes.bench_batch_size,
                                   sizes.bench_seconds, shuffle=True, seed=0)
    chosen = sorted(sampler, key=len, reverse=True)[:sizes.bench_batches]  # the full ones
    random.Random(0).shuffle(chosen)
    batches = []
    for batch in chosen:
        items = [i % len(pool) for i in batch]
        batches.append({
            "wave": pad_sequence([waves[i] for i in items], batch_first=True),
            "lengths": torch.tensor([len(waves[i]) for i in items]),
            "tokens": pad_sequence([tokens[i] for i in items], batch_first=True,
                                   padding_value=PAD_ID)})
    audio = sum(b["lengths"].sum().item() for b in batches) / sample_rate
    return [{k: v.to(device) for k, v in b.items()} for b in batches], audio


def bench_contenders(device: torch.device, dims, features, batches: list[dict]
                     ) -> tuple[dict[str, torch.nn.Module], list[str]]:
    """Ours as configured; ours and SpeechBrain's (when importable) with the same frame
    stacking front end, so that only the Transformer differs; CMVN from the first batch."""
    from dataclasses import replace

    from asr.model import SpeechTransformer
    from benchmarks.training import PeerModel

    stacked = replace(dims, subsampling="stack")
    builders = {OURS: lambda: SpeechTransformer(dims, features),
                OURS_STACKED: lambda: SpeechTransformer(stacked, features)}
    notes = [f"{OURS}: {dims.subsampling} subsampling as configured; {OURS_STACKED} and "
             f"{SPEECHBRAIN}: frames stacked by {dims.stack} and projected (equal sizes)"]
    try:
        import speechbrain.lobes.models.transformer.TransformerASR  # noqa: F401
        builders[SPEECHBRAIN] = lambda: PeerModel(stacked, features, "speechbrain")
    except ImportError as err:
        notes.append(f"SpeechBrain skipped: not importable ({err})")
    models = {}
    for name, build in builders.items():
        torch.manual_seed(0)
        models[name] = prepared(build(), batches[0], device)
    return models, notes


def prepared(model: torch.nn.Module, first: dict, device: torch.device) -> torch.nn.Module:
    """A contender ready to train: CMVN from the first batch, on the device."""
    model.frontend.set_cmvn([(first["wave"].cpu(), first["lengths"].cpu())])
    return model.to(device).train()


class DeviceStepper:
    """forward (bf16 autocast on CUDA) + backward + clip + Adam over the batches, synchronised
    at the end of each round so wall-clock time is the device's."""

    def __init__(self, model: torch.nn.Module, batches: list[dict], train_cfg: dict,
                 device: torch.device) -> None:
        from asr.training.step import clip_gradients

        self.model, self.batches, self.device = model, batches, device
        optim = {k: v for k, v in train_cfg["optim"].items() if k not in ("_target_", "fused")}
        self.optimizer = torch.optim.Adam(model.parameters(), fused=True, **optim)
        self.clip, self.grad_clip = clip_gradients, train_cfg["trainer"]["grad_clip"]
        self.losses: list[float] = []

    def forward_backward(self, batch: dict) -> torch.Tensor:
        from asr.training.options import autocast

        with autocast(self.device, "auto"):  # bf16 on CUDA, fp32 on the CPU
            loss = self.model(batch["wave"], batch["lengths"], batch["tokens"])["loss"]
        loss.backward()
        return loss

    def __call__(self) -> None:
        total = 0.0
        for batch in self.batches:
            self.optimizer.zero_grad(set_to_none=True)
            total = total + self.forward_backward(batch).detach()
            self.clip(self.model.parameters(), self.grad_clip)
            self.optimizer.step()
        self.losses.append(float(total) / len(self.batches))  # synchronises the device


def time_breakdown(stepper: DeviceStepper, device: torch.device, top: int = 8) -> dict:
    """Where one profiled round's time goes: kernel time (CUDA; operator self time on the CPU)
    by kind against the round's wall-clock time, whose remainder is the device waiting for the
    host to launch work, and the costliest kernels."""
    from torch.autograd import DeviceType
    from torch.profiler import ProfilerActivity, profile

    cuda = device.type == "cuda"
    with profile(activities=[ProfilerActivity.CUDA if cuda else ProfilerActivity.CPU]) as prof:
        start = time.perf_counter()
        stepper()
        wall = time.perf_counter() - start
    kind = DeviceType.CUDA if cuda else DeviceType.CPU
    rows = [(e.key, (e.self_device_time_total if cuda else e.self_cpu_time_total) / 1e6, e.count)
            for e in prof.key_averages() if e.device_type == kind]
    by_kind = {"matmul": 0.0, "attention": 0.0, "other": 0.0}
    for name, seconds, _ in rows:
        by_kind[kernel_kind(name)] += seconds
    busy = sum(by_kind.values())
    return {"wall_s": round(wall, 4), "kernel_s": round(busy, 4),
            "kernel_fraction": round(busy / wall, 3), "launches": sum(r[2] for r in rows),
            "by_kind_s": {k: round(v, 4) for k, v in by_kind.items()},
            "top": [{"name": n[:90], "s": round(t, 4), "count": c}
                    for n, t, c in sorted(rows, key=lambda r: -r[1])[:top]]}


def kernel_kind(name: str) -> str:
    """matmul, attention or other, from a kernel's (or CPU operator's) name."""
    lowered = name.lower()
    if any(k in lowered for k in ("flash", "fmha", "attention", "attn")):
        return "attention"
    if any(k in lowered for k in ("gemm", "nvjet", "cutlass", "xmma", "cublas", "aten::mm",
                                  "aten::addmm", "aten::bmm", "aten::matmul", "aten::linear")):
        return "matmul"
    return "other"


def round_flops(stepper: DeviceStepper) -> int:
    """Forward + backward FLOPs of one round (matmuls and attention, as counted by torch)."""
    from torch.utils.flop_counter import FlopCounterMode

    from benchmarks.efficiency import CPU_SDPA

    with FlopCounterMode(display=False, custom_mapping=CPU_SDPA) as counter:
        for batch in stepper.batches:
            stepper.forward_backward(batch)
    stepper.model.zero_grad(set_to_none=True)
    return counter.get_total_flops()


def matmul_peak(device: torch.device, size: int) -> tuple[Callable[[], None], float, str]:
    """Ten dense matmuls of two size x size matrices (bf16 on CUDA, fp32 on the CPU), their
    FLOPs and dtype: the peak that MFU divides by."""
    dtype = torch.bfloat16 if device.type == "cuda" else torch.float32
    a = torch.randn(size, size, device=device, dtype=dtype)
    b = torch.randn(size, size, device=device, dtype=dtype)
    out = torch.empty(size, size, device=device, dtype=dtype)

    def call() -> None:
        for _ in range(10):
            torch.mm(a, b, out=out)
        if device.type == "cuda":
            torch.cuda.synchronize()

    return call, 10 * 2.0 * size**3, str(dtype).removeprefix("torch.")


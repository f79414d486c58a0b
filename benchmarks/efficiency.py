"""Hardware efficiency of a training step: counted FLOPs / step time vs the measured matmul peak.

    python -m benchmarks.efficiency --threads 2 --rounds 7 --json bench_efficiency.json

The model is the default training config (conf/train.yaml; Hydra overrides accepted) on
duration-bucketed batches of real utterances, as in benchmarks/training.py. FLOPs are counted by
`torch.utils.flop_counter.FlopCounterMode` over forward + backward (matmuls, attention; the FFT,
element-wise work and Adam are not counted: they are overhead, not model FLOPs). The peak is a
large fp32 `torch.mm` at the same thread count, timed in the same rounds, alternating with the
training rounds. Then one profiled round says where the time goes: by phase (front end, encoder,
decoder, losses, backward, clipping, optimiser), by kind of operator, plus padding waste (FLOPs
of the padded batch vs the same utterances one by one) and data loading (reading and padding a
batch from disk, which training does too).
"""

import sys
import time
from collections import defaultdict

import torch
from torch import nn
from torch.autograd.profiler import record_function
from torch.utils import flop_counter
from torch.utils.flop_counter import FlopCounterMode

from asr.model import ModelDimensions
from asr.train import clip_gradients
from benchmarks.harness import (
    alternate,
    base_parser,
    markdown_table,
    matmul_peak,
    median,
    report,
    set_threads,
)
from benchmarks.training import Batch, Stepper, build, collate_real, default_config, real_batches

ATEN = torch.ops.aten
# CPU SDPA kernels the flop counter does not know yet: same formulas as the GPU kernels.
CPU_SDPA = {
    ATEN._scaled_dot_product_flash_attention_for_cpu:
        lambda q, k, v, *args, out_shape=None, **kwargs: flop_counter.sdpa_flop_count(q, k, v),
    ATEN._scaled_dot_product_flash_attention_for_cpu_backward:
        lambda g, q, k, v, *args, out_shape=None, **kwargs:
        flop_counter.sdpa_backward_flop_count(g, q, k, v),
}
OP_KINDS = [  # (kind, substrings of aten op names), first match wins
    ("matmul (GEMM)", ("addmm", "aten::mm", "bmm", "matmul", "linear")),
    ("attention kernel (SDPA)", ("scaled_dot_product", "flash_attention")),
    ("softmax, cross-entropy, CTC", ("softmax", "nll_loss", "cross_entropy", "ctc")),
    ("layer norm", ("layer_norm",)),
    ("FFT (front end)", ("fft", "stft")),
]


def count_flops(model: nn.Module, batch: Batch) -> int:
    """Forward + backward FLOPs of one batch (gradients discarded)."""
    with FlopCounterMode(display=False, custom_mapping=CPU_SDPA) as counter:
        model(batch["wave"], batch["lengths"], batch["tokens"])["loss"].backward()
    model.zero_grad(set_to_none=True)
    return counter.get_total_flops()


def unpadded_flops(model: nn.Module, batch: Batch) -> int:
    """The same utterances one at a time: the FLOPs the batch would need without padding."""
    total = 0
    for i in range(len(batch["lengths"])):
        n = int(batch["lengths"][i])
        tokens = batch["tokens"][i:i + 1]
        tokens = tokens[:, : max(int((tokens != 0).sum()), 1)]
        total += count_flops(model, {"wave": batch["wave"][i:i + 1, :n],
                                     "lengths": batch["lengths"][i:i + 1], "tokens": tokens})
    return total


def label(module: nn.Module, name: str) -> None:
    """Make a module's forward show up as `name` in the profiler."""
    def enter(mod, args):
        mod._bench_scope = record_function(name)
        mod._bench_scope.__enter__()

    def leave(mod, args, output):
        mod._bench_scope.__exit__(None, None, None)

    module.register_forward_pre_hook(enter)
    module.register_forward_hook(leave)


def profile_round(stepper: Stepper) -> tuple[dict[str, float], dict[str, float], float]:
    """Seconds per phase, per kind of operator (self time) and in total, for one round."""
    model = stepper.model
    for module, name in ((model.frontend, "front end"), (model.encoder, "encoder"),
                         (model.decoder, "decoder")):
        label(module, name)
    with torch.profiler.profile(activities=[torch.profiler.ProfilerActivity.CPU]) as prof:
        for batch in stepper.batches:
            with record_function("forward"):
                loss = model(batch["wave"], batch["lengths"], batch["tokens"])["loss"]
            stepper.optimizer.zero_grad(set_to_none=True)
            with record_function("backward"):
                loss.backward()
            with record_function("gradient clipping"):
                clip_gradients(model.parameters(), stepper.grad_clip)
            with record_function("optimizer (Adam)"):
                stepper.optimizer.step()
    events = {e.key: e for e in prof.key_averages()}
    inclusive = {k: events[k].cpu_time_total / 1e6 for k in
                 ("forward", "front end", "encoder", "decoder", "backward", "gradient clipping",
                  "optimizer (Adam)") if k in events}
    phases = {
        "front end (forward)": inclusive.get("front end", 0.0),
        "encoder (forward)": inclusive.get("encoder", 0.0),
        "decoder (forward)": inclusive.get("decoder", 0.0),
        "losses, heads, masks (forward)": inclusive["forward"] - sum(
            inclusive.get(k, 0.0) for k in ("front end", "encoder", "decoder")),
        "backward": inclusive["backward"],
        "gradient clipping": inclusive["gradient clipping"],
        "optimizer (Adam)": inclusive["optimizer (Adam)"],
    }
    kinds: dict[str, float] = defaultdict(float)
    for key, event in events.items():
        if not key.startswith("aten::"):
            continue
        kind = next((k for k, names in OP_KINDS if any(n in key for n in names)),
                    "element-wise, copies, other")
        kinds[kind] += event.self_cpu_time_total / 1e6
    return phases, dict(kinds), sum(phases.values())


def loading_seconds(items, tokenizer, sample_rate: int) -> float:
    """Reading, resampling and padding every batch of a round from disk."""
    started = time.perf_counter()
    for batch in items:
        collate_real(batch, tokenizer, sample_rate)
    return time.perf_counter() - started


def main(argv: list[str] | None = None) -> None:
    parser = base_parser(__doc__.splitlines()[0])
    parser.add_argument("--batches", type=int, default=6, help="batches per round")
    parser.add_argument("--pool", type=int, default=300, help="utterances drawn per corpus")
    parser.add_argument("--peak-size", type=int, default=2048, help="matmul side for the peak")
    parser.add_argument("overrides", nargs="*", help="Hydra overrides, e.g. model=tiny")
    args = parser.parse_args(argv)
    set_threads(args.threads)
    model_cfg, features, train_cfg = default_config(args.overrides)
    batches, tokenizer, items = real_batches(
        args.data, args.batches, train_cfg["data"]["batch_size"], features.sample_rate,
        train_cfg["tokenizer"]["vocab_size"], args.seed, args.pool)
    dims = ModelDimensions(**{**model_cfg, "n_vocab": tokenizer.vocab_size})
    stepper = Stepper(build("ours", dims, features, batches, args.seed), batches, train_cfg)
    mm, mm_flops = matmul_peak(args.peak_size)
    flops = sum(count_flops(stepper.model, b) for b in batches)
    useful = sum(unpadded_flops(stepper.model, b) for b in batches)
    times = alternate({"training round": stepper, "matmul": mm}, args.rounds)
    step_s = median(times["training round"]) / len(batches)
    peak = mm_flops / median(times["matmul"])
    achieved = flops / len(batches) / step_s
    load_s = loading_seconds(items, tokenizer, features.sample_rate) / len(batches)
    phases, kinds, profiled = profile_round(stepper)
    summary = [
        ["model FLOPs per step (forward + backward)", f"{flops / len(batches) / 1e9:.2f} G"],
        ["step time (median)", f"{1000 * step_s:.0f} ms"],
        ["achieved", f"{achieved / 1e9:.2f} GFLOP/s"],
        [f"fp32 matmul peak ({args.peak_size}^2, same threads)", f"{peak / 1e9:.2f} GFLOP/s"],
        ["**efficiency (achieved / peak)**", f"**{100 * achieved / peak:.1f}%**"],
        ["FLOPs spent on padding", f"{100 * (1 - useful / flops):.1f}%"],
        ["data loading per batch (not in step time)", f"{1000 * load_s:.0f} ms "
         f"({100 * load_s / step_s:.0f}% of a step)"],
    ]
    breakdown = [[k, f"{1000 * v / len(batches):.1f}", f"{100 * v / profiled:.1f}%"]
                 for k, v in phases.items()]
    by_kind = [[k, f"{1000 * v / len(batches):.1f}", f"{100 * v / profiled:.1f}%"]
               for k, v in sorted(kinds.items(), key=lambda kv: -kv[1])]
    table = "\n\n".join([
        markdown_table(["measure", "value"], summary),
        markdown_table(["phase (profiled round)", "ms per step", "share"], breakdown),
        markdown_table(["operator kind (self time)", "ms per step", "share"], by_kind)])
    report(f"Hardware efficiency of a training step ({args.threads} thread(s))", table, {
        "flops_per_step": flops / len(batches), "useful_flops_per_step": useful / len(batches),
        "step_seconds": step_s, "achieved_flops_per_s": achieved, "peak_flops_per_s": peak,
        "efficiency": achieved / peak, "padding_flop_share": 1 - useful / flops,
        "loading_seconds_per_batch": load_s, "phases_seconds_per_round": phases,
        "operator_kinds_seconds_per_round": kinds, "round_seconds": times,
        "config": {"model": model_cfg, "batches": len(batches)}}, args.json)


if __name__ == "__main__":
    sys.exit(main())

"""The GPU race's host-bound step, measured on a CPU: ops dispatched per training step and
the step's time when every op's arithmetic is negligible.

    python -m benchmarks.launches --rounds 25 --json launches.json

On the H100 the race of benchmarks/gpu_check.py (`bench_s2t_s`) is bound by the host: the GPU
computes for 22% of a step, and a step costs what launching its ~2,400 kernels costs
(BENCHMARKS.md section 9). This runs the same contenders (ours as `model=s2t_s` is configured,
ours with frame stacking, SpeechBrain's TransformerASR with the same stacking and sizes; see
benchmarks/gpu.py) with s2t_s's layers, heads and losses at d_model 16, in bf16 autocast on
the CPU, on one small batch of real speech, so that a step's time is its ops' dispatch and
autograd bookkeeping, as on the GPU. For each: the ops that reach the kernels per step (counted
by a TorchDispatchMode below autograd and autocast; "kernels" leaves out views, which launch
nothing), and the step's time, the contenders alternating round by round (median). It needs no
GPU, so a change to the step can be weighed before a GPU is at hand; the GPU has the last word.
"""

import sys
from collections import Counter
from dataclasses import replace

import torch
from torch.utils._python_dispatch import TorchDispatchMode

from benchmarks.gpu import SPEECHBRAIN, DeviceStepper, bench_contenders, race_setup
from benchmarks.gpu_data import TOY, shared_clips
from benchmarks.harness import alternate, base_parser, markdown_table, median, report, set_threads

NARROW = ["model.d_model=16", "model.d_ff=32", "model.conv_channels=4"]  # s2t_s's depth kept
# ops that only make another view of a tensor (or allocate one): no kernel runs on a GPU
VIEWS = frozenset("""alias as_strided detach empty empty_like empty_strided expand flatten
    lift_fresh narrow permute _reshape_alias reshape scalar_tensor select slice split
    split_with_sizes squeeze t transpose unbind unflatten unsqueeze _unsafe_view view""".split())


class OpCounter(TorchDispatchMode):
    """Counts the ops that reach the backend (after autograd and autocast), by name."""

    def __init__(self) -> None:
        super().__init__()
        self.counts: Counter[str] = Counter()

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):
        self.counts[func.overloadpacket.__name__] += 1
        return func(*args, **(kwargs or {}))


class AutocastStepper(DeviceStepper):
    """A training step in bf16 autocast on the CPU (which the trainer's default,
    `trainer.precision=auto`, leaves off there), so the step casts as the GPU's does."""

    def forward_backward(self, batch: dict) -> torch.Tensor:
        with torch.autocast("cpu", dtype=torch.bfloat16):
            loss = self.model(batch["wave"], batch["lengths"], batch["tokens"])["loss"]
        loss.backward()
        return loss


def count_ops(stepper: DeviceStepper) -> Counter[str]:
    """The ops of one step, from a round of the stepper's (equal) steps after a warm-up round."""
    stepper()
    with OpCounter() as counter:
        stepper()
    steps = len(stepper.batches)
    return Counter({op: n // steps for op, n in counter.counts.items()})


def main(argv: list[str] | None = None) -> None:
    parser = base_parser(__doc__.splitlines()[0])
    parser.add_argument("--steps", type=int, default=5, help="training steps per round")
    args = parser.parse_args(argv)
    set_threads(args.threads)
    device = torch.device("cpu")
    sizes = replace(TOY, bench_batches=1, bench_batch_size=2, bench_seconds=2.0)
    pool = [c for c in shared_clips(args.data, TOY) if c.split == "train"][:20]
    dims, features, train_cfg, batches, _ = race_setup(device, sizes, pool, toy=True,
                                                       narrow=NARROW)
    models, notes = bench_contenders(device, dims, features, batches)
    steppers = {name: AutocastStepper(m, batches[:1] * args.steps, train_cfg, device)
                for name, m in models.items()}
    ops = {name: count_ops(stepper) for name, stepper in steppers.items()}
    times = alternate(steppers, args.rounds, warmup=1)
    base = median(times[SPEECHBRAIN]) if SPEECHBRAIN in times else None
    rows, results = [], {}
    for name, seconds in times.items():
        step = median(seconds) / args.steps
        kernels = sum(n for op, n in ops[name].items() if op not in VIEWS)
        results[name] = {"ops_per_step": sum(ops[name].values()), "kernels_per_step": kernels,
                         "step_ms": round(step * 1e3, 2),
                         "round_seconds": [round(s, 4) for s in seconds],
                         "ops": dict(ops[name].most_common())}
        rows.append([name, kernels, sum(ops[name].values()), round(step * 1e3, 2),
                     f"{base / median(seconds):.2f}x" if base else "-"])
    table = markdown_table(["contender", "kernel ops / step", "all ops / step", "ms / step",
                            "faster than SpeechBrain"], rows)
    shape = (f"s2t_s depth ({dims.n_encoder_layers}+{dims.n_decoder_layers} layers, "
             f"{dims.n_head} heads) at d_model {dims.d_model}, bf16 autocast on the CPU, "
             f"one batch of {len(batches[0]['lengths'])} utterances, {args.steps} steps a round")
    print(shape)
    for note in notes:
        print(note)
    report(f"Host-bound training step ({args.threads} thread(s), median of {args.rounds} "
           "rounds)", table, {"shape": shape, "notes": notes, "models": results}, args.json)


if __name__ == "__main__":
    sys.exit(main())

"""Training precision on the CPU: bf16 autocast against fp32, side by side, on real batches.

    python -m benchmarks.precision --threads 2 --blocks 6 --batches 4 --json bench_precision.json
    python -m benchmarks.precision --init scratch        # the same sizes, from random weights

Two copies of one model (the shipped base by default, `--model DIR`: its sizes, tokenizer and
weights; `--init scratch` draws fresh weights of the same sizes) train on the same real batches
(Speech Commands words and cathy's read sentences, grouped as training groups them: at most
`data.batch_size` utterances and `data.max_duration` padded seconds), one in fp32 and one in
bf16 autocast, through the trainer's own step (`asr.training.step.TrainStep`: forward, losses,
backward, clipping, the configured Adam at its learning rate). Blocks of `--batches` steps
alternate between the two, the one that starts rotating, so a neighbour's load on a shared
machine falls on both alike. Reported: audio seconds learnt per second (median block), the
paired speed-up (the median over blocks of fp32's seconds over bf16's on the same batches), the
training loss of each block, and the loss of held-out utterances (other files of the same
corpora, no augmentation, in fp32 and eval mode) before and after the equal steps. The CPU's
flags say whether it has bf16 instructions (`asr.training.options.cpu_flags`).
"""

import copy
import sys
import time
from pathlib import Path

import torch

from asr.checkpoint import build_model, load_model_dir
from asr.data import DurationBatchSampler
from asr.distributed import Distributed
from asr.training.options import BF16_FLAGS, cpu_flags
from asr.training.step import TrainStep
from benchmarks.harness import (
    ROOT,
    base_parser,
    cathy,
    markdown_table,
    median,
    report,
    require_data,
    sample,
    set_threads,
    speech_commands,
)
from benchmarks.training import Batch, _seconds, collate_real

PRECISIONS = ("fp32", "bf16")


def pools(root: Path, per_corpus: int, held_out: int, seed: int
          ) -> tuple[list[tuple[Path, str]], list[tuple[Path, str]]]:
    """Real (file, text) items to train on, and `held_out` other ones per corpus to score."""
    require_data(root)
    train, dev = [], []
    for corpus in (speech_commands(root), cathy(root)):
        items = sample(corpus, per_corpus + held_out, seed)
        train += items[held_out:]
        dev += items[:held_out]
    return train, dev


def batches_of(items: list[tuple[Path, str]], tokenizer, data_cfg, sample_rate: int,
               count: int | None, seed: int) -> list[Batch]:
    """`count` batches (all: None) of `items` as training groups them, in a seeded order."""
    sampler = DurationBatchSampler([_seconds(f) for f, _ in items], data_cfg.batch_size,
                                   data_cfg.max_duration, shuffle=True, seed=seed,
                                   drop_last=False)
    groups = list(sampler)[:count]
    return [collate_real([items[i] for i in group], tokenizer, sample_rate) for group in groups]


def contender(model, config, precision: str) -> TrainStep:
    """The trainer's step for a copy of `model`, with the config's Adam at a constant rate."""
    model = copy.deepcopy(model).train()
    optim = {k: v for k, v in config.optim.items() if k != "_target_"}
    optimizer = torch.optim.Adam(model.parameters(), **optim)
    scheduler = torch.optim.lr_scheduler.LambdaLR(optimizer, lambda _: 1.0)
    scaler = torch.amp.GradScaler("cpu", enabled=False)
    return TrainStep(model, model, optimizer, scheduler, scaler, Distributed(),
                     torch.device("cpu"), precision, config.trainer.grad_clip,
                     config.features.sample_rate)


@torch.no_grad()
def held_out_loss(step: TrainStep, batches: list[Batch]) -> float:
    """The mean loss of the held-out batches, in fp32 and eval mode."""
    step.model.eval()
    losses = [step.model(b["wave"], b["lengths"], b["tokens"])["loss"].item() for b in batches]
    step.model.train()
    return sum(losses) / len(losses)


def race(steps: dict[str, TrainStep], batches: list[Batch], blocks: int, per_block: int
         ) -> dict[str, dict[str, list[float]]]:
    """Each contender's seconds and mean training loss per block of `per_block` steps; both
    take the same batches in the same order, and the contender that starts rotates."""
    names = list(steps)
    done = {name: {"seconds": [], "loss": []} for name in names}
    for block in range(blocks):
        chunk = [batches[(block * per_block + i) % len(batches)] for i in range(per_block)]
        for name in names[block % 2:] + names[:block % 2]:
            started = time.perf_counter()
            losses = [steps[name]([batch])[0] for batch in chunk]
            done[name]["seconds"].append(time.perf_counter() - started)
            done[name]["loss"].append(sum(losses) / len(losses))
    return done


def main(argv: list[str] | None = None) -> None:
    parser = base_parser(__doc__.splitlines()[0])
    parser.add_argument("--model", type=Path, default=ROOT / "asr" / "models" / "base",
                        help="the model directory whose sizes (and weights) train")
    parser.add_argument("--init", choices=("model", "scratch"), default="model",
                        help="start from the model's weights or from random ones")
    parser.add_argument("--blocks", type=int, default=6, help="alternating blocks (median)")
    parser.add_argument("--batches", type=int, default=4, help="steps per block")
    parser.add_argument("--pool", type=int, default=300, help="utterances drawn per corpus")
    parser.add_argument("--held-out", type=int, default=40, help="held-out utterances per corpus")
    args = parser.parse_args(argv)
    set_threads(args.threads)
    flags = cpu_flags()
    model, tokenizer, config = load_model_dir(args.model)
    if args.init == "scratch":
        torch.manual_seed(args.seed)
        fresh = build_model(config)
        fresh.frontend.load_state_dict(model.frontend.state_dict())  # the same CMVN
        model = fresh
    train_items, dev_items = pools(args.data, args.pool, args.held_out, args.seed)
    rate = config.features.sample_rate
    train = batches_of(train_items, tokenizer, config.data, rate, args.blocks * args.batches,
                       args.seed)
    dev = batches_of(dev_items, tokenizer, config.data, rate, None, args.seed)
    steps = {name: contender(model, config, name) for name in PRECISIONS}
    before = held_out_loss(steps["fp32"], dev)
    for name, step in steps.items():  # warm up each on one batch, then start again from the same weights
        step([train[0]])
        steps[name] = contender(model, config, name)
    done = race(steps, train, args.blocks, args.batches)
    after = {name: held_out_loss(step, dev) for name, step in steps.items()}
    chunks = [[train[(b * args.batches + i) % len(train)] for i in range(args.batches)]
              for b in range(args.blocks)]
    audio = [sum(x["lengths"].sum().item() for x in chunk) / rate for chunk in chunks]
    speed = {name: median([a / s for a, s in zip(audio, d["seconds"], strict=True)])
             for name, d in done.items()}
    paired = median([f / b for f, b in zip(done["fp32"]["seconds"], done["bf16"]["seconds"],
                                           strict=True)])
    present = [flag for flag in BF16_FLAGS if flag in flags]
    capability = torch.backends.cpu.get_cpu_capability()
    rows = [[name, f"{speed[name]:.2f}", f"{speed[name] / speed['fp32']:.2f}x",
             f"{sum(d['seconds']):.1f}", " / ".join(f"{x:.3f}" for x in d["loss"]),
             f"{before:.4f} -> {after[name]:.4f}"] for name, d in done.items()]
    table = markdown_table(["precision", "audio s/s (median block)", "vs fp32", "seconds",
                            "training loss per block", "held-out loss"], rows)
    print(f"model {args.model} (init: {args.init}), {args.blocks} blocks x {args.batches} "
          f"steps, {sum(audio):.1f} s of audio each, {len(dev)} held-out batches; "
          f"bf16 instructions: {', '.join(present) or 'none'}; torch's CPU capability "
          f"{capability}; bf16 is faster by {paired:.2f}x (median over blocks of fp32's "
          "seconds over bf16's on the same batches)")
    report("Training precision on the CPU (bf16 autocast vs fp32)", table, {
        "model": str(args.model), "init": args.init, "blocks": args.blocks,
        "steps_per_block": args.batches, "audio_seconds": sum(audio),
        "bf16_flags": present, "cpu_capability": capability,
        "audio_s_per_s": speed, "speedup": speed["bf16"] / speed["fp32"], "paired_speedup": paired,
        "block_seconds": {n: d["seconds"] for n, d in done.items()},
        "block_loss": {n: d["loss"] for n, d in done.items()},
        "held_out_loss_before": before, "held_out_loss_after": after}, args.json)


if __name__ == "__main__":
    sys.exit(main())

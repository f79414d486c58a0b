"""Data pipeline: padding waste and training throughput with and without duration bucketing.

    python -m benchmarks.data --threads 2 --rounds 5 --json bench_data.json

A pool of real utterances (FSDD digits, Speech Commands words, cathy's sentences: 0.3 s to
10 s) is batched two ways at the default batch size: asr.data.DurationBatchSampler (similar
durations together) and random batches. Padding waste is exact, over every batch of the pool:
padded samples / samples computed. Throughput is a real training epoch over the pool
(DataLoader reading from disk, the default model, forward + backward + Adam), the two batchings
alternating epoch by epoch; audio seconds per second counts real (unpadded) audio only.
"""

import random
import sys

from torch.utils.data import DataLoader

from asr.data import DurationBatchSampler, SpeechDataset, Utterance, collate, padding_fraction
from asr.model import ModelDimensions
from benchmarks.harness import (
    alternate,
    base_parser,
    cathy,
    duration,
    fsdd,
    markdown_table,
    median,
    report,
    require_data,
    sample,
    set_threads,
    speech_commands,
)
from benchmarks.training import Stepper, build, default_config


def random_batches(count: int, batch_size: int, seed: int) -> list[list[int]]:
    order = list(range(count))
    random.Random(seed).shuffle(order)
    return [order[i:i + batch_size] for i in range(0, count, batch_size)]


class Epoch:
    """One pass over the pool with a given batching, loading from disk like training does."""

    def __init__(self, stepper: Stepper, dataset: SpeechDataset, batches: list[list[int]]) -> None:
        self.stepper = stepper
        self.loader = DataLoader(dataset, batch_sampler=batches, collate_fn=collate)

    def __call__(self) -> None:
        for batch in self.loader:
            self.stepper.step(batch)


def main(argv: list[str] | None = None) -> None:
    parser = base_parser(__doc__.splitlines()[0])
    parser.add_argument("--pool", type=int, default=32, help="utterances drawn per corpus")
    parser.add_argument("overrides", nargs="*", help="Hydra overrides, e.g. model=tiny")
    args = parser.parse_args(argv)
    set_threads(args.threads)
    require_data(args.data)
    model_cfg, features, train_cfg = default_config(args.overrides)
    batch_size = train_cfg["data"]["batch_size"]
    items = [x for corpus in (fsdd, speech_commands, cathy)
             for x in sample(corpus(args.data), args.pool, args.seed)]
    utts = [Utterance(str(f), text, duration(f)) for f, text in items]
    durations = [u.duration for u in utts]
    from asr.tokenizer import Tokenizer

    tokenizer = Tokenizer.train([u.text for u in utts], train_cfg["tokenizer"]["vocab_size"])
    dataset = SpeechDataset(utts, tokenizer, features.sample_rate)
    batchings = {
        "duration buckets (DurationBatchSampler)":
            list(DurationBatchSampler(durations, batch_size, shuffle=True, seed=args.seed)),
        "random batches": random_batches(len(utts), batch_size, args.seed),
    }
    dims = ModelDimensions(**{**model_cfg, "n_vocab": tokenizer.vocab_size})
    cmvn = [collate([dataset[i] for i in b]) for b in batchings["random batches"][:4]]
    epochs = {}
    for name, batches in batchings.items():
        model = build("ours", dims, features, cmvn, args.seed)
        epochs[name] = Epoch(Stepper(model, [], train_cfg), dataset, batches)
    times = alternate(epochs, args.rounds)
    audio = sum(durations)
    base = median(times["random batches"])
    rows, results = [], {}
    for name, batches in batchings.items():
        t = median(times[name])
        waste = padding_fraction(batches, durations)
        rows.append([name, len(batches), f"{100 * waste:.1f}%", f"{audio / t:.1f}",
                     f"{base / t:.2f}x"])
        results[name] = {"batches": len(batches), "padding_waste": waste,
                         "epoch_seconds": times[name], "audio_s_per_s": audio / t}
    table = markdown_table(["batching", "batches", "padding waste", "audio s/s (training)",
                            "speed-up"], rows)
    print(f"{len(utts)} utterances, {audio:.1f} s of audio, {min(durations):.2f}-"
          f"{max(durations):.2f} s, batch size {batch_size}")
    report(f"Duration bucketing ({args.threads} thread(s), median of {args.rounds} epochs)", table,
           {"utterances": len(utts), "audio_seconds": audio, "batch_size": batch_size,
            "batchings": results}, args.json)


if __name__ == "__main__":
    sys.exit(main())

"""Compiled training on this machine: the eager step against the step whose encoder and decoder
Inductor compiled, as `trainer.compile=true data.buckets=N` trains, on the same static-shape
batches.

    python -m benchmarks.compiled --threads 2 --rounds 5 experiment=base_conv
    python -m benchmarks.compiled --buckets 2 --batch-size 4 model=tiny     # a quick look

Real words (Speech Commands) and read sentences (cathy) are cut into `--buckets` duration
buckets (`asr.data.duration_buckets`) and padded to their static shapes (`StaticShapes`); a round
steps once through one batch of each bucket. Both contenders start from the same weights and
take the same steps (forward, loss, backward, clipping, Adam). The compiled one's first round
compiles a graph per shape and is timed apart; then the two alternate round by round and the
median round is reported, with the audio seconds per second and the ratio of the two.
"""

import copy
import math
import sys
import time

import torch

from asr.audio import load_audio
from asr.data import StaticShapes, collate, duration_buckets
from asr.model import ModelDimensions
from asr.tokenizer import Tokenizer
from asr.training.options import COMPILE_MODES, inductor_options
from benchmarks.harness import (
    alternate,
    base_parser,
    cathy,
    duration,
    markdown_table,
    median,
    report,
    require_data,
    sample,
    set_threads,
    speech_commands,
)
from benchmarks.training import Batch, Stepper, build, default_config

EAGER, COMPILED = "eager", "compiled (encoder and decoder)"


def bucketed(pool: list, buckets: int, batch_size: int, tokenizer: Tokenizer, sample_rate: int,
             token_multiple: int) -> list[Batch]:
    """One batch of each duration bucket of `pool` (its shortest utterances), padded to the
    bucket's static shape."""
    durations = [duration(path) for path, _ in pool]
    shapes = StaticShapes.of_buckets(durations, buckets, sample_rate, token_multiple)
    batches = [collate([(load_audio(pool[i][0], sample_rate),
                         torch.tensor(tokenizer.encode(pool[i][1]))) for i in part[:batch_size]],
                       shapes) for part in duration_buckets(durations, buckets)]
    return [{k: v for k, v in b.items() if k != "bad"} for b in batches]


def compiled_copy(model: torch.nn.Module, mode: str, backend: str) -> torch.nn.Module:
    """A copy of `model` whose encoder and decoder are compiled in place for static shapes, as
    `asr.training.build.wrap_model` compiles them (by `backend`: "inductor" as training does;
    "aot_eager" traces them alike without Inductor's code generation, for a quick check)."""
    twin = copy.deepcopy(model)
    for layers in (twin.encoder, twin.decoder):
        if backend == "inductor":
            layers.compile(dynamic=False, options=inductor_options(mode))
        else:
            layers.compile(dynamic=False, backend=backend)
    return twin


def main(argv: list[str] | None = None) -> None:
    parser = base_parser(__doc__.splitlines()[0])
    parser.add_argument("--buckets", type=int, default=4, help="duration buckets (shapes)")
    parser.add_argument("--batch-size", type=int, default=16, help="utterances per batch")
    parser.add_argument("--pool", type=int, default=200, help="utterances drawn per corpus")
    parser.add_argument("--mode", choices=COMPILE_MODES, default="default",
                        help="trainer.compile_mode")
    parser.add_argument("--backend", choices=("inductor", "aot_eager"), default="inductor",
                        help="torch.compile's backend: inductor (as training) or aot_eager "
                             "(traced alike, no code generation: a quick check)")
    parser.add_argument("overrides", nargs="*", help="Hydra overrides, e.g. experiment=base_conv")
    args = parser.parse_args(argv)
    set_threads(args.threads)
    require_data(args.data)
    dims, features, cfg = default_config(args.overrides)
    pool = sample(speech_commands(args.data), args.pool, args.seed) \
        + sample(cathy(args.data), args.pool, args.seed)
    tokenizer = Tokenizer.train([text for _, text in pool], cfg["tokenizer"]["vocab_size"])
    batches = bucketed(pool, args.buckets, args.batch_size, tokenizer, features.sample_rate,
                       cfg["data"]["bucket_tokens"])
    dims = ModelDimensions(**{**dims, "n_vocab": tokenizer.vocab_size})
    eager = build("ours", dims, features, batches, args.seed)
    steppers = {EAGER: Stepper(eager, batches, cfg),
                COMPILED: Stepper(compiled_copy(eager, args.mode, args.backend), batches, cfg)}
    started = time.perf_counter()
    steppers[COMPILED]()
    first = time.perf_counter() - started
    steppers[EAGER]()  # the eager warm-up round: both have now taken the same steps
    times = alternate(steppers, args.rounds, warmup=0)
    audio = sum(float(b["lengths"].sum()) for b in batches) / features.sample_rate
    results = {"buckets": args.buckets, "batch_size": args.batch_size, "mode": args.mode,
               "backend": args.backend,
               "overrides": args.overrides, "audio_s_per_round": round(audio, 2),
               "first_compiled_round_s": round(first, 2),
               "shapes": [list(b["wave"].shape) + [b["tokens"].shape[1]] for b in batches],
               "models": {name: {"median_round_s": round(median(t), 3),
                                 "audio_s_per_s": round(audio / median(t), 1),
                                 "losses": [round(x, 4) for x in steppers[name].losses]}
                          for name, t in times.items()}}
    losses = [x for s in steppers.values() for x in s.losses]
    if not all(math.isfinite(x) for x in losses):
        sys.exit(f"error: a loss is not finite: {losses}")
    models = results["models"]
    results["compiled_speedup"] = round(models[COMPILED]["audio_s_per_s"]
                                        / models[EAGER]["audio_s_per_s"], 3)
    rows = [[name, m["median_round_s"], m["audio_s_per_s"]] for name, m in models.items()]
    table = markdown_table(["step", "median round (s)", "audio s/s"], rows)
    table += (f"\n\ncompiled / eager: {results['compiled_speedup']}x; the first compiled round "
              f"(compiling {len(batches)} shapes) took {first:.1f} s")
    report("Compiled training (static shapes) against eager", table, results, args.json)


if __name__ == "__main__":
    main()

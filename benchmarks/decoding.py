"""Decoding speed: real-time factor of greedy, beam 5 and CTC greedy search, one utterance at a
time and batched, with and without the key/value cache, and decoder steps per second.

    python -m benchmarks.decoding [--model exp/voice_commands] [--manifest FILE.jsonl]

RTF = decoding seconds (encoder included, audio loading not) / audio seconds. All rows are
measured in one run on the same utterances, so their ratios hold on a busy machine even when
the absolute figures drift. Also checks that the cache changes no hypothesis.
"""

import argparse
import time
from pathlib import Path

import torch
from omegaconf import OmegaConf
from torch.nn.utils.rnn import pad_sequence

from asr.audio import load_audio
from asr.checkpoint import load_model_dir
from asr.data import read_manifest
from asr.decoding import DecodingOptions, decode


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--model", default="exp/voice_commands")
    parser.add_argument("--manifest", help="default: the model's dev manifest")
    parser.add_argument("--utterances", type=int, default=64)
    parser.add_argument("--batch-size", type=int, default=64)
    parser.add_argument("--ctc-weight", type=float, help="default: the model's decode config")
    parser.add_argument("--threads", type=int, default=1)
    parser.add_argument("--device", default="cpu")
    args = parser.parse_args()
    torch.set_num_threads(args.threads)
    model, _, config = load_model_dir(args.model, args.device)
    manifest = args.manifest or config.data.dev_manifest
    if not Path(manifest).is_file():
        parser.error(f"{manifest}: no such manifest (pass --manifest)")
    utts = read_manifest(manifest)[: args.utterances]
    rate = model.frontend.cfg.sample_rate
    waves = [load_audio(u.audio_filepath, rate).to(args.device) for u in utts]
    audio_seconds = sum(len(w) for w in waves) / rate
    saved = OmegaConf.to_container(config.get("decode", {}))
    ctc_weight = args.ctc_weight if args.ctc_weight is not None else saved.get("ctc_weight", 0.0)
    print(f"{args.model}: {len(waves)} utterances, {audio_seconds:.1f} s of audio, "
          f"{torch.get_num_threads()} thread(s), ctc_weight {ctc_weight}")
    print(f"{'search':<22}{'cache':>6}{'batch':>6}{'RTF':>9}{'ms/utt':>9}{'steps/s':>9}")
    searches = [("greedy", {"beam_size": 1, "ctc_weight": 0.0}),
                ("greedy + ctc", {"beam_size": 1, "ctc_weight": ctc_weight}),
                ("beam 5", {"beam_size": 5, "ctc_weight": 0.0}),
                ("beam 5 + ctc", {"beam_size": 5, "ctc_weight": ctc_weight})]
    seconds = time_searches(model, waves, audio_seconds, searches, args.batch_size)
    started = time.perf_counter()
    run(model, waves, DecodingOptions(mode="ctc_greedy"), args.batch_size)
    took = time.perf_counter() - started
    print(f"{'ctc greedy':<22}{'-':>6}{args.batch_size:>6}{took / audio_seconds:>9.4f}"
          f"{1000 * took / len(waves):>9.1f}")
    print_ratios([name for name, _ in searches], seconds, args.batch_size)


Searches = list[tuple[str, dict]]


def time_searches(model, waves: list[torch.Tensor], audio_seconds: float, searches: Searches,
                  batch_size: int) -> dict[tuple[str, bool, int], float]:
    """Decode with each search, with and without the cache, one at a time and in batches of
    `batch_size`, printing a row each; the seconds each took, by (search, cache, batch)."""
    steps = count_decoder_calls(model)
    seconds: dict[tuple[str, bool, int], float] = {}
    for name, options in searches:
        outputs = {}
        for cache in (True, False):
            for batch in (1, batch_size):
                opts = DecodingOptions(kv_cache=cache, **options)
                steps[0] = 0
                started = time.perf_counter()
                outputs[cache, batch] = run(model, waves, opts, batch)
                took = seconds[name, cache, batch] = time.perf_counter() - started
                print(f"{name:<22}{'yes' if cache else 'no':>6}{batch:>6}"
                      f"{took / audio_seconds:>9.4f}{1000 * took / len(waves):>9.1f}"
                      f"{steps[0] / took:>9.0f}")
        same = all(outputs[True, b] == outputs[False, b] for b in (1, batch_size))
        print(f"{'':<22}cache changes no hypothesis: {same}")
    return seconds


def print_ratios(names: list[str], seconds: dict[tuple[str, bool, int], float],
                 batch_size: int) -> None:
    """Batched vs one at a time, and cache vs none, from the same run's seconds."""
    print("ratios (same run):")
    for name in names:
        one, many = seconds[name, True, 1], seconds[name, True, batch_size]
        print(f"  {name}: batched {batch_size} vs one at a time {one / many:.1f}x faster "
              f"per utterance; cache vs none {seconds[name, False, 1] / one:.2f}x (batch 1), "
              f"{seconds[name, False, batch_size] / many:.2f}x (batch {batch_size})")


def run(model, waves: list[torch.Tensor], options: DecodingOptions,
        batch_size: int) -> list[list[int]]:
    """Decode in batches of `batch_size` utterances of similar length (as `Transcriber` and
    evaluation batch them), returned in manifest order."""
    order = sorted(range(len(waves)), key=lambda i: len(waves[i]))
    out: list[list[int]] = [[] for _ in waves]
    for start in range(0, len(order), batch_size):
        chunk = order[start:start + batch_size]
        wave = pad_sequence([waves[i] for i in chunk], batch_first=True)
        lengths = torch.tensor([len(waves[i]) for i in chunk], device=wave.device)
        for i, ids in zip(chunk, decode(model, wave, lengths, options), strict=True):
            out[i] = ids
    return out


def count_decoder_calls(model) -> list[int]:
    """A counter of decoder steps (one call advances every hypothesis of the batch)."""
    counter = [0]
    model.decoder.register_forward_hook(lambda *_: counter.__setitem__(0, counter[0] + 1))
    return counter


if __name__ == "__main__":
    main()

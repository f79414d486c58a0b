"""What the LibriSpeech configs cost: parameters, measured CPU step time, FLOPs, and the
GPU-hours they imply under stated assumptions.

    python -m benchmarks.scale --threads 1 --rounds 3 [--json bench_scale.json]

Builds conf/model/s2t_s.yaml and s2t_m.yaml with BPE 5000 (counting parameters), then times
training steps of the s config (forward + joint loss + backward + clip + AdamW step) on CPU on
LibriSpeech-like utterances: four of cathy's read sentences joined (about 12 s, LibriSpeech's
mean training utterance is 12.3 s), 8 per batch. FLOPs per step are counted by
torch.utils.flop_counter (matmuls, convolutions, attention; elementwise work not counted).
The GPU-hours of a 960 h epoch are then FLOPs / (peak x utilisation): the peak is the data
sheet's, the utilisation an assumption printed with the result, never a measurement.
"""

import time
from pathlib import Path

import torch
from omegaconf import OmegaConf
from torch.nn.utils.rnn import pad_sequence
from torch.utils.flop_counter import FlopCounterMode

from asr.audio import load_audio
from asr.checkpoint import build_model
from asr.tokenizer import PAD_ID, Tokenizer
from benchmarks.harness import (
    base_parser,
    cathy,
    markdown_table,
    median,
    report,
    require_data,
    set_threads,
)
from benchmarks.training import default_config

LIBRISPEECH_HOURS = 960
H100_BF16_DENSE_TFLOPS = 989  # NVIDIA H100 SXM data sheet, dense (no sparsity)
UTILISATION = (0.05, 0.1, 0.2)  # assumed model-FLOPs utilisations (not measured here)
ASSUMPTIONS = (f"H100 bf16 dense peak {H100_BF16_DENSE_TFLOPS} TFLOP/s (data sheet); "
               f"model-FLOPs utilisation {UTILISATION} (assumed, not measured); "
               "counted FLOPs (matmul/conv/attention) of this batch shape scale "
               "linearly with audio; no speed-perturbed copies (one random factor "
               "per utterance and epoch)")


def librispeech_like_batch(root: Path, tokenizer: Tokenizer, size: int, join: int) -> dict:
    """`size` utterances of `join` cathy sentences each, loaded, with their tokens."""
    pool = cathy(root)[:size * join]
    waves, tokens = [], []
    for k in range(size):
        part = pool[k * join:(k + 1) * join]
        waves.append(torch.cat([load_audio(f, 16000) for f, _ in part]))
        tokens.append(torch.tensor(tokenizer.encode(" ".join(t for _, t in part))))
    return {"wave": pad_sequence(waves, batch_first=True),
            "lengths": torch.tensor([len(w) for w in waves]),
            "tokens": pad_sequence(tokens, batch_first=True, padding_value=PAD_ID)}


def build(name: str, vocab: int) -> torch.nn.Module:
    cfg = OmegaConf.create(default_config([f"model={name}", "features=fbank_specaugment"])[2])
    cfg.model.n_vocab, cfg.model.n_input = vocab, cfg.features.n_mels
    return build_model(cfg)


def main() -> None:
    parser = base_parser(__doc__.split("\n\n")[0])
    parser.add_argument("--batch", type=int, default=8, help="utterances per step")
    parser.add_argument("--join", type=int, default=4, help="sentences per utterance")
    parser.add_argument("--vocab", type=int, default=5000)
    args = parser.parse_args()
    set_threads(args.threads)
    require_data(args.data)
    torch.manual_seed(args.seed)
    params = {name: sum(p.numel() for p in build(name, args.vocab).parameters())
              for name in ("s2t_s", "s2t_m")}
    for name, count in params.items():
        print(f"{name}: {count / 1e6:.1f}M parameters (BPE {args.vocab})")

    tokenizer = Tokenizer.train([t for _, t in cathy(args.data)], args.vocab)
    batch = librispeech_like_batch(args.data, tokenizer, args.batch, args.join)
    audio = batch["lengths"].sum().item() / 16000
    flops, wall, cpu = time_steps(build("s2t_s", args.vocab).train(), batch, args.rounds)
    step_cpu = median(cpu)
    per_audio_second = flops / audio
    epoch_flops = per_audio_second * LIBRISPEECH_HOURS * 3600
    gpu_hours = {u: epoch_flops / (H100_BF16_DENSE_TFLOPS * 1e12 * u) / 3600 for u in UTILISATION}
    results = {
        "parameters": params,
        "batch": {"utterances": args.batch, "audio_seconds": audio,
                  "tokens": int((batch["tokens"] != PAD_ID).sum())},
        "s2t_s_step": {"wall_seconds": median(wall), "cpu_seconds": step_cpu, "flops": flops,
                       "cpu_audio_sec_per_cpu_sec": audio / step_cpu},
        "flops_per_audio_second": per_audio_second,
        "estimate_960h_epoch": {
            "cpu_core_hours_measured_rate": LIBRISPEECH_HOURS * 3600 / (audio / step_cpu) / 3600,
            "h100_hours_assumed": {f"utilisation {u:.0%}": h for u, h in gpu_hours.items()},
            "assumptions": ASSUMPTIONS}}
    rows = table_rows(results, gpu_hours, args.vocab, args.threads)
    report("LibriSpeech configs: size, step cost, estimate", markdown_table(["what", "value"], rows),
           results, args.json)


def time_steps(model: torch.nn.Module, batch: dict,
               rounds: int) -> tuple[int, list[float], list[float]]:
    """One training step's counted FLOPs, then `rounds` steps' wall and CPU seconds."""
    optimizer = torch.optim.AdamW(model.parameters(), lr=1e-4)

    def step() -> None:
        optimizer.zero_grad(set_to_none=True)
        model(batch["wave"], batch["lengths"], batch["tokens"])["loss"].backward()
        torch.nn.utils.clip_grad_norm_(model.parameters(), 5.0)
        optimizer.step()

    with FlopCounterMode(display=False) as counter:
        step()
    wall, cpu = [], []
    for _ in range(rounds):
        started, started_cpu = time.perf_counter(), time.process_time()
        step()
        wall.append(time.perf_counter() - started)
        cpu.append(time.process_time() - started_cpu)
    return counter.get_total_flops(), wall, cpu


def table_rows(results: dict, gpu_hours: dict[float, float], vocab: int,
               threads: int) -> list[list[str]]:
    """The report's rows (what, value) from the results."""
    params, step = results["parameters"], results["s2t_s_step"]
    audio, step_cpu = results["batch"]["audio_seconds"], step["cpu_seconds"]
    rows = [[f"parameters, s2t_s / s2t_m (BPE {vocab})",
             f"{params['s2t_s'] / 1e6:.1f}M / {params['s2t_m'] / 1e6:.1f}M"],
            [f"s2t_s training step, {audio:.1f} s of audio in {results['batch']['utterances']} "
             "utterances",
             f"{step_cpu:.2f} CPU s ({step['wall_seconds']:.2f} s wall), {threads} thread(s)"],
            ["measured CPU rate", f"{audio / step_cpu:.2f} audio s per CPU s"],
            ["counted FLOPs", f"{step['flops'] / 1e12:.2f} TFLOP per step, "
                              f"{results['flops_per_audio_second'] / 1e9:.0f} GFLOP per audio second"],
            ["one 960 h epoch on CPU (measured rate)",
             f"{results['estimate_960h_epoch']['cpu_core_hours_measured_rate']:.0f} core-hours"]]
    return rows + [[f"one 960 h epoch on an H100, ASSUMING {u:.0%} utilisation", f"{h:.2f} GPU-hours"]
                   for u, h in gpu_hours.items()]


if __name__ == "__main__":
    main()

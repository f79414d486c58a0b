"""Peak memory and time of encoder self-attention vs length: full vs local (model.attention).

    python -m benchmarks.attention [--lengths 500 1000 2000 4000 8000] [--window 16]
                                    [--pos rope|relative] [--device cpu|cuda] [--backward]

One MultiHeadAttention layer (d_model 144, 4 heads, as conf/model/small.yaml), batch 1, with a
key-padding mask as in the encoder. Each measurement runs in a fresh process: on CPU the peak is
the growth of the process's peak resident memory over the model and input (ru_maxrss); on CUDA
it is torch.cuda.max_memory_allocated. Prints a Markdown table. Note that SDPA's fused CPU/CUDA
kernels already keep *full* attention's memory linear (they never store the T x T weights);
the explicit-softmax path of `--pos relative` does store them.
"""

import argparse
import json
import os
import resource
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def measure(length: int, attention: str, window: int, pos: str | None, device: str,
            backward: bool, repeats: int) -> dict:
    """Runs in the child process."""
    import torch

    from asr.attention import MultiHeadAttention

    torch.set_num_threads(1)
    torch.manual_seed(0)
    layer = MultiHeadAttention(144, 4, pos, window=window if attention == "local" else 0).to(device)
    x = torch.randn(1, length, 144, device=device, requires_grad=backward)
    mask = torch.ones(1, 1, 1, length, dtype=torch.bool, device=device)

    def step() -> None:
        y = layer(x, x, mask)
        if backward:
            y.sum().backward()

    if device == "cuda":
        torch.cuda.synchronize()
        torch.cuda.reset_peak_memory_stats()
        base = torch.cuda.memory_allocated()
    else:
        base = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024
    with torch.set_grad_enabled(backward):
        step()  # the first run sets the peak; later ones are timed (allocator and kernels warm)
        if device == "cuda":
            torch.cuda.synchronize()
        started = time.perf_counter()
        for _ in range(repeats):
            step()
        if device == "cuda":
            torch.cuda.synchronize()
    seconds = (time.perf_counter() - started) / repeats
    if device == "cuda":
        peak = torch.cuda.max_memory_allocated() - base
    else:
        peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024 - base
    return {"seconds": seconds, "peak_bytes": max(peak, 0)}


def run_child(length: int, attention: str, args) -> dict:
    command = [sys.executable, "-m", "benchmarks.attention", "--child", str(length), attention, "--window",
               str(args.window), "--device", args.device, "--repeats", str(args.repeats)]
    if args.pos:
        command += ["--pos", args.pos]
    if args.backward:
        command.append("--backward")
    done = subprocess.run(command, capture_output=True, text=True, cwd=ROOT,
                          env={**os.environ, "OMP_NUM_THREADS": "1"})
    if done.returncode != 0:
        return {"error": done.stderr.strip().splitlines()[-1] if done.stderr.strip() else "failed"}
    return json.loads(done.stdout)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--lengths", type=int, nargs="+", default=[500, 1000, 2000, 4000, 8000])
    parser.add_argument("--window", type=int, default=16)
    parser.add_argument("--device", default="cpu")
    parser.add_argument("--pos", choices=["rope", "relative"],
                        help="position handling inside attention (relative: explicit softmax)")
    parser.add_argument("--backward", action="store_true", help="time forward + backward")
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--child", nargs=2, metavar=("LENGTH", "ATTENTION"), help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.child:
        print(json.dumps(measure(int(args.child[0]), args.child[1], args.window, args.pos,
                                 args.device, args.backward, args.repeats)))
        return
    what = "forward + backward" if args.backward else "forward"
    print(f"one attention layer, d_model 144, 4 heads, batch 1, {what}, {args.device}, 1 thread; "
          f"local window {args.window} each side; pos {args.pos or 'sinusoidal (SDPA)'}\n")
    print("| positions | full: peak MiB | full: ms | local: peak MiB | local: ms |")
    print("|---:|---:|---:|---:|---:|")
    for length in args.lengths:
        cells = []
        for attention in ("full", "local"):
            got = run_child(length, attention, args)
            if "error" in got:
                cells += [got["error"][:40], "-"]
            else:
                cells += [f"{got['peak_bytes'] / 2**20:.1f}", f"{1000 * got['seconds']:.1f}"]
        print(f"| {length} | " + " | ".join(cells) + " |", flush=True)


if __name__ == "__main__":
    main()

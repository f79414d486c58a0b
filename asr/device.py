"""Which torch device to run on, from a setting such as "auto", "cpu" or "cuda:1".

Training (`trainer.device`) and inference (`Transcriber.from_pretrained(device=...)`) both
read the setting here, so a device that does not exist fails the same clear way in either.
On the CPU, training takes as many threads as there are idle cores (`idle_cpus`).
"""

import os
import statistics
import time

import torch

from asr.threads import runnable_others, usable_cpus


def pick_device(device: str | torch.device = "auto") -> torch.device:
    """"auto" means the GPU when there is one; else "cpu", "cuda" or "cuda:N", which must exist."""
    if device == "auto":
        return torch.device("cuda" if torch.cuda.is_available() else "cpu")
    try:
        chosen = torch.device(device)
    except (RuntimeError, TypeError, ValueError):
        chosen = None
    if chosen is None or chosen.type not in ("cpu", "cuda"):
        raise ValueError(f"device must be auto, cpu, cuda or cuda:N, got {device!r}")
    if chosen.type == "cuda" and not torch.cuda.is_available():
        raise ValueError(f"device {device}: no CUDA GPU is available here (use cpu)")
    if chosen.type == "cuda" and (chosen.index or 0) >= torch.cuda.device_count():
        raise ValueError(f"device {device}: there is no such GPU (this machine has "
                         f"{torch.cuda.device_count()})")
    return chosen


def idle_cpus(samples: int = 20, interval: float = 0.025) -> int:
    """The CPUs this process may use that no other runnable process is using now, at least 1.

    torch's CPU threads wait for each other at every operation: when another program keeps a
    core busy, a thread on it stalls them all, and a 2-thread training step on a 2-core machine
    with other work beside it runs several times slower than a 1-thread one. The
    runnable count of /proc/loadavg (this process included) is sampled for half a second and
    its median taken; where it cannot be read, every usable CPU counts as idle.
    """
    cpus = usable_cpus()
    counts = []
    for _ in range(samples):
        others = runnable_others()
        if others is None:
            return cpus
        counts.append(others)
        time.sleep(interval)
    return max(1, min(cpus, os.cpu_count() or cpus) - statistics.median_low(counts))

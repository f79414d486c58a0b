"""Which torch device to run on, from a setting such as "auto", "cpu" or "cuda:1".

Training (`trainer.device`) and inference (`Transcriber.from_pretrained(device=...)`) both
read the setting here, so a device that does not exist fails the same clear way in either.
"""

import torch


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

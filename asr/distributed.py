"""Data-parallel training across processes started by torchrun: the process group and the
three collectives training needs.

`torchrun --nproc_per_node=N -m asr.train trainer=ddp` starts N copies of training and tells
each its RANK, LOCAL_RANK and WORLD_SIZE (and where to meet) through the environment;
`init_distributed` joins them into one process group: NCCL between GPUs, gloo between CPU
processes (which is how the tests run it). Without `trainer.distributed` nothing here runs
and training is a plain single process.
"""

import os
from dataclasses import dataclass

import torch
import torch.distributed as dist


@dataclass(frozen=True)
class Distributed:
    """Where this process stands among the training processes (a single one by default)."""

    rank: int = 0
    world_size: int = 1
    local_rank: int = 0

    @property
    def enabled(self) -> bool:
        return self.world_size > 1


def init_distributed(enabled: bool, backend: str, device: torch.device) -> Distributed:
    """Join torchrun's process group (once per process); a single process when not `enabled`
    or when torchrun started only one."""
    if not enabled:
        return Distributed(rank=int(os.environ.get("RANK", 0)))
    missing = [k for k in ("RANK", "WORLD_SIZE", "LOCAL_RANK", "MASTER_ADDR") if k not in os.environ]
    if missing:
        raise ValueError(f"trainer.distributed=true needs torchrun's environment ({', '.join(missing)} "
                         "not set): start training with torchrun --nproc_per_node=N -m asr.train ...")
    info = Distributed(int(os.environ["RANK"]), int(os.environ["WORLD_SIZE"]),
                       int(os.environ["LOCAL_RANK"]))
    if info.enabled and not dist.is_initialized():
        if backend == "auto":
            backend = "nccl" if device.type == "cuda" else "gloo"
        dist.init_process_group(backend, device_id=device if device.type == "cuda" else None)
    return info


def distributed_device(device: torch.device, info: Distributed) -> torch.device:
    """One GPU per process: cuda:LOCAL_RANK when the configured device is the GPU (`cuda`
    alone is the current GPU), made current; an index is needed, which `set_device` demands."""
    if device.type == "cuda" and device.index is None:
        index = info.local_rank if info.enabled else torch.cuda.current_device()
        device = torch.device("cuda", index)
    if device.type == "cuda":
        torch.cuda.set_device(device)
    return device


def all_reduce_sum(values: list[float], device: torch.device) -> list[float]:
    """The sums over all processes of a few numbers (in one float64 collective)."""
    tensor = torch.tensor(values, dtype=torch.float64, device=device)
    dist.all_reduce(tensor)
    return tensor.tolist()


def all_reduce_min(values: list[int], device: torch.device) -> list[int]:
    """Element-wise minimum over all processes (e.g. "does every rank have this batch")."""
    tensor = torch.tensor(values, dtype=torch.int64, device=device)
    dist.all_reduce(tensor, op=dist.ReduceOp.MIN)
    return tensor.tolist()


def gather_objects(obj: object, info: Distributed) -> list:
    """Every process's `obj` (picklable: numbers, strings), in rank order, on every process."""
    if not info.enabled:
        return [obj]
    gathered: list = [None] * info.world_size
    dist.all_gather_object(gathered, obj)
    return gathered


def barrier(info: Distributed) -> None:
    """Wait until every rank gets here (e.g. until rank 0 has written a file the others read)."""
    if info.enabled:
        dist.barrier()


def shutdown(info: Distributed) -> None:
    """Leave the process group once every rank has finished (rank 0 may still be saving)."""
    if info.enabled and dist.is_initialized():
        dist.barrier()
        dist.destroy_process_group()

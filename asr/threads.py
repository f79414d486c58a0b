"""How many CPU threads each piece of work gets, and how idle threads wait.

A machine that runs a recogniser is rarely idle: a browser, a build, Home Assistant. torch's
threads (and onnxruntime's) meet at a barrier after every operator, and decoding one utterance
is thousands of small operators. When another program holds a core, the thread on it stalls
the others at every barrier, and they spin while they wait: on 2 cores beside other work,
2-thread decoding of one utterance ran 6-15x slower than 1-thread decoding, which loses only
about a tenth on an idle machine (BENCHMARKS.md, `benchmarks/load.py`). So:

- one utterance, a stream or the demo decodes on one thread: there is no barrier to stall;
- a batch of utterances takes the configured threads (torch's count, or `threads=`), but no
  more than the cores idle at that moment (`idle_now`), so a busy machine gets one;
- training takes the idle cores at its start (`asr.device.idle_cpus`);
- an explicit count (`--threads N`, `Transcriber(threads=N)`, `trainer.num_threads`) is
  always obeyed;
- idle threads sleep instead of spinning: `OMP_WAIT_POLICY=PASSIVE` for torch's OpenMP
  (`asr.WAIT_POLICY`, set by `import asr` before torch loads, unless the environment sets it;
  torch imported before asr keeps OpenMP's own policy) and onnxruntime's
  `session.intra_op.allow_spinning=0`.
"""

import os
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import torch


def usable_cpus() -> int:
    """The CPUs this process may run on."""
    return len(os.sched_getaffinity(0))


def runnable_others() -> int | None:
    """Processes other than this one that are runnable now (/proc/loadavg), or None where it
    cannot be read."""
    try:
        running = int(Path("/proc/loadavg").read_text().split()[3].partition("/")[0])
    except (OSError, IndexError, ValueError):
        return None
    return max(0, running - 1)


def idle_now() -> int:
    """The usable CPUs no other runnable process holds at this moment, at least 1 (every
    usable CPU where the load cannot be read)."""
    cpus, others = usable_cpus(), runnable_others()
    return cpus if others is None else max(1, cpus - others)


def decoding_threads(rows: int, configured: int, idle: int, fixed: bool = False) -> int:
    """Threads for decoding `rows` utterances at once: `configured` if it is `fixed` (asked for
    by name); else 1 for one utterance, and for a batch the configured count, at most the
    `idle` cores."""
    if fixed:
        return configured
    return 1 if rows <= 1 else max(1, min(configured, idle))


def session_threads(batch_size: int, requested: int | None) -> int:
    """onnxruntime's intra-op threads, fixed when its session is made: `requested`, else 1
    for one utterance at a time and torch's count for batches."""
    if requested:
        return requested
    return 1 if batch_size <= 1 else torch.get_num_threads()


@contextmanager
def torch_threads(count: int) -> Iterator[None]:
    """torch's threads in this thread set to `count` for the block, then put back."""
    before = torch.get_num_threads()
    if count != before:
        torch.set_num_threads(count)
    try:
        yield
    finally:
        if count != before:
            torch.set_num_threads(before)

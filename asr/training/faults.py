"""Bad data under `data.on_error`: manifest lines and audio files training cannot use.

`raise` stops the run at the first one; `skip` leaves each out, counts it (the bad lines in
`TrainState.skipped_lines`, the bad audio in each epoch's record) and warns once per problem.
"""

from collections.abc import Callable

import torch

from asr.distributed import Distributed, all_reduce_min
from asr.training.options import TrainingError
from asr.training.state import TrainState


class DataFaults:
    """What a run has left out so far, and the rule for the next problem."""

    def __init__(self, on_error: str, warn: Callable[[str], None]) -> None:
        self.on_error, self.warn = on_error, warn
        self.skipped_lines = 0
        self.seen: set[str] = set()  # audio problems warned about already

    def skip_line(self, problem: str) -> None:
        """`read_manifest`'s callback for a line it leaves out."""
        self.skipped_lines += 1
        self.warn(f"warning: skipped {problem}")

    def usable(self, batch: dict, state: TrainState | None = None) -> bool:
        """Apply data.on_error to the batch's unusable audio (counted in `state`'s epoch when
        given); False if nothing is left of the batch."""
        for problem in batch.pop("bad"):
            if self.on_error != "skip":
                raise TrainingError(f"{problem} (data.on_error=skip leaves such files out)")
            if state is not None:
                state.epoch_bad_audio += 1
            if problem not in self.seen:
                self.seen.add(problem)
                self.warn(f"warning: skipped {problem}")
        return "wave" in batch

    def agreed_usable(self, group: list[dict], state: TrainState, dist: Distributed,
                      device: torch.device) -> list[dict]:
        """The group's usable micro-batches; in DDP only those every rank has, so that all
        ranks run the same forward/backward passes (a rank left out would hang the others)."""
        usable = [int(self.usable(batch, state)) for batch in group]
        if dist.enabled:
            usable = all_reduce_min(usable, device)
        return [batch for batch, ok in zip(group, usable, strict=True) if ok]

"""Where a run stands (`TrainState`) and the checkpoint it resumes from.

The checkpoint holds the weights, optimiser, schedule, loss scaler, this state (the position
in the epoch included) and every random generator training draws from (python, numpy, torch,
CUDA), so that a run resumed after a kill ends with the weights of an uninterrupted one.
"""

import hashlib
import math
import random
from dataclasses import asdict, dataclass, field
from pathlib import Path

import numpy as np
import torch

from asr.checkpoint import (
    FORMAT_KEY,
    WEIGHTS_FORMAT,
    load_torch,
    save_torch,
    upgrade_optimizer,
    upgrade_weights,
)
from asr.training.options import TrainingError
from asr.untrusted import first_line


@dataclass
class TrainState:
    """What a resumed run needs besides weights and optimiser: where it was and how it went."""

    epoch: int = 0
    step: int = 0
    best_wer: float = math.inf
    train_seconds: float = 0.0
    run_seconds: float = 0.0  # wall time of training (steps, dev scoring, saves), all parts
    audio_seconds: float = 0.0
    history: list[dict] = field(default_factory=list)
    skipped_lines: int = 0  # bad manifest lines left out (data.on_error=skip)
    # The weights the run started from (trainer.init_from; "" from scratch), so that a resumed
    # run's model directory says so too: what it has heard counts theirs (None: not recorded).
    init_from: str | None = None
    # Hours of audio those weights had heard, read from their directory's record when the run
    # started (0 from scratch; None: not recorded there), so that what this run's weights have
    # heard in all does not depend on that directory as it is later.
    heard_before_hours: float | None = None
    # The manifests the run started on: their SHA-256 by role (train, dev), so that a resume
    # on other data is refused (None: not recorded, a run older than the record).
    data: dict[str, str] | None = None
    # The sha256 of those weights' model.pt, read when the run started ("" from scratch; None:
    # not recorded), so that the model's lineage names its parent whatever that folder holds later.
    init_sha256: str | None = None
    # The epoch in progress, saved mid-epoch so that a resumed run continues it exactly.
    epoch_batches: int = 0
    epoch_loss_sum: float = 0.0
    epoch_loss_count: int = 0
    epoch_bad_steps: int = 0  # non-finite loss or gradients: step skipped
    epoch_bad_audio: int = 0  # unusable audio files left out (data.on_error=skip)
    bad_streak: int = 0  # consecutive skipped steps, bounded by trainer.max_bad_steps
    loss_curve: list[dict] = field(default_factory=list)  # mean train loss every trainer.log_every steps
    loss_window: list[float] = field(default_factory=list)  # losses since the curve's last point

    def record_step(self, loss: float | None, seconds: float, batches: int) -> None:
        """Count a group of `batches` micro-batches in the epoch; `loss` is None when it
        made no step (nothing usable, or not finite)."""
        if loss is not None:
            self.epoch_loss_sum, self.epoch_loss_count = \
                self.epoch_loss_sum + loss, self.epoch_loss_count + 1
            self.audio_seconds += seconds
        self.loss_window.append(math.nan if loss is None else loss)
        self.epoch_batches += batches

    def heard(self, corpus_hours: float) -> dict[str, float | None]:
        """What the weights have heard: the hours of the corpus this run draws from, the hours
        of training audio this run's steps learnt from (resumes included) and, added to what
        the weights it started from had heard, in all (None where that is not recorded)."""
        hours = self.audio_seconds / 3600
        before = self.heard_before_hours
        return {"corpus_train_hours": round(corpus_hours, 6), "audio_hours_heard": round(hours, 6),
                "total_audio_hours_heard": None if before is None else round(before + hours, 6)}

    def parent(self) -> dict[str, str | None]:
        """The weights the run started from: their folder and their model.pt's sha256."""
        return {"init_from": self.init_from, "init_sha256": self.init_sha256}

    def curve_point(self, lr: float) -> None:
        """A point of the training-loss curve: the mean over the last steps (NaN if one was)."""
        self.loss_curve.append({"step": self.step,
                                "train_loss": sum(self.loss_window) / len(self.loss_window),
                                "lr": lr})
        self.loss_window = []

    def close_epoch(self, dev: dict[str, float], lr: float) -> tuple[dict, bool]:
        """Record the finished epoch in `history` and start the next: its record and whether
        it has the best dev WER so far."""
        self.epoch += 1
        rate = self.audio_seconds / max(self.train_seconds, 1e-9)
        record = {"epoch": self.epoch, "step": self.step,
                  "train_loss": self.epoch_loss_sum / max(self.epoch_loss_count, 1), **dev,
                  "lr": lr, "audio_sec_per_sec": rate,
                  "bad_steps": self.epoch_bad_steps, "bad_audio": self.epoch_bad_audio}
        self.history.append(record)
        improved = dev["dev_wer"] < self.best_wer
        if improved:
            self.best_wer = dev["dev_wer"]
        self.epoch_batches = self.epoch_loss_count = 0
        self.epoch_loss_sum = 0.0
        self.epoch_bad_steps = self.epoch_bad_audio = 0
        return record, improved


def save_training_state(path: Path, model: torch.nn.Module, optimizer: torch.optim.Optimizer,
                        scheduler: torch.optim.lr_scheduler.LRScheduler,
                        scaler: torch.amp.GradScaler, state: TrainState) -> None:
    """The checkpoint to resume from, written atomically."""
    scaled = {"scaler": scaler.state_dict()} if scaler.is_enabled() else {}
    save_torch({"model": model.state_dict(), "optimizer": optimizer.state_dict(),
                "scheduler": scheduler.state_dict(), "state": asdict(state),
                "rng": rng_states(), FORMAT_KEY: WEIGHTS_FORMAT, **scaled}, path)


def load_training_state(path: Path, model: torch.nn.Module, optimizer: torch.optim.Optimizer,
                        scheduler: torch.optim.lr_scheduler.LRScheduler,
                        scaler: torch.amp.GradScaler) -> TrainState:
    """Load the checkpoint into the run's parts and generators; the state it was at.

    It is read onto the CPU, where the generators' states must be: the model and the optimizer
    copy theirs to their parameters' device."""
    ckpt = load_torch(path)
    try:
        optimizer_state = upgrade_optimizer(ckpt, model)  # reads the weights' saved layout
        weights = dict(ckpt["model"])
        upgrade_weights(weights, model, ckpt.get(FORMAT_KEY))
        model.load_state_dict(weights)
        optimizer.load_state_dict(optimizer_state)
        scheduler.load_state_dict(ckpt["scheduler"])
        if "scaler" in ckpt:
            scaler.load_state_dict(ckpt["scaler"])
        state = TrainState(**ckpt["state"])
        set_rng_states(ckpt.get("rng") or {"torch": ckpt["torch_rng"]})
    except (KeyError, TypeError, ValueError, RuntimeError, AttributeError) as err:
        problem = first_line(err)
        raise TrainingError(f"{path}: not a checkpoint this run can continue ({problem}); "
                            "pass trainer.overwrite=true to start over") from None
    return state


def seed_everything(seed: int) -> None:
    """Seed the python, numpy and torch generators that training draws from."""
    random.seed(seed)
    np.random.seed(seed)
    torch.manual_seed(seed)


def rng_states() -> dict:
    """Every generator training draws from, as tensors and plain data (weights_only-loadable)."""
    name, key, pos, has_gauss, gauss = np.random.get_state()
    return {"python": random.getstate(), "torch": torch.get_rng_state(),
            "numpy": [name, torch.from_numpy(key.astype(np.int64)), pos, has_gauss, gauss],
            "cuda": torch.cuda.get_rng_state_all() if torch.cuda.is_available() else []}


def set_rng_states(states: dict) -> None:
    """Put back the generators `rng_states` saved (a checkpoint may hold torch's alone)."""
    torch.set_rng_state(states["torch"].cpu())
    if "python" in states:
        version, internal, gauss = states["python"]
        random.setstate((version, tuple(internal), gauss))
    if "numpy" in states:
        name, key, pos, has_gauss, gauss = states["numpy"]
        np.random.set_state((name, key.numpy().astype(np.uint32), pos, has_gauss, gauss))
    if states.get("cuda") and torch.cuda.is_available():
        torch.cuda.set_rng_state_all([s.cpu() for s in states["cuda"]])


def data_digests(manifests: dict[str, str]) -> dict[str, str]:
    """Each manifest's role -> the SHA-256 of its bytes (what a resumed run must train on)."""
    digests = {}
    for role, path in manifests.items():
        digest = hashlib.sha256()
        with open(path, "rb") as f:
            while block := f.read(1 << 20):
                digest.update(block)
        digests[role] = digest.hexdigest()
    return digests


def check_same_data(recorded: dict[str, str] | None, manifests: dict[str, str],
                    out: Path) -> None:
    """A TrainingError when a resumed run's manifests are not those it started on."""
    if recorded is None:
        return
    now = data_digests(manifests)
    changed = [role for role in sorted(recorded) if now.get(role) != recorded[role]]
    if changed:
        raise TrainingError(f"{out}: the run started on other data (its {changed[0]} manifest "
                            f"{manifests.get(changed[0])} has changed since); resume it on the "
                            "data it started with, or pass trainer.overwrite=true to start over")

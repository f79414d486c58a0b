"""Training curves beside the model, for plotting while a run goes on (`trainer.logger`).

- `csv`: OUT/curves.csv, one `step,metric,value` row per scalar (pandas:
  `pd.read_csv(path).pivot(index="step", columns="metric", values="value")`);
- `tensorboard`: event files in OUT/tensorboard (`tensorboard --logdir OUT/tensorboard`);
- `none`: neither (metrics.json still holds every epoch and the loss curve).

The scalars are those the training state keeps: every `trainer.log_every` steps the mean
training loss and the learning rate (`train/loss`, `train/lr`), and after every epoch its
record (`epoch/train_loss`, `epoch/dev_loss`, `epoch/dev_wer`, ...). Because they come from
the state that checkpoints save, a resumed run's curves are those of a run never stopped: the
CSV file is rewritten whole (atomically) from the state, and TensorBoard drops the events a
killed run wrote after the checkpoint it resumes from (`purge_step`).
"""

from pathlib import Path

from asr.checkpoint import save_text

LOGGERS = ("csv", "tensorboard", "none")
CSV_FILE, TENSORBOARD_DIR = "curves.csv", "tensorboard"
EPOCH_KEYS = ("epoch", "train_loss", "dev_loss", "dev_wer", "lr", "audio_sec_per_sec",
              "bad_steps", "bad_audio")


def scalars(loss_curve: list[dict], history: list[dict]) -> list[tuple[int, str, float]]:
    """(step, metric, value) of the loss curve and the epoch records, in step order."""
    rows = [(point["step"], f"train/{key}", point[value])
            for point in loss_curve for key, value in (("loss", "train_loss"), ("lr", "lr"))]
    rows += [(record["step"], f"epoch/{key}", record[key])
             for record in history for key in EPOCH_KEYS if key in record]
    return sorted(rows, key=lambda row: row[0])  # stable: within a step, the curve first


def summary_writer() -> type:
    """TensorBoard's SummaryWriter; a ValueError saying how to install it when it is not.
    Training asks before it writes anything (`asr.training.options`)."""
    try:
        from torch.utils.tensorboard import SummaryWriter
    except ImportError:
        raise ValueError("trainer.logger=tensorboard needs the tensorboard package: pip "
                         "install 'speech-transformer-asr[tensorboard]' (or "
                         "trainer.logger=csv)") from None
    return SummaryWriter


class Curves:
    """Writes the state's scalars as `kind` says; `update` after the state grows."""

    def __init__(self, kind: str, out_dir: Path, loss_curve: list[dict], history: list[dict],
                 resumed_step: int | None = None) -> None:
        if kind not in LOGGERS:
            raise ValueError(f"trainer.logger must be csv, tensorboard or none, got {kind!r}")
        self.kind, self.out_dir = kind, out_dir
        self.written = len(scalars(loss_curve, history))  # already in the files
        self.writer = None
        if kind == "tensorboard":
            SummaryWriter = summary_writer()
            # TensorBoard drops earlier events from this step on: those a killed run wrote
            # after its checkpoint, or all of a run started over
            purge = resumed_step + 1 if resumed_step is not None else 0
            self.writer = SummaryWriter(str(out_dir / TENSORBOARD_DIR), purge_step=purge)
        elif kind == "csv":  # at once: a resumed run's file loses what came after its checkpoint
            self.update(loss_curve, history)

    @property
    def location(self) -> Path | None:
        return {"csv": self.out_dir / CSV_FILE,
                "tensorboard": self.out_dir / TENSORBOARD_DIR}.get(self.kind)

    def update(self, loss_curve: list[dict], history: list[dict]) -> None:
        rows = scalars(loss_curve, history)
        if self.kind == "csv":
            save_text("step,metric,value\n" + "".join(f"{step},{name},{value!r}\n"
                                                      for step, name, value in rows),
                      self.out_dir / CSV_FILE)
        elif self.writer is not None:
            for step, name, value in rows[self.written:]:
                self.writer.add_scalar(name, value, step)
            self.writer.flush()  # a kill loses nothing already logged
        self.written = len(rows)

    def close(self) -> None:
        if self.writer is not None:
            self.writer.close()

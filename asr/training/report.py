"""What a run shows and keeps of itself, from rank 0 alone: log lines, progress bars, curves.

Messages go through `logging` (logger `asr.train`): the command line shows them on the
console and Hydra's job log (OUT/hydra/<time>/train.log) keeps them; the curves go to a CSV
file or TensorBoard as well (`trainer.logger`, asr/curves.py). Progress bars (the epoch's,
kept after it ends, the CMVN statistics' and dev decoding's) show on a terminal only, when
`trainer.progress` asks for them.
"""

import logging
from collections.abc import Iterable
from datetime import datetime, timedelta
from pathlib import Path

import torch
from tqdm import tqdm

from asr.curves import Curves
from asr.progress import progress
from asr.training.budget import Forecast
from asr.training.options import TrainingError
from asr.training.state import TrainState

log = logging.getLogger("asr.train")  # not __name__: the name users configure and filter on


class Report:
    """Rank 0's log lines, progress bars and curves; every other rank's are silent."""

    def __init__(self, is_main: bool, bars: bool) -> None:
        self.is_main, self.bars = is_main, bars
        self.curves: Curves | None = None  # once the run holds its directory

    def log(self, message: str, level: int = logging.INFO) -> None:
        if self.is_main:
            log.log(level, message)

    def bar(self, iterable: Iterable, desc: str, **options) -> tqdm:
        """A progress bar of rank 0, on a terminal, when `trainer.progress` asks for them."""
        shown = self.is_main and self.bars
        return progress(iterable, desc, **options, **({} if shown else {"disable": True}))

    def open_curves(self, kind: str, out_dir: Path, state: TrainState, resumed: bool) -> None:
        """Start (or, resumed, continue) the CSV file or TensorBoard events (`trainer.logger`)."""
        if not self.is_main:
            return
        try:
            self.curves = Curves(kind, out_dir, state.loss_curve, state.history,
                                 state.step if resumed else None)
        except ValueError as err:
            raise TrainingError(str(err)) from None

    def update_curves(self, state: TrainState) -> None:
        if self.curves is not None:
            self.curves.update(state.loss_curve, state.history)

    def close_curves(self) -> None:
        if self.curves is not None:
            self.curves.close()

    def started(self, params: int, vocab: int, utterances: int,
                device: torch.device) -> None:
        where = self.curves.location if self.curves else None
        self.log(f"model: {params / 1e6:.2f}M parameters, vocab {vocab}, {utterances} training "
                 f"utterances, device {device}" + (f"; curves in {where}" if where else ""))

    def epoch(self, record: dict, improved: bool) -> None:
        """The line that sums up an epoch (its record in `TrainState.history`)."""
        skipped = "".join(f", {n} {what} skipped" for n, what in [
            (record["bad_steps"], "non-finite step(s)"),
            (record["bad_audio"], "bad audio file(s)")] if n)
        self.log(f"epoch {record['epoch']}: train loss {record['train_loss']:.3f}, dev loss "
                 f"{record['dev_loss']:.3f}, dev WER {100 * record['dev_wer']:.2f}%"
                 f"{' (best)' if improved else ''}, {record['audio_sec_per_sec']:.0f} audio s/s"
                 f"{skipped}")

    def forecast(self, forecast: Forecast, audio_rate: float, max_epochs: int,
                 max_minutes: float | None, max_steps: int | None = None) -> None:
        """The speed measured so far and when the run will end: a plain line after each epoch,
        so that a piped log has it too."""
        end = (datetime.now() + timedelta(seconds=forecast.left)).strftime("%H:%M")
        what = f"after epoch {max_epochs} of {max_epochs}"
        if max_steps is not None and forecast.epochs_at_end < max_epochs:
            what = (f"at step {max_steps} (trainer.max_steps), about "
                    f"{forecast.epochs_at_end:.1f} of {max_epochs} epochs in")
        if forecast.by_budget:
            what = (f"at the budget (trainer.max_minutes={max_minutes:g}), about "
                    f"{forecast.epochs_at_end:.1f} of {max_epochs} epochs in (all {max_epochs} "
                    f"would end in {forecast.epochs_left_seconds / 60:.1f} min)")
        self.log(f"speed: {audio_rate:.0f} audio s/s, {forecast.epoch_seconds:.0f} s/epoch "
                 f"({forecast.eval_seconds:.0f} s of it dev scoring); end expected at {end} "
                 f"(in {forecast.left / 60:.1f} min), {what}")

    def budget_stop(self, max_minutes: float, epochs: int, max_epochs: int,
                    cut: tuple[int, int] | None, step: int, elapsed: float) -> None:
        """The line of a run the budget ended; `cut`: the batches done of the last epoch, of
        how many, when the budget ended it before its end."""
        cut_line = f" (epoch {epochs} cut at batch {cut[0]} of {cut[1]})" if cut else ""
        self.log(f"stopped at the budget (trainer.max_minutes={max_minutes:g}) after {epochs} of "
                 f"{max_epochs} epochs{cut_line}, step {step}, {elapsed / 60:.1f} min of training")

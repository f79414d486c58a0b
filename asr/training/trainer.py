"""The training loop: `Trainer(cfg).fit()` runs epochs of optimiser steps on the parts
`TrainingSetup` built; after each epoch it measures dev loss and dev WER, keeps the best
weights (by dev WER) and the last training state, all in one model directory.

Crash safety: every file is written atomically, and the training state (`asr.training.state`)
is saved when the run starts, after every epoch and mid-epoch (every
`trainer.save_every_minutes` of training, and every `trainer.save_every_steps` steps), so
`trainer.resume=true` after a kill continues exactly where the last save left off: the
weights end up equal to those of an uninterrupted run.

Time (`asr.training.budget`): after each epoch a line gives the measured speed and the expected
end. Under a budget (`trainer.max_minutes`) the run stops between steps in time for its end;
the epoch it stops in is scored and kept like any other and counts as done, so a resumed run
(with a larger budget) starts the next one.
"""

import logging
import math
import time
from contextlib import nullcontext

from tqdm.contrib.logging import logging_redirect_tqdm

from asr.averaging import AVERAGED, average_epochs, save_epoch_weights
from asr.checkpoint import CHECKPOINT, save_metrics, save_model_dir, upgrade_weights
from asr.distributed import all_reduce_min, barrier, shutdown
from asr.training.budget import Budget, Clock, Plan
from asr.training.build import TrainingSetup
from asr.training.options import TrainingError, eval_precision
from asr.training.run_dir import hold_run_dir
from asr.training.state import TrainState, save_training_state
from asr.training.step import micro_batch_groups
from asr.training.validate import validate


class Trainer(TrainingSetup):
    """One training run, configured by the resolved Hydra config: `TrainingSetup.__init__`
    builds its parts (model, tokenizer, loaders, optimiser, state), `fit` trains them."""

    def fit(self) -> TrainState:
        """Train to `trainer.max_epochs` (or `trainer.max_steps`, or `trainer.max_minutes`),
        then average the kept epochs' weights when `trainer.average_checkpoints` asks; the
        final state."""
        held = hold_run_dir(self.out_dir, self.resumed) if self.is_main else nullcontext()
        history = self.state.history
        clock = Clock(self._plan(), self.state.run_seconds,
                      history[-1].get("dev_seconds") if history else None)
        self.budget = Budget(clock, self.cfg.scheduler.get("total_steps") or 0)
        self.budget.start(self.scheduler)
        with held, logging_redirect_tqdm():  # log lines above the bars
            if self.is_main and not self.resumed:
                self.save_checkpoint()  # first: from here on, a killed run can be resumed
                save_model_dir(self.out_dir, self.model, self.tokenizer, self.cfg)
            # only now: out_dir is this run's (its lock is held)
            self.report.open_curves(self.cfg.trainer.logger, self.out_dir, self.state,
                                    self.resumed)
            self.report.started(sum(p.numel() for p in self.model.parameters()),
                                self.tokenizer.vocab_size, len(self.train_utts), self.device)
            while self._more_epochs():
                self.train_epoch()
                self.end_epoch(self._timed_evaluate())
            if self.budget.spent:
                # The state as of the stop: the last save came before the time it was decided
                # at, and a resumed run would take that gap for time left to train in.
                self.save_checkpoint()
                if self.is_main and self.state.history:
                    self.save_metrics()
                self.report.budget_stop(self.cfg.trainer.max_minutes, self.state.epoch,
                                        self.cfg.trainer.max_epochs, self.budget.cut,
                                        self.state.step, self.budget.clock.elapsed())
            if self.cfg.trainer.average_checkpoints:
                self.average_checkpoints()
            self.report.close_curves()
        shutdown(self.dist)
        return self.state

    def train_epoch(self) -> None:
        """The epoch's steps, from where the state says it stands (a resumed run mid-epoch)."""
        self.train_model.train()
        state, trainer = self.state, self.cfg.trainer
        # DurationBatchSampler, or ShardBatches when training from shards
        sampler = self.train_loader.batch_sampler or self.train_loader.dataset
        sampler.set_epoch(state.epoch, start=state.epoch_batches)
        self.loader_rng.manual_seed(self.cfg.seed + state.epoch)  # worker seeds, per epoch
        bar = self.report.bar(self.train_loader, f"epoch {state.epoch + 1}", total=len(sampler),
                              initial=state.epoch_batches, leave=True, unit="batch", delay=0)
        last = time.perf_counter()
        for group in micro_batch_groups(bar, trainer.accumulate_grad_batches):
            loss, seconds = self.train_step(group)
            state.record_step(loss, seconds, len(group))
            if loss is not None:
                bar.set_postfix(loss=f"{loss:.3f}", lr=f"{self._lr():.2e}")
            if loss is not None and state.step % trainer.log_every == 0:
                state.curve_point(self._lr())
                self.report.update_curves(state)
            now = time.perf_counter()
            self.budget.clock.stepped(now - last)
            state.train_seconds, last = state.train_seconds + now - last, now
            if loss is not None and self._save_due():
                self.save_checkpoint()
            if self._out_of_steps():
                break
            if self._out_of_time():
                self.budget.cut = (state.epoch_batches, len(sampler))
                break

    def train_step(self, group: list[dict]) -> tuple[float | None, float]:
        """One optimiser step over a group of micro-batches (`asr.training.step`): the step's
        loss and the seconds of audio learnt from, or (None, 0) if nothing was usable or the
        loss or gradients were not finite (step skipped; training stops after
        trainer.max_bad_steps in a row)."""
        used = self.faults.agreed_usable(group, self.state, self.dist, self.device)
        if not used:
            return None, 0.0
        loss, seconds, not_finite = self.optimize(used)
        if not_finite:
            self._bad_step(not_finite)
            return None, 0.0
        self.state.step += 1
        self.state.bad_streak = 0
        return loss, seconds

    def _bad_step(self, what: str) -> None:
        state, limit = self.state, self.cfg.trainer.max_bad_steps
        state.epoch_bad_steps, state.bad_streak = state.epoch_bad_steps + 1, state.bad_streak + 1
        self.report.log(f"warning: non-finite {what} at epoch {state.epoch + 1}, batch "
                        f"{state.epoch_batches + 1} (after step {state.step}); step skipped",
                        logging.WARNING)
        if limit and state.bad_streak >= limit:
            raise TrainingError(f"loss or gradients not finite for {state.bad_streak} steps in a "
                                f"row (trainer.max_bad_steps={limit}); stopped at epoch "
                                f"{state.epoch + 1}, step {state.step}: lower optim.lr or "
                                "check the data")

    def evaluate(self) -> dict[str, float]:
        """Dev loss and greedy-decoding dev WER (`asr.training.validate`)."""
        bar = self.report.bar(self.dev_loader, "dev", unit="batch")
        return validate(self.model, self.tokenizer,
                        (batch for batch in bar if self.faults.usable(batch, self.state)),
                        self.device, eval_precision(self.precision, self.device), self.dist)

    def _timed_evaluate(self) -> dict[str, float]:
        """`evaluate`, and the seconds it took (`dev_seconds`, in the epoch's record)."""
        started = time.monotonic()
        dev = self.evaluate()
        seconds = time.monotonic() - started
        self.budget.clock.evaluated(seconds)
        return {**dev, "dev_seconds": round(seconds, 3)}

    def end_epoch(self, dev: dict[str, float]) -> None:
        """Record the epoch, keep the best weights and save the state to resume from."""
        state, trainer = self.state, self.cfg.trainer
        record, improved = state.close_epoch(dev, self._lr())
        self.report.update_curves(state)
        self.report.epoch(record, improved)
        forecast = self.budget.clock.forecast(state.step, state.epoch)
        if forecast and state.epoch < trainer.max_epochs and not self._out_of_steps() \
                and not self.budget.spent:
            self.report.forecast(forecast, record["audio_sec_per_sec"], trainer.max_epochs,
                                 trainer.max_minutes, trainer.max_steps)
        if not self.is_main:
            return
        if improved:
            save_model_dir(self.out_dir, self.model, self.tokenizer, self.cfg)
        keep = max(self.cfg.trainer.keep_checkpoints, self.cfg.trainer.average_checkpoints)
        if keep:
            save_epoch_weights(self.out_dir, self.model.state_dict(), state.history, keep)
        self.save_checkpoint()
        self.save_metrics()

    def save_metrics(self) -> None:
        """metrics.json: the history so far and the hours of audio heard (`TrainState.heard`).
        stopped_by_budget: the run ended at trainer.max_minutes before its max_epochs, so a
        recipe can tell a converged model from one that needs more time (written again when the
        stop is decided between epochs)."""
        state, trainer = self.state, self.cfg.trainer
        save_metrics(self.out_dir, {"best_dev_wer": state.best_wer, "steps": state.step,
                                    "audio_sec_per_sec": state.history[-1]["audio_sec_per_sec"],
                                    "max_epochs": trainer.max_epochs,
                                    "stopped_by_budget": self.budget.spent,
                                    **state.heard(self.corpus_hours), **state.parent(),
                                    "epochs": state.history, "loss_curve": state.loss_curve})

    def save_checkpoint(self) -> None:
        """The state to resume from: at the start, after an epoch, and mid-epoch every
        trainer.save_every_steps steps or trainer.save_every_minutes minutes."""
        self.saved_at = time.monotonic()
        self.state.run_seconds = self.budget.clock.elapsed()
        if self.is_main:
            save_training_state(self.out_dir / CHECKPOINT, self.model, self.optimizer,
                                self.scheduler, self.scaler, self.state)

    def average_checkpoints(self) -> dict[str, float]:
        """Average the kept weights of the last (or best) trainer.average_checkpoints epochs,
        score them on dev like any epoch and write them as the model directory OUT/averaged."""
        n, by, best = self.cfg.trainer.average_checkpoints, self.cfg.trainer.average_by, \
            self.state.best_wer
        barrier(self.dist)  # rank 0 has written the last epoch's weights
        epochs, weights = average_epochs(self.out_dir, self.state.history, n, by)
        upgrade_weights(weights, self.model)  # epochs kept in an older layout
        self.model.load_state_dict(weights)
        dev = self.evaluate()
        self.report.log(f"averaged the {by} {len(epochs)} epoch(s) {epochs}: dev loss "
                        f"{dev['dev_loss']:.3f}, dev WER {100 * dev['dev_wer']:.2f}% (best "
                        f"single epoch {100 * best:.2f}%); model in {self.out_dir / AVERAGED}")
        if self.is_main:
            save_model_dir(self.out_dir / AVERAGED, self.model, self.tokenizer, self.cfg)
            save_metrics(self.out_dir / AVERAGED, {"averaged_epochs": epochs, "by": by, **dev,
                                                   "best_single_dev_wer": best,
                                                   **self.state.heard(self.corpus_hours)})
        return dev

    def _lr(self) -> float:
        return self.scheduler.get_last_lr()[0]

    def _save_due(self) -> bool:
        """A step count (trainer.save_every_steps) or a time (trainer.save_every_minutes of
        training) since the last save asks for another."""
        every, minutes = self.cfg.trainer.save_every_steps, self.cfg.trainer.save_every_minutes
        return bool(every) and self.state.step % every == 0 \
            or bool(minutes) and time.monotonic() - self.saved_at >= 60 * minutes

    def _out_of_steps(self) -> bool:
        limit = self.cfg.trainer.max_steps
        return limit is not None and self.state.step >= limit

    def _more_epochs(self) -> bool:
        """Another epoch is due: epochs and steps are left, and time for more than the end."""
        return self.state.epoch < self.cfg.trainer.max_epochs and not self._out_of_steps() \
            and not self.budget.spent and not self._out_of_time()

    def _out_of_time(self) -> bool:
        """Whether the budget ends the run now, decided with every rank (`Budget.sync_schedule`,
        which also moves a decaying schedule's end to where the budget ends)."""
        into_epoch = self.state.epoch_batches // self.cfg.trainer.accumulate_grad_batches
        agree = (lambda values: all_reduce_min(values, self.device)) if self.dist.enabled else None
        return self.budget.sync_schedule(self.scheduler, self.state.step, into_epoch, agree)

    def _plan(self) -> Plan:
        """What the run is asked to do, for its clock: epochs, steps, minutes."""
        trainer = self.cfg.trainer
        minutes = trainer.max_minutes
        return Plan(trainer.max_epochs, trainer.max_steps,
                    max(1, math.ceil(len(self.train_loader) / trainer.accumulate_grad_batches)),
                    len(self.dev_loader), 1 + bool(trainer.average_checkpoints),
                    None if minutes is None else 60 * minutes)

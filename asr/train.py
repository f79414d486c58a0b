"""Train a Speech-Transformer: `python -m asr.train [hydra overrides]`.

Reads manifests, learns the BPE vocabulary and the CMVN statistics from the training set,
then runs epochs of (forward, loss, backward, clip, step); after each epoch it measures dev
loss and dev WER, keeps the best weights (by dev WER) and the last training state, all in one
model directory. Under torchrun with `trainer=ddp` the model is wrapped in
DistributedDataParallel: every rank trains on its share of the same shuffled batches, rank 0
alone logs and saves, and dev scores are computed from every rank's share (`asr.distributed`).
`trainer.accumulate_grad_batches` sums gradients over several micro-batches per step;
`trainer.precision` picks bf16 or fp16 (with a GradScaler) autocast on CUDA, or fp32.
`trainer.init_from` fine-tunes: a trained model's weights, CMVN statistics and tokenizer
replace the random start, the learnt CMVN and the new vocabulary.

What it reports goes through `logging` (logger `asr.train`): the command line shows it on the
console and Hydra's job log (OUT/hydra/<time>/train.log) keeps it; the curves go to a CSV file
or TensorBoard as well (`trainer.logger`, asr/curves.py). Progress bars (the epoch's, kept
after it ends, the CMVN statistics' and dev decoding's) show on a terminal only.

Crash safety: every file is written atomically, and the training state (weights, optimiser,
schedule, position in the epoch, python/numpy/torch RNG states) is saved when the run starts,
after every epoch and mid-epoch (every `trainer.save_every_minutes` of training, and every
`trainer.save_every_steps` steps), so `trainer.resume=true` after a kill continues exactly
where the last save left off: the weights end up equal to those of an uninterrupted run.

The output directory is the run's alone: a lock file (`train.lock`) stops a second run there,
and a directory that holds a run or a trained model is started over only with
`trainer.overwrite=true`, which deletes the old run's state first.
"""

import fcntl
import logging
import math
import random
import re
import shutil
import sys
import time
from collections.abc import Iterator
from contextlib import contextmanager, nullcontext
from dataclasses import asdict, dataclass, field
from pathlib import Path

import hydra
import numpy as np
import torch
from hydra.utils import instantiate
from omegaconf import DictConfig, OmegaConf, open_dict
from torch.nn.parallel import DistributedDataParallel
from torch.utils.data import DataLoader
from tqdm.contrib.logging import logging_redirect_tqdm

from asr import CONF_DIR
from asr.audio import AudioError
from asr.augment import AugmentConfig, Augmenter
from asr.averaging import AVERAGED, EPOCHS, average_epochs, save_epoch_weights
from asr.checkpoint import (
    CHECKPOINT,
    CONFIG,
    METRICS,
    TOKENIZER,
    WEIGHTS,
    ModelDirError,
    build_model,
    load_model_dir,
    load_torch,
    remove_partial_files,
    save_metrics,
    save_model_dir,
    save_torch,
)
from asr.config import register_configs
from asr.curves import CSV_FILE, LOGGERS, TENSORBOARD_DIR, Curves
from asr.data import DurationBatchSampler, ManifestError, SpeechDataset, collate, read_manifest
from asr.decoding import DecodingOptions
from asr.distributed import (
    all_reduce_min,
    all_reduce_sum,
    barrier,
    distributed_device,
    gather_objects,
    init_distributed,
    shutdown,
)
from asr.metrics import error_rate
from asr.model import SpeechTransformer
from asr.progress import progress
from asr.shards import ShardBatches
from asr.text import normalize_text
from asr.tokenizer import UNK_ID, Tokenizer
from asr.transcriber import decode_texts, pick_device

PRECISIONS = {"bf16": torch.bfloat16, "fp16": torch.float16, "fp32": torch.float32}
LOCK = "train.lock"  # in out_dir: held by the run training there
RUN_FILES = (CONFIG, WEIGHTS, TOKENIZER, METRICS, CHECKPOINT, EPOCHS, AVERAGED, CSV_FILE,
             TENSORBOARD_DIR)  # a run's state
OWN_FILES = "|".join(re.escape(name) for name in (CONFIG, WEIGHTS, TOKENIZER, METRICS, CHECKPOINT,
                                                  CSV_FILE))
log = logging.getLogger("asr.train")  # not __name__: "__main__" under python -m


class TrainingError(RuntimeError):
    """A run that cannot start; the message says why and what to pass instead."""


@dataclass
class TrainState:
    """What a resumed run needs besides weights and optimiser: where it was and how it went."""

    epoch: int = 0
    step: int = 0
    best_wer: float = math.inf
    train_seconds: float = 0.0
    audio_seconds: float = 0.0
    history: list[dict] = field(default_factory=list)
    skipped_lines: int = 0  # bad manifest lines left out (data.on_error=skip)
    # The epoch in progress, saved mid-epoch so that a resumed run continues it exactly.
    epoch_batches: int = 0
    epoch_loss_sum: float = 0.0
    epoch_loss_count: int = 0
    epoch_bad_steps: int = 0  # non-finite loss or gradients: step skipped
    epoch_bad_audio: int = 0  # unusable audio files left out (data.on_error=skip)
    bad_streak: int = 0  # consecutive skipped steps, bounded by trainer.max_bad_steps
    loss_curve: list[dict] = field(default_factory=list)  # mean train loss every trainer.log_every steps
    loss_window: list[float] = field(default_factory=list)  # losses since the curve's last point


class Trainer:
    """One training run, configured by the resolved Hydra config."""

    def __init__(self, cfg: DictConfig) -> None:
        self.cfg = cfg
        self._check_options()
        device = pick_device(cfg.trainer.device)
        self.dist = init_distributed(cfg.trainer.distributed, cfg.trainer.backend, device)
        self.device = distributed_device(device, self.dist)
        self.rank = self.dist.rank
        self.is_main = self.rank == 0
        self.out_dir = Path(cfg.trainer.out_dir)
        if cfg.trainer.num_threads:
            torch.set_num_threads(cfg.trainer.num_threads)
        if self.device.type == "cuda" and cfg.trainer.tf32:  # TF32 matmuls on Ampere and later
            torch.backends.cuda.matmul.allow_tf32 = torch.backends.cudnn.allow_tf32 = True
        seed_everything(cfg.seed)
        self.skipped_lines, self.seen_bad = 0, set()
        self.train_utts = read_manifest(cfg.data.train_manifest, cfg.data.on_error, self._skip_line)
        self.dev_utts = read_manifest(cfg.data.dev_manifest, cfg.data.on_error, self._skip_line)
        resuming = self._resuming()
        # fine-tuning: the weights (with their CMVN) and the tokenizer come from a trained model
        self.pretrained = load_pretrained(cfg, [u.text for u in self.train_utts]) \
            if cfg.trainer.init_from and not resuming else None
        self.tokenizer = self._tokenizer(resuming)
        with open_dict(cfg):
            cfg.model.n_vocab = self.tokenizer.vocab_size
            cfg.model.n_input = cfg.features.n_mels if cfg.features.kind == "fbank" \
                else cfg.features.n_mfcc
        self.model: SpeechTransformer = build_model(cfg).to(self.device)
        self.loader_rng = torch.Generator()  # keeps DataLoader seeding off the global RNG
        self.train_loader = self._loader(self.train_utts, shuffle=True)
        self.dev_loader = self._loader(self.dev_utts, shuffle=False)
        self.optimizer = instantiate(cfg.optim, params=self.model.parameters())
        if "total_steps" in cfg.scheduler and cfg.scheduler.total_steps is None:
            with open_dict(cfg):  # schedules that decay to an end (cosine) need to know it
                cfg.scheduler.total_steps = cfg.trainer.max_steps or cfg.trainer.max_epochs * \
                    math.ceil(len(self.train_loader) / cfg.trainer.accumulate_grad_batches)
        self.scheduler = instantiate(cfg.scheduler, optimizer=self.optimizer)
        # fp16 gradients underflow without loss scaling; disabled, the scaler passes through
        self.scaler = torch.amp.GradScaler(self.device.type,
                                           enabled=cfg.trainer.precision == "fp16")
        self.state = TrainState()
        self.resumed = resuming
        self.saved_at = time.monotonic()  # the last save of the training state
        if resuming:
            self._resume()
        elif self.pretrained is not None:
            self.model.load_state_dict(self.pretrained[0])
            self.log(f"initialised from {cfg.trainer.init_from} (weights, CMVN, tokenizer)")
        else:
            self._set_cmvn()
        self.state.skipped_lines = self.skipped_lines
        self.curves: Curves | None = None  # once fit holds out_dir
        self.train_model = self._wrap(self.model)
        if self.dist.enabled:  # ranks draw their own dropout and augmentation
            seed_everything(hash((cfg.seed, self.rank, self.state.step)) % 2**31)

    def _resuming(self) -> bool:
        """Whether this run continues the one in out_dir. A directory that holds a run or a
        trained model is never started over without trainer.overwrite=true, whatever
        trainer.resume says (without a checkpoint there is nothing to resume)."""
        trainer, out = self.cfg.trainer, self.out_dir
        if not any((out / name).exists() for name in RUN_FILES):
            return False
        if trainer.overwrite and trainer.resume:
            raise TrainingError(f"{out}: trainer.resume=true and trainer.overwrite=true; pass "
                                "one (continue the run there, or delete it and start over)")
        if trainer.overwrite:
            return False
        if trainer.resume and (out / CHECKPOINT).is_file():
            return True
        if trainer.resume:
            raise TrainingError(f"{out}: holds a trained model but no {CHECKPOINT} to continue "
                                "from; pass trainer.overwrite=true to delete it and start over, "
                                "or another trainer.out_dir")
        raise TrainingError(f"{out}: already holds a training run; pass trainer.resume=true to "
                            "continue it or trainer.overwrite=true to start over")

    @contextmanager
    def _directory(self) -> Iterator[None]:
        """Hold out_dir for the run (rank 0): its lock file stops a second run in the same
        directory at once (the kernel releases the lock however the process ends); a run
        that starts over first deletes the old run's state; the temp files of this
        program's writes that a kill cut short are cleaned up."""
        if not self.is_main:
            yield
            return
        self.out_dir.mkdir(parents=True, exist_ok=True)
        with (self.out_dir / LOCK).open("a") as lock:
            try:
                fcntl.flock(lock, fcntl.LOCK_EX | fcntl.LOCK_NB)
            except BlockingIOError:
                raise TrainingError(f"{self.out_dir}: another training run is using this "
                                    f"directory (it holds {LOCK}); wait for it to end or pick "
                                    "another trainer.out_dir") from None
            if not self.resumed:
                for path in (self.out_dir / name for name in RUN_FILES):
                    if path.is_dir():
                        shutil.rmtree(path)
                    else:
                        path.unlink(missing_ok=True)
            for folder, written in ((self.out_dir, OWN_FILES), (self.out_dir / AVERAGED, OWN_FILES),
                                    (self.out_dir / EPOCHS, r"epoch_\d+\.pt")):
                remove_partial_files(folder, written)
            yield

    def _check_options(self) -> None:
        cfg = self.cfg
        if cfg.data.on_error not in ("raise", "skip"):
            raise TrainingError(f"data.on_error must be raise or skip, got {cfg.data.on_error!r}")
        if cfg.trainer.precision not in PRECISIONS:
            raise TrainingError(f"trainer.precision must be one of {', '.join(PRECISIONS)}, got "
                                f"{cfg.trainer.precision!r}")
        if cfg.trainer.accumulate_grad_batches < 1:
            raise TrainingError("trainer.accumulate_grad_batches must be at least 1, got "
                                f"{cfg.trainer.accumulate_grad_batches}")
        if cfg.trainer.average_by not in ("last", "best"):
            raise TrainingError(f"trainer.average_by must be last or best, got "
                                f"{cfg.trainer.average_by!r}")
        if cfg.trainer.logger not in LOGGERS:  # before any work; the curves start in fit
            raise TrainingError(f"trainer.logger must be csv, tensorboard or none, got "
                                f"{cfg.trainer.logger!r}")

    def _curves(self) -> Curves | None:
        """The CSV file or TensorBoard events of rank 0 (`trainer.logger`)."""
        if not self.is_main:
            return None
        state = self.state
        try:
            return Curves(self.cfg.trainer.logger, self.out_dir, state.loss_curve, state.history,
                          state.step if self.resumed else None)
        except ValueError as err:
            raise TrainingError(str(err)) from None

    def _wrap(self, model: SpeechTransformer) -> torch.nn.Module:
        """What the training step calls: the model, in DDP across ranks, compiled on request.

        Buffers (the CMVN statistics) are the same on every rank and fixed during training,
        so DDP need not broadcast them before each forward."""
        if self.dist.enabled:
            model = DistributedDataParallel(
                model, device_ids=[self.device.index] if self.device.type == "cuda" else None,
                broadcast_buffers=False)
        if self.cfg.trainer.compile:
            model = torch.compile(model, dynamic=True)  # lengths vary: one graph for all shapes
        return model

    def _tokenizer(self, resuming: bool) -> Tokenizer:
        if resuming:
            return Tokenizer.load(self.out_dir / TOKENIZER)
        if self.pretrained is not None:
            return self.pretrained[1]
        texts = [u.text for u in self.train_utts]
        return Tokenizer.train(texts, self.cfg.tokenizer.vocab_size, self.cfg.tokenizer.model_type)

    def _loader(self, utts, shuffle: bool) -> DataLoader:
        """Batches of `utts`, this rank's share; the shuffled (training) ones augmented as
        `data.augment` says and, with `data.sortagrad`, in increasing length in epoch 1."""
        data = self.cfg.data
        sampler = DurationBatchSampler([u.duration for u in utts], data.batch_size,
                                       data.max_duration, shuffle=shuffle, seed=self.cfg.seed,
                                       rank=self.rank, world_size=self.dist.world_size,
                                       sortagrad=shuffle and data.sortagrad,
                                       drop_last=shuffle)
        augment = AugmentConfig.from_dict(data.get("augment"))
        augmenter = Augmenter(augment, self.cfg.features.sample_rate) \
            if shuffle and augment.enabled else None
        if shuffle and data.train_shards:  # audio from shards; an epoch as long as the manifest's
            stream = ShardBatches(data.train_shards, self.tokenizer, self.cfg.features.sample_rate,
                                  len(sampler), data.batch_size, data.max_duration,
                                  seed=self.cfg.seed, rank=self.rank, augment=augmenter)
            return DataLoader(stream, batch_size=None, num_workers=data.num_workers,
                              pin_memory=self.device.type == "cuda", generator=self.loader_rng)
        dataset = SpeechDataset(utts, self.tokenizer, self.cfg.features.sample_rate, augmenter)
        return DataLoader(dataset, batch_sampler=sampler, collate_fn=collate,
                          num_workers=data.num_workers, pin_memory=self.device.type == "cuda",
                          persistent_workers=data.num_workers > 0, generator=self.loader_rng)

    def _skip_line(self, problem: str) -> None:
        self.skipped_lines += 1
        self.log(f"warning: skipped {problem}", logging.WARNING)

    def _usable(self, batch: dict, count: bool = True) -> bool:
        """Apply data.on_error to the batch's unusable audio; False if nothing is left of it."""
        for problem in batch.pop("bad"):
            if self.cfg.data.on_error != "skip":
                raise TrainingError(f"{problem} (data.on_error=skip leaves such files out)")
            self.state.epoch_bad_audio += count
            if problem not in self.seen_bad:
                self.seen_bad.add(problem)
                self.log(f"warning: skipped {problem}", logging.WARNING)
        return "wave" in batch

    def _set_cmvn(self) -> None:
        """Global CMVN from (a seeded sample of) the training set."""
        count = min(self.cfg.trainer.cmvn_utterances, len(self.train_utts))
        sample = random.Random(self.cfg.seed).sample(self.train_utts, count)
        loader = DataLoader(SpeechDataset(sample, self.tokenizer, self.cfg.features.sample_rate),
                            batch_size=32, collate_fn=collate)
        batches = self._bar(loader, "CMVN statistics", unit="batch")
        self.model.frontend.set_cmvn((b["wave"], b["lengths"]) for b in batches
                                     if self._usable(b, count=False))

    def _resume(self) -> None:
        path = self.out_dir / CHECKPOINT
        ckpt = load_torch(path, self.device)
        try:
            self.model.load_state_dict(ckpt["model"])
            self.optimizer.load_state_dict(ckpt["optimizer"])
            self.scheduler.load_state_dict(ckpt["scheduler"])
            if "scaler" in ckpt:
                self.scaler.load_state_dict(ckpt["scaler"])
            self.state = TrainState(**ckpt["state"])
            set_rng_states(ckpt.get("rng") or {"torch": ckpt["torch_rng"]})
        except (KeyError, TypeError, ValueError, RuntimeError, AttributeError) as err:
            problem = str(err).strip().splitlines()[0] if str(err).strip() else type(err).__name__
            raise TrainingError(f"{path}: not a checkpoint this run can continue ({problem}); "
                                "pass trainer.overwrite=true to start over") from None
        self.log(f"resumed from {self.out_dir / CHECKPOINT} at step {self.state.step}: epoch "
                 f"{self.state.epoch + 1}, {self.state.epoch_batches} batch(es) in")

    def log(self, message: str, level: int = logging.INFO) -> None:
        if self.is_main:
            log.log(level, message)

    def _bar(self, iterable, desc: str, **options):
        """A progress bar of rank 0, on a terminal, when `trainer.progress` asks for them."""
        shown = self.is_main and self.cfg.trainer.progress
        return progress(iterable, desc, **options, **({} if shown else {"disable": True}))

    def fit(self) -> TrainState:
        with self._directory(), logging_redirect_tqdm():  # log lines above the bars
            if self.is_main and not self.resumed:
                self.save_checkpoint()  # first: from here on, a killed run can be resumed
                save_model_dir(self.out_dir, self.model, self.tokenizer, self.cfg)
            self.curves = self._curves()  # only now: out_dir is this run's (its lock is held)
            params = sum(p.numel() for p in self.model.parameters())
            self.log(f"model: {params / 1e6:.2f}M parameters, vocab {self.tokenizer.vocab_size}, "
                     f"{len(self.train_utts)} training utterances, device {self.device}"
                     + (f"; curves in {self.curves.location}" if self.curves
                        and self.curves.location else ""))
            while self.state.epoch < self.cfg.trainer.max_epochs and not self._out_of_steps():
                self.train_epoch()
                self.end_epoch(self.evaluate())
            if self.cfg.trainer.average_checkpoints:
                self.average_checkpoints()
            if self.curves is not None:
                self.curves.close()
        shutdown(self.dist)
        return self.state

    def _update_curves(self) -> None:
        if self.curves is not None:
            self.curves.update(self.state.loss_curve, self.state.history)

    def _out_of_steps(self) -> bool:
        limit = self.cfg.trainer.max_steps
        return limit is not None and self.state.step >= limit

    def train_epoch(self) -> None:
        self.train_model.train()
        state, every = self.state, self.cfg.trainer.save_every_steps
        # DurationBatchSampler, or ShardBatches when training from shards
        sampler = self.train_loader.batch_sampler or self.train_loader.dataset
        sampler.set_epoch(state.epoch, start=state.epoch_batches)
        self.loader_rng.manual_seed(self.cfg.seed + state.epoch)  # worker seeds, per epoch
        bar = self._bar(self.train_loader, f"epoch {state.epoch + 1}", total=len(sampler),
                        initial=state.epoch_batches, leave=True, unit="batch", delay=0)
        last = time.perf_counter()
        for group in micro_batch_groups(bar, self.cfg.trainer.accumulate_grad_batches):
            loss, seconds = self.train_step(group)
            if loss is not None:
                state.epoch_loss_sum, state.epoch_loss_count = \
                    state.epoch_loss_sum + loss, state.epoch_loss_count + 1
                bar.set_postfix(loss=f"{loss:.3f}", lr=f"{self.scheduler.get_last_lr()[0]:.2e}")
                state.audio_seconds += seconds
            state.loss_window.append(math.nan if loss is None else loss)
            if loss is not None and state.step % self.cfg.trainer.log_every == 0:
                self._log_steps(state.loss_window)
                state.loss_window = []
            state.epoch_batches += len(group)
            now = time.perf_counter()
            state.train_seconds, last = state.train_seconds + now - last, now
            if loss is not None and (every and state.step % every == 0 or self._save_due()):
                self.save_checkpoint()
            if self._out_of_steps():
                break

    def _log_steps(self, losses: list[float]) -> None:
        """A point of the training-loss curve: the mean over the last steps (NaN if one was)."""
        self.state.loss_curve.append({"step": self.state.step, "train_loss": sum(losses) / len(losses),
                                      "lr": self.scheduler.get_last_lr()[0]})
        self._update_curves()

    def train_step(self, group: list[dict]) -> tuple[float | None, float]:
        """One optimiser step over a group of micro-batches (trainer.accumulate_grad_batches;
        the same number on every rank): returns the step's loss and the seconds of audio learnt
        from, or (None, 0) if nothing was usable or the loss or gradients were not finite (step
        skipped; training stops after trainer.max_bad_steps in a row).

        The model's losses are means over tokens; each micro-batch's is weighted by its share
        (`shares`) of the tokens of the whole step, every micro-batch on every rank (as fairseq
        normalises by its sample size), so a step is exactly the gradient of one big batch of
        all of them: W ranks accumulating A micro-batches equal one process accumulating
        W x A, or one batch that holds them all. DDP all-reduces on the last micro-batch's
        backward only (`no_sync` before it).
        """
        used = self._agreed_usable(group)
        if not used:
            return None, 0.0
        totals = self._step_tokens(used)
        self.optimizer.zero_grad(set_to_none=True)
        loss_sum, seconds, finite = 0.0, 0.0, True
        for i, batch in enumerate(used):
            seconds += batch["lengths"].sum().item() / self.cfg.features.sample_rate
            shares = [n / total for n, total in zip(self.model.loss_tokens(batch["tokens"]),
                                                    totals, strict=True)]
            batch = {k: v.to(self.device, non_blocking=True) for k, v in batch.items()}
            last = i == len(used) - 1
            with nullcontext() if last or not self.dist.enabled else self.train_model.no_sync():
                with self.autocast():
                    loss = self.train_model(batch["wave"], batch["lengths"], batch["tokens"],
                                            shares)["loss"]
                finite = finite and bool(torch.isfinite(loss))
                if not finite and not self.dist.enabled:
                    break  # alone, skip the wasted backward; in DDP every rank must all-reduce
                # DDP divides the summed gradients by the world size: multiply it back
                self.scaler.scale(loss * self.dist.world_size).backward()
            loss_sum += loss.item()
        if self.dist.enabled:  # every rank takes the same decision, on the world's numbers
            bad, loss_sum, seconds = all_reduce_sum([float(not finite), loss_sum, seconds],
                                                    self.device)
            finite = bad == 0
        if not finite:
            self.optimizer.zero_grad(set_to_none=True)
            return self._bad_step("loss"), 0.0
        self.scaler.unscale_(self.optimizer)  # clip the true gradients, not the scaled ones
        norm = clip_gradients(self.model.parameters(), self.cfg.trainer.grad_clip)
        if not torch.isfinite(norm):
            self.scaler.update()  # fp16: a lower loss scale for the next step
            self.optimizer.zero_grad(set_to_none=True)
            return self._bad_step("gradients"), 0.0
        self.scaler.step(self.optimizer)
        self.scaler.update()
        self.scheduler.step()
        self.state.step += 1
        self.state.bad_streak = 0
        return loss_sum, seconds

    def _step_tokens(self, used: list[dict]) -> list[int]:
        """The tokens each loss averages over in the whole step (all micro-batches and ranks)."""
        totals = [sum(counts) for counts in zip(*(self.model.loss_tokens(b["tokens"])
                                                  for b in used), strict=True)]
        if self.dist.enabled:
            totals = [int(n) for n in all_reduce_sum(totals, self.device)]
        return totals

    def _agreed_usable(self, group: list[dict]) -> list[dict]:
        """The group's usable micro-batches; in DDP only those every rank has, so that all
        ranks run the same forward/backward passes (a rank left out would hang the others)."""
        usable = [int(self._usable(batch)) for batch in group]
        if self.dist.enabled:
            usable = all_reduce_min(usable, self.device)
        return [batch for batch, ok in zip(group, usable, strict=True) if ok]

    def _bad_step(self, what: str) -> None:
        state, limit = self.state, self.cfg.trainer.max_bad_steps
        state.epoch_bad_steps, state.bad_streak = state.epoch_bad_steps + 1, state.bad_streak + 1
        self.log(f"warning: non-finite {what} at epoch {state.epoch + 1}, batch "
                 f"{state.epoch_batches + 1} (after step {state.step}); step skipped",
                 logging.WARNING)
        if limit and state.bad_streak >= limit:
            raise TrainingError(f"loss or gradients not finite for {state.bad_streak} steps in a "
                                f"row (trainer.max_bad_steps={limit}); stopped at epoch "
                                f"{state.epoch + 1}, step {state.step}: lower optim.lr or "
                                "check the data")

    def _save_due(self) -> bool:
        """trainer.save_every_minutes of training have passed since the last save."""
        minutes = self.cfg.trainer.save_every_minutes
        return bool(minutes) and time.monotonic() - self.saved_at >= 60 * minutes

    def save_checkpoint(self) -> None:
        """The state to resume from: at the start, after an epoch, and mid-epoch every
        trainer.save_every_steps steps or trainer.save_every_minutes minutes."""
        self.saved_at = time.monotonic()
        if self.is_main:
            scaler = {"scaler": self.scaler.state_dict()} if self.scaler.is_enabled() else {}
            save_torch({"model": self.model.state_dict(), "optimizer": self.optimizer.state_dict(),
                        "scheduler": self.scheduler.state_dict(), "state": asdict(self.state),
                        "rng": rng_states(), **scaler}, self.out_dir / CHECKPOINT)

    def autocast(self) -> torch.autocast:
        """bf16 or fp16 autocast on CUDA (trainer.precision); CPU runs in fp32."""
        dtype = PRECISIONS[self.cfg.trainer.precision]
        enabled = self.device.type == "cuda" and dtype != torch.float32
        return torch.autocast(self.device.type, dtype=dtype, enabled=enabled)

    @torch.no_grad()
    def evaluate(self) -> dict[str, float]:
        """Dev loss (no augmentation, no dropout) and greedy-decoding dev WER."""
        self.model.eval()
        loss_sum, batches, pairs = 0.0, 0, []
        for batch in self._bar(self.dev_loader, "dev", unit="batch"):
            if not self._usable(batch):
                continue
            batch = {k: v.to(self.device, non_blocking=True) for k, v in batch.items()}
            with self.autocast():
                losses = self.model(batch["wave"], batch["lengths"], batch["tokens"])
                texts = decode_texts(self.model, self.tokenizer, batch["wave"], batch["lengths"],
                                     DecodingOptions(beam_size=1))
            loss_sum += losses["loss"].item()
            refs = [self.tokenizer.decode(row.tolist()) for row in batch["tokens"]]
            pairs.extend(zip(refs, texts, strict=True))
            batches += 1
        if self.dist.enabled:  # each rank scored its share of dev: the scores need all of it
            shares = gather_objects((loss_sum, batches, pairs), self.dist)
            loss_sum, batches = sum(s[0] for s in shares), sum(s[1] for s in shares)
            pairs = [pair for share in shares for pair in share[2]]
        return {"dev_loss": loss_sum / max(batches, 1), "dev_wer": error_rate(pairs)}

    def end_epoch(self, dev: dict[str, float]) -> None:
        """Record the epoch, keep the best weights and save the state to resume from."""
        state = self.state
        state.epoch += 1
        rate = state.audio_seconds / max(state.train_seconds, 1e-9)
        record = {"epoch": state.epoch, "step": state.step,
                  "train_loss": state.epoch_loss_sum / max(state.epoch_loss_count, 1), **dev,
                  "lr": self.scheduler.get_last_lr()[0], "audio_sec_per_sec": rate,
                  "bad_steps": state.epoch_bad_steps, "bad_audio": state.epoch_bad_audio}
        state.history.append(record)
        self._update_curves()
        improved = dev["dev_wer"] < state.best_wer
        if improved:
            state.best_wer = dev["dev_wer"]
        skipped = "".join(f", {n} {what} skipped" for n, what in [
            (state.epoch_bad_steps, "non-finite step(s)"),
            (state.epoch_bad_audio, "bad audio file(s)")] if n)
        self.log(f"epoch {state.epoch}: train loss {record['train_loss']:.3f}, dev loss "
                 f"{dev['dev_loss']:.3f}, dev WER {100 * dev['dev_wer']:.2f}%"
                 f"{' (best)' if improved else ''}, {rate:.0f} audio s/s{skipped}")
        state.epoch_batches = state.epoch_loss_count = 0
        state.epoch_loss_sum = 0.0
        state.epoch_bad_steps = state.epoch_bad_audio = 0
        if not self.is_main:
            return
        if improved:
            save_model_dir(self.out_dir, self.model, self.tokenizer, self.cfg)
        keep = max(self.cfg.trainer.keep_checkpoints, self.cfg.trainer.average_checkpoints)
        if keep:
            save_epoch_weights(self.out_dir, self.model.state_dict(), state.history, keep)
        self.save_checkpoint()
        save_metrics(self.out_dir, {"best_dev_wer": state.best_wer, "steps": state.step,
                                    "audio_sec_per_sec": rate, "epochs": state.history,
                                    "loss_curve": state.loss_curve})

    def average_checkpoints(self) -> dict[str, float]:
        """Average the kept weights of the last (or best) trainer.average_checkpoints epochs,
        score them on dev like any epoch and write them as the model directory OUT/averaged."""
        n, by = self.cfg.trainer.average_checkpoints, self.cfg.trainer.average_by
        barrier(self.dist)  # rank 0 has written the last epoch's weights
        epochs, weights = average_epochs(self.out_dir, self.state.history, n, by)
        self.model.load_state_dict(weights)
        dev = self.evaluate()
        self.log(f"averaged the {by} {len(epochs)} epoch(s) {epochs}: dev loss "
                 f"{dev['dev_loss']:.3f}, dev WER {100 * dev['dev_wer']:.2f}% (best single epoch "
                 f"{100 * self.state.best_wer:.2f}%); model in {self.out_dir / AVERAGED}")
        if self.is_main:
            save_model_dir(self.out_dir / AVERAGED, self.model, self.tokenizer, self.cfg)
            save_metrics(self.out_dir / AVERAGED, {"averaged_epochs": epochs, "by": by, **dev,
                                                   "best_single_dev_wer": self.state.best_wer})
        return dev


# Settings that shape only training (losses, regularisation, SpecAugment): a fine-tuning run may
# change them. Every other model and features setting must be the one the weights were trained
# with (n_vocab and n_input follow from the tokenizer and the features).
TRAINING_ONLY = {"model": {"dropout", "label_smoothing", "ctc_weight", "guided_attention",
                           "guided_attention_width", "n_vocab", "n_input"},
                 "features": {"freq_masks", "freq_width", "time_masks", "time_width",
                              "time_max_ratio", "vtlp"}}


def load_pretrained(cfg: DictConfig, texts: list[str]) -> tuple[dict, Tokenizer]:
    """The weights (CMVN included) and tokenizer that `trainer.init_from` names, once checked
    to fit this run: the same network and front end, a CTC head on both sides or neither, and
    a vocabulary that spells every character of the training transcripts."""
    source = cfg.trainer.init_from
    try:
        model, tokenizer, _ = load_model_dir(source)
    except ModelDirError as err:
        raise TrainingError(f"trainer.init_from: {err}") from None
    # What the weights were built with: a setting newer than their config has its default.
    built = {"model": asdict(model.dims), "features": asdict(model.frontend.cfg)}
    for section, free in TRAINING_ONLY.items():
        mine = OmegaConf.to_container(cfg[section], resolve=True)
        for key, value in built[section].items():
            if key not in free and mine.get(key) != value:
                raise TrainingError(f"trainer.init_from={source}: {section}.{key} is {value} "
                                    f"there, {mine.get(key)} here; pass {section}.{key}={value} "
                                    "(the network must be the one the weights were trained as)")
    if (cfg.model.ctc_weight > 0) != (model.ctc is not None):
        raise TrainingError(f"trainer.init_from={source}: model.ctc_weight must be "
                            f"{'> 0' if model.ctc is not None else '0'}, as there (the CTC "
                            "head is part of the weights)")
    chars = {c for text in texts for c in normalize_text(text)} - {" "}
    unknown = sorted(c for c in chars if UNK_ID in tokenizer.encode(c))
    if unknown:
        raise TrainingError(f"trainer.init_from={source}: its tokenizer cannot spell "
                            f"{' '.join(map(repr, unknown))} of the training transcripts")
    return model.state_dict(), tokenizer


def clip_gradients(parameters, max_norm: float) -> torch.Tensor:
    """Scale the gradients down to a total L2 norm of `max_norm` if they exceed it; the norm.

    `clip_grad_norm_` multiplies every gradient by min(1, max_norm / norm) on every step, so
    that a GPU never waits for the norm. The training step waits for it anyway (it checks that
    the norm is finite), and most steps are under the limit: multiplying only then saves a
    pass over all gradients, about 5% of a CPU step of the default model.
    """
    params = [p for p in parameters if p.grad is not None]
    norm = torch.nn.utils.get_total_norm([p.grad for p in params])
    if norm > max_norm:
        torch.nn.utils.clip_grads_with_norm_(params, max_norm, norm)
    return norm


def micro_batch_groups(batches, size: int):
    """Consecutive groups of `size` batches (the last one may be shorter)."""
    group = []
    for batch in batches:
        group.append(batch)
        if len(group) == size:
            yield group
            group = []
    if group:
        yield group


def seed_everything(seed: int) -> None:
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
    torch.set_rng_state(states["torch"].cpu())
    if "python" in states:
        version, internal, gauss = states["python"]
        random.setstate((version, tuple(internal), gauss))
    if "numpy" in states:
        name, key, pos, has_gauss, gauss = states["numpy"]
        np.random.set_state((name, key.numpy().astype(np.uint32), pos, has_gauss, gauss))
    if states.get("cuda") and torch.cuda.is_available():
        torch.cuda.set_rng_state_all([s.cpu() for s in states["cuda"]])


_started = False  # set once Hydra has composed a config and handed it over


@hydra.main(version_base="1.3", config_path=str(CONF_DIR), config_name="train")
def main(cfg: DictConfig) -> None:
    global _started
    _started = True
    try:
        state = Trainer(cfg).fit()
    except (TrainingError, ManifestError, AudioError, ValueError, OSError) as err:
        raise SystemExit(f"error: {err}") from None
    skipped = "".join(f"; skipped {n} {what}" for n, what in [
        (state.skipped_lines, "bad manifest line(s)"),
        (sum(e.get("bad_audio", 0) for e in state.history), "bad audio item(s)"),
        (sum(e.get("bad_steps", 0) for e in state.history), "non-finite step(s)")] if n)
    log.info(f"best dev WER {100 * state.best_wer:.2f}% after {state.epoch} epochs, "
             f"{state.step} steps; model in {cfg.trainer.out_dir}{skipped}")


def config_choices() -> str:
    """`group=a|b` for every config group, as the hint after a bad override."""
    groups = sorted(d for d in CONF_DIR.iterdir() if d.is_dir())
    return ", ".join(f"{d.name}={'|'.join(sorted(f.stem for f in d.glob('*.yaml')))}"
                     for d in groups)


def cli() -> None:
    """`python -m asr.train`: Hydra's own error for a bad override, plus the valid choices."""
    register_configs()  # the schemas conf/*/*.yaml start from
    try:
        main()
    except SystemExit as stop:
        if stop.code == 1 and not _started:
            print(f"hint: config groups: {config_choices()}; keys: python -m asr.train --cfg job",
                  file=sys.stderr)
        raise


if __name__ == "__main__":
    cli()

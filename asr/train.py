"""Train a Speech-Transformer: `python -m asr.train [hydra overrides]`.

Reads manifests, learns the BPE vocabulary and the CMVN statistics from the training set,
then runs epochs of (forward, loss, backward, clip, step); after each epoch it measures dev
loss and dev WER, keeps the best weights (by dev WER) and the last training state, all in one
model directory. Rank-aware (logging and saving on rank 0 only), so DDP can be added around it.
"""

import math
import os
import random
import time
from dataclasses import asdict, dataclass, field
from pathlib import Path

import hydra
import numpy as np
import torch
from hydra.utils import instantiate
from omegaconf import DictConfig, open_dict
from torch.utils.data import DataLoader
from tqdm import tqdm

from asr.audio import AudioError
from asr.augment import AugmentConfig, Augmenter
from asr.checkpoint import (
    CHECKPOINT,
    TOKENIZER,
    build_model,
    load_torch,
    save_metrics,
    save_model_dir,
    save_torch,
)
from asr.data import DurationBatchSampler, ManifestError, SpeechDataset, collate, read_manifest
from asr.decoding import DecodingOptions
from asr.metrics import error_rate
from asr.model import SpeechTransformer
from asr.tokenizer import Tokenizer
from asr.transcriber import decode_texts, pick_device


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


class Trainer:
    """One training run, configured by the resolved Hydra config."""

    def __init__(self, cfg: DictConfig) -> None:
        self.cfg = cfg
        self.rank = int(os.environ.get("RANK", 0))
        self.is_main = self.rank == 0
        self.device = pick_device(cfg.trainer.device)
        self.out_dir = Path(cfg.trainer.out_dir)
        if cfg.trainer.num_threads:
            torch.set_num_threads(cfg.trainer.num_threads)
        seed_everything(cfg.seed)
        self.train_utts = read_manifest(cfg.data.train_manifest, cfg.data.on_error)
        self.dev_utts = read_manifest(cfg.data.dev_manifest, cfg.data.on_error)
        resuming = cfg.trainer.resume and (self.out_dir / CHECKPOINT).is_file()
        if (self.out_dir / CHECKPOINT).is_file() and not (resuming or cfg.trainer.overwrite):
            raise TrainingError(f"{self.out_dir}: already holds a training run; pass "
                                "trainer.resume=true to continue it or trainer.overwrite=true "
                                "to start over")
        self.tokenizer = self._tokenizer(resuming)
        with open_dict(cfg):
            cfg.model.n_vocab = self.tokenizer.vocab_size
            cfg.model.n_input = cfg.features.n_mels if cfg.features.kind == "fbank" \
                else cfg.features.n_mfcc
        self.model: SpeechTransformer = build_model(cfg).to(self.device)
        self.optimizer = instantiate(cfg.optim, params=self.model.parameters())
        self.scheduler = instantiate(cfg.scheduler, optimizer=self.optimizer)
        self.state = TrainState()
        if resuming:
            self._resume()
        else:
            self._set_cmvn()
        self.train_loader = self._loader(self.train_utts, shuffle=True)
        self.dev_loader = self._loader(self.dev_utts, shuffle=False)

    def _tokenizer(self, resuming: bool) -> Tokenizer:
        if resuming:
            return Tokenizer.load(self.out_dir / TOKENIZER)
        texts = [u.text for u in self.train_utts]
        return Tokenizer.train(texts, self.cfg.tokenizer.vocab_size, self.cfg.tokenizer.model_type)

    def _loader(self, utts, shuffle: bool) -> DataLoader:
        """Batches of `utts`; the shuffled (training) ones augmented as `data.augment` says."""
        data = self.cfg.data
        sampler = DurationBatchSampler([u.duration for u in utts], data.batch_size,
                                       data.max_duration, shuffle=shuffle, seed=self.cfg.seed)
        augment = AugmentConfig.from_dict(data.get("augment"))
        augmenter = Augmenter(augment, self.cfg.features.sample_rate) \
            if shuffle and augment.enabled else None
        dataset = SpeechDataset(utts, self.tokenizer, self.cfg.features.sample_rate, augmenter)
        return DataLoader(dataset, batch_sampler=sampler, collate_fn=collate,
                          num_workers=data.num_workers, pin_memory=self.device.type == "cuda",
                          persistent_workers=data.num_workers > 0)

    def _set_cmvn(self) -> None:
        """Global CMVN from (a seeded sample of) the training set."""
        count = min(self.cfg.trainer.cmvn_utterances, len(self.train_utts))
        sample = random.Random(self.cfg.seed).sample(self.train_utts, count)
        loader = DataLoader(SpeechDataset(sample, self.tokenizer, self.cfg.features.sample_rate),
                            batch_size=32, collate_fn=collate)
        self.model.frontend.set_cmvn((b["wave"], b["lengths"]) for b in loader)

    def _resume(self) -> None:
        ckpt = load_torch(self.out_dir / CHECKPOINT, self.device)
        self.model.load_state_dict(ckpt["model"])
        self.optimizer.load_state_dict(ckpt["optimizer"])
        self.scheduler.load_state_dict(ckpt["scheduler"])
        self.state = TrainState(**ckpt["state"])
        torch.set_rng_state(ckpt["torch_rng"].cpu())
        self.log(f"resumed from {self.out_dir / CHECKPOINT} at epoch {self.state.epoch}, "
                 f"step {self.state.step}")

    def log(self, message: str) -> None:
        if self.is_main:
            tqdm.write(message)

    def fit(self) -> TrainState:
        if self.is_main and self.state.epoch == 0:
            save_model_dir(self.out_dir, self.model, self.tokenizer, self.cfg)
        params = sum(p.numel() for p in self.model.parameters())
        self.log(f"model: {params / 1e6:.2f}M parameters, vocab {self.tokenizer.vocab_size}, "
                 f"{len(self.train_utts)} training utterances, device {self.device}")
        while self.state.epoch < self.cfg.trainer.max_epochs and not self._out_of_steps():
            self.train_epoch()
            self.end_epoch(self.evaluate())
        return self.state

    def _out_of_steps(self) -> bool:
        limit = self.cfg.trainer.max_steps
        return limit is not None and self.state.step >= limit

    def train_epoch(self) -> None:
        self.model.train()
        sampler: DurationBatchSampler = self.train_loader.batch_sampler
        sampler.set_epoch(self.state.epoch)
        bar = tqdm(self.train_loader, desc=f"epoch {self.state.epoch + 1}",
                   disable=not (self.is_main and self.cfg.trainer.progress), leave=False)
        started, total, count = time.perf_counter(), 0.0, 0
        for batch in bar:
            loss = self.train_step(batch)
            if loss is not None:
                total, count = total + loss, count + 1
            bar.set_postfix(loss=f"{loss:.3f}" if loss is not None else "nan",
                            lr=f"{self.scheduler.get_last_lr()[0]:.2e}")
            self.state.audio_seconds += batch["lengths"].sum().item() / \
                self.cfg.features.sample_rate
            if self._out_of_steps():
                break
        self.state.train_seconds += time.perf_counter() - started
        self.epoch_train_loss = total / max(count, 1)

    def train_step(self, batch: dict[str, torch.Tensor]) -> float | None:
        """One optimiser step; returns the loss, or None if it was not finite (step skipped)."""
        batch = {k: v.to(self.device, non_blocking=True) for k, v in batch.items()}
        with self.autocast():
            losses = self.model(batch["wave"], batch["lengths"], batch["tokens"])
        loss = losses["loss"]
        self.optimizer.zero_grad(set_to_none=True)
        if not torch.isfinite(loss):
            self.log(f"warning: non-finite loss at step {self.state.step}; step skipped")
            return None
        loss.backward()
        torch.nn.utils.clip_grad_norm_(self.model.parameters(), self.cfg.trainer.grad_clip)
        self.optimizer.step()
        self.scheduler.step()
        self.state.step += 1
        return loss.item()

    def autocast(self) -> torch.autocast:
        enabled = self.device.type == "cuda" and self.cfg.trainer.precision == "bf16"
        return torch.autocast(self.device.type, dtype=torch.bfloat16, enabled=enabled)

    @torch.no_grad()
    def evaluate(self) -> dict[str, float]:
        """Dev loss (no augmentation, no dropout) and greedy-decoding dev WER."""
        self.model.eval()
        loss_sum, batches, pairs = 0.0, 0, []
        for batch in self.dev_loader:
            batch = {k: v.to(self.device) for k, v in batch.items()}
            with self.autocast():
                losses = self.model(batch["wave"], batch["lengths"], batch["tokens"])
                texts = decode_texts(self.model, self.tokenizer, batch["wave"], batch["lengths"],
                                     DecodingOptions(beam_size=1))
            loss_sum += losses["loss"].item()
            refs = [self.tokenizer.decode(row.tolist()) for row in batch["tokens"]]
            pairs.extend(zip(refs, texts, strict=True))
            batches += 1
        return {"dev_loss": loss_sum / max(batches, 1), "dev_wer": error_rate(pairs)}

    def end_epoch(self, dev: dict[str, float]) -> None:
        """Record the epoch, keep the best weights and save the state to resume from."""
        state = self.state
        state.epoch += 1
        rate = state.audio_seconds / max(state.train_seconds, 1e-9)
        record = {"epoch": state.epoch, "step": state.step, "train_loss": self.epoch_train_loss,
                  **dev, "lr": self.scheduler.get_last_lr()[0], "audio_sec_per_sec": rate}
        state.history.append(record)
        improved = dev["dev_wer"] < state.best_wer
        if improved:
            state.best_wer = dev["dev_wer"]
        self.log(f"epoch {state.epoch}: train loss {record['train_loss']:.3f}, dev loss "
                 f"{dev['dev_loss']:.3f}, dev WER {100 * dev['dev_wer']:.2f}%"
                 f"{' (best)' if improved else ''}, {rate:.0f} audio s/s")
        if not self.is_main:
            return
        if improved:
            save_model_dir(self.out_dir, self.model, self.tokenizer, self.cfg)
        save_torch({"model": self.model.state_dict(), "optimizer": self.optimizer.state_dict(),
                    "scheduler": self.scheduler.state_dict(), "state": asdict(state),
                    "torch_rng": torch.get_rng_state()}, self.out_dir / CHECKPOINT)
        save_metrics(self.out_dir, {"best_dev_wer": state.best_wer, "steps": state.step,
                                    "audio_sec_per_sec": rate, "epochs": state.history})


def seed_everything(seed: int) -> None:
    random.seed(seed)
    np.random.seed(seed)
    torch.manual_seed(seed)


@hydra.main(version_base="1.3", config_path="../conf", config_name="train")
def main(cfg: DictConfig) -> None:
    try:
        state = Trainer(cfg).fit()
    except (TrainingError, ManifestError, AudioError, ValueError) as err:
        raise SystemExit(f"error: {err}") from None
    print(f"best dev WER {100 * state.best_wer:.2f}% after {state.epoch} epochs, "
          f"{state.step} steps; model in {cfg.trainer.out_dir}")


if __name__ == "__main__":
    main()

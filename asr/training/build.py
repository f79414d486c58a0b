"""Everything the training loop works with, built from the config before it starts.

`TrainingSetup` builds a run's parts in order: the process (device, DDP, threads), the data,
the tokenizer (learnt from the training transcripts, or the fine-tuned model's, or the resumed
run's), the model, the loaders, the optimiser and schedule, and where training starts from (a
checkpoint, pretrained weights, or CMVN statistics learnt from the training set). The order is
that in which random numbers are drawn, so it is part of what makes runs reproducible.
"""

import functools
import logging
import math
import random
import time
from pathlib import Path

import torch
from hydra.utils import instantiate
from omegaconf import DictConfig, open_dict
from torch.nn.parallel import DistributedDataParallel
from torch.utils.data import DataLoader

from asr.augment import AugmentConfig, Augmenter
from asr.checkpoint import CHECKPOINT, METRICS, TOKENIZER, TRAINING, build_model
from asr.data import (
    DurationBatchSampler,
    SpeechDataset,
    StaticShapes,
    Utterance,
    collate,
    read_manifest,
)
from asr.device import pick_device
from asr.distributed import Distributed, distributed_device, init_distributed
from asr.model import SpeechTransformer
from asr.shards import ShardBatches
from asr.tokenizer import Tokenizer
from asr.training.faults import DataFaults
from asr.training.options import (
    check_compile,
    check_options,
    inductor_options,
    step_precision,
)
from asr.training.pretrained import HEARD, hours_heard, load_pretrained, weights_sha256
from asr.training.report import Report
from asr.training.run_dir import resuming
from asr.training.state import (
    TrainState,
    check_same_data,
    data_digests,
    load_training_state,
    seed_everything,
)
from asr.training.step import TrainStep


class TrainingSetup:
    """A run's parts, built from the resolved Hydra config; `Trainer` trains them."""

    def __init__(self, cfg: DictConfig) -> None:
        self.cfg = cfg
        check_options(cfg)
        self.dist, self.device = start_process(cfg.trainer)
        check_compile(cfg.trainer.compile, self.device)
        self.is_main = self.dist.rank == 0
        self.report = Report(self.is_main, cfg.trainer.progress)
        self.out_dir = Path(cfg.trainer.out_dir)
        seed_everything(cfg.seed)
        self.faults = DataFaults(cfg.data.on_error, self._warn)
        self.train_utts = read_manifest(cfg.data.train_manifest, cfg.data.on_error,
                                        self.faults.skip_line)
        self.dev_utts = read_manifest(cfg.data.dev_manifest, cfg.data.on_error,
                                      self.faults.skip_line)
        self.corpus_hours = sum(u.duration for u in self.train_utts) / 3600
        self.resumed = resuming(cfg.trainer, self.out_dir)
        # fine-tuning: the weights (with their CMVN) and the tokenizer come from a trained model
        pretrained = load_pretrained(cfg, [u.text for u in self.train_utts]) \
            if cfg.trainer.init_from and not self.resumed else None
        self.tokenizer = self._tokenizer(pretrained)
        self.model = build_sized_model(cfg, self.tokenizer).to(self.device)
        self.loader_rng = torch.Generator()  # keeps DataLoader seeding off the global RNG
        self.train_loader = self._loader(self.train_utts, shuffle=True)
        self.dev_loader = self._loader(self.dev_utts, shuffle=False)
        self.optimizer, self.scheduler = build_optimizer(cfg, self.model, len(self.train_loader))
        # fp16 gradients underflow without loss scaling; disabled, the scaler passes through
        self.scaler = torch.amp.GradScaler(self.device.type,
                                           enabled=cfg.trainer.precision == "fp16")
        self.saved_at = time.monotonic()  # the last save of the training state
        self.state = self._start(pretrained)
        self.state.skipped_lines = self.faults.skipped_lines
        self.train_model = wrap_model(self.model, self.dist, self.device, cfg.trainer,
                                      cfg.data.buckets)
        self.precision, fallback = step_precision(cfg.trainer.precision, self.device)
        if fallback:
            self._warn(fallback)
        self.optimize = TrainStep(self.model, self.train_model, self.optimizer, self.scheduler,
                                  self.scaler, self.dist, self.device, self.precision,
                                  cfg.trainer.grad_clip, cfg.features.sample_rate)
        if self.dist.enabled:  # ranks draw their own dropout and augmentation
            seed_everything(hash((cfg.seed, self.dist.rank, self.state.step)) % 2**31)

    def _warn(self, message: str) -> None:
        self.report.log(message, logging.WARNING)

    def _tokenizer(self, pretrained: tuple[dict, Tokenizer] | None) -> Tokenizer:
        if self.resumed:
            return Tokenizer.load(self.out_dir / TOKENIZER)
        if pretrained is not None:
            return pretrained[1]
        texts = [u.text for u in self.train_utts]
        tokenizer = self.cfg.tokenizer
        return Tokenizer.train(texts, tokenizer.vocab_size, tokenizer.model_type, tokenizer.letters)

    def _loader(self, utts: list[Utterance], shuffle: bool) -> DataLoader:
        return build_loader(self.cfg, utts, self.tokenizer, self.dist, self.device,
                            self.loader_rng, shuffle)

    def _start(self, pretrained: tuple[dict, Tokenizer] | None) -> TrainState:
        """Where training starts: the checkpoint's state when resuming; else a fresh state,
        from the pretrained weights or with CMVN statistics learnt from the training set."""
        if self.resumed:
            path = self.out_dir / CHECKPOINT
            state = load_training_state(path, self.model, self.optimizer, self.scheduler,
                                        self.scaler)
            self.report.log(f"resumed from {path} at step {state.step}: epoch "
                            f"{state.epoch + 1}, {state.epoch_batches} batch(es) in")
            self._started_from(state.init_from)
            check_same_data(state.data, self._manifests(), self.out_dir)
            return state
        if pretrained is not None:
            self.model.load_state_dict(pretrained[0])
            self.report.log(f"initialised from {self.cfg.trainer.init_from} (weights, CMVN, "
                            "tokenizer)")
        else:
            loader = cmvn_loader(self.cfg, self.train_utts, self.tokenizer)
            batches = self.report.bar(loader, "CMVN statistics", unit="batch")
            self.model.frontend.set_cmvn((b["wave"], b["lengths"]) for b in batches
                                         if self.faults.usable(b))
        source = self.cfg.trainer.init_from
        return TrainState(init_from=source or "", heard_before_hours=self._heard_before(),
                          data=data_digests(self._manifests()),
                          init_sha256=weights_sha256(source) if source else "")

    def _manifests(self) -> dict[str, str]:
        """The manifests this run trains and scores on, by role."""
        return {"train": self.cfg.data.train_manifest, "dev": self.cfg.data.dev_manifest}

    def _heard_before(self) -> float | None:
        """The hours of audio the weights this run starts from had heard (0 from scratch)."""
        source = self.cfg.trainer.init_from
        if not source:
            return 0.0
        hours = hours_heard(source)
        if hours is None:
            self._warn(f"trainer.init_from={source}: no record of the hours of audio its weights "
                       f"heard ({HEARD} in {TRAINING} or {METRICS}), so this run's "
                       f"{HEARD} is not known")
        return hours

    def _started_from(self, recorded: str | None) -> None:
        """A resumed run's trainer.init_from is the one it started with (its checkpoint's),
        whatever this command says: the weights are resumed, not initialised again."""
        if recorded is None:
            return
        given = self.cfg.trainer.init_from
        if given and given != recorded:
            self._warn(f"trainer.init_from={given} ignored: the resumed run started from "
                       f"{recorded or 'scratch'}")
        self.cfg.trainer.init_from = recorded or None


def start_process(trainer: DictConfig) -> tuple[Distributed, torch.device]:
    """This process's place among the ranks and its device (`trainer.device`, one GPU per
    rank), with `trainer.num_threads` and TF32 matmuls (`trainer.tf32`) set."""
    device = pick_device(trainer.device)
    dist = init_distributed(trainer.distributed, trainer.backend, device)
    device = distributed_device(device, dist)
    if trainer.num_threads:
        torch.set_num_threads(trainer.num_threads)
    if device.type == "cuda" and trainer.tf32:  # TF32 matmuls on Ampere and later
        torch.backends.cuda.matmul.allow_tf32 = torch.backends.cudnn.allow_tf32 = True
    return dist, device


def build_sized_model(cfg: DictConfig, tokenizer: Tokenizer) -> SpeechTransformer:
    """The configured model, its input and output sized by the features and the tokenizer
    (written into `cfg.model`, which the model directory saves)."""
    with open_dict(cfg):
        cfg.model.n_vocab = tokenizer.vocab_size
        cfg.model.n_input = cfg.features.n_mels if cfg.features.kind == "fbank" \
            else cfg.features.n_mfcc
    return build_model(cfg)


def build_loader(cfg: DictConfig, utts: list[Utterance], tokenizer: Tokenizer,
                 dist: Distributed, device: torch.device, generator: torch.Generator,
                 shuffle: bool) -> DataLoader:
    """Batches of `utts`, this rank's share; the shuffled (training) ones augmented as
    `data.augment` says and, with `data.sortagrad`, in increasing length in epoch 1."""
    data, sample_rate = cfg.data, cfg.features.sample_rate
    durations = [u.duration for u in utts]
    sampler = DurationBatchSampler(durations, data.batch_size,
                                   data.max_duration, shuffle=shuffle, seed=cfg.seed,
                                   rank=dist.rank, world_size=dist.world_size,
                                   sortagrad=shuffle and data.sortagrad, drop_last=shuffle,
                                   buckets=data.buckets if shuffle else 0)
    augment = AugmentConfig.from_dict(data.get("augment"))
    augmenter = Augmenter(augment, sample_rate) if shuffle and augment.enabled else None
    pin = device.type == "cuda"
    if shuffle and data.train_shards:  # audio from shards; an epoch as long as the manifest's
        stream = ShardBatches(data.train_shards, tokenizer, sample_rate, len(sampler),
                              data.batch_size, data.max_duration, seed=cfg.seed, rank=dist.rank,
                              augment=augmenter)
        return DataLoader(stream, batch_size=None, num_workers=data.num_workers,
                          pin_memory=pin, generator=generator)
    dataset = SpeechDataset(utts, tokenizer, sample_rate, augmenter)
    batch = collate
    if shuffle and data.buckets:
        batch = functools.partial(collate, shapes=static_shapes(
            durations, data.buckets, data.bucket_tokens, sample_rate, augment))
    return DataLoader(dataset, batch_sampler=sampler, collate_fn=batch,
                      num_workers=data.num_workers, pin_memory=pin,
                      persistent_workers=data.num_workers > 0, generator=generator)


def static_shapes(durations: list[float], buckets: int, token_multiple: int, sample_rate: int,
                  augment: AugmentConfig) -> StaticShapes:
    """The padded sizes of the training batches of `buckets` buckets: each bucket's longest
    utterance as speed perturbation's slowest factor stretches it."""
    slowest = min(augment.speed.factors) if augment.enabled and augment.speed.enabled else 1.0
    return StaticShapes.of_buckets(durations, buckets, sample_rate, token_multiple,
                                   stretch=1 / min(slowest, 1.0))


def cmvn_loader(cfg: DictConfig, utts: list[Utterance], tokenizer: Tokenizer) -> DataLoader:
    """The batches global CMVN statistics are learnt from: a seeded sample of `utts`."""
    count = min(cfg.trainer.cmvn_utterances, len(utts))
    sample = random.Random(cfg.seed).sample(utts, count)
    return DataLoader(SpeechDataset(sample, tokenizer, cfg.features.sample_rate),
                      batch_size=32, collate_fn=collate)


def build_optimizer(cfg: DictConfig, model: SpeechTransformer, batches_per_epoch: int
                    ) -> tuple[torch.optim.Optimizer, torch.optim.lr_scheduler.LRScheduler]:
    """`cfg.optim` over the model's parameters and its `cfg.scheduler`; schedules that decay
    to an end (cosine) are told the run's steps when `scheduler.total_steps` is left empty."""
    optimizer = instantiate(cfg.optim, params=model.parameters())
    if "total_steps" in cfg.scheduler and cfg.scheduler.total_steps is None:
        with open_dict(cfg):
            cfg.scheduler.total_steps = cfg.trainer.max_steps or cfg.trainer.max_epochs * \
                math.ceil(batches_per_epoch / cfg.trainer.accumulate_grad_batches)
    return optimizer, instantiate(cfg.scheduler, optimizer=optimizer)


def wrap_model(model: SpeechTransformer, dist: Distributed, device: torch.device,
               trainer: DictConfig, buckets: int) -> torch.nn.Module:
    """What the training step calls: the model, in DDP across ranks, its encoder and decoder
    compiled in place on request (`trainer.compile`, in `trainer.compile_mode`).

    The layers are compiled, not the whole step: each is one graph, while the front end
    (torchaudio's spectrogram) and the CTC loss (an output shape that depends on the data) would
    break it into ten. In place, the weights keep their names; scoring on dev runs eagerly
    (`asr.training.validate`). Lengths vary: one graph for every shape, unless `buckets`
    (data.buckets) make them static: a graph per shape, which reduce-overhead runs as a CUDA
    graph.

    Buffers (the CMVN statistics) are the same on every rank and fixed during training,
    so DDP need not broadcast them before each forward."""
    if trainer.compile:
        if buckets:  # a graph per shape: a bucket's waveform length x a few token lengths
            torch._dynamo.config.recompile_limit = max(torch._dynamo.config.recompile_limit,
                                                       4 * buckets)
        for layers in (model.encoder, model.decoder):
            layers.compile(dynamic=not buckets, options=inductor_options(trainer.compile_mode))
    if dist.enabled:
        model = DistributedDataParallel(
            model, device_ids=[device.index] if device.type == "cuda" else None,
            broadcast_buffers=False)
    return model

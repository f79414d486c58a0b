"""The training config's schema: a dataclass per config group, registered with Hydra.

Every setting has one default, in a dataclass: the ones the library reads (`ModelDimensions`,
`FeatureConfig`, `DecodingOptions`, `AugmentConfig`) and the ones here, for the sections that
training reads from the config itself (data, tokenizer, trainer, optimiser, schedule). Each
`conf/<group>/*.yaml` starts from its group's schema (`defaults: [base_<group>, _self_]`) and
states only what differs, and an experiment (`conf/experiment/<name>.yaml`) states only what
differs from the defaults list of conf/train.yaml, which picks the best model's settings. A
misspelt key or a value of the wrong type, in a yaml file or an override, fails when Hydra
composes the config.

The library dataclasses' defaults are also what a model directory's config.yaml falls back on
for a setting newer than it (asr/checkpoint.py), so the best model's sizes live in
conf/model/small.yaml rather than in `ModelDimensions`' defaults.

`register_configs()` stores the schemas; call it before composing conf/train.yaml
(`python -m asr.train` does).
"""

from dataclasses import dataclass, field

from hydra.core.config_store import ConfigStore
from omegaconf import MISSING

from asr.augment import AugmentConfig, BabbleConfig
from asr.decoding import DecodingOptions
from asr.features import FeatureConfig
from asr.model import ModelDimensions


def recorded_sources() -> AugmentConfig:
    """Every part off; babble, when an experiment turns it on, mixes in the training speech
    itself. The parts that mix in other recordings (noise, reverb) read the manifests an
    experiment names."""
    return AugmentConfig(babble=BabbleConfig(manifest="${data.train_manifest}"))


@dataclass
class DataConfig:
    """Manifests and batching (asr/data.py); `conf/data/*.yaml` name a prepared corpus."""

    root: str = MISSING  # the prepared corpus: python -m recipes.<name>.prepare --out ROOT
    train_manifest: str = "${.root}/train.jsonl"
    dev_manifest: str = "${.root}/dev.jsonl"
    test_manifest: str = "${.root}/test.jsonl"
    train_shards: str | None = None  # a shard set (tools/write_shards.py) to read training audio from
    batch_size: int = 16  # utterances per batch at most
    max_duration: float | None = None  # padded seconds of audio per batch at most (None: no cap)
    sortagrad: bool = False  # first epoch in increasing length (short utterances first)
    # Static shapes for a compiled step (trainer.compile): training batches from this many
    # duration buckets, each bucket's batches of one size, padded to its length and tokens to a
    # multiple of bucket_tokens (asr/data.py: bucket_batches, StaticShapes). 0: batches padded
    # to their longest (every batch a shape of its own).
    buckets: int = 0
    bucket_tokens: int = 16
    num_workers: int = 0  # DataLoader worker processes
    on_error: str = "raise"  # bad manifest lines and audio files: raise | skip
    augment: AugmentConfig = field(default_factory=recorded_sources)  # training only


@dataclass
class TokenizerConfig:
    """sentencepiece trained on the training transcripts (asr/tokenizer.py)."""

    vocab_size: int = 128
    model_type: str = "bpe"  # sentencepiece's: bpe | unigram | char | word
    letters: bool = True  # every English letter a piece, so any English text can be fine-tuned on


@dataclass
class OptimConfig:
    """A torch.optim optimiser of the Adam family (`_target_`) and its keywords."""

    _target_: str = MISSING
    lr: float = 2.5e-3  # peak learning rate (schedules multiply it)
    betas: list[float] = field(default_factory=lambda: [0.9, 0.98])
    eps: float = 1e-9
    weight_decay: float = 0.0


@dataclass
class AdamConfig(OptimConfig):
    """Adam and AdamW, which can run as one fused kernel."""

    fused: bool = True  # one kernel for all parameters (BENCHMARKS.md: faster on CPU too)


@dataclass
class SchedulerConfig:
    """A schedule of asr/scheduler.py (`_target_`) that needs nothing but the optimiser."""

    _target_: str = MISSING


@dataclass
class WarmupConfig(SchedulerConfig):
    warmup_steps: int = 500


@dataclass
class NoamConfig(WarmupConfig):
    d_model: int = MISSING  # conf/scheduler/noam.yaml: the model's
    scale: float | None = None  # None: the peak (at warmup_steps) is optim.lr


@dataclass
class CosineConfig(WarmupConfig):
    total_steps: int | None = None  # None: filled in by training (max_steps or all epochs')
    final: float = 0.0  # the end of the cosine, times optim.lr


@dataclass
class ExponentialConfig(SchedulerConfig):
    tau: float = 400.0  # 1 - exp(-t / tau); tau = warmup / 2 matches a linear warmup

# trainer.max_minutes' bound (about two years): its seconds, and the steps a budget that long
# holds at any speed, stay finite numbers (1e308 minutes made the steps left NaN).
MAX_MINUTES = 1e6


@dataclass
class TrainerConfig:
    """The training loop, device, checkpoints and logs (asr/train.py)."""

    out_dir: str = MISSING  # the model directory: each experiment names its own
    max_epochs: int = 20
    max_steps: int | None = None  # stop earlier after this many optimiser steps
    # A time budget: training ends by then, its last weights scored on dev and kept as any
    # epoch's (asr/training/budget.py). Wall minutes of training over all resumed parts (not the
    # setup before the first step); checked between steps, leaving the time the end needs (the
    # final dev evaluation, and the averaged weights' when averaging). Under a budget a schedule
    # with an end (cosine) ends where the budget does: the steps the time left holds at the speed
    # measured so far in this process, estimated again after every step. None: no budget.
    max_minutes: float | None = None
    grad_clip: float = 5.0
    device: str = "auto"  # auto | cpu | cuda | cuda:N
    # auto (bf16 on CUDA, fp32 on the CPU) | bf16 (autocast, on the CPU too where it has bf16
    # instructions, else fp32 with a warning) | fp16 (CUDA autocast with a GradScaler) | fp32
    precision: str = "auto"
    num_threads: int | None = None  # torch CPU threads (None: torch's; from the command line: the idle cores)
    # torch.compile's mode: default | reduce-overhead (CUDA graphs: needs data.buckets, whose
    # static shapes each graph is captured for) | max-autotune
    compile_mode: str = "default"
    resume: bool = False  # continue from out_dir/checkpoint.pt
    overwrite: bool = False  # start over in an out_dir that holds a run or a model (deletes it)
    init_from: str | None = None  # fine-tune: a model directory whose weights, CMVN and tokenizer start
    cmvn_utterances: int = 1000  # training utterances used for the CMVN statistics
    progress: bool = True  # progress bars on a terminal (epoch, CMVN, dev decoding)
    logger: str = "csv"  # curves beside the model: csv (OUT/curves.csv) | tensorboard | none
    save_every_steps: int | None = None  # also save the training state every N steps
    save_every_minutes: float | None = 5.0  # and every N minutes (None: only after each epoch)
    max_bad_steps: int = 100  # stop when this many steps in a row had non-finite loss/gradients
    log_every: int = 25  # steps per point of the training-loss curve
    accumulate_grad_batches: int = 1  # micro-batches per optimiser step (loss scaled 1/n)
    distributed: bool = False  # DDP under torchrun (conf/trainer/ddp.yaml)
    backend: str = "auto"  # process group: auto (nccl on CUDA, gloo on CPU) | nccl | gloo
    tf32: bool = True  # TF32 matmuls and convolutions on CUDA (Ampere and later)
    compile: bool = False  # torch.compile the training forward (slow to start)
    keep_checkpoints: int = 0  # keep the weights of the last N and best N epochs in out_dir/epochs
    average_checkpoints: int = 0  # at the end, average N epochs' weights into out_dir/averaged
    average_by: str = "last"  # which N epochs: last | best (by dev WER, then dev loss)


SCHEMAS = {  # group -> {name in the group's defaults lists: schema}
    "data": {"base_data": DataConfig},
    "features": {"base_features": FeatureConfig},
    "model": {"base_model": ModelDimensions},
    "tokenizer": {"base_tokenizer": TokenizerConfig},
    "optim": {"base_optim": OptimConfig, "base_adam": AdamConfig},
    "scheduler": {"base_scheduler": SchedulerConfig, "base_warmup": WarmupConfig,
                  "base_noam": NoamConfig, "base_cosine": CosineConfig,
                  "base_exponential": ExponentialConfig},
    "trainer": {"base_trainer": TrainerConfig},
    "decode": {"base_decode": DecodingOptions},
}


def register_configs() -> None:
    """Store every schema in Hydra's ConfigStore, where the yaml files' defaults lists find it."""
    store = ConfigStore.instance()
    for group, schemas in SCHEMAS.items():
        for name, schema in schemas.items():
            store.store(group=group, name=name, node=schema)

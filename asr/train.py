"""Train a Speech-Transformer: `python -m asr.train [hydra overrides]` (console script
`asr-train`).

Reads manifests, learns the BPE vocabulary and the CMVN statistics from the training set,
then runs epochs of (forward, loss, backward, clip, step); after each epoch it measures dev
loss and dev WER, keeps the best weights (by dev WER) and the last training state, all in one
model directory. Under torchrun with `trainer=ddp` the model is wrapped in
DistributedDataParallel: every rank trains on its share of the same shuffled batches, rank 0
alone logs and saves, and dev scores are computed from every rank's share (`asr.distributed`).
`trainer.accumulate_grad_batches` sums gradients over several micro-batches per step;
`trainer.precision` picks bf16 or fp16 (with a GradScaler) autocast on CUDA, bf16 on a CPU with
bf16 instructions, or fp32 (auto: bf16 on CUDA, fp32 on the CPU).
`trainer.init_from` fine-tunes: a trained model's weights, CMVN statistics and tokenizer
replace the random start, the learnt CMVN and the new vocabulary.

This module is the command line; the parts (building, the loop, checkpoints and resume, the
run directory, logging) are in `asr/training/`, whose docstring lists them. What training
reports goes through `logging` (logger `asr.train`, `asr/training/report.py`). A killed run
continues exactly where its last save left off with `trainer.resume=true`; the output
directory is the run's alone (a lock file, and `trainer.overwrite=true` to start over).
"""

import logging
import sys
from pathlib import Path

import hydra
import torch
from omegaconf import DictConfig, OmegaConf, open_dict

from asr import CONF_DIR
from asr.audio import AudioError
from asr.cli import CLOSED_PIPE, silence_stdout
from asr.config import register_configs
from asr.data import ManifestError
from asr.device import idle_cpus
from asr.models import package_problem
from asr.training.options import TrainingError
from asr.training.report import log
from asr.training.run_dir import LOCK
from asr.training.step import clip_gradients
from asr.training.trainer import Trainer

__all__ = ["LOCK", "Trainer", "TrainingError", "cli", "clip_gradients", "config_choices", "main"]

INTERRUPTED = 130  # the exit status of a run stopped by Ctrl-C, as a shell reports SIGINT
HYDRA_DIRS = ("hydra.run.dir", "hydra.sweep.dir")  # where Hydra writes its logs, given
FILLED_IN = {"model.n_vocab"}  # what training sets itself (the tokenizer's size)
_started = False  # set once Hydra has composed a config and handed it over


@hydra.main(version_base="1.3", config_path=str(CONF_DIR), config_name="train")
def main(cfg: DictConfig) -> None:
    global _started
    _started = True
    missing = sorted(OmegaConf.missing_keys(cfg) - FILLED_IN)
    if missing:
        raise SystemExit(f"error: no value for {', '.join(missing)}: give it on the command line "
                         f"({missing[0]}=...)")
    on_cpu = cfg.trainer.device == "cpu" or (cfg.trainer.device == "auto"
                                             and not torch.cuda.is_available())
    if cfg.trainer.num_threads is None and on_cpu:
        with open_dict(cfg):  # threads on cores that other work keeps busy stall the others
            cfg.trainer.num_threads = idle_cpus()
    try:
        state = Trainer(cfg).fit()
    except BrokenPipeError:  # the log's reader went away: the last saved state is kept
        silence_stdout()
        raise SystemExit(CLOSED_PIPE) from None
    except (TrainingError, ManifestError, AudioError, ValueError, OSError) as err:
        raise SystemExit(f"error: {err}") from None
    except KeyboardInterrupt:  # Ctrl-C: the state saved last (trainer.save_every_minutes) stays
        print(f"interrupted: continue with the same command and trainer.resume=true (from "
              f"{cfg.trainer.out_dir}/checkpoint.pt)", file=sys.stderr)
        raise SystemExit(INTERRUPTED) from None
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
    stop_when_the_log_is_gone()
    check_out_dir(sys.argv[1:])
    try:
        main()
    except SystemExit as stop:
        if stop.code == 1 and not _started:
            print(f"hint: config groups: {config_choices()}; keys: python -m asr.train --cfg job",
                  file=sys.stderr)
        raise


def check_out_dir(overrides: list[str]) -> None:
    """A one-line error for a `trainer.out_dir=` that is a file or lies under one, and for an
    out_dir or a Hydra run dir (`hydra.run.dir=`, `hydra.sweep.dir=`) inside the installed
    package's models, before Hydra makes its folders there (its NotADirectoryError would end in
    a config-group hint, and its run dir would be written into the package)."""
    for key in ("trainer.out_dir", *HYDRA_DIRS):
        given = [a.split("=", 1)[1] for a in overrides if a.lstrip("+").startswith(f"{key}=")]
        if given and package_problem(given[-1]):
            raise SystemExit(f"error: {key}={given[-1]} "
                             f"{package_problem(given[-1], 'a training run')}")
    given = [a.split("=", 1)[1] for a in overrides
             if a.lstrip("+").startswith("trainer.out_dir=")]
    if not given:
        return
    path = Path(given[-1])
    for folder in (path, *path.parents):
        if folder.exists() and not folder.is_dir():
            raise SystemExit(f"error: trainer.out_dir={given[-1]}: {folder} is a file, not a "
                             "folder")


def stop_when_the_log_is_gone() -> None:
    """A log line whose reader went away (`asr-train ... | head`) ends the run, as a closed
    pipe ends any Unix tool; logging would otherwise report the error on stderr for every line
    after it and train on unseen while the shell waits. The command line's process alone."""
    report = logging.Handler.handleError

    def handle(handler: logging.Handler, record: logging.LogRecord) -> None:
        error = sys.exc_info()[1]
        if isinstance(error, BrokenPipeError):
            raise error
        report(handler, record)
    logging.Handler.handleError = handle


if __name__ == "__main__":
    cli()

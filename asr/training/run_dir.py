"""The output directory is the run's alone.

A lock file (`train.lock`) stops a second run there at once (the kernel releases the lock
however the process ends), and a directory that holds a run or a trained model is started
over only with `trainer.overwrite=true`, which deletes the old run's state first.
"""

import fcntl
import re
import shutil
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

from omegaconf import DictConfig

from asr.averaging import AVERAGED, EPOCHS
from asr.checkpoint import CHECKPOINT, CONFIG, METRICS, TOKENIZER, WEIGHTS, remove_partial_files
from asr.curves import CSV_FILE, TENSORBOARD_DIR
from asr.training.options import TrainingError

LOCK = "train.lock"  # in out_dir: held by the run training there
RUN_FILES = (CONFIG, WEIGHTS, TOKENIZER, METRICS, CHECKPOINT, EPOCHS, AVERAGED, CSV_FILE,
             TENSORBOARD_DIR)  # a run's state
OWN_FILES = "|".join(re.escape(name) for name in (CONFIG, WEIGHTS, TOKENIZER, METRICS, CHECKPOINT,
                                                  CSV_FILE))


def resuming(trainer: DictConfig, out: Path) -> bool:
    """Whether this run continues the one in `out`. A directory that holds a run or a
    trained model is never started over without trainer.overwrite=true, whatever
    trainer.resume says (without a checkpoint there is nothing to resume)."""
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
def hold_run_dir(out: Path, resumed: bool) -> Iterator[None]:
    """Hold `out` for the run (rank 0 alone calls this): its lock file stops a second run
    in the same directory; a run that starts over first deletes the old run's state; the
    temp files of this program's writes that a kill cut short are cleaned up."""
    out.mkdir(parents=True, exist_ok=True)
    with (out / LOCK).open("a") as lock:
        try:
            fcntl.flock(lock, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            raise TrainingError(f"{out}: another training run is using this directory (it "
                                f"holds {LOCK}); wait for it to end or pick another "
                                "trainer.out_dir") from None
        if not resumed:
            for path in (out / name for name in RUN_FILES):
                if path.is_dir():
                    shutil.rmtree(path)
                else:
                    path.unlink(missing_ok=True)
        for folder, written in ((out, OWN_FILES), (out / AVERAGED, OWN_FILES),
                                (out / EPOCHS, r"epoch_\d+\.pt")):
            remove_partial_files(folder, written)
        try:
            yield
        finally:  # DataLoader workers forked during the run share this open file: closing it
            fcntl.flock(lock, fcntl.LOCK_UN)  # would leave the lock held until they exit

"""The output directory is the run's alone.

A lock file (`train.lock`) stops a second run there at once (the kernel releases the lock
however the process ends), and a directory that holds a run or a trained model is started
over only with `trainer.overwrite=true`, which deletes the old run's state first. The folder
is checked before any work (a file, or a folder that cannot be written, is refused), the lock
is opened without waiting (a FIFO or device by its name is refused, never waited on), and a
save that fails during the run (a full disk) ends it with one line: the atomic writes left the
last saved state whole, to continue from once there is room.
"""

import errno
import fcntl
import os
import re
import shutil
import stat
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

from omegaconf import DictConfig

from asr.averaging import AVERAGED, EPOCHS
from asr.checkpoint import CHECKPOINT, CONFIG, METRICS, TOKENIZER, WEIGHTS, remove_partial_files
from asr.curves import CSV_FILE, TENSORBOARD_DIR
from asr.models import package_problem
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
    check_out_dir(out)
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


def check_out_dir(out: Path) -> None:
    """A TrainingError unless `out` is a folder this process may write in, or can be made
    as one (its nearest existing ancestor is such a folder), outside the installed package's
    models."""
    problem = package_problem(out, "a training run")
    if problem is not None:
        raise TrainingError(f"{out}: trainer.out_dir {problem}")
    nearest = next(p for p in (out, *out.absolute().parents) if os.path.lexists(p))
    if not nearest.is_dir():
        what = "a file" if nearest.is_file() else "a device or pipe" if nearest.exists() \
            else "a link to nothing"
        where = "trainer.out_dir" if nearest == out else f"its parent {nearest}"
        raise TrainingError(f"{out}: {where} is {what}, not a folder; pick another "
                            "trainer.out_dir")
    if not os.access(nearest, os.W_OK | os.X_OK):
        raise TrainingError(f"{out}: cannot write in {nearest} (permission denied); pick "
                            "another trainer.out_dir")


@contextmanager
def hold_run_dir(out: Path, resumed: bool) -> Iterator[None]:
    """Hold `out` for the run (rank 0 alone calls this): its lock file stops a second run
    in the same directory; a run that starts over first deletes the old run's state; the
    temp files of this program's writes that a kill cut short are cleaned up. A write into
    `out` that fails during the run becomes a TrainingError saying what was kept."""
    out.mkdir(parents=True, exist_ok=True)
    lock = open_lock(out / LOCK)
    try:
        try:
            fcntl.flock(lock, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            raise TrainingError(f"{out}: another training run is using this directory (it "
                                f"holds {LOCK}); wait for it to end or pick another "
                                "trainer.out_dir") from None
        if not resumed:
            for path in (out / name for name in RUN_FILES):
                if path.is_dir() and not path.is_symlink():
                    shutil.rmtree(path)
                else:  # a file, or a link (to a folder of someone's: the link goes, not it)
                    path.unlink(missing_ok=True)
        for folder, written in ((out, OWN_FILES), (out / AVERAGED, OWN_FILES),
                                (out / EPOCHS, r"epoch_\d+\.pt")):
            remove_partial_files(folder, written)
        try:
            yield
        except OSError as err:
            if not _inside(err.filename, out):
                raise
            raise TrainingError(_not_saved(err, out)) from None
        finally:  # DataLoader workers forked during the run share this open file: closing it
            fcntl.flock(lock, fcntl.LOCK_UN)  # would leave the lock held until they exit
    finally:
        os.close(lock)


def open_lock(path: Path) -> int:
    """The lock file's descriptor, opened without blocking (a FIFO by that name would wait
    for a writer forever) or following a link; a TrainingError if it is not a regular file."""
    try:
        fd = os.open(path, os.O_RDWR | os.O_CREAT | os.O_NONBLOCK | os.O_NOFOLLOW | os.O_CLOEXEC,
                     0o666)
    except OSError as err:
        problem = "a link" if err.errno == errno.ELOOP else err.strerror
        raise TrainingError(f"{path}: cannot open the lock file ({problem}); remove it or pick "
                            "another trainer.out_dir") from None
    if not stat.S_ISREG(os.fstat(fd).st_mode):
        os.close(fd)
        raise TrainingError(f"{path}: the lock file is not a regular file (a FIFO, socket or "
                            "device); remove it or pick another trainer.out_dir")
    return fd


def _inside(filename: object, out: Path) -> bool:
    """Whether an error's file lies in `out` (or below it)."""
    if not isinstance(filename, str | os.PathLike):
        return False
    return Path(os.path.abspath(filename)).is_relative_to(os.path.abspath(out))


def _not_saved(err: OSError, out: Path) -> str:
    """The one line of a run a failed write ended: what failed, and what there is to go on from."""
    failed = f"{err.filename}: cannot write ({err.strerror or err}); training stopped"
    if (out / CHECKPOINT).is_file():
        return f"{failed}, the state saved before in {out / CHECKPOINT} is intact: make room " \
               "and continue with trainer.resume=true"
    return f"{failed} before its first save: make room and run it again"

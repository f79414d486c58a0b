"""The training directory is the run's alone: a trained model is never started over without
`trainer.overwrite=true`, starting over deletes the old run's state first, only this program's
own temp files are cleaned up, a lock stops a second run, and the state is saved mid-epoch by
default (every few minutes). What would stop a run is refused before it writes anything (a file
as the folder, a FIFO as the lock, a logger that is not installed), and a full disk at a later
save ends it with one line, the state saved before intact."""

import errno
import fcntl
import os
import shlex
import subprocess
import sys

import pytest
import torch

from asr.checkpoint import CHECKPOINT, WEIGHTS, atomic_write, load_torch, save_torch
from asr.train import LOCK, Trainer, TrainingError
from helpers import ROOT, small_real_set, train_config, write_manifest

pytestmark = [pytest.mark.tier("fast"), pytest.mark.data]

STEPS = ["tokenizer.vocab_size=30", "data.batch_size=1", "trainer.max_epochs=1"]


@pytest.fixture(scope="module")
def manifest(tmp_path_factory):
    return write_manifest(tmp_path_factory.mktemp("data") / "train.jsonl", small_real_set()[:4])


@pytest.fixture(scope="module")
def trained(tmp_path_factory, manifest):
    """A finished run's model directory, its checkpoint.pt deleted (as a user might, to ship
    the model): model.pt and its siblings only."""
    tmp = tmp_path_factory.mktemp("trained")
    Trainer(train_config(tmp, manifest, *STEPS, "trainer.max_steps=2")).fit()
    (tmp / "model" / CHECKPOINT).unlink()
    return tmp / "model"


def test_resume_never_starts_over_a_trained_model(trained, manifest):
    """resume=true with no checkpoint.pt used to start afresh and write an untrained model.pt
    over the trained one."""
    weights = (trained / WEIGHTS).read_bytes()
    for flags, problem in [
            (["trainer.resume=true"], f"{trained}: holds a trained model but no {CHECKPOINT} to "
                                      "continue from; pass trainer.overwrite=true to delete it "
                                      "and start over, or another trainer.out_dir"),
            ([], f"{trained}: already holds a training run; pass trainer.resume=true to continue "
                 "it or trainer.overwrite=true to start over"),
            (["trainer.resume=true", "trainer.overwrite=true"],
             f"{trained}: trainer.resume=true and trainer.overwrite=true; pass one (continue the "
             "run there, or delete it and start over)")]:
        with pytest.raises(TrainingError) as caught:
            Trainer(train_config(trained.parent, manifest, *STEPS, *flags)).fit()
        assert str(caught.value) == problem
    assert (trained / WEIGHTS).read_bytes() == weights


class FirstSave(Trainer):
    """Records what the directory held when the run first saved its state."""

    def save_checkpoint(self) -> None:
        if not hasattr(self, "before_first_save"):
            self.before_first_save = sorted(p.name for p in self.out_dir.iterdir())
        super().save_checkpoint()


@pytest.mark.train
def test_overwrite_deletes_the_old_state_first_and_only_own_temp_files(tmp_path, manifest):
    out = tmp_path / "model"
    Trainer(train_config(tmp_path, manifest, *STEPS, "trainer.max_steps=1")).fit()
    (out / "epochs").mkdir()
    (out / "epochs" / "epoch_0001.pt").write_bytes(b"old")
    (out / ".notes.tmp").write_text("someone else's")  # not a temp file of this program
    (out / ".model.pt.k2x8_q0z.tmp").write_text("half of a write that a kill cut short")
    (out / ".model.pt.k2x8_q0z.tmp.keep").write_text("not one either")
    run = FirstSave(train_config(tmp_path, manifest, *STEPS, "trainer.max_steps=1",
                                 "trainer.overwrite=true"))
    assert (out / ".model.pt.k2x8_q0z.tmp").exists()  # creating a Trainer deletes nothing
    run.fit()
    assert run.before_first_save == [".model.pt.k2x8_q0z.tmp.keep", ".notes.tmp", LOCK]
    assert not (out / "epochs").exists()
    assert load_torch(out / CHECKPOINT)["state"]["step"] == 1


@pytest.mark.train
def test_a_second_run_in_the_same_directory_stops_at_once(tmp_path, manifest):
    (tmp_path / "model").mkdir()
    with (tmp_path / "model" / LOCK).open("a") as held:  # as a run in another process holds it
        fcntl.flock(held, fcntl.LOCK_EX)
        with pytest.raises(TrainingError, match=f"^{tmp_path / 'model'}: another training run is "
                                                f"using this directory \\(it holds {LOCK}\\)"):
            Trainer(train_config(tmp_path, manifest, *STEPS)).fit()
    assert not (tmp_path / "model" / WEIGHTS).exists()


@pytest.mark.train
def test_a_finished_run_frees_the_directory_while_its_loader_workers_live(tmp_path, manifest):
    """Persistent DataLoader workers, forked while the lock was held, share its open file;
    the run unlocks on leaving, so resuming in the same process (benchmarks/gpu_check.py does) works
    while they are still alive."""
    run = [*STEPS, "data.num_workers=1"]
    first = Trainer(train_config(tmp_path, manifest, *run))
    first.fit()
    resumed = Trainer(train_config(tmp_path, manifest, *run, "trainer.max_epochs=2",
                                   "trainer.resume=true"))
    resumed.fit()
    assert resumed.state.epoch == 2 and first.train_loader._iterator is not None  # workers kept


def test_a_resumed_run_says_which_weights_it_started_from(tmp_path, manifest, trained, caplog):
    """Its config (what its model directories save) says the first command's trainer.init_from,
    whatever the resuming one says: what a model has heard (recipes/base/ship.py) counts the
    weights it started from."""
    Trainer(train_config(tmp_path, manifest, *STEPS, f"trainer.init_from={trained}")).fit()
    for epochs, again in ((2, []), (3, ["trainer.init_from=base"])):
        run = Trainer(train_config(tmp_path, manifest, *STEPS, f"trainer.max_epochs={epochs}",
                                   "trainer.resume=true", *again))
        assert run.cfg.trainer.init_from == str(trained)
        assert run.fit().epoch == epochs
    assert f"trainer.init_from=base ignored: the resumed run started from {trained}" in caplog.text
    scratch = tmp_path / "scratch"
    Trainer(train_config(scratch, manifest, *STEPS)).fit()
    resumed = Trainer(train_config(scratch, manifest, *STEPS, "trainer.max_epochs=2",
                                   "trainer.resume=true", f"trainer.init_from={trained}"))
    assert resumed.cfg.trainer.init_from is None


class Saves(Trainer):
    """Records the position in the epoch at every save of the training state."""

    def save_checkpoint(self) -> None:
        self.saves = [*getattr(self, "saves", []), self.state.epoch_batches]
        super().save_checkpoint()


@pytest.mark.train
def test_the_state_is_saved_mid_epoch_every_few_minutes(tmp_path, manifest):
    default = train_config(tmp_path, manifest)
    assert default.trainer.save_every_minutes == 5
    run = Saves(train_config(tmp_path, manifest, *STEPS, "trainer.save_every_minutes=1e-9"))
    run.fit()
    assert run.saves == [0, 1, 2, 3, 4, 0]  # the start, after every step, the epoch's end
    resumed = load_torch(tmp_path / "model" / CHECKPOINT)
    assert resumed["state"]["step"] == 4 and torch.is_tensor(resumed["rng"]["torch"])


@pytest.mark.train
def test_a_fifo_named_train_lock_is_refused_not_waited_on(tmp_path, manifest):
    (tmp_path / "model").mkdir()
    os.mkfifo(tmp_path / "model" / LOCK)
    with pytest.raises(TrainingError, match=f"^{tmp_path / 'model' / LOCK}: the lock file is not "
                                            "a regular file \\(a FIFO, socket or device\\)"):
        Trainer(train_config(tmp_path, manifest, *STEPS)).fit()
    assert sorted(p.name for p in (tmp_path / "model").iterdir()) == [LOCK]


@pytest.mark.train
@pytest.mark.parametrize("where", ["file", "parent"])
def test_an_out_dir_that_is_a_file_is_refused_before_any_work(tmp_path, manifest, where):
    (tmp_path / "model").write_text("notes")
    out = tmp_path / "model" if where == "file" else tmp_path / "model" / "run"
    said = "trainer.out_dir" if where == "file" else f"its parent {tmp_path / 'model'}"
    with pytest.raises(TrainingError, match=f"^{out}: {said} is a file, not a folder; pick "
                                            "another trainer.out_dir$"):
        Trainer(train_config(tmp_path, manifest, *STEPS, f"trainer.out_dir={out}"))
    assert (tmp_path / "model").read_text() == "notes"


class CutShort:
    """A temporary file whose writes past its first kilobyte raise `error` (a full disk's
    OSError, a Ctrl-C's KeyboardInterrupt)."""

    def __init__(self, file, error: BaseException) -> None:
        self.file, self.error, self.written = file, error, 0

    def write(self, data) -> int:
        self.written += len(data)
        if self.written > 1024:
            raise self.error
        return self.file.write(data)

    def flush(self) -> None:
        self.file.flush()


@pytest.mark.train
def test_a_full_disk_at_a_later_save_keeps_the_state_saved_before(tmp_path, manifest, monkeypatch):
    """The state saved at the start survives a checkpoint write that finds the disk full
    (torch's zip writer meets the OSError and raises a RuntimeError of its own); the run ends
    with one line saying so, and resumes from it once there is room."""
    import asr.checkpoint as checkpoint
    import asr.training.state as state

    saved = []

    def save_or_fill(obj, path):
        if saved:  # every save after the first finds the disk full
            monkeypatch.setattr(checkpoint, "atomic_write", lambda where, write: atomic_write(
                where, lambda f: write(CutShort(f, OSError(errno.ENOSPC, "No space left on "
                                                                "device")))))
        save_torch(obj, path)
        saved.append(path)

    monkeypatch.setattr(state, "save_torch", save_or_fill)
    out = tmp_path / "model"
    with pytest.raises(TrainingError) as caught:
        Trainer(train_config(tmp_path, manifest, *STEPS, "trainer.save_every_steps=1")).fit()
    assert str(caught.value) == (
        f"{out / CHECKPOINT}: cannot write (No space left on device); training stopped, the "
        f"state saved before in {out / CHECKPOINT} is intact: make room and continue with "
        "trainer.resume=true")
    assert load_torch(out / CHECKPOINT)["state"]["step"] == 0
    assert not [p.name for p in out.iterdir() if p.name.endswith(".tmp")]
    monkeypatch.undo()
    resumed = Trainer(train_config(tmp_path, manifest, *STEPS, "trainer.resume=true"))
    assert resumed.fit().epoch == 1


def test_ctrl_c_inside_a_save_is_a_keyboard_interrupt_and_keeps_the_old_file(tmp_path,
                                                                             monkeypatch):
    """A Ctrl-C that lands in one of torch.save's writes makes its zip writer fail on closing
    (a RuntimeError, "unexpected pos"); the KeyboardInterrupt is what comes out, so training
    ends in its one interrupted line, and the file saved before is untouched."""
    import asr.checkpoint as checkpoint

    path = tmp_path / "checkpoint.pt"
    save_torch({"step": 1, "weights": torch.zeros(4096)}, path)

    monkeypatch.setattr(checkpoint, "atomic_write", lambda where, write: atomic_write(
        where, lambda f: write(CutShort(f, KeyboardInterrupt()))))
    with pytest.raises(KeyboardInterrupt):
        save_torch({"step": 2, "weights": torch.ones(4096)}, path)
    assert load_torch(path)["step"] == 1
    assert [p.name for p in tmp_path.iterdir()] == ["checkpoint.pt"]


@pytest.mark.train
def test_a_missing_logger_is_refused_before_anything_is_written(tmp_path, manifest, monkeypatch):
    """trainer.logger=tensorboard without tensorboard used to fail after checkpoint.pt,
    model.pt and train.lock were written, and the run with logger=csv was then refused."""
    monkeypatch.setitem(sys.modules, "torch.utils.tensorboard", None)  # import fails
    with pytest.raises(TrainingError, match="^trainer.logger=tensorboard needs the tensorboard "
                                            "package: pip install "):
        Trainer(train_config(tmp_path, manifest, *STEPS, "trainer.logger=tensorboard")).fit()
    assert not (tmp_path / "model").exists()
    Trainer(train_config(tmp_path, manifest, *STEPS, "trainer.max_steps=1",
                         "trainer.logger=csv")).fit()
    assert (tmp_path / "model" / "curves.csv").is_file()


@pytest.mark.subprocess
def test_a_closed_log_pipe_ends_the_run_quietly(tmp_path, manifest):
    """`asr-train ... | head -1` printed a logging traceback for every line after the first and
    trained on unseen while the shell waited; now it ends as Unix tools do, its last saved
    state kept."""
    command = [sys.executable, "-m", "asr.train", f"data.train_manifest={manifest}",
               f"data.dev_manifest={manifest}", f"trainer.out_dir={tmp_path / 'model'}",
               "model=tiny", *STEPS, "trainer.max_epochs=3", "trainer.progress=false"]
    run = subprocess.run(f"{shlex.join(command)} | head -1; exit \"${{PIPESTATUS[0]}}\"",
                         shell=True, executable="/bin/bash", cwd=ROOT, capture_output=True,
                         text=True, timeout=300)
    assert (run.returncode, run.stderr) == (141, "")
    assert run.stdout.startswith("model: ")
    assert load_torch(tmp_path / "model" / CHECKPOINT)["state"]["epoch"] < 3


@pytest.mark.subprocess
@pytest.mark.parametrize("under", ["", "/run/x"])
def test_an_out_dir_that_is_a_file_is_one_line_from_the_command_line(tmp_path, under):
    """Hydra makes its folders under trainer.out_dir before the run starts: a file there was
    its NotADirectoryError with a config-group hint."""
    import subprocess
    import sys

    notes = tmp_path / "notes"
    notes.write_text("mine")
    done = subprocess.run([sys.executable, "-m", "asr.train", f"trainer.out_dir={notes}{under}"],
                          capture_output=True, text=True, timeout=120)
    assert done.returncode == 1 and done.stdout == ""
    assert done.stderr == (f"error: trainer.out_dir={notes}{under}: {notes} is a file, not a "
                           "folder\n")
    assert notes.read_text() == "mine"


def test_a_resume_on_other_data_is_refused(tmp_path, caplog):
    """trainer.resume=true with other data and another init_from trained on without a word
    (run.sh always passes resume=true): the run records its manifests' SHA-256 at its start."""
    entries = small_real_set()
    manifest = write_manifest(tmp_path / "train.jsonl", entries[:4])
    steps = ("trainer.max_steps=1", "trainer.max_epochs=1", "data.batch_size=2")
    Trainer(train_config(tmp_path, manifest, *steps)).fit()
    resumed = Trainer(train_config(tmp_path, manifest, "trainer.resume=true",
                                   "trainer.max_steps=2", "trainer.max_epochs=1",
                                   "data.batch_size=2", f"trainer.init_from={tmp_path}/other"))
    assert resumed.state.step == 1
    assert f"trainer.init_from={tmp_path}/other ignored: the resumed run started from scratch" \
        in caplog.text
    write_manifest(manifest, entries[4:8])
    with pytest.raises(TrainingError, match=f"^{tmp_path / 'model'}: the run started on other "
                       f"data \\(its dev manifest {manifest} has changed since\\); resume it on "
                       "the data it started with, or pass trainer.overwrite=true to start over$"):
        Trainer(train_config(tmp_path, manifest, "trainer.resume=true", *steps))

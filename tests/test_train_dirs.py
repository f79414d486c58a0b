"""The training directory is the run's alone: a trained model is never started over without
`trainer.overwrite=true`, starting over deletes the old run's state first, only this program's
own temp files are cleaned up, a lock stops a second run, and the state is saved mid-epoch by
default (every few minutes)."""

import fcntl

import pytest
import torch

from asr.checkpoint import CHECKPOINT, WEIGHTS, load_torch
from asr.train import LOCK, Trainer, TrainingError
from conftest import small_real_set, train_config, write_manifest

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


def test_a_second_run_in_the_same_directory_stops_at_once(tmp_path, manifest):
    (tmp_path / "model").mkdir()
    with (tmp_path / "model" / LOCK).open("a") as held:  # as a run in another process holds it
        fcntl.flock(held, fcntl.LOCK_EX)
        with pytest.raises(TrainingError, match=f"^{tmp_path / 'model'}: another training run is "
                                                f"using this directory \\(it holds {LOCK}\\)"):
            Trainer(train_config(tmp_path, manifest, *STEPS)).fit()
    assert not (tmp_path / "model" / WEIGHTS).exists()


def test_a_finished_run_frees_the_directory_while_its_loader_workers_live(tmp_path, manifest):
    """Persistent DataLoader workers, forked while the lock was held, share its open file;
    the run unlocks on leaving, so resuming in the same process (tools/gpu_check.py does) works
    while they are still alive."""
    run = [*STEPS, "data.num_workers=1"]
    first = Trainer(train_config(tmp_path, manifest, *run))
    first.fit()
    resumed = Trainer(train_config(tmp_path, manifest, *run, "trainer.max_epochs=2",
                                   "trainer.resume=true"))
    resumed.fit()
    assert resumed.state.epoch == 2 and first.train_loader._iterator is not None  # workers kept


class Saves(Trainer):
    """Records the position in the epoch at every save of the training state."""

    def save_checkpoint(self) -> None:
        self.saves = [*getattr(self, "saves", []), self.state.epoch_batches]
        super().save_checkpoint()


def test_the_state_is_saved_mid_epoch_every_few_minutes(tmp_path, manifest):
    default = train_config(tmp_path, manifest)
    assert default.trainer.save_every_minutes == 5
    run = Saves(train_config(tmp_path, manifest, *STEPS, "trainer.save_every_minutes=1e-9"))
    run.fit()
    assert run.saves == [0, 1, 2, 3, 4, 0]  # the start, after every step, the epoch's end
    resumed = load_torch(tmp_path / "model" / CHECKPOINT)
    assert resumed["state"]["step"] == 4 and torch.is_tensor(resumed["rng"]["torch"])

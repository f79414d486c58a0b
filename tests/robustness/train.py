"""Cases: training into a directory that holds a model, a checkpoint or another run's lock,
which must refuse (or, with overwrite=true, replace only its own files)."""

from pathlib import Path

from robustness.case import BOMB, Work, case, save


def _trainer(w: Work, parent: Path, *overrides: str):
    """One step of training into parent/model (w.model when parent is w.folder)."""
    from asr.train import Trainer
    from helpers import train_config
    return Trainer(train_config(parent, w.shared / "train.jsonl", "trainer.max_steps=1",
                                "trainer.max_epochs=1", *overrides))


case("train", "resume=true over a trained model without checkpoint.pt", limit=60)(
    lambda w: (w.model, _trainer(w, w.folder, "trainer.resume=true").fit()))
case("train", "a trained model, neither resume nor overwrite", limit=60)(
    lambda w: (w.model, _trainer(w, w.folder).fit()))
case("train", "resume=true and overwrite=true over a run", limit=60)(
    lambda w: (w.model, _trainer(w, w.folder, "trainer.resume=true",
                                 "trainer.overwrite=true").fit()))
case("train", "init_from a model with a billion laughs", limit=60)(
    lambda w: ((w.model / "config.yaml").write_text(
        (w.model / "config.yaml").read_text() + BOMB),
        _trainer(w, w.folder / "new", f"trainer.init_from={w.model}").fit())[1])
case("train", "a checkpoint.pt of the wrong structure", limit=60)(
    lambda w: (save(w.model / "checkpoint.pt", {"model": {}}),
               _trainer(w, w.folder, "trainer.resume=true").fit())[1])


def _second_run(w: Work) -> None:
    import fcntl
    w.model.joinpath("train.lock").touch()
    with open(w.model / "train.lock") as held:
        fcntl.flock(held, fcntl.LOCK_EX)
        _trainer(w, w.folder, "trainer.overwrite=true").fit()


case("train", "a second run in a directory another run holds", limit=60)(_second_run)


def _overwrite_cleans(w: Work) -> bool:
    import torch
    out = w.model
    save(out / "checkpoint.pt", {"stale": torch.zeros(1)})
    (out / ".notes.tmp").write_text("someone else's")
    (out / ".model.pt.abcd1234.tmp").write_text("a write a kill cut short")
    _trainer(w, w.folder, "trainer.overwrite=true").fit()
    return (out / ".notes.tmp").exists() and not (out / ".model.pt.abcd1234.tmp").exists() \
        and "state" in torch.load(out / "checkpoint.pt", weights_only=True)


case("train", "overwrite=true replaces the old state, leaves others' files", "ok", limit=120)(
    _overwrite_cleans)

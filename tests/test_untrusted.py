"""Model directories from strangers: nothing in them is ever executed.

A pickle whose __reduce__ runs a shell command is planted as model.pt or checkpoint.pt; a
config names os.system as a `_target_` or carries a YAML Python tag. Loading refuses each with
one clear error, and the marker file the payload would create never appears.
"""

import os
import pickle
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
import torch
from omegaconf import OmegaConf, open_dict

from asr.checkpoint import (
    CHECKPOINT,
    CONFIG,
    TOKENIZER,
    WEIGHTS,
    ModelDirError,
    build_model,
    check_targets,
    load_model_dir,
    save_model_dir,
)
from asr.tokenizer import Tokenizer
from conftest import ROOT, fsdd_file, small_real_set, train_config, write_manifest


class Payload:
    """Unpickling this runs `touch MARKER`."""

    def __init__(self, marker) -> None:
        self.marker = marker

    def __reduce__(self):
        return os.system, (f"touch {self.marker}",)


@pytest.fixture(scope="module")
def pristine(tmp_path_factory):
    """A real (untrained) tiny model directory, as training writes it, and its manifest."""
    tmp = tmp_path_factory.mktemp("pristine")
    manifest = write_manifest(tmp / "train.jsonl", small_real_set()[:4])
    cfg = train_config(tmp, manifest)
    tokenizer = Tokenizer.train(["one", "four", "yes", "stop"], 20)
    with open_dict(cfg):
        cfg.model.n_vocab, cfg.model.n_input = tokenizer.vocab_size, cfg.features.n_mels
    save_model_dir(tmp / "model", build_model(cfg), tokenizer, cfg)
    load_model_dir(tmp / "model")  # loads as written
    return tmp


@pytest.fixture
def model_dir(pristine, tmp_path):
    """A fresh copy of the pristine model directory (and its manifest) for one test to spoil."""
    shutil.copy(pristine / "train.jsonl", tmp_path / "train.jsonl")
    return Path(shutil.copytree(pristine / "model", tmp_path / "model"))


def plant_pickle(path, marker, style: str) -> None:
    payload = {"model": {"weight": Payload(marker)}}
    if style == "torch.save":
        torch.save(payload, path)
    else:
        path.write_bytes(pickle.dumps(payload, protocol=2))


def test_the_payload_is_live(tmp_path):
    """Plain unpickling does run it: the refusals below are not vacuous."""
    pickle.loads(pickle.dumps(Payload(tmp_path / "ran")))
    assert (tmp_path / "ran").exists()


@pytest.mark.parametrize("style", ["torch.save", "raw pickle"])
def test_malicious_weights_are_refused(model_dir, tmp_path, style):
    marker = tmp_path / "pwned"
    plant_pickle(model_dir / WEIGHTS, marker, style)
    with pytest.raises(ModelDirError) as caught:
        load_model_dir(model_dir)
    assert str(caught.value) == (f"{model_dir / WEIGHTS}: refused: it holds a pickled reference "
                                 "to posix.system, which could run code; only tensors are loaded")
    assert not marker.exists()


def test_transcribe_cli_refuses_malicious_weights(model_dir, tmp_path):
    marker = tmp_path / "pwned"
    plant_pickle(model_dir / WEIGHTS, marker, "torch.save")
    result = subprocess.run([sys.executable, "-m", "asr.transcribe", "--model", str(model_dir),
                             str(fsdd_file(1))], cwd=ROOT, capture_output=True, text=True,
                            timeout=120)
    assert result.returncode == 1 and result.stdout == ""
    assert result.stderr.splitlines() == [
        f"error: {model_dir / WEIGHTS}: refused: it holds a pickled reference to posix.system, "
        "which could run code; only tensors are loaded"]
    assert not marker.exists()


def test_malicious_training_checkpoint_is_refused(model_dir, tmp_path):
    """`trainer.resume=true` on a planted checkpoint.pt refuses it before using anything."""
    from asr.train import Trainer

    marker = tmp_path / "pwned"
    plant_pickle(model_dir / CHECKPOINT, marker, "torch.save")
    cfg = train_config(tmp_path, tmp_path / "train.jsonl", "trainer.resume=true")
    with pytest.raises(ModelDirError) as caught:
        Trainer(cfg)
    assert str(caught.value) == (f"{model_dir / CHECKPOINT}: refused: it holds a pickled "
                                 "reference to posix.system, which could run code; only "
                                 "tensors are loaded")
    assert not marker.exists()


def test_corrupt_files_are_named(model_dir):
    weights = model_dir / WEIGHTS
    weights.write_bytes(weights.read_bytes()[:100])
    with pytest.raises(ModelDirError, match=rf"^{weights}: cannot load \(PytorchStreamReader"):
        load_model_dir(model_dir)
    (model_dir / TOKENIZER).write_bytes(b"not a sentencepiece model")
    with pytest.raises(ModelDirError, match=rf"^{model_dir / TOKENIZER}: not a sentencepiece"):
        load_model_dir(model_dir)


@pytest.mark.parametrize("section,target", [
    ("optim", "os.system"),
    ("optim", "builtins.exec"),
    ("optim", "subprocess.run"),
    ("optim", "torch.optim.sgd.torch.os.system"),  # an attribute chain through an allowed module
    ("scheduler", "asr.checkpoint.save_text"),  # this package, but a writer, not a schedule
    ("scheduler", "asr.scheduler.LambdaLR.__init__"),
    ("scheduler", "asr.scheduler._private"),
    ("model", "${oc.env:TARGET}"),  # interpolations are not resolved to find the target
    ("decode.nested.deeper", "os.system"),
])
def test_targets_outside_the_allowlist_are_refused(model_dir, tmp_path, section, target):
    config = OmegaConf.load(model_dir / CONFIG)
    OmegaConf.update(config, f"{section}._target_", target, force_add=True)
    OmegaConf.update(config, f"{section}.command", f"touch {tmp_path / 'pwned'}", force_add=True)
    (model_dir / CONFIG).write_text(OmegaConf.to_yaml(config))
    with pytest.raises(ModelDirError) as caught:
        load_model_dir(model_dir)
    assert str(caught.value) == (
        f"{model_dir / CONFIG}: {section}._target_: {target!r} is not allowed (a model directory "
        "may name only torch.optim optimisers and schedulers and asr.scheduler schedules)")
    assert not (tmp_path / "pwned").exists()


@pytest.mark.parametrize("target", ["torch.optim.Adam", "torch.optim.AdamW",
                                    "torch.optim.lr_scheduler.StepLR", "asr.scheduler.noam"])
def test_optimisers_and_schedules_are_allowed(target):
    check_targets(OmegaConf.create({"optim": {"_target_": target}}), "config.yaml")


def test_yaml_python_tags_are_not_executed(model_dir, tmp_path):
    marker = tmp_path / "pwned"
    text = (model_dir / CONFIG).read_text()
    (model_dir / CONFIG).write_text(f"evil: !!python/object/apply:os.system ['touch {marker}']\n"
                                    + text)
    with pytest.raises(ModelDirError) as caught:
        load_model_dir(model_dir)
    assert str(caught.value).startswith(f"{model_dir / CONFIG}: not a plain YAML config (could "
                                        "not determine a constructor for the tag")
    assert not marker.exists()

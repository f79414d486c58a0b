"""Training meets faults: non-finite losses and unusable audio, skipped or stopped on, counted.

A transient NaN (injected into the loss of two steps) is skipped with a warning and counted;
a persistent one (a real overflow: lr 1e30) stops training with a clear message. Audio that
breaks after the manifest was checked is left out and counted with data.on_error=skip, and
stops the run, naming the file, with data.on_error=raise. Warnings and epoch lines are read
from the `asr.train` logger.
"""

import json
import logging

import pytest
import torch

from asr.model import SpeechTransformer
from asr.train import Trainer, TrainingError
from helpers import small_real_set, train_config, write_manifest

pytestmark = [pytest.mark.tier("fast"), pytest.mark.data]

FAST = ["tokenizer.vocab_size=30", "data.batch_size=1", "trainer.max_epochs=2"]


@pytest.fixture(autouse=True)
def training_log(caplog):
    caplog.set_level(logging.INFO, logger="asr.train")
    return caplog


@pytest.fixture
def manifest(tmp_path):
    return write_manifest(tmp_path / "train.jsonl", small_real_set()[:4])


@pytest.mark.train
def test_transient_nan_loss_is_skipped_and_counted(tmp_path, manifest, monkeypatch, training_log):
    forward, calls = SpeechTransformer.forward, []

    def nan_on_training_calls_2_and_3(self, *args):
        losses = forward(self, *args)
        if self.training:
            calls.append(1)
            if len(calls) in (2, 3):  # fault injection: the loss of these steps is NaN
                losses["loss"] = losses["loss"] * float("nan")
        return losses

    monkeypatch.setattr(SpeechTransformer, "forward", nan_on_training_calls_2_and_3)
    trainer = Trainer(train_config(tmp_path, manifest, *FAST))
    state = trainer.fit()
    assert [e["bad_steps"] for e in state.history] == [2, 0]
    assert state.step == 8 - 2
    assert all(torch.isfinite(p).all() for p in trainer.model.parameters())
    out = training_log.text
    assert "warning: non-finite loss at epoch 1, batch 2 (after step 1); step skipped" in out
    assert "warning: non-finite loss at epoch 1, batch 3 (after step 1); step skipped" in out
    assert "2 non-finite step(s) skipped" in out
    metrics = json.loads((tmp_path / "model" / "metrics.json").read_text())
    assert [e["bad_steps"] for e in metrics["epochs"]] == [2, 0]


@pytest.mark.train
def test_persistent_overflow_stops_training(tmp_path, manifest):
    """lr 1e30: the first step blows the weights up, every later loss overflows."""
    cfg = train_config(tmp_path, manifest, *FAST, "optim.lr=1e30", "scheduler=constant",
                       "trainer.max_bad_steps=3")
    with pytest.raises(TrainingError) as caught:
        Trainer(cfg).fit()
    assert str(caught.value) == ("loss or gradients not finite for 3 steps in a row "
                                 "(trainer.max_bad_steps=3); stopped at epoch 1, step 1: lower "
                                 "optim.lr or check the data")


def spoil(path) -> None:
    """Cut a file short after the manifest was written: it breaks only when training reads it."""
    path.write_bytes(path.read_bytes()[:1000])


@pytest.fixture
def spoiled(tmp_path):
    """A training manifest of four real utterances, one of whose files is then truncated."""
    entries = [(tmp_path / f"{i}.wav", text) for i, (_, text) in enumerate(small_real_set()[:4])]
    for (copy, _), (original, _) in zip(entries, small_real_set()[:4], strict=True):
        copy.write_bytes(original.read_bytes())
    manifest = write_manifest(tmp_path / "train.jsonl", entries)
    spoil(entries[1][0])
    return manifest, entries[1][0]


@pytest.mark.train
def test_bad_audio_met_in_training_is_skipped_and_counted(tmp_path, spoiled, training_log):
    manifest, bad = spoiled
    dev = write_manifest(tmp_path / "dev.jsonl", small_real_set()[:2])
    state = Trainer(train_config(tmp_path, manifest, *FAST, f"data.dev_manifest={dev}",
                                 "data.on_error=skip")).fit()
    assert [e["bad_audio"] for e in state.history] == [1, 1]
    assert state.step == 2 * 3
    out = training_log.text
    assert out.count(f"warning: skipped {bad}: truncated: header declares") == 1  # once per file
    assert "1 bad audio file(s) skipped" in out


@pytest.mark.train
def test_bad_audio_met_in_training_stops_the_run_by_default(tmp_path, spoiled):
    manifest, bad = spoiled
    with pytest.raises(TrainingError) as caught:
        Trainer(train_config(tmp_path, manifest, *FAST)).fit()
    assert str(caught.value).startswith(f"{bad}: truncated: header declares ")
    assert str(caught.value).endswith(" (data.on_error=skip leaves such files out)")


@pytest.mark.train
def test_bad_manifest_lines_are_skipped_and_counted(tmp_path, manifest, training_log):
    lines = manifest.read_text().splitlines()
    manifest.write_text("\n".join([lines[0], "{broken", *lines[1:], '{"text": "x"}']) + "\n")
    cfg = train_config(tmp_path, manifest, *FAST, "trainer.max_epochs=1", "data.on_error=skip")
    trainer = Trainer(cfg)
    assert len(trainer.train_utts) == 4 and trainer.state.skipped_lines == 4  # train + dev
    out = training_log.text
    assert f"warning: skipped {manifest}:2: bad JSON (Expecting property name enclosed in " \
           "double quotes)" in out
    with pytest.raises(TrainingError, match="data.on_error must be raise or skip, got 'ignore'"):
        Trainer(train_config(tmp_path, manifest, *FAST, "data.on_error=ignore"))


@pytest.mark.train
@pytest.mark.parametrize("overrides, message", [
    (["trainer.compile_mode=fastest"], "trainer.compile_mode must be one of default, "
     "reduce-overhead, max-autotune, got 'fastest'"),
    (["trainer.compile=true", "trainer.compile_mode=reduce-overhead"],
     "trainer.compile_mode=reduce-overhead captures CUDA graphs for static shapes: set "
     "data.buckets (e.g. data.buckets=4)"),
    (["data.buckets=-1"], "data.buckets must be 0 (off) or more and data.bucket_tokens at least "
     "1, got -1 and 16"),
    (["data.buckets=2", "data.train_shards=x"], "data.buckets pads manifest batches; shards "
     "(data.train_shards) batch as they are read: use one or the other"),
])
def test_static_shape_settings_are_checked_before_anything_is_read(tmp_path, manifest, overrides,
                                                                   message):
    with pytest.raises(TrainingError) as caught:
        Trainer(train_config(tmp_path, manifest, *FAST, *overrides))
    assert str(caught.value) == message
    assert not (tmp_path / "model").exists()

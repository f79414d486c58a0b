"""Checkpoint averaging: which epochs are kept and chosen, and that the averaged model is their
mean, written as a model directory that loads and transcribes."""

import json
import subprocess
import sys

import pytest
import torch

from asr.averaging import AVERAGED, EPOCHS, average_model_dir, average_weights, epoch_path, select_epochs
from asr.checkpoint import WEIGHTS, ModelDirError, load_model_dir, load_torch
from asr.train import Trainer
from helpers import ROOT, small_real_set, train_config, write_manifest

pytestmark = [pytest.mark.tier("fast"), pytest.mark.data]

HISTORY = [{"epoch": e, "dev_wer": w, "dev_loss": loss} for e, w, loss in [
    (1, 0.9, 3.0), (2, 0.5, 2.0), (3, 0.6, 1.5), (4, 0.5, 1.8), (5, 0.7, 1.6)]]


def test_last_and_best_epochs():
    assert select_epochs(HISTORY, 2, "last") == [4, 5]
    assert select_epochs(HISTORY, 3, "best") == [2, 3, 4]  # WER ties broken by dev loss
    assert select_epochs(HISTORY, 1, "best") == [4]
    assert select_epochs(HISTORY, 9, "last") == [1, 2, 3, 4, 5]


@pytest.mark.subprocess
@pytest.mark.train
def test_training_keeps_epochs_and_writes_their_average(tmp_path):
    manifest = write_manifest(tmp_path / "train.jsonl", small_real_set()[4:6])
    trainer = Trainer(train_config(tmp_path, manifest, "tokenizer.vocab_size=20",
                                   "data.batch_size=1", "trainer.max_epochs=4",
                                   "scheduler.warmup_steps=2", "decode.max_len_ratio=0.2",
                                   "trainer.num_threads=1", "trainer.keep_checkpoints=1",
                                   "trainer.average_checkpoints=2", "trainer.average_by=last"))
    state = trainer.fit()
    out = tmp_path / "model"
    best = select_epochs(state.history, 2, "best")
    kept = sorted(int(p.stem[-4:]) for p in (out / EPOCHS).glob("epoch_*.pt"))
    assert kept == sorted({3, 4} | set(best))  # the last 2 and the best 2
    averaged = load_torch(out / AVERAGED / WEIGHTS)
    mean = average_weights([epoch_path(out, 3), epoch_path(out, 4)])
    last, before = load_torch(epoch_path(out, 4)), load_torch(epoch_path(out, 3))
    for name, tensor in averaged.items():
        assert torch.equal(tensor, mean[name])
        if tensor.is_floating_point():
            assert torch.allclose(tensor, (last[name] + before[name]) / 2, atol=1e-7)
    metrics = json.loads((out / AVERAGED / "metrics.json").read_text())
    assert metrics["averaged_epochs"] == [3, 4] and 0 <= metrics["dev_wer"]
    model, _, _ = load_model_dir(out / AVERAGED)
    assert all(torch.equal(t, averaged[k]) for k, t in model.state_dict().items())

    tool = subprocess.run([sys.executable, "-m", "tools.average_checkpoints", "--model", str(out),
                           "--best", "2", "--out", str(tmp_path / "best2")],
                          cwd=ROOT, capture_output=True, text=True, timeout=120)
    assert tool.returncode == 0, tool.stderr
    best2 = load_torch(tmp_path / "best2" / WEIGHTS)
    expected = average_weights([epoch_path(out, e) for e in best])
    assert all(torch.equal(best2[k], expected[k]) for k in expected)
    with pytest.raises(ModelDirError, match=r"epochs: missing epoch_000.*keep_checkpoints>=4"):
        average_model_dir(out, 4, "last", tmp_path / "x")

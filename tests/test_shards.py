"""WebDataset shards: written from a streamed manifest (exact members and index), read back
as the same audio, and trained from for real steps."""

import json
import subprocess
import sys
import tarfile

import pytest
import torch

from asr.audio import load_audio
from asr.data import iter_manifest
from asr.shards import INDEX, ShardBatches, decode_sample, read_index, write_shards
from asr.tokenizer import Tokenizer
from helpers import ROOT, small_real_set, train_config, write_manifest

pytestmark = [pytest.mark.tier("slow"), pytest.mark.data]


@pytest.fixture(scope="module")
def shards(tmp_path_factory):
    """The 8 real utterances in shards of at most 3, by the command-line tool."""
    tmp_path = tmp_path_factory.mktemp("shards")
    manifest = write_manifest(tmp_path / "train.jsonl", small_real_set())
    run = subprocess.run([sys.executable, "-m", "tools.write_shards", "--manifest", str(manifest),
                          "--out", str(tmp_path / "shards"), "--max-count", "3"],
                         cwd=ROOT, capture_output=True, text=True, timeout=120)
    assert run.returncode == 0, run.stderr
    assert "8 utterances" in run.stdout and "3 shard(s)" in run.stdout
    return manifest, tmp_path / "shards"


def test_shards_hold_every_utterance_once_in_order(shards):
    manifest, folder = shards
    utts = list(iter_manifest(manifest))
    index = read_index(folder)
    assert [s["utterances"] for s in index["shards"]] == [3, 3, 2]
    assert index["seconds"] == pytest.approx(sum(u.duration for u in utts), abs=1e-3)
    names = [m for s in index["shards"] for m in tarfile.open(folder / s["name"]).getnames()]
    assert names == [f"{k:09d}.{ext}" for k in range(8) for ext in ("audio", "json")]
    assert {p.name for p in folder.iterdir()} == {INDEX, "shard-000000.tar", "shard-000001.tar",
                                                  "shard-000002.tar"}  # no staging left
    import webdataset as wds

    samples = list(wds.WebDataset([str(folder / s["name"]) for s in index["shards"]],
                                  shardshuffle=False))
    for sample, utt in zip(samples, utts, strict=True):
        wave, text, duration = decode_sample(sample, 16000)
        assert text == utt.text and duration == utt.duration
        assert torch.equal(wave, load_audio(utt.audio_filepath, 16000))  # 8 kHz FSDD resampled too


def test_stream_gives_the_epoch_length_in_duration_buckets(shards):
    manifest, folder = shards
    tokenizer = Tokenizer.train([u.text for u in iter_manifest(manifest)], 30)
    stream = ShardBatches(folder, tokenizer, 16000, batches=5, batch_size=3, max_duration=4.0,
                          buffer=4)
    batches = list(stream)
    assert len(batches) == len(stream) == 5  # resampled shards never run dry
    for batch in batches:
        assert len(batch["lengths"]) <= 3 and not batch["bad"]
        assert batch["lengths"].max().item() * len(batch["lengths"]) <= 4.0 * 16000
    stream.set_epoch(0, start=3)
    assert len(list(stream)) == 2  # a resumed epoch delivers the batches it still owes


@pytest.mark.train
def test_training_from_shards(shards, tmp_path):
    manifest, folder = shards
    from asr.train import Trainer

    trainer = Trainer(train_config(tmp_path, manifest, f"data.train_shards={folder}",
                                   "tokenizer.vocab_size=30", "data.batch_size=2",
                                   "trainer.max_epochs=2", "trainer.num_threads=1",
                                   "scheduler.warmup_steps=2", "decode.max_len_ratio=0.2"))
    state = trainer.fit()
    assert isinstance(trainer.train_loader.dataset, ShardBatches)
    assert state.step == 8  # 4 batches per epoch, as the manifest's utterances make
    assert state.history[1]["train_loss"] < state.history[0]["train_loss"]
    assert json.loads((tmp_path / "model" / "metrics.json").read_text())["steps"] == 8


def test_unfinished_shard_set_is_refused(tmp_path):
    folder = tmp_path / "shards"
    write_shards(write_manifest(tmp_path / "m.jsonl", small_real_set()[:2]), folder)
    (folder / INDEX).unlink()
    with pytest.raises(ValueError, match=r"shards.json: no shard index \(an unfinished"):
        read_index(folder)

"""tools/pack_base.py: the base model's corpus packed for one GPU call (Opus, FLAC responses,
paths relative), and training from the packed folder, on the CPU at toy size."""

import json
import shutil
from pathlib import Path

import numpy as np
import pytest
import soundfile as sf

from asr.audio import load_audio
from helpers import noise_clips, small_real_set, train_config
from tools import pack_base

pytestmark = [pytest.mark.tier("fast"), pytest.mark.data]


def write_corpus(folder: Path) -> tuple[Path, Path]:
    """A corpus as recipes.base.prepare lays it out (train, dev, noise manifests with absolute
    paths and extra fields) and two room responses, made here (asr.rooms)."""
    corpus, rirs = folder / "corpus", folder / "rirs"
    corpus.mkdir(parents=True)
    rirs.mkdir()

    def manifest(name: str, items: list[tuple[Path, str]]) -> None:
        rows = [{"audio_filepath": str(a), "text": t, "voice": "real",
                 "duration": sf.info(str(a)).duration} for a, t in items]
        (corpus / f"{name}.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows))

    words = small_real_set()
    manifest("train", words)
    manifest("dev", words[:4])
    manifest("noise", [(p, "") for p in noise_clips(0, 2)])
    rows = []
    for index in range(2):  # a decaying noise burst: an impulse response's shape
        rng = np.random.default_rng(index)
        response = rng.standard_normal(4000) * np.exp(-np.arange(4000) / 600)
        sf.write(str(rirs / f"r{index}.wav"), (response / abs(response).max()).astype("float32"),
                 16000, subtype="FLOAT")
        rows.append({"audio_filepath": f"r{index}.wav", "text": "", "duration": 0.25})
    (rirs / "rirs.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows))
    return corpus, rirs


@pytest.mark.train
def test_the_packed_corpus_is_the_same_speech_in_opus_and_trains(tmp_path, monkeypatch):
    from asr.train import Trainer

    corpus, rirs = write_corpus(tmp_path / "src")
    out = tmp_path / "gpu_base"
    monkeypatch.setattr(pack_base, "ROOT", tmp_path)
    assert pack_base.main(["--corpus", str(corpus), "--rirs", str(rirs), "--out", str(out),
                           "--no-wheels"]) == 0
    packed = [json.loads(line) for line in (out / "corpus" / "train.jsonl").read_text().splitlines()]
    original = [json.loads(line) for line in (corpus / "train.jsonl").read_text().splitlines()]
    assert [r["text"] for r in packed] == [r["text"] for r in original]
    for before, after in zip(original, packed, strict=True):
        assert after["voice"] == "real" and not Path(after["audio_filepath"]).is_absolute()
        assert sf.info(str(out / "corpus" / after["audio_filepath"])).subtype == "OPUS"
        a, b = (load_audio(p, 16000) for p in (before["audio_filepath"],
                                                out / "corpus" / after["audio_filepath"]))
        assert abs(len(a) - len(b)) <= 160  # Opus keeps the length to a frame
    responses = (out / "rirs" / "rirs.jsonl").read_text().splitlines()
    assert [sf.info(str(out / "rirs" / json.loads(r)["audio_filepath"])).format
            for r in responses] == ["FLAC", "FLAC"]

    cfg = train_config(tmp_path, out / "corpus" / "train.jsonl", "experiment=base_conv",
                       "model=tiny", f"data.root={out / 'corpus'}",
                       f"data.augment.reverb.manifest={out / 'rirs' / 'rirs.jsonl'}",
                       "trainer.max_minutes=null", "trainer.max_epochs=8",
                       "tokenizer.vocab_size=40", "data.batch_size=8", "scheduler.warmup_steps=4",
                       "optim.lr=3e-3", "trainer.cmvn_utterances=8", "model.dropout=0.0",
                       f"data.dev_manifest={out / 'corpus' / 'dev.jsonl'}")
    losses = [epoch["train_loss"] for epoch in Trainer(cfg).fit().history]
    assert losses[-1] < 0.8 * losses[0], losses


def test_the_command_trains_the_experiment_on_the_gpu_from_the_packed_folder(tmp_path, monkeypatch):
    monkeypatch.setattr(pack_base, "ROOT", tmp_path)
    out = tmp_path / "gpu_base"
    (out / "start").mkdir(parents=True)
    command = pack_base.device_command(out, "base_conv", 8, start=True)
    assert "experiment=base_conv data.root=gpu_base/corpus" in command
    assert "data.augment.reverb.manifest=gpu_base/rirs/rirs.jsonl" in command
    assert "trainer.device=cuda trainer.precision=bf16 trainer.max_minutes=8" in command
    assert command.endswith("trainer.init_from=gpu_base/start") and "pip" not in command
    (out / "requirements.txt").write_text("jiwer==4.0.0\n")
    command = pack_base.device_command(out, "base_conv", 8, start=False)
    assert "--find-links gpu_base/wheels -r gpu_base/requirements.txt" in command
    assert "-m tools.pack_gpu --unpack $S --out gpu_base" in command
    assert len(command) < 2000 and "init_from" not in command
    shutil.rmtree(out)

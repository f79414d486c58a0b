"""LibriSpeech data prep on a tiny corpus in its exact layout, built at test time from real
read speech (cathy's FLACs): manifests, normalised text, durations, downloads, bad lines."""

import json
import shutil
import tarfile
from pathlib import Path

import pytest
import soundfile as sf

from helpers import SHARED
from recipes.librispeech import prepare as librispeech

pytestmark = [pytest.mark.tier("fast"), pytest.mark.data]

CATHY = SHARED / "cathy" / "data"
# split -> speaker -> chapter -> number of utterances
LAYOUT = {"train-clean-100": {"103": {"1240": 3}, "1034": {"121119": 2}},
          "dev-clean": {"84": {"121123": 2}}, "dev-other": {"116": {"288045": 1}},
          "test-clean": {"1089": {"134686": 2}}}


def build_corpus(root: Path) -> dict[str, list[str]]:
    """LibriSpeech's layout under `root`; the upper-case transcripts of each split in order."""
    sources = sorted(CATHY.glob("arctic_a00*.flac"))
    texts: dict[str, list[str]] = {}
    for split, speakers in LAYOUT.items():
        for speaker, chapters in speakers.items():
            for chapter, count in chapters.items():
                folder = root / split / speaker / chapter
                folder.mkdir(parents=True)
                lines = []
                for n in range(count):
                    source = sources.pop(0)
                    utt_id = f"{speaker}-{chapter}-{n:04d}"
                    shutil.copy(source, folder / f"{utt_id}.flac")
                    text = source.with_suffix(".txt").read_text().strip().upper()
                    lines.append(f"{utt_id} {text}")
                    texts.setdefault(split, []).append(text)
                (folder / f"{speaker}-{chapter}.trans.txt").write_text("\n".join(lines) + "\n")
    return texts


def rows(path: Path) -> list[dict]:
    return [json.loads(line) for line in path.read_text().splitlines()]


def test_manifests_from_librispeech_layout(tmp_path):
    texts = build_corpus(tmp_path / "LibriSpeech")
    paths = librispeech.prepare(tmp_path / "LibriSpeech", tmp_path / "out",
                                train=["train-clean-100"],
                                evaluation=["dev-clean", "dev-other", "test-clean"])
    assert sorted(paths) == ["dev", "dev_clean", "dev_other", "test_clean", "train"]
    train = rows(paths["train"])
    assert [r["speaker"] for r in train] == ["103"] * 3 + ["1034"] * 2  # utterance-id order
    assert len(rows(paths["dev"])) == 3 and [r["split"] for r in rows(paths["dev"])] == \
        ["dev-clean", "dev-clean", "dev-other"]
    first = rows(paths["test_clean"])[0]
    assert Path(first["audio_filepath"]).name == "1089-134686-0000.flac"
    assert first["duration"] == round(sf.info(first["audio_filepath"]).duration, 4)
    assert first["text"] == texts["test-clean"][0].lower().replace(",", "").replace(".", "")
    assert all(r["text"] == r["text"].lower() and "," not in r["text"] for r in train)


def test_download_unpacks_each_split_once(tmp_path, monkeypatch):
    build_corpus(tmp_path / "src" / "LibriSpeech")
    for split in ("dev-clean", "test-clean"):
        with tarfile.open(tmp_path / f"{split}.tar.gz", "w:gz") as archive:
            archive.add(tmp_path / "src" / "LibriSpeech" / split, f"LibriSpeech/{split}")
    monkeypatch.setattr(librispeech, "URL", tmp_path.as_uri() + "/{split}.tar.gz")
    paths = librispeech.prepare(None, tmp_path / "out", train=["dev-clean"],
                                evaluation=["test-clean"])
    assert len(rows(paths["train"])) == 2 and len(rows(paths["test_clean"])) == 2
    assert (tmp_path / "out" / "download" / "test-clean" / "test-clean" / "1089").is_dir()
    (tmp_path / "test-clean.tar.gz").unlink()  # a second run finds the unpacked copy
    librispeech.prepare(None, tmp_path / "out", train=["dev-clean"], evaluation=["test-clean"])


def test_bad_transcript_line_names_file_and_line(tmp_path):
    build_corpus(tmp_path / "LibriSpeech")
    trans = tmp_path / "LibriSpeech" / "dev-clean" / "84" / "121123" / "84-121123.trans.txt"
    trans.write_text(trans.read_text() + "84-121123-0009 A LINE WITHOUT ITS AUDIO\n")
    with pytest.raises(SystemExit, match=rf"{trans}:3: audio file not found: .*84-121123-0009"):
        librispeech.prepare(tmp_path / "LibriSpeech", tmp_path / "out", train=["dev-clean"],
                            evaluation=[])
    with pytest.raises(SystemExit, match="unknown LibriSpeech split"):
        librispeech.prepare(tmp_path / "LibriSpeech", tmp_path / "out", train=["train-960"])


@pytest.mark.train
def test_recipe_configs_train_on_the_prepared_manifests(tmp_path):
    """data=librispeech and features=fbank_specaugment (the recipe's) run real steps; the s
    and m model configs build at their published sizes (fairseq: 30M and 71M)."""
    from asr.checkpoint import build_model
    from asr.train import Trainer
    from helpers import train_config

    build_corpus(tmp_path / "LibriSpeech")
    paths = librispeech.prepare(tmp_path / "LibriSpeech", tmp_path / "out",
                                train=["train-clean-100"], evaluation=["dev-clean", "dev-other"])
    cfg = train_config(tmp_path, paths["train"], "data=librispeech", f"data.root={tmp_path / 'out'}",
                       f"data.train_manifest={paths['train']}", f"data.dev_manifest={paths['dev']}",
                       "features=fbank_specaugment", "data.num_workers=0", "trainer.max_steps=2",
                       "data.max_duration=30", "tokenizer.vocab_size=60", "trainer.num_threads=1",
                       "decode.max_len_ratio=0.1")
    state = Trainer(cfg).fit()
    assert state.step == 2 and cfg.features.freq_masks == 2 and cfg.data.augment.speed.enabled
    for name, millions in (("s2t_s", 29.7), ("s2t_m", 75.5)):
        sized = train_config(tmp_path, paths["train"], f"model={name}")
        sized.model.n_vocab, sized.model.n_input = 5000, 80
        params = sum(p.numel() for p in build_model(sized).parameters())
        assert round(params / 1e6, 1) == millions

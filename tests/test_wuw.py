"""WUW Corpus II recipe on the shared calls: mu-law read, markup normalised, speakers disjoint,
a few training steps, and the wake-word scoring."""

import json
import subprocess
import sys
from collections import defaultdict
from pathlib import Path

import numpy as np
import pytest
import soundfile as sf

from asr.alignment import WordTime, align_text
from asr.audio import load_audio
from asr.checkpoint import load_model_dir
from asr.text import normalize_transcription
from helpers import ROOT, SHARED, require_shared, train_config
from recipes.common import SPLITS, corpora
from recipes.wuw import prepare as wuw
from recipes.wuw import spot

pytestmark = [pytest.mark.tier("fast"), pytest.mark.data]

WUW = SHARED / "wuw"
# One caller back to back (00026-00029: female, native, cell, 10:45-10:59), three callers of
# different genders reading one script one morning (00146-00148; the first two say one of its
# sentences word for word, the third paraphrases), and three callers of their own, one with a
# sentence transcribed `[[skip]]` (00048_010).
CALLS = ("00026", "00027", "00028", "00029", "00146", "00147", "00148", "00000", "00002", "00048")


def rows(path: Path) -> list[dict]:
    return [json.loads(line) for line in path.read_text().splitlines()]


@pytest.fixture(scope="module")
def corpus() -> list[dict]:
    require_shared()
    return corpora.entries(WUW)


@pytest.fixture(scope="module")
def prepared(tmp_path_factory, corpus) -> dict[str, Path]:
    """The recipe run on a copy of the corpus' layout holding CALLS (the calls linked)."""
    root = tmp_path_factory.mktemp("wuw_root")
    (root / "calls").mkdir()
    for call in CALLS:
        (root / "calls" / call).symlink_to(WUW / "calls" / call)
    picked = [e for e in corpus if e["sessionNumber"] in CALLS]
    (root / "data.json").write_text(json.dumps({"entries": picked}))
    return wuw.prepare(root, tmp_path_factory.mktemp("wuw"))


def g711_mu_law(path: Path) -> np.ndarray:
    """The ITU-T G.711 mu-law decoding of a file's bytes, written out (no library)."""
    code = ~np.frombuffer(path.read_bytes(), dtype=np.uint8).astype(np.int32) & 0xFF
    magnitude = ((((code & 0x0F) << 3) + 0x84) << ((code >> 4) & 7)) - 0x84
    return np.where(code & 0x80, -magnitude, magnitude)


def test_mu_law_is_read_as_g711_says(prepared):
    """Every prepared WAV holds the call's samples exactly as G.711 decodes its bytes, at
    8 kHz, as long as the file has bytes; speech, neither silence nor clipped, no offset."""
    lines = [r for split in SPLITS for r in rows(prepared[split])]
    assert len(lines) == 99  # 10 calls x 10, less 00048_010 (no words)
    for line in lines:
        source = WUW / "calls" / line["session"] / (Path(line["audio_filepath"]).stem + ".ulaw")
        samples, rate = sf.read(line["audio_filepath"], dtype="int16")
        assert rate == 8000 and np.array_equal(samples, g711_mu_law(source))
        assert line["duration"] == pytest.approx(source.stat().st_size / 8000, abs=1e-4)
        wave = samples / 32768
        # the quietest of the whole corpus peaks at 0.028 with an RMS of 0.0033
        assert 0.02 < np.abs(wave).max() < 1.0 and 0.003 < np.sqrt(np.mean(wave**2)) < 0.3
        assert abs(wave.mean()) < 0.01


@pytest.mark.parametrize("name, words", [
    ("00104_007", "i'm gonna be using the word thinkengine in a sentence as requested thinkengine"),
    ("00132_007", "for the last eight months i am working in the company known as thinkengine"),
    ("00161_006", "hi i was just wondering about operator and i could use"),
    ("00109_010", "voyager i have a hard time pronouncing that word voyager i dont know what it "
                  "is hahaha"),
    ("00185_006", "hello hello hello operator"),
    ("00024_006", "i want to redirect the call to the operator"),
    ("00219_008", "i don't know what to say onword"),
    ("00026_010", "what am i supposed to say they want me to use wildfire in a sentence and "
                  "thinkengine in a sentence"),
    ("00110_009", "wildfires in the brush"),
    ("00049_008", "full support for the cpx eight thousands and advanced high availability onword"),
    ("00127_008", "the onword system is a pain in the neck"),
    ("00092_001", "operator"),
    ("00121_008", "this is a sort of a word that we came up and its not that we are liking it "
                  "that much anyway but let's see if we can make a use of it onword"),
    ("00048_010", ""),
    ("00124_001", ""),
])
def test_markup_is_normalised(corpus, name, words):
    """The corpus' own transcripts: noise tags, ((uncertain)) and <as>ides, %hesitations and
    uh/um, fragments, ^names, +odd and *non-words, _keywords_, a mangled apostrophe."""
    transcription = next(e["transcription"] for e in corpus
                         if e["fileName"] == f"WUWII{name}.ulaw")
    assert normalize_transcription(transcription) == words


def test_manifest_lines(prepared, corpus):
    lines = {Path(r["audio_filepath"]).stem: r for split in SPLITS for r in rows(prepared[split])}
    line = lines["WUWII00026_008"]
    entry = next(e for e in corpus if e["fileName"] == "WUWII00026_008.ulaw")
    assert (line["text"], line["kind"], line["keyword"], line["phonetype"]) == (
        "here we go onword", "sentence", "onword", "cellphone")
    assert (line["keyword_start"], line["keyword_end"]) == (entry["startTime"], entry["endTime"])
    assert lines["WUWII00026_003"]["kind"] == "wake_word"
    assert "WUWII00048_010" not in lines and "WUWII00048_009" in lines
    for split in ("dev", "test"):
        assert rows(prepared[f"{split}_sentences"]) == [
            r for r in rows(prepared[split]) if r["kind"] == "sentence"]


def test_speaker_groups_are_disjoint_across_splits(corpus, prepared):
    """Calls of one group share a split; the rule's groups on the whole corpus; and the
    prepared splits hold no group (and no call) twice."""
    groups = corpora.speaker_groups(corpus)
    assert len(groups) == 183 and len(set(groups.values())) == 105
    assert {groups[c] for c in ("00026", "00027", "00028", "00029")} == {"wuw:00026"}
    assert groups["00146"] == groups["00147"] == "wuw:00146" and groups["00148"] == "wuw:00148"
    assert groups["00000"] == "wuw:00000" and groups["00002"] == "wuw:00002"
    splits = corpora.session_splits(corpus)
    by_group = defaultdict(set)
    for call, group in groups.items():
        by_group[group].add(splits[call])
    assert all(len(s) == 1 for s in by_group.values())
    held_out = {split: {g for g, s in by_group.items() if s == {split}} for split in SPLITS}
    assert [len(held_out[s]) for s in SPLITS] == [72, 14, 19]
    speakers = {split: {r["speaker"] for r in rows(prepared[split])} for split in SPLITS}
    calls = {split: {r["session"] for r in rows(prepared[split])} for split in SPLITS}
    for a, b in (("train", "dev"), ("train", "test"), ("dev", "test")):
        assert not speakers[a] & speakers[b] and not calls[a] & calls[b]
    assert set().union(*calls.values()) == set(CALLS)


@pytest.mark.subprocess
def test_missing_corpus_is_one_line(tmp_path):
    proc = subprocess.run([sys.executable, "-m", "recipes.wuw.prepare", "--root", str(tmp_path),
                           "--out", str(tmp_path / "out")], capture_output=True, text=True,
                          cwd=ROOT, timeout=120)
    assert proc.returncode != 0
    assert proc.stderr.strip().splitlines() == [
        f"error: {tmp_path / 'data.json'}: cannot read the corpus index "
        f"([Errno 2] No such file or directory: '{tmp_path / 'data.json'}')"]


def test_wake_word_scoring_rules():
    """The timed keyword is a detection within the tolerance; a keyword the speaker also said
    elsewhere is a mention; anything else is a false alarm."""
    words = [WordTime("i", 0.1, 0.2), WordTime("use", 0.3, 0.5), WordTime("wildfire", 1.0, 1.4),
             WordTime("wildfire", 3.0, 3.5), WordTime("voyager", 4.0, 4.5)]
    result = spot.score_sentence(words, "wildfire", 3.1, 3.6, 0.5,
                                 "i use wildfire in a sentence wildfire")
    assert result == {"detected": True, "start_error": pytest.approx(-0.1),
                      "end_error": pytest.approx(-0.1), "false_alarms": 1, "mentions": 1}
    late = spot.score_sentence(words, "voyager", 2.0, 3.4, 0.5, "i use wildfire voyager")
    assert (late["detected"], late["false_alarms"], late["mentions"]) == (False, 2, 1)
    assert spot.score_sentence(words, "voyager", 2.0, 3.4, 0.7, "voyager")["detected"]


@pytest.mark.train
def test_a_few_training_steps_then_scoring(prepared, tmp_path):
    """The tiny model on the recipe's own data config: the loss falls; CTC word times lie in
    the audio, in order; the wake-word scoring runs end to end."""
    from asr.train import Trainer

    lines = sorted((r for split in SPLITS for r in rows(prepared[split])),
                   key=lambda r: r["duration"])
    picked = [r for r in lines if r["kind"] == "wake_word"][:4] + [
        r for r in lines if r["kind"] == "sentence" and r["keyword_start"] is not None][:2]
    train = tmp_path / "train.jsonl"
    train.write_text("".join(json.dumps(r) + "\n" for r in picked))
    dev = tmp_path / "dev.jsonl"
    dev.write_text(json.dumps(picked[0]) + "\n")
    cfg = train_config(tmp_path, train, "data=wuw", f"data.train_manifest={train}",
                       f"data.dev_manifest={dev}", "trainer.max_epochs=10",
                       "tokenizer.vocab_size=40", "data.batch_size=6", "scheduler.warmup_steps=4",
                       "optim.lr=3e-3", "trainer.cmvn_utterances=6", "data.augment.speed.enabled=true")
    state = Trainer(cfg).fit()
    losses = [epoch["train_loss"] for epoch in state.history]
    assert losses[-1] < 0.5 * losses[0], losses

    model, tokenizer, _ = load_model_dir(tmp_path / "model")
    sentence = picked[-1]
    wave = load_audio(sentence["audio_filepath"], 16000)
    words = align_text(model, tokenizer, wave, sentence["text"])
    assert [w.word for w in words] == sentence["text"].split()
    times = [t for w in words for t in (w.start, w.end)]
    assert times == sorted(times) and 0 <= times[0] and times[-1] <= sentence["duration"]

    sentences = tmp_path / "sentences.jsonl"
    sentences.write_text("".join(json.dumps(r) + "\n" for r in picked[4:]))
    result = spot.spot(tmp_path / "model", sentences, tolerance=0.5)
    assert result["sentences"] == 2 and 0 <= result["detections"] <= 2
    hours = sum(r["duration"] - r["keyword_end"] + r["keyword_start"] for r in picked[4:]) / 3600
    assert result["non_keyword_hours"] == pytest.approx(hours)
    assert result["false_alarms_per_hour"] == pytest.approx(result["false_alarms"] / hours)

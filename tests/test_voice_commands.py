"""The embedded voice-command corpus: grammar coverage, the split, a tiny real synthesis."""

import json
import random
import re
import shutil
from pathlib import Path

import pytest
import soundfile as sf

from conftest import SHARED, require_shared
from recipes.voice_commands import prepare, real
from recipes.voice_commands.grammar import (
    DIGITS,
    WORDS,
    all_sentences,
    commands,
    intents,
    parse,
    sentence_intent,
)

REQUIRED = {
    "show_files": ["show me my files", "show me my directories", "show me my videos",
                   "hey computer show me my photos please"],
    "find_files": ["find my downloads", "find my photos from today",
                   "find my documents from yesterday", "find my music from last week"],
    "check_status": ["check whether the battery ran down", "check whether the program ran"],
    "check_log": ["check the battery log and find out whether it ran down",
                  "check the program log and find out whether it ran"],
    "open_app": ["open the browser", "open the editor please"],
    "close_app": ["close the calculator", "could you close the settings"],
    "timer": ["set a timer for sixty minutes", "set a timer for twenty seconds",
              "set a timer for thirteen minutes", "set a timer for forty seconds"],
    "volume": ["turn the volume up", "turn the volume down"],
    "switch": ["could you turn off the wifi", "turn on the lights", "turn off the radio"],
    "time": ["what time is it", "hey computer what time is it"],
    "date": ["what is the date today"],
    "music": ["play the music", "pause the music please", "stop the music"],
    "next_song": ["next song"],
    "go_back": ["go back"],
    "cancel": ["cancel", "please cancel"],
    "scroll": ["scroll up", "scroll down", "scroll left", "scroll right"],
    "word": list(WORDS),
    "digit": list(DIGITS),
}


def test_grammar_covers_required_phrases() -> None:
    sentences = set(all_sentences())
    for intent, texts in REQUIRED.items():
        for text in texts:
            assert text in sentences, text
            assert sentence_intent(text) == intent


def test_grammar_text_is_normalised_and_deterministic() -> None:
    sentences = all_sentences()
    assert sentences == sorted(set(sentences)) == all_sentences()
    assert all(re.fullmatch(r"[a-z]+( [a-z]+)*", text) for text in sentences)
    assert not [text for text in sentences if text.count("please") > 1]
    assert parse("  Turn OFF the wifi ").slots == {"state": "off", "device": "wifi"}
    assert parse("open the fridge") is None
    with pytest.raises(KeyError):
        sentence_intent("open the fridge")


def test_single_words_and_digits_are_never_wrapped() -> None:
    singles = [c.text for c in commands() if c.intent in ("word", "digit")]
    assert sorted(singles) == sorted(WORDS + DIGITS)
    assert "zero please" not in all_sentences()


def test_sentence_split() -> None:
    splits = prepare.split_sentences(seed=0)
    assert splits == prepare.split_sentences(seed=0)
    multi = {name: {t for t in texts if " " in t} for name, texts in splits.items()}
    assert not multi["train"] & multi["dev"]
    assert not multi["train"] & multi["test"]
    assert not multi["dev"] & multi["test"]
    for texts in splits.values():
        assert {sentence_intent(t) for t in texts} == set(intents())
    assert set(WORDS + DIGITS) <= set(splits["train"])
    assert {c.core for c in commands()} <= set(splits["train"])
    train_words = {w for t in splits["train"] for w in t.split()}
    assert {w for t in splits["dev"] + splits["test"] for w in t.split()} <= train_words
    assert sum(map(len, splits.values())) - 2 * len(WORDS + DIGITS) == len(all_sentences())


def test_draw_covers_the_pool_with_fair_intent_shares() -> None:
    train = prepare.split_sentences(seed=0)["train"]
    pool = prepare.sentence_pool(train)
    drawn = prepare.draw_sentences(pool, 3 * len(pool) + 5, random.Random(0))
    assert set(drawn) == set(train)
    shares = {i: sum(sentence_intent(t) == i for t in pool) / len(pool) for i in intents()}
    assert min(shares.values()) > 0.02
    assert max(shares.values()) < 0.4


def test_voice_split_holds_out_whole_speakers() -> None:
    voices = [prepare.Voice("espeak-ng", v, a)
              for a in prepare.ESPEAK_ACCENTS for v in prepare.ESPEAK_VARIANTS]
    voices += [prepare.Voice("flite", name) for name in ("kal", "kal16", "awb", "rms", "slt")]
    voices += [prepare.Voice("festival", name)
               for name in ("kal_diphone", "ked_diphone", "cmu_us_slt_arctic_hts")]
    splits = prepare.split_voices(voices)
    speakers = {name: {(v.engine, v.variant) for v in vs} for name, vs in splits.items()}
    assert not speakers["train"] & speakers["dev"]
    assert not speakers["train"] & speakers["test"]
    assert not speakers["dev"] & speakers["test"]
    for name, vs in splits.items():
        assert "espeak-ng" in {v.engine for v in vs} and len({v.engine for v in vs}) >= 2, name
        assert {v.accent for v in vs if v.engine == "espeak-ng"} == set(prepare.ESPEAK_ACCENTS)
    assert len(splits["train"]) > 5 * len(splits["test"])


def test_missing_espeak_is_one_clear_error(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(prepare.shutil, "which", lambda program: None)
    with pytest.raises(SystemExit, match=r"espeak-ng.*apt-get install espeak-ng"):
        prepare.discover_voices()


def _read_manifests(root: Path) -> dict[str, list[dict]]:
    return {split: [json.loads(line) for line in (root / f"{split}.jsonl").read_text().splitlines()]
            for split in prepare.SPLITS}


@pytest.mark.skipif(shutil.which("espeak-ng") is None, reason="espeak-ng not installed")
def test_tiny_synthesis(tmp_path: Path, capsys: pytest.CaptureFixture) -> None:
    args = ["--train", "8", "--dev", "4", "--test", "4", "--real-root", "none"]
    prepare.main(["--out", str(tmp_path / "a"), "--jobs", "2", *args])
    prepare.main(["--out", str(tmp_path / "b"), "--jobs", "1", *args])
    manifests = _read_manifests(tmp_path / "a")
    assert {s: len(r) for s, r in manifests.items()} == {"train": 8, "dev": 4, "test": 4}
    assert manifests == _read_manifests(tmp_path / "b")  # same corpus whatever --jobs
    for split, records in manifests.items():
        for record in records:
            assert not Path(record["audio_filepath"]).is_absolute()
            path = tmp_path / "a" / record["audio_filepath"]
            assert path.read_bytes() == (tmp_path / "b" / record["audio_filepath"]).read_bytes()
            info = sf.info(str(path))
            assert (info.samplerate, info.channels, info.subtype) == (16000, 1, "PCM_16")
            assert abs(info.frames / info.samplerate - record["duration"]) < 0.01
            assert sentence_intent(record["text"]) == record["intent"]
            assert prepare.HELD_OUT.get((record["engine"], record["voice"].split("+")[-1]),
                                        "train") == split
    sample = tmp_path / "a" / "sample.wav"
    assert sf.info(str(sample)).samplerate == 16000
    assert (tmp_path / "a" / "sample.txt").read_text().strip() in {
        r["text"] for r in manifests["test"]}
    capsys.readouterr()
    prepare.main(["--out", str(tmp_path / "a"), *args])
    assert "already prepared" in capsys.readouterr().out


def test_real_recordings_split_by_speaker() -> None:
    """People from ../shared/data: grammar words only, speakers disjoint, noise as empty text."""
    require_shared()
    splits = real.real_records(SHARED)
    assert len(splits["dev"]) == real.DEV_RECORDINGS
    speakers = {name: {r["voice"] for r in records if r["voice"] != "noise"}
                for name, records in splits.items()}
    assert not speakers["train"] & speakers["dev"]
    assert not speakers["train"] & speakers["test"]
    assert not speakers["dev"] & speakers["test"]
    assert {"jackson", "lucas"} <= speakers["train"] and "yweweler" in speakers["test"]
    for records in splits.values():
        for record in records:
            assert Path(record["audio_filepath"]).is_file()
            if record["voice"] == "noise":
                assert record["text"] == "" and "_silence_" in record["audio_filepath"]
            else:
                assert record["text"] in WORDS + DIGITS
    fsdd_test = [r for r in splits["test"] if r["source"] == "fsdd"]
    assert len(fsdd_test) == 500 and {r["text"] for r in fsdd_test} == set(DIGITS)
    assert any(r["text"] == "" for r in splits["train"])

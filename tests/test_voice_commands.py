"""The embedded voice-command corpus: grammar coverage, the split, a tiny real synthesis."""

import json
import random
import re
import shutil
from dataclasses import replace
from pathlib import Path

import pytest
import soundfile as sf

from asr.grammar import Grammar
from helpers import SHARED, require_shared
from recipes.common import corpora, real, sentence_splits, synthesis
from recipes.common import voices as synthetic_voices
from recipes.voice_commands import prepare

pytestmark = [pytest.mark.tier("slow"), pytest.mark.data]

GRAMMAR = Grammar.load(prepare.DEFAULT_GRAMMAR)
POOLS = sentence_splits.intent_pools(GRAMMAR, seed=0)
SENTENCES = {s.text: s for group in POOLS.values() for s in group}
WORDS = ["yes", "no", "up", "down", "left", "right", "on", "off", "stop", "go"]
DIGITS = ["zero", "one", "two", "three", "four", "five", "six", "seven", "eight", "nine"]


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
    for intent, texts in REQUIRED.items():
        for text in texts:
            assert SENTENCES[text].intent == intent, text


def test_default_grammar_expands_as_documented() -> None:
    """1,172 sentences, 18 intents; text normalised; please at most once; slots as written."""
    assert len(SENTENCES) == 1172 and len(POOLS) == 18
    assert GRAMMAR.count() == 1400  # "hey computer open the editor" is in two expressions
    assert all(re.fullmatch(r"[a-z]+( [a-z]+)*", text) for text in SENTENCES)
    assert not [text for text in SENTENCES if text.count("please") > 1]
    assert SENTENCES["could you turn off the wifi"].slots == {"state": "off", "device": "wifi"}
    assert SENTENCES["set a timer for one minute please"].slots == {"amount": "one",
                                                                     "unit": "minute"}
    singles = sorted(t for t, s in SENTENCES.items() if s.intent in ("word", "digit"))
    assert singles == sorted(WORDS + DIGITS) and "zero please" not in SENTENCES


def test_sentence_split() -> None:
    splits = sentence_splits.split_sentences(POOLS, seed=0)
    assert splits == sentence_splits.split_sentences(POOLS, seed=0)
    texts = {name: [s.text for s in found] for name, found in splits.items()}
    multi = {name: {t for t in found if " " in t} for name, found in texts.items()}
    assert not multi["train"] & multi["dev"]
    assert not multi["train"] & multi["test"]
    assert not multi["dev"] & multi["test"]
    for found in splits.values():
        assert {s.intent for s in found} == set(GRAMMAR.intents)
    assert set(WORDS + DIGITS) <= set(texts["train"])
    assert {t for t, s in SENTENCES.items() if s.core} <= set(texts["train"])
    assert "open the editor" in texts["train"]
    train_words = {w for t in texts["train"] for w in t.split()}
    assert {w for t in texts["dev"] + texts["test"] for w in t.split()} <= train_words
    assert sum(map(len, texts.values())) - 2 * len(WORDS + DIGITS) == len(SENTENCES)


def test_a_grammar_of_millions_is_sampled_not_enumerated() -> None:
    """A coffee machine's grammar: three 30-value slots per expression, 100 expressions."""
    values = "\n".join(f"    s{k}: [{', '.join(f'v{k}x{i}' for i in range(30))}]" for k in range(3))
    lines = [f"      - \"[make, brew] (me) (a) $s0:a $s1:b (with) $s2:c {word}\""
             for word in (f"w{i}" for i in range(100))]
    text = "context:\n  expressions:\n    order:\n" + "\n".join(lines) + "\n  slots:\n" + values
    grammar = Grammar.from_yaml(text)
    assert grammar.count() == 100 * 2 * 2 * 2 * 2 * 30**3
    pools = sentence_splits.intent_pools(grammar, seed=0)
    assert len(pools["order"]) > 0.99 * sentence_splits.POOL
    splits = sentence_splits.split_sentences(pools, seed=0)
    assert all(splits[name] for name in sentence_splits.SPLITS)
    sentence = splits["test"][0]
    match = grammar.match(sentence.text)
    assert (match.intent, match.slots, match.similarity) == ("order", sentence.slots, 1.0)


def test_draw_covers_the_pool_with_fair_intent_shares() -> None:
    train = sentence_splits.split_sentences(POOLS, seed=0)["train"]
    pool = sentence_splits.sentence_pool(train)
    drawn = sentence_splits.draw_sentences(pool, 3 * len(pool) + 5, random.Random(0))
    assert {s.text for s in drawn} == {s.text for s in train}
    shares = {i: sum(s.intent == i for s in pool) / len(pool) for i in GRAMMAR.intents}
    assert min(shares.values()) > 0.02
    assert max(shares.values()) < 0.4


def test_corpus_planned_in_hours_of_speech() -> None:
    """--hours sizes every split by expected durations: a grammar of long sentences gets fewer
    utterances for the same hours; the first utterances are those a count would draw; dev and
    test get their shares."""
    train = sentence_splits.sentence_pool(sentence_splits.split_sentences(POOLS, seed=0)["train"])
    long = [replace(sentence, text=f"{sentence.text} and then {sentence.text}")
            for sentence in train]

    def duration(sentence) -> float:
        return synthesis.expected_seconds(sentence.text)

    short_drawn = sentence_splits.draw_seconds(train, 3600, random.Random(0), duration)
    long_drawn = sentence_splits.draw_seconds(long, 3600, random.Random(0), duration)
    for drawn in (short_drawn, long_drawn):
        seconds = [duration(s) for s in drawn]
        assert sum(seconds[:-1]) < 3600 <= sum(seconds)
    assert len(long_drawn) < 0.6 * len(short_drawn)
    assert short_drawn[:100] == sentence_splits.draw_sentences(train, 100, random.Random(0))
    args = prepare.parse_args(["--hours", "1"])
    hours = {split: sum(map(duration, prepare.draw_split(args, split, train))) / 3600
             for split in sentence_splits.SPLITS}
    assert hours == pytest.approx({"train": 1, "dev": 0.05, "test": 0.1}, abs=0.002)  # an utterance


def test_voice_split_holds_out_whole_speakers() -> None:
    voices = [synthetic_voices.Voice("espeak-ng", v, a)
              for a in synthetic_voices.ESPEAK_ACCENTS for v in synthetic_voices.ESPEAK_VARIANTS]
    voices += [synthetic_voices.Voice("flite", name) for name in ("kal", "kal16", "awb", "rms", "slt")]
    voices += [synthetic_voices.Voice("festival", name)
               for name in ("kal_diphone", "ked_diphone", "cmu_us_slt_arctic_hts")]
    splits = synthetic_voices.split_voices(voices)
    speakers = {name: {(v.engine, v.variant) for v in vs} for name, vs in splits.items()}
    assert not speakers["train"] & speakers["dev"]
    assert not speakers["train"] & speakers["test"]
    assert not speakers["dev"] & speakers["test"]
    for name, vs in splits.items():
        assert "espeak-ng" in {v.engine for v in vs} and len({v.engine for v in vs}) >= 2, name
        assert {v.accent for v in vs if v.engine == "espeak-ng"} == set(synthetic_voices.ESPEAK_ACCENTS)
    assert len(splits["train"]) > 5 * len(splits["test"])


def test_missing_espeak_is_one_clear_error(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(synthetic_voices.shutil, "which", lambda program: None)
    with pytest.raises(SystemExit, match=r"espeak-ng.*apt-get install espeak-ng"):
        synthetic_voices.discover_voices()


def _read_manifests(root: Path) -> dict[str, list[dict]]:
    return {split: [json.loads(line) for line in (root / f"{split}.jsonl").read_text().splitlines()]
            for split in sentence_splits.SPLITS}


@pytest.mark.train
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
            sentence = SENTENCES[record["text"]]
            assert (record["intent"], record["slots"]) == (sentence.intent, sentence.slots)
            voice = (record["engine"], record["voice"].split("+")[-1])
            assert synthetic_voices.HELD_OUT.get(voice, "train") == split
    calibration = (tmp_path / "a" / "calibration.jsonl").read_text()
    assert calibration == (tmp_path / "a" / "dev.jsonl").read_text()  # no people: dev itself
    assert (tmp_path / "a" / "grammar.yaml").read_bytes() == prepare.DEFAULT_GRAMMAR.read_bytes()
    sample = tmp_path / "a" / "sample.wav"
    assert sf.info(str(sample)).samplerate == 16000
    assert (tmp_path / "a" / "sample.txt").read_text().strip() in {
        r["text"] for r in manifests["test"]}
    capsys.readouterr()
    prepare.main(["--out", str(tmp_path / "a"), *args])
    assert "already prepared" in capsys.readouterr().out


@pytest.mark.train
@pytest.mark.skipif(shutil.which("espeak-ng") is None, reason="espeak-ng not installed")
def test_synthesised_hours_are_those_planned(tmp_path: Path, capsys: pytest.CaptureFixture) -> None:
    """The expected durations hold for real synthesis: --hours 0.01 (36 s of training speech)
    gives 36 s give or take the spread of a dozen utterances; the summary names the word
    training hears least."""
    prepare.main(["--out", str(tmp_path), "--hours", "0.01", "--real-root", "none"])
    manifests = _read_manifests(tmp_path)
    assert sum(r["duration"] for r in manifests["train"]) == pytest.approx(36, rel=0.25)
    assert manifests["dev"] and manifests["test"]
    assert re.search(r"every word of training's sentences said at least \d+ times",
                     capsys.readouterr().out)


def test_real_recordings_split_by_speaker(tmp_path: Path) -> None:
    """People from ../shared/data: every recording of a person keeps what was said (grammar
    sentences are commands), only noise has the empty text; speakers disjoint across splits.
    Every dev recording (what calibration chooses a threshold on) holds a few hundred
    non-commands; dev scored after each epoch is a stable sample of them."""
    require_shared()
    splits = real.real_records(SHARED, tmp_path, set(SENTENCES), dev_size=None)
    sample = real.dev_sample(splits["dev"])
    assert len(sample) == real.DEV_RECORDINGS and sample == real.dev_sample(splits["dev"])
    assert all(record in splits["dev"] for record in sample)
    assert sum(record["kind"] != "command" for record in splits["dev"]) >= 150
    speakers = {name: {r["voice"] for r in records if r["voice"] != "noise"}
                for name, records in splits.items()}
    assert not speakers["train"] & speakers["dev"]
    assert not speakers["train"] & speakers["test"]
    assert not speakers["dev"] & speakers["test"]
    assert {"jackson", "lucas"} <= speakers["train"] and "yweweler" in speakers["test"]
    wuw_groups = corpora.speaker_groups(corpora.entries(SHARED / "wuw"))
    groups = {name: {group for session, group in wuw_groups.items()
                     if f"wuw:{session}" in speakers[name]} for name in speakers}
    assert not groups["train"] & groups["test"] and groups["test"]
    for records in splits.values():
        for record in records:
            assert Path(record["audio_filepath"]).is_file()
            if record["kind"] == "command":
                assert record["text"] in SENTENCES
            elif record["kind"] == "noise":
                assert record["text"] == ""
            else:
                assert record["text"] and record["text"] not in SENTENCES
    fsdd_test = [r for r in splits["test"] if r["source"] == "fsdd"]
    assert len(fsdd_test) == 500 and {r["text"] for r in fsdd_test} == set(DIGITS)
    other = [r for r in splits["test"] if r["source"] == "speech_commands" and r["kind"] == "other"]
    assert {"marvin", "bed"} & {r["text"] for r in other}
    wuw = [r for r in splits["test"] if r["source"] == "wuw"]
    assert {r["kind"] for r in wuw} == {"sentence", "wake_word"}
    assert max(r["duration"] for r in wuw) > real.MAX_OTHER_SECONDS
    assert max(r["duration"] for r in splits["train"]) <= real.MAX_OTHER_SECONDS
    assert sf.info(wuw[0]["audio_filepath"]).samplerate == 8000


def test_real_commands_listed_real_repeat_times_in_train(tmp_path: Path) -> None:
    """`--real-repeat 3`: each real command thrice in train, everything else once; dev, the
    calibration set and the people's own test manifests untouched; babble draws from the real
    training speech."""
    (tmp_path / "wavs" / "test").mkdir(parents=True)
    sf.write(tmp_path / "wavs" / "test" / "t.wav", [0.0] * 1600, 16000)
    synthetic = [{"audio_filepath": "wavs/train/s.wav", "text": "open the browser", "snr_db": None},
                 {"audio_filepath": "wavs/test/t.wav", "text": "turn on the lights", "snr_db": None}]

    def person(text: str, kind: str, voice: str) -> dict:
        return {"audio_filepath": f"/{voice}.wav", "text": text, "voice": voice, "kind": kind}

    people = {"train": [person("yes", "command", "a"), person("", "other", "b"),
                        person("", "noise", "c")],
              "dev": [person("no", "command", "d")], "test": [person("up", "command", "e")],
              "calibration": [person("no", "command", "d"), person("bed", "other", "f")]}
    prepare.write_corpus(tmp_path, synthetic, people, prepare.DEFAULT_GRAMMAR, real_repeat=3)

    def voices(name: str) -> list[str | None]:
        lines = (tmp_path / f"{name}.jsonl").read_text().splitlines()
        return [json.loads(line).get("voice") for line in lines]

    assert voices("train") == [None, "a", "a", "a", "b", "c"]
    assert voices("dev") == ["d"] and voices("test") == [None] and voices("test_real") == ["e"]
    assert voices("calibration") == ["d", "f"]
    assert voices("babble") == ["a", "b"]


def test_help_prints(capsys):
    with pytest.raises(SystemExit) as stop:
        prepare.parse_args(["--help"])
    assert stop.value.code == 0 and "5%, 10% of it" in capsys.readouterr().out.replace("\n", " ")


@pytest.mark.parametrize("option, value, message", [
    ("--jobs", "100000", "must be from 1 to"), ("--jobs", "0", "must be from 1 to"),
    ("--sample-rate", "1", "must be from 8000 to 96000 Hz, got 1"),
    ("--hours", "nan", "must be from 0.0001 to 10000 hours, got nan"),
    ("--hours", "inf", "must be from 0.0001 to 10000 hours, got inf"),
    ("--train", "many", "not a number: 'many'")])
def test_numeric_options_are_bounded(option, value, message, capsys):
    with pytest.raises(SystemExit) as stop:
        prepare.parse_args([option, value])
    assert stop.value.code == 2 and message in capsys.readouterr().err

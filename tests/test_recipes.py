"""Real-speech recipes: data prep on the shared recordings, downloads, and a short training each."""

import hashlib
import io
import json
import shutil
import tarfile
import zipfile
from collections import defaultdict
from pathlib import Path

import pytest
import soundfile as sf

from asr.data import read_manifest
from asr.text import normalize_text
from helpers import COMMANDS, DIGITS, FSDD, SHARED, require_shared, train_config
from recipes import common
from recipes.cathy import lm_text
from recipes.cathy import prepare as cathy
from recipes.common import corpora, synthetic
from recipes.common.voices import HELD_OUT
from recipes.fsdd import prepare as fsdd
from recipes.speech_commands import prepare as speech_commands

pytestmark = [pytest.mark.tier("fast"), pytest.mark.data]

CATHY = SHARED / "cathy"


def rows(path: Path) -> list[dict]:
    return [json.loads(line) for line in path.read_text().splitlines()]


@pytest.fixture(scope="module")
def fsdd_out(tmp_path_factory) -> dict[str, Path]:
    require_shared()
    out = tmp_path_factory.mktemp("fsdd")
    return fsdd.prepare(FSDD.parent, out, strings={"train": 12, "dev": 3, "test": 4}, seed=1)


@pytest.fixture(scope="module")
def commands_out(tmp_path_factory) -> dict[str, Path]:
    require_shared()
    return speech_commands.prepare(COMMANDS, tmp_path_factory.mktemp("speech_commands"))


@pytest.fixture(scope="module")
def cathy_out(tmp_path_factory) -> dict[str, Path]:
    require_shared()
    return cathy.prepare(CATHY, tmp_path_factory.mktemp("cathy"))


def test_fsdd_splits_by_speaker(fsdd_out):
    splits = {split: rows(path) for split, path in fsdd_out.items()}
    speakers = {split: {r["speaker"] for r in lines} for split, lines in splits.items()}
    assert speakers == {"train": {"jackson", "lucas", "nicolas"},
                        "dev": {"jackson", "lucas", "nicolas"}, "test": {"yweweler"}}
    isolated = {split: [r for r in lines if r["kind"] == "digit"] for split, lines in splits.items()}
    assert [len(isolated[s]) for s in common.SPLITS] == [1350, 150, 500]
    # Dev holds takes 0-4 of the training speakers, train the others: no recording in both.
    takes = {s: {int(Path(r["audio_filepath"]).stem.split("_")[2]) for r in isolated[s]}
             for s in ("train", "dev")}
    assert takes == {"train": set(range(5, 50)), "dev": set(range(5))}
    for split, lines in isolated.items():
        for r in lines:
            assert Path(r["audio_filepath"]).parent == FSDD.resolve()
            digit, speaker, _ = Path(r["audio_filepath"]).stem.split("_")
            assert (r["text"], r["speaker"]) == (DIGITS[int(digit)], speaker), split


def test_fsdd_rehearsal_adds_the_digit_sentences_of_another_corpus_to_train(tmp_path):
    """--rehearse: the lines of another manifest that say a digit join train (audio paths made
    absolute), the others do not, and dev and test stay FSDD's own; a missing manifest is a
    one-line error before anything is written."""
    require_shared()
    digit = sorted(FSDD.glob("3_*_4[89].wav"))[0]
    (tmp_path / "other").mkdir()
    (tmp_path / "other" / "a.wav").write_bytes(digit.read_bytes())
    other = tmp_path / "other" / "train.jsonl"
    other.write_text("".join(json.dumps({"audio_filepath": "a.wav", "text": text, "duration": 0.5})
                             + "\n" for text in ["set a timer for five minutes", "stop",
                                                  "call nine one one", "one"]))
    subset = tmp_path / "fsdd"
    subset.mkdir()
    for path in sorted(FSDD.glob("[01]_*_4[89].wav")):
        (subset / path.name).symlink_to(path)
    plain = fsdd.prepare(subset, tmp_path / "plain", strings={})
    out = fsdd.prepare(subset, tmp_path / "mixed", strings={}, rehearse=[other])
    added = rows(out["train"])[len(rows(plain["train"])):]
    assert [r["text"] for r in added] == ["set a timer for five minutes", "call nine one one",
                                           "one"]
    assert {r["audio_filepath"] for r in added} == {str((tmp_path / "other" / "a.wav").resolve())}
    assert {r["kind"] for r in added} == {"rehearsal"}
    for split in ("dev", "test"):
        assert rows(out[split]) == rows(plain[split])
    with pytest.raises(SystemExit, match=f"^error: --rehearse {tmp_path}/absent.jsonl: manifest "
                                         "not found$"):
        fsdd.prepare(subset, tmp_path / "never", strings={}, rehearse=[tmp_path / "absent.jsonl"])
    assert not (tmp_path / "never").exists()


def test_fsdd_digit_strings_match_their_recordings(fsdd_out):
    train_sources = {s for r in rows(fsdd_out["train"]) for s in r["sources"]}
    for split, count in {"train": 12, "dev": 3, "test": 4}.items():
        strings = [r for r in rows(fsdd_out[split]) if r["kind"] == "string"]
        assert len(strings) == count
        for r in strings:
            assert 1 <= len(r["sources"]) <= fsdd.MAX_DIGITS
            names = [Path(s).stem.split("_") for s in r["sources"]]
            assert r["text"] == " ".join(DIGITS[int(digit)] for digit, _, _ in names)
            assert {speaker for _, speaker, _ in names} == {r["speaker"]}
            info = sf.info(r["audio_filepath"])
            assert info.samplerate == 16000
            assert r["duration"] == pytest.approx(info.duration, abs=1e-3)
            spoken = sum(sf.info(str(FSDD / s)).duration for s in r["sources"])
            gaps = len(r["sources"]) - 1
            assert spoken + gaps * fsdd.PAUSE_S[0] + 2 * fsdd.EDGE_S[0] - 0.01 <= r["duration"] \
                <= spoken + gaps * fsdd.PAUSE_S[1] + 2 * fsdd.EDGE_S[1] + 0.01
            if split != "train":
                assert not train_sources & set(r["sources"])


def test_speech_commands_transcripts_and_speaker_split(commands_out):
    splits = {split: rows(commands_out[split]) for split in common.SPLITS}
    assert sum(len(lines) for lines in splits.values()) == 2503
    speakers = {s: {r["speaker"] for r in lines} for s, lines in splits.items()}
    assert not speakers["train"] & speakers["dev"]
    assert not speakers["train"] & speakers["test"]
    assert not speakers["dev"] & speakers["test"]
    for split, lines in splits.items():
        kinds = {r["kind"] for r in lines}
        assert kinds == {"command", "_unknown_", "_silence_"}, split
        for r in lines:
            path = Path(r["audio_filepath"])
            if r["kind"] == "_silence_":
                assert r["text"] == "" and path.parent.name == "_silence_"
            elif r["kind"] == "_unknown_":
                assert r["text"] == path.stem.split("_")[0] and r["speaker"] in path.stem
            else:
                assert r["text"] == path.parent.name in corpora.COMMANDS
                assert path.stem.startswith(r["speaker"] + "_nohash_")
    noise = rows(commands_out["noise"])
    assert noise and noise == [r for r in splits["train"] if r["kind"] == "_silence_"]
    # The manifests are usable by training as they are, empty transcripts included.
    assert read_manifest(commands_out["test"])[0].duration == pytest.approx(1.0)


def test_speech_commands_auxiliary_words_are_the_unknown_clips(commands_out):
    """The 25 other words that `recipes.common.synthetic` speaks are exactly the corpus's own."""
    said = {r["text"] for split in common.SPLITS for r in rows(commands_out[split])
            if r["kind"] == "_unknown_"}
    assert said == set(corpora.AUXILIARY) and len(corpora.AUXILIARY) == 25


def test_speech_commands_rehearsal_joins_train_only(commands_out, tmp_path):
    """--rehearse: every line of another manifest joins train as kind "rehearsal" (absolute
    audio paths); dev, test and the noise list stay the corpus's own; a bad manifest is a
    one-line error before anything is written."""
    clip = sorted((COMMANDS / "stop").glob("*.wav"))[0]
    (tmp_path / "other").mkdir()
    (tmp_path / "other" / "a.wav").write_bytes(clip.read_bytes())
    other = tmp_path / "other" / "train.jsonl"
    other.write_text("".join(json.dumps({"audio_filepath": "a.wav", "text": text,
                                         "duration": 1.0}) + "\n" for text in ["stop", "marvin"]))
    speech_commands.main(["--root", str(COMMANDS), "--out", str(tmp_path / "mixed"),
                          "--rehearse", str(other)])
    mixed = {name: rows(tmp_path / "mixed" / f"{name}.jsonl") for name in commands_out}
    plain = {name: rows(path) for name, path in commands_out.items()}
    assert mixed["train"][:len(plain["train"])] == plain["train"]
    added = mixed["train"][len(plain["train"]):]
    assert [(r["text"], r["kind"]) for r in added] == [("stop", "rehearsal"),
                                                       ("marvin", "rehearsal")]
    assert {r["audio_filepath"] for r in added} == {str((tmp_path / "other" / "a.wav").resolve())}
    for name in ("dev", "test", "noise"):
        assert mixed[name] == plain[name]
    other.write_text('{"audio_filepath": "a.wav"}\n')
    with pytest.raises(SystemExit, match=f"^error: --rehearse {other}:1: "):
        speech_commands.prepare(COMMANDS, tmp_path / "never", rehearse=[other])
    assert not (tmp_path / "never").exists()


def test_hash_split_is_stable_and_salted():
    assert common.hash_split("0ea0e2f4", 10, 10) == common.hash_split("0ea0e2f4", 10, 10)
    # Every speaker of the official test archive lies in the unsalted test band.
    speakers = {p.stem.split("_")[0] for p in (COMMANDS / "yes").glob("*.wav")}
    assert {common.hash_split(s, 10, 10) for s in speakers} == {"test"}
    assert {common.hash_split(s, 10, 10, corpora.SALT) for s in speakers} == \
        {"train", "dev", "test"}
    with pytest.raises(ValueError, match="both in dev and test: ann"):
        common.named_split("bob", ["ann"], ["ann"])


def test_cathy_splits_by_prompt(cathy_out):
    splits = {split: rows(path) for split, path in cathy_out.items()}
    assert sum(len(lines) for lines in splits.values()) == 1317
    prompts = {s: {r["prompt"] for r in lines} for s, lines in splits.items()}
    assert len(prompts["train"] | prompts["dev"] | prompts["test"]) == 921
    assert not prompts["train"] & prompts["dev"]
    assert not prompts["train"] & prompts["test"]
    assert not prompts["dev"] & prompts["test"]
    # No sentence of dev or test is in train, even under another ARCTIC id.
    train_texts = {normalize_text(r["text"]) for r in splits["train"]}
    assert not train_texts & {normalize_text(r["text"]) for r in splits["dev"] + splits["test"]}
    first = next(r for r in splits["test"] + splits["train"] + splits["dev"]
                 if r["prompt"] == "arctic_a0001")
    assert first["text"] == "Author of the danger trail, Philip Steels, etc."
    assert normalize_text(first["text"]) == "author of the danger trail philip steels etc"


def test_cathy_lm_text_drops_the_scored_sentences(cathy_out, tmp_path):
    """LM text: paragraphs -> normalised sentences of 3+ words, curly quotes straightened, and
    no sentence that equals a dev or test transcript (the LM must not read what is scored)."""
    held_out = [u.text for split in ("dev", "test") for u in read_manifest(cathy_out[split])]
    exclude = {normalize_text(t) for t in held_out}
    paragraph = f"It\u2019s late now. Go home! {held_out[0]} Why not 3 words?"
    assert lm_text.sentences([paragraph], exclude) == ["it's late now", "why not three words"]
    (tmp_path / "tales").write_text("One fine day.\n%\nA wise man\nsaid so.\n%\n")
    (tmp_path / "tales.dat").write_bytes(b"\0\1")
    assert lm_text.fortunes(tmp_path) == ["One fine day.", "A wise man said so."]
    plain = ("Genesis 1:1: In the beginning.\n  Genesis 1:2: The earth was\n    formless.\n"
             "  1 John 2:3: A Psalm by David.\n")
    assert lm_text.verses(plain) == ["In the beginning. The earth was formless. "
                                     "A Psalm by David."]


@pytest.mark.parametrize("raw,expected", [
    ("It was 1908, the 2nd of May.", "it was nineteen o eight the second of may"),
    ("He paid 3,500 dollars & 25 cents.", "he paid three thousand five hundred dollars and "
                                          "twenty five cents"),
    ("the 21st man, the 100th; 1900 -- 2024", "the twenty first man the one hundredth "
                                               "nineteen hundred two thousand twenty four"),
    ("Lop-Ear's wolf-dog", "lop ear's wolf dog"),
    ("x2 and 5a stay", "x2 and 5a stay"),
])
def test_prompt_normalisation(raw, expected):
    assert normalize_text(raw) == expected


def _archive_zip(members: dict[str, Path]) -> bytes:
    buffer = io.BytesIO()
    with zipfile.ZipFile(buffer, "w") as archive:
        for name, path in members.items():
            archive.write(path, name)
    return buffer.getvalue()


def test_download_paths_unpack_github_zip_and_tarball(tmp_path, monkeypatch):
    """The no-root code path, fed local archives by file:// URL (no network in tests)."""
    require_shared()
    digits = {f"free-spoken-digit-dataset-master/recordings/{p.name}": p
              for p in sorted(FSDD.glob("[01]_*_4[89].wav"))}
    (tmp_path / "fsdd.zip").write_bytes(_archive_zip(digits))
    monkeypatch.setattr(fsdd, "URL", (tmp_path / "fsdd.zip").as_uri())
    out = fsdd.prepare(None, tmp_path / "fsdd", strings={})
    assert [len(rows(out[s])) for s in common.SPLITS] == [12, 0, 4]
    assert (tmp_path / "fsdd" / "download" / "recordings").is_dir()

    with tarfile.open(tmp_path / "sc.tar.gz", "w:gz") as archive:
        for folder in ("yes", "_unknown_", "_silence_"):
            for path in sorted((COMMANDS / folder).glob("*.wav"))[:3]:
                archive.add(path, f"./{folder}/{path.name}")
    monkeypatch.setattr(speech_commands, "URL", (tmp_path / "sc.tar.gz").as_uri())
    out = speech_commands.prepare(None, tmp_path / "sc")
    assert sum(len(rows(out[s])) for s in common.SPLITS) == 9
    (tmp_path / "sc.tar.gz").unlink()  # a second run finds the unpacked copy
    assert speech_commands.prepare(None, tmp_path / "sc").keys() == out.keys()

    monkeypatch.setattr(cathy, "URL", (tmp_path / "absent.zip").as_uri())
    with pytest.raises(SystemExit, match="cannot download .*absent.zip"):
        cathy.prepare(None, tmp_path / "cathy")


def test_download_checks_the_published_checksum(tmp_path, capsys):
    """A download whose SHA-256 is not the published one stops before anything is unpacked;
    the right one is unpacked. Both say the archive's size."""
    archive = tmp_path / "corpus.zip"
    with zipfile.ZipFile(archive, "w") as opened:
        opened.writestr("corpus-master/MARKER", "x" * 5000)
    url, digest = archive.as_uri(), hashlib.sha256(archive.read_bytes()).hexdigest()
    with pytest.raises(SystemExit) as stop:
        common.download(url, tmp_path / "bad", "MARKER", sha256="0" * 64)
    assert str(stop.value) == (f"error: {url}: sha256 {digest} is not the published {'0' * 64} "
                               "(a corrupt or changed download); nothing was unpacked")
    assert sorted(p.name for p in tmp_path.iterdir()) == ["corpus.zip"]
    assert common.download(url, tmp_path / "good", "MARKER", sha256=digest) == tmp_path / "good"
    assert (tmp_path / "good" / "MARKER").read_text() == "x" * 5000
    size = f"({archive.stat().st_size / 1e6:.1f} MB)"
    assert capsys.readouterr().out.splitlines() == [
        f"downloading {url} -> {tmp_path / 'bad'} {size}",
        f"downloading {url} -> {tmp_path / 'good'} {size}", f"sha256 {digest}: as published"]


def test_librispeech_checksums_cover_every_split():
    from recipes.librispeech import prepare as librispeech

    assert set(librispeech.SHA256) == {librispeech.URL.format(split=split)
                                       for split in librispeech.TRAIN + librispeech.EVAL}
    assert all(len(digest) == 64 for digest in librispeech.SHA256.values())


def _subset(path: Path, out: Path, count: int, key=lambda r: 0) -> Path:
    """The `count` shortest lines of a manifest, spread over the groups that `key` gives."""
    groups = defaultdict(list)
    for r in sorted(rows(path), key=lambda r: r["duration"]):
        groups[key(r)].append(r)
    picked = [r for i in range(count) for g in groups.values() if i < len(g) for r in [g[i]]]
    out.write_text("".join(json.dumps(r) + "\n" for r in picked[:count]))
    return out


@pytest.mark.train
@pytest.mark.parametrize("recipe", ["fsdd", "speech_commands", "cathy"])
def test_training_on_recipe_manifests_lowers_the_loss(recipe, tmp_path, request):
    """A few steps of the tiny model on each recipe's own data config and manifests."""
    from asr.train import Trainer

    prepared = request.getfixturevalue({"fsdd": "fsdd_out", "speech_commands": "commands_out",
                                        "cathy": "cathy_out"}[recipe])
    by_kind = {"speech_commands": lambda r: r["kind"], "fsdd": lambda r: r["kind"]}
    train = _subset(prepared["train"], tmp_path / "train.jsonl", 4, by_kind.get(recipe, lambda r: 0))
    dev = _subset(train, tmp_path / "dev.jsonl", 1)  # decoding an untrained model is slow
    overrides = ["trainer.max_epochs=12", "tokenizer.vocab_size=40", "data.batch_size=4",
                 "scheduler.warmup_steps=4", "optim.lr=3e-3", "data.max_duration=null",
                 "trainer.cmvn_utterances=4"]
    if recipe == "speech_commands":  # every augmentation on, noise from the training silence
        overrides += ["data.augment.speed.enabled=true", "data.augment.gain.enabled=true",
                      "data.augment.noise.enabled=true", "data.augment.noise.prob=0.5",
                      f"data.augment.noise.manifest={prepared['noise']}"]
    cfg = train_config(tmp_path, train, f"data={recipe}", f"data.train_manifest={train}",
                       f"data.dev_manifest={dev}", *overrides)
    state = Trainer(cfg).fit()
    losses = [epoch["train_loss"] for epoch in state.history]
    assert losses[-1] < 0.5 * losses[0], losses


@pytest.mark.skipif(shutil.which("espeak-ng") is None, reason="espeak-ng not installed")
@pytest.mark.parametrize("vocabulary, max_words", [("digits", fsdd.MAX_DIGITS),
                                                   ("speech_commands", 1)])
def test_synthetic_speech_of_a_recipes_words(tmp_path, vocabulary, max_words):
    """1 to max_words words of the vocabulary by the synthetic corpus's training voices, 16 kHz
    files whose lengths the manifest states, the same whatever the number of processes."""
    words = synthetic.VOCABULARIES[vocabulary]
    draw = synthetic.word_strings(words, max_words)
    a = synthetic.generate(tmp_path / "a", draw, count=4, processes=2)
    b = synthetic.generate(tmp_path / "b", draw, count=4, processes=1)
    lines, again = rows(a), rows(b)
    assert [r["text"] for r in lines] == [r["text"] for r in again]
    assert all(Path(x["audio_filepath"]).read_bytes() == Path(y["audio_filepath"]).read_bytes()
               for x, y in zip(lines, again, strict=True))
    assert len(lines) == 4
    for line in lines:
        assert 1 <= len(line["text"].split()) <= max_words
        assert set(line["text"].split()) <= set(words)
        assert HELD_OUT.get((line["engine"], line["voice"].split("+")[-1]), "train") == "train"
        info = sf.info(line["audio_filepath"])
        assert Path(line["audio_filepath"]).is_absolute() and info.samplerate == 16000
        assert abs(info.frames / info.samplerate - line["duration"]) < 0.01


@pytest.mark.skipif(shutil.which("espeak-ng") is None, reason="espeak-ng not installed")
def test_synthetic_sentences_from_a_text(tmp_path):
    """--text: whole lines of the files, only those of MIN_SENTENCE_WORDS to max_words words,
    spoken by training voices; a text with no such line is a one-line error."""
    text = tmp_path / "text.txt"
    fitting = ["the quick brown fox", "a dog barked at the moon all night"]
    text.write_text("\n".join(["too short", *fitting, " ".join(["word"] * 12), ""]))
    manifest = tmp_path / "out" / "train.jsonl"
    synthetic.main(["--text", str(text), "--max-words", "8", "--count", "3",
                    "--out", str(tmp_path / "out")])
    lines = rows(manifest)
    assert len(lines) == 3 and {r["text"] for r in lines} <= set(fitting)
    assert all(sf.info(r["audio_filepath"]).frames > 0 for r in lines)
    with pytest.raises(SystemExit, match=f"^error: {text}: no line of 4-3 words$"):
        synthetic.sentences([text], max_words=3)


def test_cathy_rehearsal_joins_train_only(cathy_out, tmp_path):
    """--rehearse: other corpora's utterances join train as kind "rehearsal"; the corpus's own
    lines and dev/test are those of the plain prepare; a bad manifest writes nothing."""
    clip = rows(cathy_out["train"])[0]["audio_filepath"]
    other = tmp_path / "other.jsonl"
    other.write_text(json.dumps({"audio_filepath": clip, "text": "a rehearsed sentence",
                                 "duration": 1.0}) + "\n")
    cathy.main(["--root", str(CATHY), "--out", str(tmp_path / "mixed"), "--rehearse", str(other)])
    mixed = {name: rows(tmp_path / "mixed" / f"{name}.jsonl") for name in cathy_out}
    plain = {name: rows(path) for name, path in cathy_out.items()}
    assert mixed["train"][:-1] == plain["train"]
    assert (mixed["train"][-1]["text"], mixed["train"][-1]["kind"]) == ("a rehearsed sentence",
                                                                        "rehearsal")
    assert (mixed["dev"], mixed["test"]) == (plain["dev"], plain["test"])
    with pytest.raises(SystemExit, match=f"^error: --rehearse {tmp_path}/absent.jsonl: "):
        cathy.prepare(CATHY, tmp_path / "never", rehearse=[tmp_path / "absent.jsonl"])
    assert not (tmp_path / "never").exists()

"""The base recipe at toy size: a corpus spoken by two Kokoro voices and espeak-ng, cached, a few
training steps that lower the loss, and the result shipped and loaded; the shipped names."""

import json
import random
import re
from collections import Counter
from pathlib import Path

import pytest
import torch

from asr.assistant.intents.calibration import grammar_digest
from asr.assistant.intents.scoring import calibrate_model
from asr.checkpoint import CALIBRATION_FILE, TRAINING, WEIGHTS, ModelDirError
from asr.lm import LM_FILE, LM_FOLDER
from asr.models import FOLDER, model_path
from asr.train_lm import main as train_lm
from asr.transcriber import Transcriber
from helpers import COMMANDS, ROOT, require_shared, train_config
from recipes.base import prepare, ship
from recipes.base.text import ALONE_SHARES, alone_text
from recipes.common import kokoro
from recipes.common.voices import Voice

pytestmark = [pytest.mark.tier("slow"), pytest.mark.data]

VOICES = "kokoro:af_heart,kokoro:am_adam,espeak-ng:en-us+m3"
TOY = ["--hours", "0.004", "--real-root", "none", "--voices", VOICES, "--jobs", "1"]
needs_kokoro = pytest.mark.skipif(not kokoro.available(),
                                  reason="Kokoro is not set up (bash tools/setup_kokoro.sh)")


def rows(path: Path) -> list[dict]:
    return [json.loads(line) for line in path.read_text().splitlines()]


@pytest.fixture(scope="module")
def corpus(tmp_path_factory) -> Path:
    out = tmp_path_factory.mktemp("base") / "corpus"
    prepare.main(["--out", str(out), *TOY])
    return out


@needs_kokoro
def test_prepare_speaks_held_out_text_in_kokoro_and_espeak_voices(corpus):
    train, test = rows(corpus / "train.jsonl"), rows(corpus / "test.jsonl")
    noise = [r for r in train if r.get("kind") == "noise"]
    assert noise == rows(corpus / "noise.jsonl") and {r["text"] for r in noise} == {""}
    train = [r for r in train if r not in noise]
    assert {r["engine"] for r in train} == {"kokoro", "espeak-ng"}
    spoken = {r["voice"] for r in train if r["engine"] == "espeak-ng"}
    assert spoken == {"en-us+m3"}
    mixes = {r["voice"] for r in train if r["engine"] == "kokoro"}
    assert {part.split("*")[0] for mix in mixes for part in mix.split("+")} <= {"af_heart", "am_adam"}
    assert {r["voice"] for r in test if r["engine"] == "kokoro"} <= {"af_heart", "am_adam"}
    assert test and not {r["text"] for r in test} & {r["text"] for r in train}
    for row in train + test:
        assert (corpus / row["audio_filepath"]).is_file() and row["duration"] > 0.3
        assert row["text"] == row["text"].lower() and row["text"].strip()
    assert (corpus / "sample.txt").read_text().strip() in {r["text"] for r in test}


@pytest.mark.train
@needs_kokoro
def test_a_second_prepare_synthesises_nothing(corpus, tmp_path, capsys):
    prepare.main(["--out", str(tmp_path / "again"), *TOY])
    summary = capsys.readouterr().out
    count = sum(1 for split in ("train", "dev", "test") for r in rows(corpus / f"{split}.jsonl")
                if r.get("kind") != "noise")
    assert f"0 utterances synthesised, {count} from the cache" in summary
    assert rows(tmp_path / "again" / "train.jsonl") == rows(corpus / "train.jsonl")


@pytest.mark.train
@needs_kokoro
def test_training_lowers_the_loss_and_the_model_ships_in_fp16(corpus, tmp_path):
    from asr.train import Trainer

    cfg = train_config(tmp_path, corpus / "train.jsonl", "experiment=base", "model=tiny",
                       f"data.root={corpus}", "data.augment.reverb.enabled=false",
                       "trainer.max_minutes=null", "trainer.max_epochs=10",
                       "tokenizer.vocab_size=60", "data.batch_size=8", "scheduler.warmup_steps=4",
                       "optim.lr=3e-3", "trainer.cmvn_utterances=8", "model.dropout=0.0",
                       f"data.dev_manifest={corpus / 'dev.jsonl'}")
    state = Trainer(cfg).fit()
    losses = [epoch["train_loss"] for epoch in state.history]
    assert losses[-1] < 0.7 * losses[0], losses
    out = tmp_path / "shipped"
    info = ship.ship(tmp_path / "model", corpus, out, "again")
    assert info["epochs"] == 10 and info["steps"] == state.step
    assert info["fp16_check"]["utterances"] == len(rows(corpus / "test.jsonl"))
    weights = torch.load(out / WEIGHTS, weights_only=True)
    assert {v.dtype for v in weights.values() if v.dim() >= 2} == {torch.float16}
    assert (out / "grammar.yaml").read_text() == ship.DEFAULT_GRAMMAR.read_text()
    text = Transcriber.from_pretrained(str(out), device="cpu").transcribe(corpus / "sample.wav").text
    assert isinstance(text, str) and re.fullmatch(r"[a-z' ]*", text)
    lm = tmp_path / "lm"
    assert train_lm(["--model", str(out), "--text", str(corpus / "train.jsonl"), "--dev",
                     str(corpus / "dev.jsonl"), "--out", str(lm), "--steps", "20",
                     "--warmup-steps", "2", "--eval-every", "10", "--d-model", "32",
                     "--layers", "1", "--d-ff", "64", "--batch-tokens", "256",
                     "--threads", "1"]) == 0
    calibration = calibration_manifest(tmp_path / "calibration.jsonl")
    calibrate_model(out, calibration)
    with_lm = ship.ship_lm(out, lm, 0.5, corpus)
    assert with_lm == {**info, "lm": with_lm["lm"]}
    saved = json.loads((out / CALIBRATION_FILE).read_text())  # chosen again, with the LM
    assert saved["min_confidence"] == with_lm["lm"]["min_confidence"]
    assert saved["grammar"] == str(out / "grammar.yaml") and saved["manifest"] == str(calibration)
    assert calibrate_model(out, calibration)[0] == with_lm["lm"]["min_confidence"]
    assert json.loads((out / TRAINING).read_text()) == with_lm
    assert with_lm["lm"]["weight"] == 0.5 and with_lm["lm"]["fp16_check"]["utterances"] == len(
        rows(corpus / "test.jsonl"))
    weights = torch.load(out / LM_FOLDER / LM_FILE, weights_only=True)["state_dict"]
    assert {v.dtype for v in weights.values() if v.dim() >= 2} == {torch.float16}
    transcriber = Transcriber.from_pretrained(str(out), device="cpu")
    assert transcriber.task.lm is not None and transcriber.options.lm_weight == 0.5
    assert re.fullmatch(r"[a-z' ]*", transcriber.transcribe(corpus / "sample.wav").text)


@needs_kokoro
def test_the_ship_step_records_the_lineage(corpus, tmp_path):
    """TRAINING.json names the code's commit, the parent's sha256 (read when the child's run
    started: the parent's folder is replaced afterwards, as the latest round's is), the
    experiment and overrides Hydra started the run with, the seeds, the corpora and the date.
    The child ships in int8, checked against fp32 as fp16 is."""
    import hashlib
    import subprocess
    import sys
    from datetime import datetime, timezone

    from asr.train import Trainer

    toy = [f"data.root={corpus}", "model=tiny", "tokenizer.vocab_size=60", "data.batch_size=8",
           "trainer.max_minutes=null", "trainer.max_epochs=1", "trainer.cmvn_utterances=8",
           "data.augment.reverb.enabled=false", "trainer.num_threads=1", "scheduler.warmup_steps=1"]
    Trainer(train_config(tmp_path, corpus / "train.jsonl", "experiment=base", *toy,
                         f"data.dev_manifest={corpus / 'dev.jsonl'}")).fit()
    parent = tmp_path / "parent"
    first = ship.ship(tmp_path / "model", corpus, parent, "again")
    sha = hashlib.sha256((parent / WEIGHTS).read_bytes()).hexdigest()
    child_run = tmp_path / "child"
    overrides = ["experiment=base", *toy, f"trainer.out_dir={child_run}",
                 f"trainer.init_from={parent}", "trainer.progress=false"]
    done = subprocess.run([sys.executable, "-m", "asr.train", *overrides], cwd=ROOT,
                          capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr
    (parent / WEIGHTS).write_bytes(b"replaced by a later round")  # lineage must not read it now
    child = ship.ship(child_run, corpus, tmp_path / "shipped", "again", int8=True)
    weights = torch.load(tmp_path / "shipped" / WEIGHTS, weights_only=True)
    assert {v.dtype for k, v in weights.items() if v.dim() >= 2 and "int8" not in k} == {torch.int8}
    assert child["int8_check"]["utterances"] == len(rows(corpus / "test.jsonl"))
    commit = subprocess.run(["git", "rev-parse", "HEAD"], cwd=ROOT, capture_output=True,
                            text=True).stdout.strip()
    prepared = json.loads((corpus / ".done").read_text())
    corpora = [{"path": str(corpus), "seed": 0, "hours": 0.004, "text": prepared["text"],
                "voices": 3}]
    for info in (first, child):
        assert info["commit"] == commit and isinstance(info["code_modified"], bool)
        assert info["seeds"] == {"training": 0, "corpora": [0]} and info["corpora"] == corpora
        date = datetime.fromisoformat(info["date"])
        assert abs((datetime.now(timezone.utc) - date).total_seconds()) < 600
    assert first["parent"] == {"path": "", "sha256": ""}  # from scratch
    assert first["experiment"] is None and first["overrides"] is None  # not started by Hydra
    assert child["parent"] == {"path": str(parent), "sha256": sha}
    assert child["experiment"] == "base" and child["overrides"] == overrides
    assert child["resumed_with"] == []
    assert {"audio_hours_heard", "total_audio_hours_heard"} <= child.keys()  # this round, in all
    assert json.loads((tmp_path / "shipped" / TRAINING).read_text()) == child


def calibration_manifest(path: Path) -> Path:
    """Ten of Speech Commands' words said by people (the default grammar's `word` intent) and
    ten other words, as a calibration manifest."""
    require_shared()
    words = sorted((COMMANDS / "yes").glob("*.wav"))[:5] + sorted((COMMANDS / "no").glob("*.wav"))[:5]
    others = sorted((COMMANDS / "_unknown_").glob("*.wav"))[:10]
    rows = [{"audio_filepath": str(w), "intent": "word", "slots": {"word": w.parent.name}}
            for w in words] + [{"audio_filepath": str(o), "intent": None} for o in others]
    path.write_text("".join(json.dumps(row) + "\n" for row in rows))
    return path


def test_a_language_model_needs_the_calibration_manifest_to_ship(tmp_path):
    """Adding a language model changes the free transcript the grammar search is checked
    against, so a calibration whose manifest is gone cannot be carried over."""
    folder = tmp_path / "shipped"
    folder.mkdir()
    (folder / CALIBRATION_FILE).write_text(json.dumps({"min_confidence": 0.3,
                                                       "manifest": "gone.jsonl"}))
    with pytest.raises(ModelDirError, match=f"^{folder / CALIBRATION_FILE}: calibrated on "
                                            "'gone.jsonl', which is not here; the threshold must "
                                            "be chosen again with the language model$"):
        ship.recalibrate(folder, tmp_path / "out")


def test_shipped_names_resolve_to_the_package_and_paths_stay_paths():
    assert model_path("base") == FOLDER / "base"
    assert model_path("./base") == Path("base")
    assert model_path(Path("base")) == Path("base")
    assert model_path("exp/base") == Path("exp/base")



def test_voices_are_chosen_by_name_or_by_engine(capsys):
    voices = [Voice("kokoro", "af_heart"), Voice("kokoro", "bm_george"), Voice("flite", "awb"),
              Voice("espeak-ng", "m3", "en-us")]
    assert prepare.chosen_voices(voices, None) == voices
    assert prepare.chosen_voices(voices, {"kokoro:*", "espeak-ng:en-us+m3"}) == sorted(
        [voices[0], voices[1], voices[3]])
    assert prepare.chosen_voices(voices, {"flite:awb"}) == [voices[2]]
    for names, missing in (({"festival:*"}, "festival:*"), ({"kokoro:af_sky", "kokoro:*"},
                                                              "kokoro:af_sky")):
        with pytest.raises(SystemExit) as caught:
            prepare.chosen_voices(voices, names)
        assert str(caught.value) == f"error: --voices: no such voice here: {missing}"


def test_shipping_takes_the_hours_heard_that_training_recorded(tmp_path):
    run = tmp_path / "run"
    (run / "averaged").mkdir(parents=True)
    history = [{"epoch": e + 1, "step": 10 * (e + 1)} for e in range(3)]
    record = {"corpus_train_hours": 0.504, "audio_hours_heard": 1.46,
              "total_audio_hours_heard": 251.46}
    (run / "metrics.json").write_text(json.dumps({"epochs": history, **record}))
    averaged = run / "averaged" / "metrics.json"
    averaged.write_text(json.dumps({"averaged_epochs": [2, 3], **record}))
    assert ship.trained_for(run / "averaged") == {
        "epochs": 3, "steps": 30, "corpus_train_hours": 0.5, "audio_hours_heard": 1.5,
        "total_audio_hours_heard": 251.5}
    for unknown in ({**record, "total_audio_hours_heard": None}, {"averaged_epochs": [2, 3]}):
        averaged.write_text(json.dumps(unknown))
        with pytest.raises(SystemExit) as caught:
            ship.trained_for(run / "averaged")
        assert str(caught.value) == (
            f"error: {averaged}: no record of the hours of audio its weights heard "
            "(corpus_train_hours, audio_hours_heard, total_audio_hours_heard, which asr.train "
            "writes)")


def test_merge_joins_synthetic_speech_and_keeps_people_and_noise_once(tmp_path, capsys):
    from recipes.base import merge

    def corpus(name: str, synthetic: str) -> Path:
        out = tmp_path / name
        out.mkdir()
        (out / ".done").write_text("{}\n")
        lines = [{"audio_filepath": f"wavs/train/{synthetic}.wav", "text": synthetic,
                  "duration": 1.0, "engine": "kokoro"},
                 {"audio_filepath": "/data/sc/yes_1.wav", "text": "yes", "duration": 1.0,
                  "engine": "real", "kind": "command"},
                 {"audio_filepath": "wavs/noise/white_0.wav", "text": "", "duration": 2.0,
                  "kind": "noise"}]
        (out / "train.jsonl").write_text("".join(json.dumps(line) + "\n" for line in lines))
        return out

    first, second = corpus("first", "turn it on"), corpus("second", "turn it off")
    merge.main([str(first), str(second), "--out", str(tmp_path / "all")])
    joined = rows(tmp_path / "all" / "train.jsonl")
    assert [(r["text"], r["audio_filepath"]) for r in joined] == [
        ("turn it on", str(first / "wavs/train/turn it on.wav")), ("yes", "/data/sc/yes_1.wav"),
        ("", str(first / "wavs/noise/white_0.wav")),
        ("turn it off", str(second / "wavs/train/turn it off.wav"))]
    summary = f"{tmp_path / 'all'}: 4 training utterances, 0.00 h, from 2 corpora\n"
    assert capsys.readouterr().out == summary


def test_summary_reads_the_score_reports_as_one_line_per_target(tmp_path):
    from recipes.base import summary

    (tmp_path / "commands.json").write_text(json.dumps({"command_acceptance": 0.8252,
                                                        "commands": 978}))
    (tmp_path / "other_speech.json").write_text(json.dumps({"false_acceptance": 0.0084,
                                                            "non_commands": 358}))
    (tmp_path / "test_words.json").write_text(json.dumps({"wer": 0.1657, "cer": 0.1716,
                                                          "utterances": 990, "rtf": 0.0083}))
    assert summary.summary_lines(tmp_path) == [
        "people's one-word commands: 82.52% of 978 (target >= 92%)",
        "other speech accepted: 0.84% of 358 (target <= 1%)",
        "people's WER, held-out Speech Commands and FSDD: WER 16.57%, CER 17.16% of 990, "
        "RTF 0.0083 (target <= 8%)"]
    (tmp_path / "coffee.json").write_text("{")
    with pytest.raises(SystemExit) as caught:
        summary.summary_lines(tmp_path)
    assert str(caught.value).startswith(f"error: {tmp_path / 'coffee.json'}: cannot read the report")


def test_a_run_whose_weights_were_kept_is_told_from_one_still_to_keep(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)  # run.sh names its folders relative to the repository
    latest = tmp_path / "latest"
    latest.mkdir()
    for run in ("exp/base", "exp/base_r2"):
        (tmp_path / run).mkdir(parents=True)
        (tmp_path / run / "metrics.json").write_text(json.dumps({"epochs": [{"step": 70}]}))
    assert not ship.shipped_from(latest, Path("exp/base"))  # nothing kept yet
    kept = {"source": "exp/base/averaged", "steps": 70}
    (latest / "TRAINING.json").write_text(json.dumps(kept))
    assert ship.shipped_from(latest, Path("exp/base"))
    assert ship.shipped_from(latest, tmp_path / "exp" / "base")
    assert not ship.shipped_from(latest, Path("exp/base_r2"))
    # A new round in the same folder, not yet kept: the kept weights are the round before's.
    (tmp_path / "exp/base/metrics.json").write_text(json.dumps({"epochs": [{"step": 35}]}))
    assert not ship.shipped_from(latest, Path("exp/base"))
    (latest / "TRAINING.json").write_text("[1, 2]")  # untrusted: not the form written
    assert not ship.shipped_from(latest, Path("exp/base"))
    (latest / "TRAINING.json").write_text(json.dumps({"source": "exp/base", "steps": 35}))
    with pytest.raises(SystemExit) as caught:
        ship.main(["--kept-from", "exp/base", "--out", str(latest)])
    assert caught.value.code == 0
    with pytest.raises(SystemExit) as caught:
        ship.main(["--kept-from", "exp/other", "--out", str(latest)])
    assert caught.value.code == 1


def test_the_alone_draw_gives_the_digits_half_of_the_time():
    from recipes.common.synthesis import expected_seconds

    drawn = prepare.draw_lines(alone_text()["train"], 600.0, random.Random(0), ALONE_SHARES)
    seconds = Counter()
    for line in drawn:
        seconds[line.source] += expected_seconds(line.text)
    assert set(seconds) == {"alone:digits", "alone:words"}
    assert 300 <= seconds["alone:digits"] < 302 and 300 <= seconds["alone:words"] < 302
    digits = Counter(line.text for line in drawn if line.source == "alone:digits")
    assert max(digits.values()) - min(digits.values()) <= 1  # every digit once before any twice


@pytest.mark.train
@needs_kokoro
def test_the_alone_corpus_says_single_words_and_no_real_people(tmp_path):
    out = tmp_path / "alone"
    prepare.main(["--out", str(out), "--text", "alone", "--hours", "0.004", "--voices", VOICES,
                  "--jobs", "1"])  # the default --real-root: its people stay out all the same
    train = [r for r in rows(out / "train.jsonl") if r.get("kind") != "noise"]
    words = {line.text for line in alone_text()["train"]}
    assert train and {r["engine"] for r in train} <= {"kokoro", "espeak-ng"}
    assert {r["text"] for r in train} <= words
    assert rows(out / "test_words.jsonl") == rows(out / "babble.jsonl") == []


def test_a_shipped_calibration_names_the_shipped_grammar_and_must_hold_for_it(tmp_path):
    scored = tmp_path / "candidate"
    scored.mkdir()
    with pytest.raises(ModelDirError, match="intents.json: no such calibration"):
        ship.calibration_for(scored, tmp_path / "out")
    calibration = {"min_confidence": 0.36, "grammar": str(scored / "grammar.yaml"),
                   "grammar_sha256": grammar_digest(ship.DEFAULT_GRAMMAR), "dev": {"commands": 7}}
    (scored / "intents.json").write_text(json.dumps(calibration))
    shipped = json.loads(ship.calibration_for(scored, tmp_path / "out"))
    assert shipped == {**calibration, "grammar": str(tmp_path / "out" / "grammar.yaml")}
    (scored / "intents.json").write_text(json.dumps({**calibration, "grammar_sha256": "0" * 16}))
    with pytest.raises(ModelDirError, match="calibrated for another grammar than"):
        ship.calibration_for(scored, tmp_path / "out")
    (scored / "intents.json").write_text(json.dumps({**calibration, "min_confidence": 3}))
    with pytest.raises(ModelDirError, match=r"min_confidence must be a number in \[0, 1\]"):
        ship.calibration_for(scored, tmp_path / "out")

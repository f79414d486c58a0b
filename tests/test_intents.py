"""Transcript -> intent on text: every grammar sentence, near misses, what must be refused, and
the command line on a tiny real model."""

import json
import math
import random
import subprocess
import sys
from pathlib import Path

import pytest

from asr.assistant.actions import ACTIONS
from asr.assistant.intents import (
    IntentParser,
    acceptance,
    calibrated_confidence,
    grammar_file,
    read_commands,
)
from asr.assistant.intents.cli import argument_parser
from asr.assistant.intents.scoring import confusions, format_report, utterance_result
from asr.checkpoint import ModelDirError
from asr.data import ManifestError
from asr.decoding import Hypothesis
from asr.grammar import Grammar, GrammarError
from recipes.voice_commands.prepare import DEFAULT_GRAMMAR

pytestmark = [pytest.mark.tier("fast"), pytest.mark.data]

GRAMMAR = Grammar.load(DEFAULT_GRAMMAR)
PARSER = IntentParser(GRAMMAR, search="free", threshold=0.85)  # fuzzy: near misses count
EXACT = IntentParser(GRAMMAR)  # the grammar search's: the text must be a grammar sentence


def heard_with(acoustic: float | None = None, garbage_ratio: float | None = None) -> Hypothesis:
    """The search's scores of a transcript (its tokens do not matter to the parser)."""
    return Hypothesis([], 0.0, 0.0, 0.0 if acoustic is None else acoustic,
                      garbage_ratio=garbage_ratio)


def test_every_grammar_sentence_gives_its_intent_and_slots():
    sentences = [s for i in GRAMMAR.intents for s in GRAMMAR.sentences(i, 10**6, random.Random(0))]
    assert len(sentences) == 1172
    for parser in (PARSER, EXACT):
        wrong = [(s.text, i.name, i.slots) for s in sentences
                 if ((i := parser.parse(s.text)).name, i.slots, i.similarity)
                 != (s.intent, s.slots, 1.0)]
        assert wrong == []


def test_every_grammar_intent_has_an_action():
    assert sorted(ACTIONS) == GRAMMAR.intents


@pytest.mark.parametrize(("heard", "name", "slots"), [
    ("show me my fotos please", "show_files", {"kind": "photos"}),
    ("hey computa turn of the lights", "switch", {"state": "off", "device": "lights"}),
    ("set a timer for fife minutes", "timer", {"amount": "five", "unit": "minutes"}),
    ("could you find my documents from yesterdy", "find_files",
     {"kind": "documents", "when": "from yesterday"}),
    ("check whether the batery ran down", "check_status", {"thing": "battery"}),
    ("open the browsr please", "open_app", {"app": "browser"}),
    ("what time is et", "time", {}),
    ("go bak", "go_back", {}),
    ("Nex song!", "next_song", {}),
])
def test_near_misses_land_on_the_right_command(heard, name, slots):
    intent = PARSER.parse(heard)
    assert (intent.name, intent.slots) == (name, slots)
    assert 0.85 <= intent.similarity < 1.0 and intent.confidence == intent.similarity


@pytest.mark.parametrize(("heard", "closest", "similarity"), [
    ("delete all my files", "please find my files", 0.5),
    ("show me my files in /etc", "show me my files", 2 / 3),
    ("now", "no", 0.8),
    ("shut down the computer now", "down", 0.2),
])
def test_below_threshold_is_not_understood(heard, closest, similarity):
    intent = PARSER.parse(heard)
    assert intent.name is None and not intent.understood and intent.slots == {}
    assert intent.command == closest
    assert intent.similarity == pytest.approx(similarity, abs=1e-3)


def test_thresholds_are_the_boundaries():
    heard = "turn the volume up please now"  # 1 - 1/6

    def free(**limits) -> IntentParser:
        return IntentParser(GRAMMAR, search="free", **limits)

    assert free(threshold=0.83, min_confidence=0.0).parse(heard).name == "volume"
    assert free(threshold=0.84, min_confidence=0.0).parse(heard).name is None
    assert free(threshold=0.83, min_confidence=0.0).parse(heard, heard_with(0.3)).name == "volume"
    refused = free(threshold=0.83, min_confidence=0.5).parse(heard, heard_with(0.3))
    assert (refused.name, refused.slots, refused.acoustic) == (None, {}, 0.3)
    assert refused.confidence == pytest.approx(0.3 * 5 / 6)
    assert free(threshold=0.83, min_confidence=0.3).parse(heard, heard_with(0.3)).name == "volume"
    assert free(threshold=0.83).parse(heard).similarity == pytest.approx(5 / 6)
    with pytest.raises(ValueError, match="intents.min_confidence must be in"):
        IntentParser(GRAMMAR, min_confidence=1.5)
    with pytest.raises(ValueError, match="intents.search must be one of"):
        IntentParser(GRAMMAR, search="fuzzy")


def test_grammar_search_reads_only_grammar_sentences_and_refuses_by_the_garbage_ratio():
    """search="grammar": a near miss is no sentence (the search never writes one), and an
    exact sentence counts while exp(-garbage ratio) reaches min_confidence."""
    assert EXACT.parse("show me my fotos please").name is None
    said = "set a timer for five minutes"
    intent = EXACT.parse(said, heard_with(garbage_ratio=0.1))
    assert (intent.name, intent.slots) == ("timer", {"amount": "five", "unit": "minutes"})
    assert intent.confidence == pytest.approx(math.exp(-0.1)) == intent.acoustic
    at = math.exp(-0.1)
    assert IntentParser(GRAMMAR, min_confidence=at).parse(said, heard_with(garbage_ratio=0.1)).name
    refused = IntentParser(GRAMMAR, min_confidence=0.95).parse(said, heard_with(garbage_ratio=0.1))
    assert (refused.name, refused.slots) == (None, {})
    assert EXACT.parse(said, heard_with(garbage_ratio=math.inf)).name is None
    assert EXACT.parse(said).confidence == 1.0  # typed text: nothing acoustic to doubt


def test_grammar_search_confidence_falls_with_the_free_paths_disagreement():
    """The free path's text (CTC best path) against the sentence found: all agree, 1; one
    letter off, 1 - 1/length; a long sentence heard where a short command was forced, low."""
    said, ratio = "set a timer for five minutes", 0.1
    heard = heard_with(garbage_ratio=ratio)
    assert EXACT.parse(said, heard, free=said).confidence == pytest.approx(math.exp(-ratio))
    assert EXACT.parse(said, heard, free="set a timer for fife minutes").confidence == \
        pytest.approx(math.exp(-ratio) * (1 - 1 / len(said)))
    long = "well i understand that firemen are having a tough time with wildfires"
    assert EXACT.parse("what time is it", heard, free=long).confidence < 0.3
    assert EXACT.parse(said, heard, free="").confidence == 0.0


def test_grammar_search_alternatives_are_the_nbest_readings_with_their_probabilities():
    nbest = [("set a timer for five minutes", -1.0), ("set a timer for nine minutes", -2.0),
             ("please set a timer for five minutes", -3.0)]
    intent = EXACT.parse(nbest[0][0], heard_with(garbage_ratio=0.0), nbest)
    total = 1 + math.exp(-1) + math.exp(-2)
    five = {"intent": "timer", "slots": {"amount": "five", "unit": "minutes"}}
    nine = {"intent": "timer", "slots": {"amount": "nine", "unit": "minutes"}}
    readings = [({"intent": r.intent, "slots": r.slots}, r.probability)
                for r in intent.alternatives]
    assert [r for r, _ in readings] == [five, nine]
    assert [p for _, p in readings] == pytest.approx(
        [(1 + math.exp(-2)) / total, math.exp(-1) / total])


def test_hostile_text_never_yields_a_slot_from_the_transcript():
    for heard in ("run rm -rf", "run rm -rf /", "open /etc/passwd", "eval import os", ""):
        assert PARSER.parse(heard).name is None
        assert EXACT.parse(heard).name is None
    intent = IntentParser(GRAMMAR, search="free", threshold=0.5).parse("show me my files in /etc")
    assert (intent.name, intent.slots) == ("show_files", {"kind": "files"})


def test_acceptance_counts_intent_and_every_slot_and_refusals():
    said = PARSER.parse
    results = [("timer", {"amount": "five", "unit": "minutes"}, said("set a timer for five minutes")),
               ("timer", {"amount": "six", "unit": "minutes"}, said("set a timer for five minutes")),
               ("word", {"word": "yes"}, said("yes")),
               (None, {}, said("what a lovely day it is")),
               (None, {}, said("cancel"))]
    assert [i.is_right(e, s) for e, s, i in results] == [True, False, True, True, False]
    report = acceptance(results)
    assert (report["acceptance"], report["command_acceptance"], report["false_acceptance"]) == (
        3 / 5, 2 / 3, 0.5)
    assert report["per_intent"]["timer"] == {"n": 2, "acceptance": 0.5}
    json.dumps(report)


# ---------------------------------------------------------------------------- manifests and CLI


@pytest.mark.parametrize(("row", "problem"), [
    ({"intent": "time", "slots": []}, "slots must be an object mapping names to strings, got []"),
    ({"intent": "time", "slots": False}, "got False"),
    ({"intent": "time", "slots": 0}, "got 0"),
    ({"intent": "time", "slots": None}, "got None"),
    ({"intent": "time", "slots": ""}, "got ''"),
    ({"intent": "timer", "slots": {"amount": 5}}, "mapping names to strings"),
    ({"intent": None, "slots": {"kind": "photos"}}, "a non-command (intent null) has no slots"),
    ({"intent": "\ud800"}, "is not valid Unicode (a lone surrogate)"),
    ({"intent": "show_files", "slots": {"kind": "photos\udfff"}}, "is not valid Unicode"),
    ({"intent": "show_files", "slots": {"\udc00": "photos"}}, "is not valid Unicode"),
    ({"intent": "time", "audio_filepath": "a\ud800.wav"}, "is not valid Unicode"),
])
def test_a_bad_manifest_row_names_the_file_and_line(tmp_path, row, problem):
    (tmp_path / "a.wav").write_bytes(b"")
    manifest = tmp_path / "m.jsonl"
    good = {"audio_filepath": "a.wav", "intent": "time"}
    manifest.write_text(json.dumps(good) + "\n" + json.dumps({**good, **row}) + "\n")
    with pytest.raises(ManifestError) as caught:
        read_commands(manifest)
    message = str(caught.value)
    assert message.startswith(f"{manifest}:2: ") and problem in message
    message.encode("utf-8")  # printable


def test_a_manifest_row_without_slots_has_none(tmp_path):
    (tmp_path / "a.wav").write_bytes(b"")
    manifest = tmp_path / "m.jsonl"
    manifest.write_text('{"audio_filepath": "a.wav", "intent": "time"}\n'
                        '{"audio_filepath": "a.wav", "intent": null, "slots": {}}\n')
    assert [row[1:] for row in read_commands(manifest)] == [("time", {}), (None, {})]


def test_confusions_count_what_was_heard_instead_commonest_first():
    said = EXACT.parse
    results = [("word", {"word": "go"}, said("no")), ("word", {"word": "yes"}, said("yes")),
               ("word", {"word": "go"}, said("no")), ("word", {"word": "go"}, said("hello")),
               (None, {}, said("stop"))]
    assert confusions(results) == [
        {"said": "word word=go", "heard": "word word=no", "n": 2},
        {"said": "word word=go", "heard": "(refused)", "n": 1},
        {"said": "(non-command)", "heard": "word word=stop", "n": 1}]
    report = {**acceptance(results), "confusions": confusions(results)}
    lines = format_report(report).splitlines()
    assert lines[-4:] == ["most often heard wrong (said -> heard, times):",
                          "  word word=go -> word word=no  (2)",
                          "  word word=go -> (refused)  (1)",
                          "  (non-command) -> word word=stop  (1)"]
    assert utterance_result("a.wav", results[0]) == {
        "audio_filepath": "a.wav", "intent": "word", "slots": {"word": "go"}, "right": False,
        "heard": {"intent": "word", "slots": {"word": "no"}, "confidence": 1.0, "text": "no",
                  "free_text": None}}
    assert confusions(results[1:2]) == []
    assert "most often" not in format_report({**acceptance(results[1:2]), "confusions": []})


def test_the_report_keeps_an_odd_intent_name_on_its_line():
    said = EXACT.parse("next song")
    report = acceptance([("x\n  time  100.00%  (9)", {}, said), ("next_song", {}, said)])
    lines = format_report(report).splitlines()
    assert len(lines) == 3 and lines[1].startswith("  next_song ") and "x\\n" in lines[2]


@pytest.mark.parametrize("command", [None, "recognize", "evaluate", "calibrate"])
def test_every_option_has_help_and_the_program_its_installed_name(monkeypatch, command):
    for run_as, program in (("/usr/bin/asr-intents", "asr-intents"),
                            ("/x/asr/assistant/intents.py", "python -m asr.assistant.intents")):
        monkeypatch.setattr(sys, "argv", [run_as])
        parser = argument_parser(command)
        assert parser.prog == program + (f" {command}" if command else "")
        assert all(action.help for action in parser._actions), [
            action.dest for action in parser._actions if not action.help]
        if command is None:
            assert f"{program} evaluate --help" in parser.format_help()


@pytest.mark.subprocess
def test_the_installed_command_names_itself():
    script = Path(sys.executable).with_name("asr-intents")
    if not script.exists():
        pytest.skip("asr-intents is not installed in this environment")
    shown = subprocess.run([str(script), "--help"], capture_output=True, text=True, check=True)
    assert shown.stdout.startswith("usage: asr-intents ")


def test_the_free_search_refuses_a_grammar_too_large_for_it_when_set_up():
    values = "    s: [" + ", ".join(f"\"a{i} b{i}\"" for i in range(4000)) + "]\n"
    grammar = Grammar.from_yaml("context:\n  expressions:\n    play: [\"play $s:x\"]\n  slots:\n"
                                + values, "songs.yaml")
    assert IntentParser(grammar).parse("play a1 b1").slots == {"x": "a1 b1"}
    with pytest.raises(GrammarError, match="^songs.yaml: too large for the free search"):
        IntentParser(grammar, search="free")


@pytest.mark.parametrize("text", ["[" * 60000, '{"min_confidence": ' * 30000, "\x00", "[]"])
def test_a_bad_calibration_file_is_one_line(tmp_path, text):
    (tmp_path / "intents.json").write_text(text)
    with pytest.raises(ModelDirError, match=f"^{tmp_path / 'intents.json'}: "):
        calibrated_confidence(tmp_path)


@pytest.mark.parametrize("grammar", ["", " "])
def test_an_empty_grammar_name_is_refused_not_taken_for_the_models_own(tmp_path, grammar):
    (tmp_path / "grammar.yaml").write_text(DEFAULT_GRAMMAR.read_text())
    with pytest.raises(GrammarError, match=r"^the grammar is an empty file name"):
        grammar_file(tmp_path, grammar)
    assert grammar_file(tmp_path) == tmp_path / "grammar.yaml"


@pytest.fixture
def model_copy(tmp_path) -> Path:
    """The shipped base model's directory, copied where a command may write."""
    import shutil

    from asr.models import FOLDER
    if not (FOLDER / "base" / "model.pt").is_file():
        pytest.skip("no base model shipped")
    return Path(shutil.copytree(FOLDER / "base", tmp_path / "model"))


def commands_manifest(folder: Path, commands: int, others: int, intent: str = "time") -> Path:
    from helpers import FSDD, require_shared
    require_shared()
    clip = str(FSDD / "7_yweweler_0.wav")
    rows = [{"audio_filepath": clip, "intent": intent}] * commands
    rows += [{"audio_filepath": clip, "intent": None}] * others
    manifest = folder / "m.jsonl"
    manifest.write_text("".join(json.dumps(row) + "\n" for row in rows))
    return manifest


@pytest.mark.parametrize("command", ["evaluate", "calibrate"])
@pytest.mark.parametrize("target", ["model.pt", "config.yaml", "grammar.yaml", "intents.json",
                                    "manifest"])
def test_a_report_never_replaces_what_the_command_reads(model_copy, capsys, command, target):
    """--json over the manifest or a file of the model is a usage error before any work, and
    the file is as it was."""
    from asr.assistant.intents import main
    manifest = commands_manifest(model_copy.parent, 1, 0)
    path = manifest if target == "manifest" else model_copy / target
    before = path.read_bytes()
    with pytest.raises(SystemExit) as stopped:
        main([command, "--model", str(model_copy), "--manifest", str(manifest),
              "--json", str(path)])
    assert stopped.value.code == 2
    assert "the output would replace it" in capsys.readouterr().err.strip().splitlines()[-1]
    assert path.read_bytes() == before


def test_calibrating_into_a_folder_is_refused_before_any_work(model_copy, capsys):
    from asr.assistant.intents import main
    manifest = commands_manifest(model_copy.parent, 10, 10)
    (model_copy / "intents.json").unlink()
    (model_copy / "intents.json").mkdir()
    with pytest.raises(SystemExit) as stopped:
        main(["calibrate", "--model", str(model_copy), "--manifest", str(manifest)])
    assert stopped.value.code == 2
    assert "intents.json is a folder" in capsys.readouterr().err.strip().splitlines()[-1]


@pytest.mark.parametrize(("commands", "others", "intent", "problem"), [
    (12, 0, "time", "needs at least 10 commands and 10 non-commands (intent null); it has 12 and 0"),
    (1, 0, "time", "it has 1 and 0"),
    (10, 10, "brew_coffee", "intent 'brew_coffee' is not one of the grammar's"),
])
def test_a_manifest_that_cannot_calibrate_is_refused(model_copy, capsys, commands, others,
                                                     intent, problem):
    """No non-commands would choose the threshold that accepts everything; an intent the
    grammar lacks can never be right. The model's calibration stays as it was."""
    from asr.assistant.intents import main
    manifest = commands_manifest(model_copy.parent, commands, others, intent)
    before = (model_copy / "intents.json").read_bytes()
    assert main(["calibrate", "--model", str(model_copy), "--manifest", str(manifest)]) == 1
    error = capsys.readouterr().err.strip().splitlines()
    assert len(error) == 1 and problem in error[0]
    assert (model_copy / "intents.json").read_bytes() == before


def test_a_calibration_holds_for_its_own_grammar_only(model_copy, tmp_path):
    from asr.assistant.intents import DEFAULT_MIN_CONFIDENCE, grammar_digest
    other = tmp_path / "other.yaml"
    other.write_text(DEFAULT_GRAMMAR.read_text().replace("please", "now please", 1))
    (model_copy / "intents.json").write_text(json.dumps(
        {"min_confidence": 0.123, "grammar_sha256": grammar_digest(model_copy / "grammar.yaml")}))
    assert calibrated_confidence(model_copy) == 0.123
    assert calibrated_confidence(model_copy, model_copy / "grammar.yaml") == 0.123
    assert calibrated_confidence(model_copy, other) == DEFAULT_MIN_CONFIDENCE


def test_a_sentence_of_two_intents_is_named_at_load_and_read_both_ways():
    grammar = Grammar.from_yaml("context:\n  expressions:\n    lights: [\"(turn) lights on\"]\n"
                                "    power: [\"power on\", \"lights on\"]\n", "both.yaml")
    with pytest.warns(UserWarning, match=r"^both.yaml: 'lights on' is a sentence of lights and "
                                         "power"):
        parser = IntentParser(grammar)
    assert [r.intent for r in grammar.readings("lights on")] == ["lights", "power"]
    intent = parser.parse("lights on", heard_with(garbage_ratio=0.0), [("lights on", -0.1)])
    assert intent.name == "lights"
    assert [(a.intent, a.probability) for a in intent.alternatives] == [
        ("lights", 0.5), ("power", 0.5)]


def test_a_grammar_without_shared_sentences_loads_without_a_warning():
    import warnings
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        IntentParser(GRAMMAR)


def test_a_report_of_non_commands_only_says_nothing_of_commands():
    refused = EXACT.parse("hello there")
    lines = format_report(acceptance([(None, {}, refused)] * 4)).splitlines()
    assert lines[0] == "non-commands accepted as commands: 0.00% of 4"
    assert not any("command acceptance" in line for line in lines)

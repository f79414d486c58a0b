"""Transcript -> intent on text: every grammar sentence, near misses, and what must be refused."""

import pytest

from asr.actions import ACTIONS
from asr.intents import IntentParser, strip_wrappers
from recipes.voice_commands.grammar import commands, intents

PARSER = IntentParser(threshold=0.85)


def test_every_grammar_sentence_gives_its_intent_and_slots():
    parsed = [(c, PARSER.parse(c.text)) for c in commands()]
    assert [(c.text, i) for c, i in parsed if (i.name, i.slots, i.confidence) !=
            (c.intent, c.slots, 1.0)] == []
    assert PARSER.parse("hey computer could you set a timer for one minute please").confidence == 1.0


def test_every_grammar_intent_has_an_action():
    assert sorted(ACTIONS) == intents()


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
    assert 0.85 <= intent.confidence < 1.0


@pytest.mark.parametrize(("heard", "closest", "confidence"), [
    ("delete all my files", "find my files", 0.625),
    ("show me my files in /etc", "show me my files", 0.821),
    ("now", "no", 0.8),
    ("please", "yes", 0.444),
])
def test_below_threshold_is_not_understood(heard, closest, confidence):
    intent = PARSER.parse(heard)
    assert intent.name is None and not intent.understood and intent.slots == {}
    assert intent.command == closest
    assert intent.confidence == pytest.approx(confidence, abs=1e-3)


def test_hostile_text_never_yields_a_slot_from_the_transcript():
    for heard in ("run rm -rf", "run rm -rf /", "open /etc/passwd", "eval import os", ""):
        assert PARSER.parse(heard).name is None
    # Even when a request is close enough to act on, its slots are the grammar's own words.
    intent = IntentParser(threshold=0.5).parse("show me my files in /etc")
    assert (intent.name, intent.slots) == ("show_files", {"kind": "files"})


def test_threshold_is_the_boundary():
    assert PARSER.parse("show me my files in /etc").confidence == pytest.approx(32 / 39)
    assert IntentParser(threshold=0.83).parse("show me my files in /etc").name is None
    assert IntentParser(threshold=0.82).parse("show me my files in /etc").name == "show_files"


def test_wrappers_are_stripped_but_never_the_whole_command():
    assert strip_wrappers("hey computer could you cancel please") == "cancel"
    assert strip_wrappers("hey computa please open the editor") == "open the editor"
    assert strip_wrappers("please") == "please"
    assert strip_wrappers("could you") == "you"

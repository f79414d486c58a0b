"""Transcript -> intent on text: every grammar sentence, near misses, what must be refused, and
the command line on a tiny real model."""

import json
import random

import pytest

from asr.assistant.actions import ACTIONS
from asr.assistant.grammar import Grammar
from asr.assistant.intents import IntentParser, acceptance, is_right
from recipes.voice_commands.prepare import DEFAULT_GRAMMAR

GRAMMAR = Grammar.load(DEFAULT_GRAMMAR)
PARSER = IntentParser(GRAMMAR, threshold=0.85)


def test_every_grammar_sentence_gives_its_intent_and_slots():
    sentences = [s for i in GRAMMAR.intents for s in GRAMMAR.sentences(i, 10**6, random.Random(0))]
    assert len(sentences) == 1172
    wrong = [(s.text, i.name, i.slots) for s in sentences
             if ((i := PARSER.parse(s.text)).name, i.slots, i.similarity) != (s.intent, s.slots, 1.0)]
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
    assert IntentParser(GRAMMAR, threshold=0.83).parse(heard).name == "volume"
    assert IntentParser(GRAMMAR, threshold=0.83).parse(heard, acoustic=0.3).name == "volume"
    refused = IntentParser(GRAMMAR, threshold=0.83, min_confidence=0.5).parse(heard, acoustic=0.3)
    assert (refused.name, refused.slots, refused.acoustic) == (None, {}, 0.3)
    assert refused.confidence == pytest.approx(0.3 * 5 / 6)
    assert IntentParser(GRAMMAR, threshold=0.83).parse(heard).similarity == pytest.approx(5 / 6)
    with pytest.raises(ValueError, match="intents.min_confidence must be in"):
        IntentParser(GRAMMAR, min_confidence=1.5)


def test_hostile_text_never_yields_a_slot_from_the_transcript():
    for heard in ("run rm -rf", "run rm -rf /", "open /etc/passwd", "eval import os", ""):
        assert PARSER.parse(heard).name is None
    intent = IntentParser(GRAMMAR, threshold=0.5).parse("show me my files in /etc")
    assert (intent.name, intent.slots) == ("show_files", {"kind": "files"})


def test_acceptance_counts_intent_and_every_slot_and_refusals():
    said = PARSER.parse
    results = [("timer", {"amount": "five", "unit": "minutes"}, said("set a timer for five minutes")),
               ("timer", {"amount": "six", "unit": "minutes"}, said("set a timer for five minutes")),
               ("word", {"word": "yes"}, said("yes")),
               (None, {}, said("what a lovely day it is")),
               (None, {}, said("cancel"))]
    assert [is_right(i, e, s) for e, s, i in results] == [True, False, True, True, False]
    report = acceptance(results)
    assert (report["acceptance"], report["command_acceptance"], report["false_acceptance"]) == (
        3 / 5, 2 / 3, 0.5)
    assert report["per_intent"]["timer"] == {"n": 2, "acceptance": 0.5}
    json.dumps(report)

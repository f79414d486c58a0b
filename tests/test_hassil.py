"""Home Assistant's sentences (hassil templates) as a grammar: asr.grammar.hassil."""

import warnings

import pytest

from asr.grammar import Grammar, GrammarError
from asr.grammar.hassil import read_home, round_trip, sample_commands

pytestmark = pytest.mark.tier("slow")

pytest.importorskip("hassil")
pytest.importorskip("home_assistant_intents")

HOME = """\
areas: [kitchen, {name: Living Room, aliases: [lounge]}, bedroom]
floors: [upstairs]
devices:
  - {name: Kitchen Light, domain: light, area: kitchen}
  - {name: ceiling fan, domain: fan}
  - {name: front door, domain: lock}
"""

CUSTOM = """\
language: en
intents:
  SetFan:
    data:
      - sentences:
          - "turn (on;[the] fan[s])"
          - "{area} fan[s] to {speed}[%]"
          - "name the fan {anything}"
        slots: {domain: fan}
  Feed:
    data:
      - sentences: ["feed the (cat|dog) {meal}", "feed {pet} [<now>]"]
lists:
  speed: {range: {from: 10, to: 30, step: 10}}
  meal: {values: [{in: "(breakfast|morning)", out: am}, dinner]}
  pet: {values: [rex]}
  anything: {wildcard: true}
expansion_rules:
  now: "right now"
"""


@pytest.fixture(scope="module")
def home(tmp_path_factory):
    path = tmp_path_factory.mktemp("home") / "home.yaml"
    path.write_text(HOME)
    return path


@pytest.fixture(scope="module")
def ha(home):
    with warnings.catch_warnings(record=True):
        warnings.simplefilter("always")
        return Grammar.load("ha:en", home=home)


def test_home_assistant_sentences_read_with_the_homes_names(ha):
    assert ha.parse("turn on the kitchen light").intent == "HassTurnOn"
    assert ha.parse("turn on the kitchen light").values == {"name": "Kitchen Light"}
    # an area's lights: the block's fixed slot (domain) and the area as Home Assistant names it
    assert ha.parse("turn off the lights in the lounge").values == {"area": "Living Room",
                                                                  "domain": "light"}
    # a range: words said, digits reported
    assert ha.parse("set the kitchen light to fifty percent").values == {
        "name": "Kitchen Light", "brightness": "50"}
    assert ha.parse("could you lock the front door please").values == {"name": "front door"}
    # a lock is no light: {name} of a block that requires a domain lists only its devices
    assert ha.parse("set the front door to fifty percent") is None
    assert ha.parse("turn on the toaster") is None


def test_hassil_round_trip_on_a_sample(ha, home):
    pairs = sample_commands("ha:en", home, per_template=1)
    assert len(pairs) > 400
    assert len({intent for intent, _ in pairs}) >= 25
    parsed, missed = round_trip(ha, pairs)
    assert missed == []
    assert parsed == len(pairs)


def test_custom_sentences_glue_permutations_lists_rules_and_drops(tmp_path, home):
    folder = tmp_path / "custom_sentences" / "en"
    folder.mkdir(parents=True)
    (folder / "fan.yaml").write_text(CUSTOM)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        grammar = Grammar.load(folder, home=home)
    lines = [str(w.message) for w in caught]
    assert [line for line in lines if "wildcard" in line] == [
        f"{folder}: 1 template(s) dropped: they hold a wildcard list (any words) ({{anything}} 1)"]
    for said in ("turn on fans", "turn on the fan", "turn the fan on", "turn fans on"):
        assert grammar.parse(said).values == {"domain": "fan"}, said
    assert grammar.parse("turn on the fanss") is None
    assert grammar.parse("living room fan to twenty percent").values == {
        "area": "Living Room", "speed": "20", "domain": "fan"}
    assert grammar.parse("feed the dog morning").values == {"meal": "am"}
    assert grammar.parse("feed the cat dinner").values == {"meal": "dinner"}
    assert grammar.parse("feed rex right now").intent == "Feed"
    assert grammar.parse("feed the cat lunch") is None


def test_bad_home_files_and_sentences_are_one_line_errors(tmp_path, home):
    bad = tmp_path / "home.yaml"
    for text, problem in (("areas: kitchen\n", "areas must be a list"),
                          ("rooms: [a]\n", "maps areas, floors and devices"),
                          ("devices: [{name: 3}]\n", "needs a name of words"),
                          ("a: &x [1]\nb: *x\n", "aliases are not allowed")):
        bad.write_text(text)
        with pytest.raises(GrammarError, match=problem) as err:
            read_home(bad)
        assert "\n" not in str(err.value)
    with pytest.raises(GrammarError, match="no language 'xx'"):
        Grammar.load("ha:xx")
    sentences = tmp_path / "s.yaml"
    sentences.write_text("language: en\nintents:\n  X:\n    data:\n      - sentences: ['a <nope>']\n")
    with pytest.raises(GrammarError, match="no expansion rule <nope>"):
        Grammar.load(sentences)
    rhino = tmp_path / "rhino.yaml"
    rhino.write_text("context:\n  expressions:\n    go: [go]\n")
    with pytest.raises(GrammarError, match="this grammar is Rhino's"):
        Grammar.load(rhino, home=home)

"""Grammar files (Picovoice Rhino's context YAML): parsing, errors with lines, counts, matching."""

import json
import random
import tracemalloc
from pathlib import Path

import pytest

from asr.grammar import MAX_BYTES, Grammar, GrammarError
from helpers import peak_memory

pytestmark = pytest.mark.tier("fast")

COFFEE = """\
context:
  expressions:
    orderDrink:
      - "(could you) [make, brew] me a $size:size $drink:drink (please)"
      - "@polite $drink:drink"
    setTimer:
      - "set (a) timer for $pv.TwoDigitInteger:minutes [minute, minutes]"
  slots:
    size: [small, medium, large]
    drink: [latte, "flat white", Espresso]
  macros:
    polite: ["i would like a", "can i have a"]
"""


def test_choices_optionals_slots_and_macros_expand_exactly() -> None:
    grammar = Grammar.from_yaml(COFFEE)
    assert grammar.intents == ["orderDrink", "setTimer"]
    assert grammar.count("orderDrink") == 2 * 2 * 3 * 3 * 2 + 2 * 3
    assert grammar.count("setTimer") == 2 * 100 * 2
    drinks = grammar.sentences("orderDrink", 1000, random.Random(0))
    texts = {s.text: s for s in drinks}
    assert len(texts) == 78
    assert texts["could you brew me a large flat white please"].slots == {
        "size": "large", "drink": "flat white"}
    assert texts["can i have a espresso"].slots == {"drink": "Espresso"}  # as written
    assert texts["make me a small latte"].core and not texts["make me a small latte please"].core
    timers = {s.text: s for s in grammar.sentences("setTimer", 1000, random.Random(0))}
    assert timers["set a timer for twenty five minutes"].slots == {"minutes": "25"}


def test_large_intents_are_sampled_deterministically() -> None:
    grammar = Grammar.from_yaml(COFFEE)
    first = grammar.sentences("setTimer", 50, random.Random(1))
    assert first == grammar.sentences("setTimer", 50, random.Random(1))
    assert 30 < len(first) <= 50 and all(s.intent == "setTimer" for s in first)


@pytest.mark.parametrize(("heard", "intent", "slots", "similarity"), [
    ("Could you make me a medium latte, please?", "orderDrink",
     {"size": "medium", "drink": "latte"}, 1.0),
    ("brew me a larg flat white", "orderDrink", {"size": "large", "drink": "flat white"}, 0.981),
    ("set timer for 7 minutes", "setTimer", {"minutes": "7"}, 1.0),
    ("i would like a espresso", "orderDrink", {"drink": "Espresso"}, 1.0),
])
def test_match_finds_the_sentence_and_its_slots(heard, intent, slots, similarity) -> None:
    match = Grammar.from_yaml(COFFEE).match(heard)
    assert (match.intent, match.slots) == (intent, slots)
    assert match.similarity == pytest.approx(similarity, abs=0.01)


def test_match_scores_what_is_not_in_the_grammar_low() -> None:
    grammar = Grammar.from_yaml(COFFEE)
    assert grammar.match("") is None
    assert grammar.match("what is the weather like in paris today").similarity < 0.4
    assert grammar.match("make me a sandwich").similarity < 0.85


@pytest.mark.parametrize(("text", "line", "problem"), [
    ("context:\n  expressions:\n    a:\n      - make $drink:drink\n", 4, "unknown slot type 'drink'"),
    ("context:\n  expressions:\n    a:\n      - '[make, brew me'\n", 4, "unclosed ["),
    ("context:\n  expressions:\n    a:\n      - 'make (me'\n", 4, "unclosed ("),
    ("context:\n  expressions:\n    a:\n      - ok\n      - 'make me)'\n", 5, "unmatched ')'"),
    ("context:\n  expressions:\n    a:\n      - '[make, ] me'\n", 4, "empty choice"),
    ("context:\n  expressions:\n    a:\n      - ' '\n", 4, "non-empty string"),
    ("context:\n  expressions:\n    a:\n      - '!?'\n", 4, "not a word"),
    ("context:\n  expressions:\n    a:\n      - make @nice\n", 4, "unknown macro '@nice'"),
    ("context:\n  expressions:\n    a:\n      - make $:x\n", 4, "bad slot"),
    ("context:\n  expressions:\n    a:\n      - $s:x $s:x\n  slots:\n    s: [b]\n", 4,
     "slot name 'x' used twice"),
    ("context:\n  expressions:\n    a: []\n", 3, "non-empty list"),
    ("context:\n  expressions:\n    a:\n      - a\n  slots:\n    s: [b, B]\n", 6, "twice"),
    ("context:\n  expressions: {}\n", 2, "no expressions"),
    ("context:\n  intents: {}\n", 2, "unknown section 'intents'"),
    ("expressions: {}\n", 1, "no 'context:' mapping"),
    ("context:\n  expressions:\n    a: [x\n", 4, "not valid YAML"),
    ("a: &x [1]\nb: *x\n", 2, "aliases are not allowed"),
])
def test_errors_name_the_file_the_line_and_the_problem(tmp_path: Path, text, line, problem) -> None:
    path = tmp_path / "bad.yaml"
    path.write_text(text)
    with pytest.raises(GrammarError) as caught:
        Grammar.load(path)
    message = str(caught.value)
    assert message.startswith(f"{path}:{line}: ") and problem in message
    assert "\n" not in message


def test_unreadable_huge_and_binary_files_are_one_line_errors(tmp_path: Path) -> None:
    big = tmp_path / "big.yaml"
    big.write_bytes(b"#" * (MAX_BYTES + 1))
    binary = tmp_path / "bin.yaml"
    binary.write_bytes(b"\xff\xfe\x00")
    empty = tmp_path / "empty"  # a folder is Home Assistant's custom_sentences (asr.grammar.hassil)
    empty.mkdir()
    for path, problem in ((tmp_path / "missing.yaml", "cannot read"), (big, "larger than"),
                          (binary, "not UTF-8"), (empty, r"no \*.yaml sentence files")):
        with pytest.raises(GrammarError, match=problem):
            Grammar.load(path)


def test_a_billion_laughs_is_refused_before_expansion() -> None:
    laughs = "a: &a [x, x, x, x, x, x, x, x, x]\n" + "".join(
        f"{chr(98 + i)}: &{chr(98 + i)} [*{chr(97 + i)}, *{chr(97 + i)}, *{chr(97 + i)}]\n"
        for i in range(12))
    with pytest.raises(GrammarError, match="aliases are not allowed"):
        Grammar.from_yaml(laughs + "context: *m\n")


# ---------------------------------------------------------------------------- hostile grammars


def one_intent(expression: str, slots: str = "", macros: str = "") -> str:
    """A grammar of one expression (line 4), with slot and macro sections as given."""
    return (f"context:\n  expressions:\n    a:\n      - {json.dumps(expression)}\n"
            + (f"  slots:\n{slots}" if slots else "") + (f"  macros:\n{macros}" if macros else ""))


def refused(tmp_path: Path, text: str, problem: str) -> str:
    """Grammar.load(text) raises one GrammarError line naming the file, without building
    anything large (its Python memory stays under 64 MB)."""
    path = tmp_path / "g.yaml"
    path.write_text(text)
    tracemalloc.start()
    try:
        with pytest.raises(GrammarError) as caught:
            Grammar.load(path)
    finally:
        peak = tracemalloc.get_traced_memory()[1]
        tracemalloc.stop()
    message = str(caught.value)
    assert message.startswith(f"{path}:") and problem in message and "\n" not in message
    assert len(message) < 400
    assert peak < 64 << 20, f"{peak >> 20} MB"
    return message


@pytest.mark.parametrize(("phrases", "uses", "problem"), [
    (3000, 3000, "has sentences of 3000 words"),  # 32 KB: once 3.2 GB and a MemoryError
    (3000, 60, "would need 540001 arcs, more than 200000"),
    (20000, 6, "arcs, more than 200000"),
    (1000, 99, "arcs, more than 200000"),
])
def test_a_long_macro_used_many_times_is_refused_before_it_is_built(tmp_path, phrases, uses,
                                                                     problem):
    macro = "    m: [" + ", ".join(f"w{i}" for i in range(phrases)) + "]\n"
    refused(tmp_path, one_intent(" ".join(["@m"] * uses), macros=macro), problem)


def test_a_grammar_near_the_bounds_loads_and_parses_at_once(tmp_path):
    """A 3000-phrase macro used 20 times (180,000 arcs) and a 20,000-value slot used 90 times
    (slots share one trie): both load, parse and search in bounded memory (44 and 9 MB of
    Python memory at their peaks)."""
    macro = "    m: [" + ", ".join(f"w{i}" for i in range(3000)) + "]\n"
    grammar, peak = peak_memory(lambda: Grammar.from_yaml(one_intent(" ".join(["@m"] * 20),
                                                                     macros=macro)))
    assert grammar.automaton.arcs == 180_001 and peak < 64 << 20, f"{peak >> 20} MB"
    assert grammar.parse(" ".join(f"w{i}" for i in range(20))).intent == "a"
    values = "    s: [" + ", ".join(f"v{i}" for i in range(20000)) + "]\n"
    slotted, peak = peak_memory(lambda: Grammar.from_yaml(
        one_intent(" ".join(f"$s:x{i}" for i in range(90)), values)))
    assert slotted.automaton.arcs == 91 and peak < 16 << 20, f"{peak >> 20} MB"
    assert slotted.parse(" ".join(["v7"] * 90)).values["x89"] == "v7"


@pytest.mark.parametrize(("expression", "problem"), [
    ("[" * 500 + "a" + "]" * 500, "brackets nested deeper than 16 levels"),
    ("(" * 330 + "a" + ")" * 330, "brackets nested deeper than 16 levels"),
    ("[(" * 9 + "a" + ")]" * 9, "brackets nested deeper than 16 levels"),
    ("set " + "9" * 5000, "has sentences of 5001 words"),  # beyond Python's int() limit
    ("go " + "(w) " * 2000, "has sentences of 2001 words"),
    ("(w) " * 2000, "every part of"),
    ("(please) [(could you), (hey)]", "every part of"),
])
def test_deep_long_and_silent_expressions_are_refused(tmp_path, expression, problem):
    refused(tmp_path, one_intent(expression), problem)


def test_nesting_to_the_bound_and_numbers_of_any_length_read(tmp_path):
    grammar = Grammar.from_yaml(one_intent("[" * 16 + "go" + "]" * 16 + " 1234567890123456789"))
    assert grammar.parse("go one two three four five six seven eight nine zero one two three "
                         "four five six seven eight nine").intent == "a"
    macro = "    m: [" + json.dumps("(" * 16 + "please" + ")" * 16 + " now") + "]\n"
    assert Grammar.from_yaml(one_intent("(" * 15 + "go" + ")" * 15 + " @m", macros=macro)
                             ).parse("go please now").intent == "a"


@pytest.mark.parametrize(("expression", "slots", "macros", "problem"), [
    ("@m and $s:x", "    s: [b, c]\n", "    m: [\"$s:x\"]\n", "slot name 'x' used twice"),
    ("$s:x and @m", "    s: [b, c]\n", "    m: [\"$s:x\"]\n", "'x' used twice (once through '@m')"),
    ("@m and @m", "    s: [b, c]\n", "    m: [\"$s:x\", \"hi $s:x\"]\n",
     "'x' used twice (once through '@m')"),
    ("$s:x @m", "    s: [b, c]\n", "    m: [\"well\", \"[$s:x, $s:y]\"]\n", "used twice"),
    ("go $s:x", "    s: [\"b\\n  action: Opened\"]\n", "", "control character or line break"),
    ("go $s:x", "    s: [\"b\\u2028c\"]\n", "", "control character or line break"),
    ("go $s:x", "    s: [" + json.dumps("9" * 5000) + "]\n", "", "a value of 5000 words"),
])
def test_slots_through_macros_and_bad_slot_values_are_refused(tmp_path, expression, slots,
                                                              macros, problem):
    refused(tmp_path, one_intent(expression, slots, macros), problem)


def test_a_slot_in_a_macro_used_once_keeps_its_value():
    grammar = Grammar.from_yaml(one_intent("@m and $s:y", "    s: [b, c]\n",
                                           "    m: [\"$s:x\", \"hi $s:x\"]\n"))
    assert grammar.parse("hi b and c").values == {"x": "b", "y": "c"}


def test_errors_quote_a_long_expression_short(tmp_path):
    message = refused(tmp_path, one_intent("go " * 3000 + "$nope:x"), "unknown slot type")
    assert message.endswith("...'")


def test_the_free_search_refuses_a_grammar_too_large_to_align_and_long_transcripts():
    values = "    s: [" + ", ".join(f"\"a{i} b{i} c{i}\"" for i in range(5000)) + "]\n"
    grammar = Grammar.from_yaml(one_intent("play $s:x", values), "songs.yaml")
    assert grammar.parse("play a7 b7 c7").values == {"x": "a7 b7 c7"}  # the grammar search: fine
    with pytest.raises(GrammarError, match=r"^songs.yaml: too large for the free search \("):
        grammar.match("play a7 b8 c7")
    small = Grammar.from_yaml(COFFEE)
    assert small.match("make me a latte " * 30) is None  # 120 words: no command is that long
    assert small.match("make me a large latte " * 20).similarity < 0.1


def test_sentences_of_a_long_expression_expand_without_recursion():
    grammar = Grammar.from_yaml(one_intent("go " + "[a, b] " * 99))
    drawn = grammar.sentences("a", 5, random.Random(0))
    assert all(len(s.text.split()) == 100 for s in drawn)
    few = Grammar.from_yaml(one_intent("go (a) (b) (c) " + "now " * 90))
    assert len(few.sentences("a", 100, random.Random(0))) == 8


def test_parsing_walks_only_the_expressions_the_words_reach(monkeypatch):
    """A grammar of 20,000 one-word expressions: the last one's sentence is read off one walk,
    not after 19,999 that lead nowhere."""
    grammar = Grammar.from_yaml("context:\n  expressions:\n    a: ["
                                + ", ".join(f"w{i}" for i in range(20000)) + "]\n")
    walks = []
    walk = grammar.automaton._walk
    monkeypatch.setattr(grammar.automaton, "_walk", lambda *a: walks.append(a) or walk(*a))
    assert grammar.parse("w19999").expression == 19999 and len(walks) == 1


@pytest.mark.parametrize(("expression", "slots", "macros", "character"), [
    ("open\u200bthe browser", "", "", "U+200B (ZERO WIDTH SPACE)"),
    ("open the bro\u200dwser", "", "", "U+200D (ZERO WIDTH JOINER)"),
    ("open the browser\u00ad", "", "", "U+00AD (SOFT HYPHEN)"),
    ("go \u202eresu\u202c", "", "", "U+202E (RIGHT-TO-LEFT OVERRIDE)"),
    ("go $s:x", "    s: [\"b\u2060c\"]\n", "", "U+2060 (WORD JOINER)"),
    ("go @m", "", "    m: [\"now\ufeff\"]\n", "U+FEFF (ZERO WIDTH NO-BREAK SPACE)"),
])
def test_grammar_text_with_an_invisible_format_character_is_refused(tmp_path, expression, slots,
                                                                    macros, character):
    """Every Unicode format character (Cf) hides whether it joins two words or breaks one:
    "open\\u200bthe browser" read as "openthe browser" matched "open the browser"."""
    message = refused(tmp_path, one_intent(expression, slots, macros),
                      f"the invisible character {character}")
    assert message.endswith("hides where its words break; write a space or nothing there")

"""Grammar files (Picovoice Rhino's context YAML): parsing, errors with lines, counts, matching."""

import random
from pathlib import Path

import pytest

from asr.grammar import MAX_BYTES, Grammar, GrammarError

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
    for path, problem in ((tmp_path / "missing.yaml", "cannot read"), (big, "larger than"),
                          (binary, "not UTF-8"), (tmp_path, "cannot read")):
        with pytest.raises(GrammarError, match=problem):
            Grammar.load(path)


def test_a_billion_laughs_is_refused_before_expansion() -> None:
    laughs = "a: &a [x, x, x, x, x, x, x, x, x]\n" + "".join(
        f"{chr(98 + i)}: &{chr(98 + i)} [*{chr(97 + i)}, *{chr(97 + i)}, *{chr(97 + i)}]\n"
        for i in range(12))
    with pytest.raises(GrammarError, match="aliases are not allowed"):
        Grammar.from_yaml(laughs + "context: *m\n")

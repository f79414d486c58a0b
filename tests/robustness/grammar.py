"""Cases: hostile grammar files (Rhino context YAML), loaded through the API, the intents
command line, the demo and a model directory's grammar.yaml: macros used until the graph would
need gigabytes, brackets nested hundreds deep, numbers past Python's int() limit, sentences of
thousands of words or of none, slots filled twice through macros, slot values that would forge
output lines. Each must be one GrammarError line naming the file, at once and in little memory;
grammars near the bounds must load and parse."""

import importlib
import json
import tracemalloc

from helpers import peak_memory
from robustness.case import DEMO, GRAMMAR, INTENTS, Cli, Work, case


def one_intent(expression: str, slots: str = "", macros: str = "") -> str:
    return (f"context:\n  expressions:\n    a:\n      - {json.dumps(expression)}\n"
            + (f"  slots:\n{slots}" if slots else "") + (f"  macros:\n{macros}" if macros else ""))


def _macro(phrases: list[str]) -> str:
    return "    m: [" + ", ".join(json.dumps(p) for p in phrases) + "]\n"


def _load(text: str):
    """Grammar.load of `text` from a file, within 256 MB of Python memory (the faults this
    corpus holds once took 3.2 GB): a MemoryError-free GrammarError, or the grammar."""
    def run(w: Work):
        grammar = importlib.import_module(GRAMMAR)
        tracemalloc.start()
        try:
            return grammar.Grammar.load(w.file("g.yaml", text))
        finally:
            peak = tracemalloc.get_traced_memory()[1]
            tracemalloc.stop()
            if peak > 256 << 20:
                raise AssertionError(f"loading took {peak >> 20} MB")  # a traceback: counted
    return run


MACROS = [  # (phrases, words each, uses): the graph copies a macro at every use
    (3000, 1, 3000), (3000, 1, 60), (20000, 1, 6), (1000, 1, 99), (700, 1, 100),
    (100000, 1, 2), (5000, 3, 20), (300, 1, 300)]
for phrases, words, uses in MACROS:
    text = one_intent(" ".join(["@m"] * uses), macros=_macro(
        [" ".join(f"w{i}x{k}" for k in range(words)) for i in range(phrases)]))
    case("api", f"grammar: a macro of {phrases} {words}-word phrases used {uses} times "
                f"({len(text) >> 10} KB)")(_load(text))
case("api", "grammar: 200 choices of 100 options each, inside one macro used 10 times")(
    _load(one_intent(" ".join(["@m"] * 10), macros=_macro(
        ["[" + ", ".join(f"c{i}o{j}" for j in range(100)) + "]" for i in range(200)]))))

NESTINGS = [("[", "]", 500), ("(", ")", 500), ("(", ")", 330), ("[(", ")]", 9), ("[", "]", 17),
            ("(", ")", 5000)]
for opening, closing, depth in NESTINGS:
    case("api", f"grammar: {opening}{closing} nested {depth} deep")(
        _load(one_intent(opening * depth + "a" + closing * depth)))
case("api", "grammar: brackets nested 17 deep inside a macro")(
    _load(one_intent("go @m", macros=_macro(["(" * 17 + "x" + ")" * 17]))))

NUMBERS = {"in an expression": one_intent("set " + "9" * 5000),
           "as a slot value": one_intent("set $s:x", "    s: [" + "7" * 5000 + "]\n"),
           "in a macro": one_intent("go @m", macros=_macro(["1" * 4301])),
           "as an ordinal": one_intent("the " + "1" * 5000 + "th"),
           "with thousands separators": one_intent("pay " + ",".join(["999"] * 1500))}
for where, text in NUMBERS.items():
    case("api", f"grammar: a 5000-digit number {where}")(_load(text))

LONG = {"101 words": one_intent(" ".join(["go"] * 101)),
        "a word and 2000 optional words": one_intent("go " + "(w) " * 2000),
        "only optional parts": one_intent("(please) [(could you), (hey)]"),
        "only optional parts, 2000 of them": one_intent("(w) " * 2000),
        "a slot value of 150 words": one_intent("go $s:x", "    s: [" + "a " * 150 + "]\n"),
        "a macro phrase of 150 words": one_intent("go @m", macros=_macro(["b " * 150]))}
for what, text in LONG.items():
    case("api", f"grammar: an expression with {what}")(_load(text))

REUSED = {"in the expression then the macro": ("$s:x and @m", ["$s:x"]),
          "in the macro then the expression": ("@m and $s:x", ["$s:x"]),
          "through a macro used twice": ("@m and @m", ["$s:x", "hi $s:x"]),
          "in one of the macro's choices": ("$s:x @m", ["well", "[$s:x, $s:y]"])}
for how, (expression, phrases) in REUSED.items():
    case("api", f"grammar: a slot name reused {how}")(
        _load(one_intent(expression, "    s: [b, c]\n", _macro(phrases))))

CONTROLS = {"a newline": "b\n  action: Opened the browser", "a carriage return": "b\rc",
            "an escape": "b\x1b[2Jc", "a line separator": "b\u2028c", "a NEL": "b\x85c",
            "a NUL": "b\x00c"}
for what, value in CONTROLS.items():
    case("api", f"grammar: a slot value with {what}")(
        _load(one_intent("go $s:x", f"    s: [{json.dumps(value)}]\n")))
case("api", "grammar: an intent name of 100,000 letters")(
    _load("context:\n  expressions:\n    " + "a" * 100000 + ": [go]\n"))
case("api", "grammar: 3000 words then an unknown slot type (a short error)")(
    _load(one_intent("go " * 3000 + "$nope:x")))


def _near_the_bounds(w: Work) -> bool:
    """A 3000-phrase macro used 20 times (180,001 arcs) and a 20,000-value slot used 90 times
    load and parse in bounded memory (`_load`'s bound; the slot's values in one trie of 91
    arcs, under 16 MB of Python memory held)."""
    grammar = importlib.import_module(GRAMMAR)
    big = _load(one_intent(" ".join(["@m"] * 20), macros=_macro([f"w{i}" for i in range(3000)])))(w)
    slotted, peak = peak_memory(lambda: grammar.Grammar.from_yaml(one_intent(
        " ".join(f"$s:x{i}" for i in range(90)), "    s: [" + ", ".join(
            f"v{i}" for i in range(20000)) + "]\n")))
    return (big.parse(" ".join(f"w{i}" for i in range(20))).intent == "a"
            and slotted.automaton.arcs == 91 and peak < 16 << 20
            and slotted.parse(" ".join(["v7"] * 90)).values["x89"] == "v7")


def _sixteen_deep(w: Work) -> bool:
    """16 deep in an expression and 16 in the macro it uses (each within its bound), and a
    number past the billions, read digit by digit."""
    grammar = _load(one_intent("[" * 16 + "go @m" + "]" * 16 + " 1234567890123456789",
                               macros=_macro(["[" * 16 + "x" + "]" * 16])))(w)
    return grammar.parse("go x one two three four five six seven eight nine zero one two three "
                         "four five six seven eight nine").intent == "a"


case("api", "grammar: near the bounds, loads and parses", "ok", limit=20)(_near_the_bounds)
case("api", "grammar: 16 deep, through a macro 16 deep, and a 19-digit number", "ok")(
    _sixteen_deep)
case("api", "grammar: a macro of 500 phrases used 100 times (150,001 arcs), loads", "ok")(
    lambda w: _load(one_intent(" ".join(["@m"] * 100), macros=_macro(
        [f"w{i}" for i in range(500)])))(w).automaton.arcs == 150_001)


# ---------------------------------------------------------------------------- through the CLIs

HOSTILE = {"nested 500 deep": one_intent("[" * 500 + "a" + "]" * 500),
           "a macro of 3000 used 3000 times": one_intent(" ".join(["@m"] * 3000), macros=_macro(
               [f"w{i}" for i in range(3000)])),
           "a 5000-digit number": one_intent("set " + "9" * 5000),
           "2000 optional words": one_intent("go " + "(w) " * 2000)}
for what, text in HOSTILE.items():
    case("cli", f"asr.assistant.intents --grammar with {what}")(
        lambda w, text=text: Cli(f"{INTENTS}:main", [
            "--model", str(w.model), "--grammar", str(w.file("g.yaml", text)), str(w.clip)]))
    case("cli", f"asr.assistant.intents, a model whose grammar.yaml has {what}")(
        lambda w, text=text: ((w.model / "grammar.yaml").write_text(text),
                              Cli(f"{INTENTS}:main", ["--model", str(w.model), str(w.clip)]))[1])
    case("demo", f"asr-demo grammar= with {what}")(
        lambda w, text=text: Cli(f"{DEMO}:main", [
            "--input", str(w.clip), f"model_dir={w.model}", f"actions.home={w.folder}",
            f"grammar={w.file('g.yaml', text)}"]))
case("demo", "asr-demo, a model whose grammar.yaml nests 330 deep")(
    lambda w: ((w.model / "grammar.yaml").write_text(one_intent("(" * 330 + "a" + ")" * 330)),
               Cli(f"{DEMO}:main", ["--input", str(w.clip), f"model_dir={w.model}",
                                    f"actions.home={w.folder}"]))[1])
case("cli", "asr.assistant.intents --search free, a grammar too large to align against")(
    lambda w: Cli(f"{INTENTS}:main", [
        "--model", str(w.model), "--search", "free", "--grammar", str(w.file("g.yaml", one_intent(
            "play $s:x", "    s: [" + ", ".join(f"\"a{i} b{i}\"" for i in range(5000)) + "]\n"))),
        str(w.clip)]))

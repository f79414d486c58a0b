"""Cases: the voice assistant's command lines (intents, demo), intents manifests, the demo's
time (questions and timers on file and stdin input), grammars of one's own that reach the
actions with other slots and values, and home folders with odd file names, looping links and
huge logs."""

import importlib
import json
import shutil
from collections.abc import Callable

from helpers import peak_memory
from robustness.case import ACTIONS, BOMB, DEMO, GRAMMAR, INTENTS, Cli, Work, case
from robustness.cli import manifest_of_clip, one_record_per_file


def _intents(w: Work, *extra: str) -> Cli:
    return Cli(f"{INTENTS}:main", ["--model", str(w.model), *extra, str(w.clip)])


def _intents_evaluate(w: Work, manifest: str, *extra: str) -> Cli:
    return Cli(f"{INTENTS}:main", ["evaluate", "--model", str(w.model), "--manifest", manifest,
                                   *extra])


for option, value in [("--threshold", "2"), ("--threshold", "nan"), ("--min-confidence", "-1"),
                      ("--grammar", "/dev/zero"), ("--device", "foo")]:
    case("cli", f"asr.assistant.intents {option} {value}")(
        lambda w, option=option, value=value: _intents(w, option, value))
case("cli", "asr.assistant.intents --grammar FIFO")(lambda w: _intents(w, "--grammar", str(w.fifo())))
case("cli", "asr.assistant.intents --grammar with a billion laughs")(
    lambda w: _intents(w, "--grammar", str(w.file("g.yaml", BOMB + "context: *a11\n"))))
case("cli", "asr.assistant.intents no grammar in the model directory")(
    lambda w: ((w.model / "grammar.yaml").unlink(), _intents(w))[1])
case("cli", "asr.assistant.intents evaluate --manifest /dev/zero")(
    lambda w: _intents_evaluate(w, "/dev/zero"))
case("cli", "asr.assistant.intents evaluate --json into a directory")(
    lambda w: _intents_evaluate(w, str(manifest_of_clip(w, intent=None)), "--json", str(w.folder)))


def _intents_odd_name(w: Work) -> Cli:
    name = str(w.folder / "a\tb.wav")
    shutil.copy(w.clip, name)
    return Cli(f"{INTENTS}:main", ["--model", str(w.model), name], one_record_per_file([name], 4))


case("output", "asr.assistant.intents a file name with a tab", "ok")(_intents_odd_name)


def _demo(w: Work, *overrides: str, source: str | None = None) -> Cli:
    return Cli(f"{DEMO}:main", ["--input", source or str(w.clip), f"model_dir={w.model}",
                                f"actions.home={w.folder}", *overrides])


for override in ["vad.aggressiveness=9", "block_ms=0", "block_ms=-30", "sample_rate=0",
                 "sample_rate=12345", "intents.threshold=5", "actions.page_size=0",
                 "actions.confirm_seconds=nan", "device=foo", "grammar=/dev/zero",
                 "+actions.foo=1", "model_dir=123", "vad.start_frames=100",
                 "actions.max_scanned=0", "vad.max_utterance_s=1e9", "actions.enabled=[shell]",
                 "vad.frame_ms=15", "intents.min_confidence=abc"]:
    case("demo", f"asr-demo {override}")(lambda w, override=override: _demo(w, override))
case("demo", "asr-demo --input /dev/zero")(lambda w: _demo(w, source="/dev/zero"))
case("demo", "asr-demo model_dir with a billion laughs")(
    lambda w: ((w.model / "config.yaml").write_text((w.model / "config.yaml").read_text() + BOMB),
               _demo(w))[1])


def _listing_huge_home(w: Work) -> object:
    """'show me my documents' in a home of 60,000 files answers at once: a partial listing,
    cut after the first max_scanned entries (20,000)."""
    actions = importlib.import_module(ACTIONS)
    home = w.folder / "home"
    for d in range(100):
        folder = home / f"d{d}"
        folder.mkdir(parents=True)
        for f in range(600):
            (folder / f"{f}.txt").touch()
    assistant = actions.Assistant(actions.ActionsConfig(home=str(home)))
    answer = assistant.act("show_files", {"kind": "documents"})
    return "among the first 20000 entries" in answer


case("api", "a listing of a home of 60,000 files", "ok", limit=120)(_listing_huge_home)


# ---------------------------------------------------------------------------- intents manifests

for what, fields in {"slots []": {"intent": "word", "slots": []},
                     "slots false": {"intent": "word", "slots": False},
                     "slots 0": {"intent": "word", "slots": 0},
                     "slots null": {"intent": "word", "slots": None},
                     "slots \"\"": {"intent": "word", "slots": ""},
                     "slots a list of pairs": {"intent": "word", "slots": [["word", "yes"]]},
                     "a slot value that is a number": {"intent": "word", "slots": {"word": 1}},
                     "a non-command with slots": {"intent": None, "slots": {"word": "yes"}},
                     "a lone surrogate as the intent": {"intent": "\ud800"},
                     "a lone surrogate in a slot value": {"intent": "word",
                                                          "slots": {"word": "yes\udfff"}},
                     "a lone surrogate as a slot name": {"intent": "word",
                                                         "slots": {"\udc00": "yes"}}}.items():
    case("cli", f"asr.assistant.intents evaluate, a manifest row with {what}")(
        lambda w, fields=fields: _intents_evaluate(w, str(manifest_of_clip(w, **fields))))
case("cli", "asr.assistant.intents evaluate, a lone surrogate in the audio path")(
    lambda w: _intents_evaluate(w, str(w.file("m.jsonl", json.dumps(
        {"audio_filepath": "a\ud800.wav", "intent": "word", "slots": {"word": "yes"}}) + "\n"))))


def _report_of_odd_intents(w: Work) -> Cli:
    """Intent names with a newline and a tab: the report keeps one line per intent (and per
    confusion, after them)."""
    manifest = w.file("m.jsonl", "".join(json.dumps(
        {"audio_filepath": str(w.clip), "intent": name}) + "\n" for name in (
            "x\n  word  100.00%  (9)", "y\tz", "word")))

    def check(status: int, out: str, err: str) -> bool:
        lines = out.split("most often heard wrong")[0].splitlines()
        return status == 0 and len(lines) == 4 and "x\\n  word" in out and "y\\tz" in out \
            and "\t" not in out
    return Cli(f"{INTENTS}:main", ["evaluate", "--model", str(w.model), "--manifest",
                                   str(manifest)], check)


case("output", "asr.assistant.intents evaluate, intent names with a newline and a tab", "ok")(
    _report_of_odd_intents)


def _help(command: list[str]) -> Cli:
    """--help: exit 0, and every option of the help has a description."""
    def check(status: int, out: str, err: str) -> bool:
        cli = importlib.import_module(INTENTS + ".cli")
        parser = cli.argument_parser(command[0] if command else None)
        return status == 0 and out.startswith("usage: ") and all(
            action.help for action in parser._actions)
    return Cli(f"{INTENTS}:main", [*command, "--help"], check)


for command in ([], ["recognize"], ["evaluate"], ["calibrate"]):
    case("output", f"asr.assistant.intents {' '.join(command)} --help: help for every option",
         "ok")(lambda w, command=command: _help(command))


# ---------------------------------------------------------------------------- the demo's time


def _confirm(gap: float, stdin: bool, expired: bool) -> Callable[[Work], bool]:
    """"open the browser", then "yes" `gap` seconds of audio later, read faster than real time:
    launched only within actions.confirm_seconds (8) of stream time."""
    def run(w: Work) -> bool:
        from scripted_demo import actions_of, run_demo
        lines, assistant = run_demo(["open the browser", "yes"], [0.5, gap], w.folder,
                                    stdin=stdin, launch=True, apps={"browser": ["true"]})
        answer = actions_of(lines)[1]
        for process in assistant.launched.values():
            process.wait(timeout=10)
        if expired:
            return answer.startswith("The question has expired") and not assistant.launched
        return answer.startswith("Opened the browser (pid ")
    return run


for gap in (10, 60, 250):
    for stdin in (False, True):
        case("api", f"asr-demo: yes {gap} s of audio after the question, from "
                    f"{'stdin' if stdin else 'a file'}", "ok", limit=30)(_confirm(gap, stdin, True))
case("api", "asr-demo: yes 3 s of audio after the question, from a file", "ok")(
    _confirm(3, False, False))
case("api", "asr-demo: yes 8.5 s of audio after the question, from stdin", "ok")(
    _confirm(8.5, True, True))


def _timers_in_stream_time(w: Work) -> bool:
    from scripted_demo import run_demo
    lines, _ = run_demo(["set a timer for five seconds", "what time is it", "what time is it"],
                        [0.5, 1, 5], w.folder)
    rung = lines.index("** Time is up: the timer for five seconds has run out.")
    heard = [i for i, line in enumerate(lines) if "heard:" in line]
    return heard[1] < rung < heard[2]


case("api", "asr-demo: a timer rings where the stream reaches it, not on the wall clock", "ok")(
    _timers_in_stream_time)


# ---------------------------------------------------------------------------- a grammar of one's own

OWN_GRAMMAR = """context:
  expressions:
    timer: ["set a timer for $pv.TwoDigitInteger:amount $units:unit", "wait $pv.SingleDigitInteger:amount"]
    digit: ["pick $pv.SingleDigitInteger:digit"]
    show_files: ["show me my $kinds:kind from the $pv.TwoDigitOrdinal:day"]
    orderDrink: ["a $size:size latte"]
    switch: ["switch $pv.SingleDigitOrdinal:state the fan"]
  slots:
    units: [seconds, minutes, hours, days]
    kinds: [photos, spreadsheets]
    size: [small, large]
"""


def _own_grammar(script: list[str], expected: str) -> Callable[[Work], bool]:
    def run(w: Work) -> bool:
        from scripted_demo import actions_of, run_demo
        grammar = importlib.import_module(GRAMMAR).Grammar.from_yaml(OWN_GRAMMAR)
        lines, _ = run_demo(script, [0.5] * len(script), w.folder, grammar)
        return actions_of(lines)[-1] == expected
    return run


for said, expected in {
        "set a timer for twenty five minutes": "Timer set for 25 minutes: it rings in 0:25:00.",
        "set a timer for sixty hours": "Timer set for 60 hours: it rings in 2 days, 12:00:00.",
        "set a timer for ninety nine days": (
            "Timers count seconds, minutes or hours, not 'days'; no timer set."),
        "wait five": "The timer action takes amount, unit (got amount); nothing done.",
        "pick seven": "Heard 7; nothing on screen to pick.",
        "show me my spreadsheets from the third": (
            "The show_files action takes kind (got kind, day); nothing done."),
        "a large latte": "No action called 'orderDrink'; nothing done.",
        "switch first the fan": "The switch action takes state, device (got state); nothing done.",
}.items():
    case("api", f"asr-demo with a grammar of one's own: \"{said}\"", "ok")(
        _own_grammar([said], expected))


def _act(intent: str, slots: dict, expected: str) -> Callable[[Work], bool]:
    """The assistant answers an intent with odd slots in one line (no exception)."""
    def run(w: Work) -> bool:
        actions = importlib.import_module(ACTIONS)
        assistant = actions.Assistant(actions.ActionsConfig(home=str(w.folder)))
        return assistant.act(intent, slots) == expected
    return run


for intent, slots, expected in [
        ("timer", {"amount": "sixty", "unit": "fortnights"},
         "Timers count seconds, minutes or hours, not 'fortnights'; no timer set."),
        ("timer", {"amount": "9" * 5000, "unit": "seconds"},
         "Cannot count '" + "9" * 5000 + "' (a number up to ninety nine, or digits); no timer set."),
        ("timer", {"amount": "999999", "unit": "hours"},
         "999999 hours is longer than a week; no timer set."),
        ("digit", {"digit": "٧"}, "Heard '٧', which is no digit; nothing picked."),
        ("volume", {"direction": "sideways"},
         "Turn the volume 'sideways'? Only up or down; nothing done."),
        ("switch", {"state": "on", "device": "__class__"},
         "There is no '__class__' to switch (only the lights, radio, wifi); nothing done."),
        ("music", {"action": "rewind"},
         "The player cannot 'rewind' (only play, pause, stop); nothing done."),
        ("scroll", {"direction": "diagonally"},
         "Cannot scroll 'diagonally' (up, down, left or right); nothing done."),
        ("check_status", {"thing": "printer"},
         "I cannot check the 'printer' (only the battery or the program); nothing done."),
        ("find_files", {"kind": "photos", "when": "from last month"},
         "I cannot tell which files are 'from last month' (only from today, from yesterday, "
         "from last week); nothing shown."),
        ("show_files", {"kind": "../../etc"}, "I know no kind of file called '../../etc' (only "
         "files, directories, downloads, photos, documents, music, videos); nothing shown."),
        ("date", {"day": "monday"}, "The date action takes no slots (got day); nothing done."),
        ("go_back", {"self": "x"}, "The go_back action takes no slots (got self); nothing done."),
        ("word", {"word": "yes", "extra": "1"},
         "The word action takes word (got word, extra); nothing done."),
        ("__init__", {}, "No action called '__init__'; nothing done.")]:
    case("api", f"actions: {intent} with {slots!r:.60}", "ok")(_act(intent, slots, expected))


# ---------------------------------------------------------------------------- the home folder


def _listing_of(name: bytes) -> Callable[[Work], bool]:
    """"show me my photos" in a home holding a file named `name`: five lines, the name escaped
    on the action's line."""
    def run(w: Work) -> bool:
        from scripted_demo import run_demo
        home = w.folder / "home"
        home.mkdir()
        with open(bytes(home) + b"/" + name + b".jpg", "wb") as f:
            f.write(b"x")
        lines, _ = run_demo(["show me my photos"], [0.5], w.folder, home=str(home))
        return len(lines) == 5 and [line[:10] for line in lines[1:]] == [
            '  match: "', "  intent: ", "  action: ", "  latency:"] and "1 photo" in lines[3]
    return run


for what, name in {"a newline and a forged action line": b"a\n  action: Opened the browser",
                   "a carriage return": b"a\rb", "a terminal escape": b"a\x1b[2Kb",
                   "a line separator": "a\u2028b".encode(), "bytes that are not UTF-8": b"caf\xe9",
                   "a NEL": "a\x85b".encode()}.items():
    case("output", f"asr-demo lists a file name with {what}", "ok")(_listing_of(name))


def _looping_link(link: str, intent: str, slots: dict) -> Callable[[Work], bool]:
    def run(w: Work) -> bool:
        actions = importlib.import_module(ACTIONS)
        home = w.folder / "home"
        home.mkdir()
        (home / link).symlink_to(link)
        assistant = actions.Assistant(actions.ActionsConfig(home=str(home)))
        return assistant.act(intent, slots).endswith("); refused")
    return run


case("api", "actions: Downloads is a link to itself", "ok")(
    _looping_link("Downloads", "show_files", {"kind": "downloads"}))
case("api", "actions: program.log is a link to itself", "ok")(
    _looping_link("program.log", "check_log", {"thing": "program"}))
case("api", "actions: the home folder is a link to itself")(
    lambda w: (w.folder.joinpath("h").symlink_to(w.folder / "h"), importlib.import_module(
        ACTIONS).Assistant(importlib.import_module(ACTIONS).ActionsConfig(
            home=str(w.folder / "h"))))[1])


def _huge_log(w: Work) -> bool:
    """A program log of one 256 MB line (sparse), then a last one: read from its end (under
    1 MB of Python memory held)."""
    actions = importlib.import_module(ACTIONS)
    with (w.folder / "program.log").open("wb") as log:
        log.truncate(256 << 20)
        log.seek(0, 2)
        log.write(b"\ndone\n")
    assistant = actions.Assistant(actions.ActionsConfig(home=str(w.folder)))
    answer, peak = peak_memory(lambda: assistant.act("check_log", {"thing": "program"}))
    return answer.endswith("ends with: done") and peak < 1 << 20


case("api", "actions: a program log of one 256 MB line", "ok")(_huge_log)

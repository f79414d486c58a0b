"""Cases: the voice assistant's command lines (intents, demo) and a listing of a huge home."""

import importlib
import shutil
import time

from fuzz.case import ACTIONS, BOMB, DEMO, INTENTS, Cli, Work, case
from fuzz.cli import manifest_of_clip, one_record_per_file


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
    """'show me my documents' in a home of 60,000 files answers at once (a partial listing)."""
    actions = importlib.import_module(ACTIONS)
    home = w.folder / "home"
    for d in range(100):
        folder = home / f"d{d}"
        folder.mkdir(parents=True)
        for f in range(600):
            (folder / f"{f}.txt").touch()
    started = time.perf_counter()
    assistant = actions.Assistant(actions.ActionsConfig(home=str(home)))
    answer = assistant.act("show_files", {"kind": "documents"})
    return "among the first" in answer and time.perf_counter() - started < 5


case("api", "a listing of a home of 60,000 files", "ok", limit=120)(_listing_huge_home)

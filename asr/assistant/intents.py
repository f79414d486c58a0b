"""Speech -> intent: which command of a grammar an utterance means, and how surely.

    python -m asr.assistant.intents --model exp/voice_commands command.wav ...        # intent and slots
    python -m asr.assistant.intents --model DIR --json a.wav b.flac                  # one JSON per file
    python -m asr.assistant.intents evaluate --model DIR --manifest commands.jsonl   # acceptance rate

The model transcribes; the transcript is matched to the grammar (`asr.assistant.grammar`: a Rhino
context file, by default the model directory's `grammar.yaml`) by word edit distance, so a
small recognition error ("show me my fotos") still lands on its command. Two numbers decide
whether the utterance is understood: the similarity of the transcript to the nearest grammar
sentence (`threshold`), and the acoustic confidence of the transcript (`min_confidence`:
`asr.decoding.confidence`, how well the audio supports it). Speech that is no command is
refused by either: a model trained to say nothing for other speech says nothing or something
far from the grammar, and when it does produce a command sentence, the audio supports it
poorly. Slot values always come from the grammar, never from the transcript.

`evaluate` prints the command acceptance rate (Picovoice's metric): the share of utterances
whose intent and every slot value are right, a non-command (manifest `intent` null) counting
as right when it is refused; with a breakdown per intent.
"""

import argparse
import json
import sys
from collections import defaultdict
from dataclasses import asdict, dataclass, field
from pathlib import Path

from asr.assistant.grammar import Grammar, GrammarError
from asr.audio import AudioError, load_audio
from asr.checkpoint import ModelDirError
from asr.cli import ArgumentParser, print_error, save_report, tsv_field
from asr.data import ManifestError, audio_path
from asr.progress import progress
from asr.text import normalize_text
from asr.transcriber import Transcriber
from asr.untrusted import UntrustedInputError, check_fields, check_ranges, read_text

GRAMMAR_FILE = "grammar.yaml"  # the grammar a model directory was trained for
MAX_MANIFEST_BYTES = 256 << 20


@dataclass(frozen=True)
class Intent:
    """What an utterance asks for: the intent and slots, or None when it is refused."""

    name: str | None
    slots: dict[str, str] = field(default_factory=dict)
    confidence: float = 0.0  # similarity x acoustic confidence
    text: str = ""  # the transcript, normalised
    command: str = ""  # the grammar sentence it came closest to
    similarity: float = 0.0  # of the transcript to that sentence (1: it is one)
    acoustic: float | None = None  # how well the audio supports the transcript (None: text only)

    @property
    def understood(self) -> bool:
        return self.name is not None

    def describe(self) -> str:
        """`show_files kind=photos`: the intent and slots on one line."""
        slots = " ".join(f"{key}={value}" for key, value in self.slots.items())
        return " ".join(part for part in (self.name or "(none)", slots) if part)


@dataclass(frozen=True)
class IntentParser:
    """Transcript (and its acoustic confidence) -> Intent, for one grammar."""

    grammar: Grammar
    threshold: float = 0.85  # lowest similarity to a grammar sentence that counts
    min_confidence: float = 0.0  # lowest acoustic confidence that counts

    def __post_init__(self) -> None:
        check_fields(self, "intents")
        check_ranges(self, "intents", threshold=(0, 1), min_confidence=(0, 1))

    def parse(self, text: str, acoustic: float | None = None) -> Intent:
        heard = normalize_text(text)
        match = self.grammar.match(heard)
        if match is None:
            return Intent(None, text=heard, acoustic=acoustic)
        confidence = match.similarity * (1.0 if acoustic is None else acoustic)
        refused = match.similarity < self.threshold or (
            acoustic is not None and acoustic < self.min_confidence)
        return Intent(None if refused else match.intent, {} if refused else match.slots,
                      confidence, heard, match.sentence, match.similarity, acoustic)


def load_grammar(model_dir: str | Path, grammar: str | Path | None = None) -> Grammar:
    """The grammar file given, else the model directory's grammar.yaml."""
    path = Path(grammar) if grammar else Path(model_dir) / GRAMMAR_FILE
    if not grammar and not path.is_file():
        raise GrammarError(f"{model_dir}: no {GRAMMAR_FILE} in the model directory; name a "
                           "grammar file (--grammar FILE, or grammar=FILE in the demo)")
    return Grammar.load(path)


class IntentRecognizer:
    """A model and a grammar: audio in, Intent out.

        recognizer = IntentRecognizer.from_pretrained("exp/voice_commands")
        recognizer.recognize(["command.wav"])[0].describe()   # "timer amount=five unit=minutes"
    """

    def __init__(self, transcriber: Transcriber, parser: IntentParser) -> None:
        self.transcriber, self.parser = transcriber, parser

    @classmethod
    def from_pretrained(cls, model_dir: str | Path, grammar: str | Path | None = None,
                        device: str = "cpu", threshold: float = 0.85,
                        min_confidence: float = 0.0) -> "IntentRecognizer":
        parser = IntentParser(load_grammar(model_dir, grammar), threshold, min_confidence)
        return cls(Transcriber.from_pretrained(model_dir, device=device, vad=None), parser)

    def recognize(self, audio: list) -> list[Intent]:
        """Each input (a path, or a waveform at the model's rate) is one utterance."""
        rate = self.transcriber.sample_rate
        waves = [load_audio(a, rate) if isinstance(a, str | Path) else a for a in audio]
        return [self.parser.parse(text, sure)
                for text, sure in self.transcriber.transcribe_scored(waves)]


# ---------------------------------------------------------------------------- scoring


def is_right(intent: Intent, expected: str | None, slots: dict[str, str]) -> bool:
    """Intent and every slot value right; a non-command is right when refused."""
    if expected is None:
        return not intent.understood
    return intent.name == expected and intent.slots == slots


def acceptance(results: list[tuple[str | None, dict, Intent]]) -> dict:
    """Command acceptance overall, among commands, false acceptance among non-commands, and
    per intent."""
    per_intent: dict[str, list[bool]] = defaultdict(list)
    for expected, slots, intent in results:
        per_intent[expected or "(non-command)"].append(is_right(intent, expected, slots))
    commands = [ok for name, oks in per_intent.items() if name != "(non-command)" for ok in oks]
    others = per_intent.get("(non-command)", [])
    return {"utterances": len(results),
            "acceptance": _share(commands + others),
            "command_acceptance": _share(commands), "commands": len(commands),
            "false_acceptance": 1 - _share(others) if others else None,
            "non_commands": len(others),
            "per_intent": {name: {"n": len(oks), "acceptance": _share(oks)}
                           for name, oks in sorted(per_intent.items())}}


def _share(flags: list[bool]) -> float:
    return sum(flags) / len(flags) if flags else 0.0


def read_commands(manifest: str | Path) -> list[tuple[str, str | None, dict[str, str]]]:
    """(audio path, intent or None, slots) per line of a JSON-lines manifest whose rows have
    `audio_filepath` (relative to the manifest's folder), `intent` (null or absent: not a
    command) and `slots` (an object of strings)."""
    path, rows = Path(manifest), []
    try:
        lines = read_text(path, MAX_MANIFEST_BYTES, "the manifest").splitlines()
    except UntrustedInputError as err:
        raise ManifestError(str(err)) from None
    for number, line in enumerate(lines, start=1):
        if line.strip():
            try:
                rows.append(_command_row(line, path.parent))
            except (ManifestError, json.JSONDecodeError, RecursionError) as err:
                raise ManifestError(f"{path}:{number}: {err}") from None
    if not rows:
        raise ManifestError(f"{path}: no utterances")
    return rows


def _command_row(line: str, root: Path) -> tuple[str, str | None, dict[str, str]]:
    row = json.loads(line)
    if not isinstance(row, dict):
        raise ManifestError("expected a JSON object")
    intent, slots = row.get("intent"), row.get("slots") or {}
    if intent is not None and not isinstance(intent, str):
        raise ManifestError(f"intent must be a string or null, got {intent!r}")
    if not isinstance(slots, dict) or not all(isinstance(v, str) for v in slots.values()):
        raise ManifestError(f"slots must map names to strings, got {slots!r}")
    return audio_path(row.get("audio_filepath"), root), intent, slots


def evaluate(recognizer: IntentRecognizer, manifest: str | Path, batch: int = 32) -> dict:
    """Score every row of a manifest (`read_commands`)."""
    rows = read_commands(manifest)
    results: list[tuple[str | None, dict, Intent]] = []
    with progress(total=len(rows), desc="evaluating", unit="utt") as bar:
        for start in range(0, len(rows), batch):
            chunk = rows[start:start + batch]
            heard = recognizer.recognize([audio for audio, _, _ in chunk])
            results += [(name, slots, intent)
                        for (_, name, slots), intent in zip(chunk, heard, strict=True)]
            bar.update(len(chunk))
    return acceptance(results)


def format_report(report: dict) -> str:
    false = report["false_acceptance"]
    lines = [f"command acceptance: {100 * report['command_acceptance']:.2f}% of "
             f"{report['commands']} commands (intent and every slot right)"]
    if report["non_commands"]:
        lines.append(f"non-commands accepted as commands: {100 * false:.2f}% of "
                     f"{report['non_commands']}")
    lines += [f"  {name:24s} {100 * row['acceptance']:6.2f}%  ({row['n']})"
              for name, row in report["per_intent"].items()]
    return "\n".join(lines)


# ---------------------------------------------------------------------------- command line


def _arguments(argv: list[str]) -> argparse.Namespace:
    evaluating = bool(argv) and argv[0] == "evaluate"
    parser = ArgumentParser(
        prog="python -m asr.assistant.intents" + (" evaluate" if evaluating else ""),
        description="Score intents on a manifest." if evaluating else __doc__.splitlines()[0])
    parser.add_argument("--model", required=True, help="model directory")
    parser.add_argument("--grammar", help="grammar file (default: the model's grammar.yaml)")
    parser.add_argument("--device", default="cpu")
    parser.add_argument("--threshold", type=float, default=0.85)
    parser.add_argument("--min-confidence", type=float, default=0.0)
    if evaluating:
        parser.add_argument("--manifest", required=True)
        parser.add_argument("--json", metavar="FILE", help="also write the report as JSON")
        return parser.parse_args(argv[1:])
    parser.add_argument("--json", action="store_true", help="one JSON object per file")
    parser.add_argument("files", nargs="+")
    return parser.parse_args(argv)


def _print_intents(recognizer: IntentRecognizer, files: list[str], as_json: bool) -> int:
    failed = 0
    for path in files:
        try:
            intent = recognizer.recognize([path])[0]
        except AudioError as err:
            print_error(err)
            failed += 1
            continue
        if as_json:
            print(json.dumps({"file": path, **asdict(intent)}), flush=True)
        else:
            print(f"{tsv_field(path)}\t{intent.describe()}\t{intent.confidence:.2f}\t"
                  f"{intent.text}", flush=True)
    return 1 if failed else 0


def main(argv: list[str] | None = None) -> int:
    args = _arguments(sys.argv[1:] if argv is None else argv)
    try:
        recognizer = IntentRecognizer.from_pretrained(args.model, args.grammar, args.device,
                                                      args.threshold, args.min_confidence)
        if "manifest" not in args:
            return _print_intents(recognizer, args.files, args.json)
        report = evaluate(recognizer, args.manifest)
        if args.json:
            save_report(report, args.json)
    except (GrammarError, ModelDirError, ManifestError, AudioError, ValueError) as err:
        print_error(err)
        return 1
    print(format_report(report))
    return 0


if __name__ == "__main__":
    sys.exit(main())

"""Speech -> intent: which command of a grammar an utterance means, and how surely.

    asr-intents --model exp/voice_commands command.wav ...        # intent and slots
    asr-intents --model DIR --json a.wav b.flac                  # one JSON per file
    asr-intents evaluate --model DIR --manifest commands.jsonl   # acceptance rate
    asr-intents calibrate --model DIR --manifest dev.jsonl       # the threshold

(`python -m asr.assistant.intents` is the same program, from a checkout.)

The grammar (`asr.grammar`: a Rhino context file, by default the model directory's
`grammar.yaml`) is searched in one of two ways (`search`):

- `grammar` (the default), as Rhino, Vosk or pocketsphinx with a grammar do: the decoder's
  beam search writes only the grammar's sentences (`decode.grammar`), and the intent and every
  slot are read off the winning sentence's path (`Grammar.parse`). Whether the utterance is a
  command at all is a likelihood ratio: the same audio scored against the best free path,
  which may say anything (`asr.decoding.garbage_ratio`, per frame), and the agreement of that
  free path's words with the sentence (`agreement`); `confidence` is exp(-ratio) x agreement,
  and an utterance is refused below `min_confidence`. That threshold is
  calibrated on dev when the model is trained (`calibrate`, stored in the model directory's
  `intents.json`); a model without it uses DEFAULT_MIN_CONFIDENCE. The n-best sentences give
  the other readings with their probabilities (`Intent.alternatives`), so an application can
  ask "did you mean ...?" when two are close.
- `free`: the model transcribes freely and the transcript is matched to the nearest grammar
  sentence by word edit distance (`Grammar.match`); it counts when its similarity reaches
  `threshold` and the transcript's acoustic confidence (`asr.decoding.teacher_forced`)
  reaches `min_confidence`.

Slot values always come from the grammar, as it writes them, never from the transcript.

`evaluate` prints the command acceptance rate (Picovoice's metric): the share of utterances
whose intent and every slot value are right, a non-command (manifest `intent` null) counting
as right when it is refused; with a breakdown per intent. `calibrate` picks the grammar
search's `min_confidence` on a dev manifest, written to DIR/intents.json: the one that
minimises the share of commands refused plus CALIBRATION_COST times the share of
non-commands accepted (a Bayes risk, not a quantile: a dev set of a few dozen non-commands
cannot pin a 1% false acceptance, and one non-command that fits the grammar perfectly must not
push the threshold to 1).
"""

import argparse
import hashlib
import json
import math
import reprlib
import sys
from collections import defaultdict
from dataclasses import asdict, dataclass, field, replace
from pathlib import Path

from rapidfuzz.distance import Levenshtein

from asr.audio import AudioError, load_audio
from asr.checkpoint import CALIBRATION_FILE, GRAMMAR_FILE, ModelDirError, save_text
from asr.cli import (
    ArgumentParser,
    check_output,
    one_line,
    print_error,
    quiet_pipe,
    save_report,
    tsv_field,
)
from asr.data import ManifestError, audio_path
from asr.decoding import Hypothesis
from asr.grammar import Grammar, GrammarError
from asr.models import DEFAULT as DEFAULT_MODEL
from asr.models import model_path
from asr.outputs import model_files
from asr.progress import progress
from asr.text import normalize_text
from asr.transcriber import Transcriber
from asr.untrusted import UntrustedInputError, check_fields, check_ranges, first_line, read_text

PROG = "asr-intents"  # the installed command (pyproject's [project.scripts])
MODULE = "python -m asr.assistant.intents"  # the same, run from a checkout
MAX_MANIFEST_BYTES = 256 << 20
SEARCHES = ("grammar", "free")
DEFAULT_THRESHOLD = 0.85  # free search: lowest similarity to a grammar sentence that counts
DEFAULT_MIN_CONFIDENCE = 0.3  # grammar search, uncalibrated: lowest exp(-garbage ratio) x agreement
CALIBRATION_COST = 2.0  # `calibrate`: a non-command accepted costs as much as two refused
MIN_CALIBRATION_ROWS = 10  # `calibrate` needs this many commands and as many non-commands
COMMANDS = {"evaluate": "Score intents on a manifest.",
            "calibrate": "Choose the grammar search's min_confidence on dev."}


@dataclass(frozen=True)
class Intent:
    """What an utterance asks for: the intent and slots, or None when it is refused."""

    name: str | None
    slots: dict[str, str] = field(default_factory=dict)
    confidence: float = 0.0  # grammar: exp(-garbage ratio) x agreement; free: similarity x acoustic
    text: str = ""  # the transcript, normalised (grammar search: the sentence it wrote)
    command: str = ""  # the grammar sentence it came closest to
    similarity: float = 0.0  # of the transcript to that sentence (1: it is one)
    acoustic: float | None = None  # the confidence's acoustic part (None: text only)
    alternatives: tuple[dict, ...] = ()  # grammar search: readings of the n-best, most likely first
    slot_times: dict[str, tuple[float, float]] = field(default_factory=dict)  # seconds, from audio
    # What was said as a search free of the grammar wrote it, normalised: the free search's
    # transcript, the grammar search's free path (None without one: no CTC head, text typed).
    heard: str | None = None

    @property
    def understood(self) -> bool:
        return self.name is not None

    def describe(self) -> str:
        """`show_files kind=photos`: the intent and slots on one line."""
        slots = " ".join(f"{key}={value}" for key, value in self.slots.items())
        return " ".join(part for part in (self.name or "(none)", slots) if part)


@dataclass(frozen=True)
class IntentParser:
    """Transcript (and the search's `Hypothesis` of it) -> Intent, for one grammar."""

    grammar: Grammar
    search: str = "grammar"  # how the transcript was found (see the module docstring)
    threshold: float = DEFAULT_THRESHOLD  # free search: lowest similarity that counts
    min_confidence: float = DEFAULT_MIN_CONFIDENCE  # lowest (acoustic) confidence that counts

    def __post_init__(self) -> None:
        check_fields(self, "intents")
        check_ranges(self, "intents", threshold=(0, 1), min_confidence=(0, 1))
        if self.search not in SEARCHES:
            raise ValueError(f"intents.search must be one of {SEARCHES}, got {self.search!r}")
        if self.search == "free":
            self.grammar.check_matchable()  # refused now, not at the first utterance
        self.grammar.warn_shared_sentences()

    def parse(self, text: str, found: Hypothesis | None = None,
              nbest: list[tuple[str, float]] | None = None, free: str | None = None) -> Intent:
        """The intent of `text`; `found` (None: the text alone, as typed) carries the audio's
        scores, `nbest` the grammar search's sentences with their scores, best first, `free`
        the text of the free path (the CTC head's best path)."""
        if self.search == "free":
            return self._match(normalize_text(text), None if found is None else found.confidence)
        return self._read(normalize_text(text), found, nbest or [], free)

    def _read(self, sentence: str, found: Hypothesis | None, nbest: list[tuple[str, float]],
              free: str | None) -> Intent:
        heard = None if free is None else normalize_text(free)
        reading = self.grammar.parse(sentence)
        if reading is None:
            return Intent(None, text=sentence, heard=heard)
        ratio = 0.0 if found is None or found.garbage_ratio is None else found.garbage_ratio
        sure = math.exp(-ratio) * agreement(sentence, free)
        acoustic = None if found is None else sure
        refused = sure < self.min_confidence
        return Intent(None if refused else reading.intent, {} if refused else reading.values,
                      sure, sentence, sentence, 1.0, acoustic, self._alternatives(nbest),
                      heard=heard)

    def _alternatives(self, nbest: list[tuple[str, float]]) -> tuple[dict, ...]:
        """The n-best sentences' readings, each once, with the probability the search gives it
        among them (a softmax over their scores)."""
        if not nbest:
            return ()
        top = max(score for _, score in nbest)
        weights = [math.exp(score - top) for _, score in nbest]
        readings: dict[str, dict] = {}
        for (text, _), weight in zip(nbest, weights, strict=True):
            meanings = self.grammar.readings(text)  # a sentence two intents share: both
            for reading in meanings:
                key = json.dumps([reading.intent, reading.values], sort_keys=True)
                row = readings.setdefault(key, {"intent": reading.intent,
                                                "slots": reading.values, "probability": 0.0})
                row["probability"] += weight / sum(weights) / len(meanings)
        return tuple(sorted(readings.values(), key=lambda r: -r["probability"]))

    def _match(self, heard: str, acoustic: float | None) -> Intent:
        match = self.grammar.match(heard)
        if match is None:
            return Intent(None, text=heard, acoustic=acoustic, heard=heard)
        confidence = match.similarity * (1.0 if acoustic is None else acoustic)
        refused = match.similarity < self.threshold or (
            acoustic is not None and acoustic < self.min_confidence)
        return Intent(None if refused else match.intent, {} if refused else match.slots,
                      confidence, heard, match.sentence, match.similarity, acoustic, heard=heard)


def grammar_file(model_dir: str | Path, grammar: str | Path | None = None) -> Path:
    """The grammar file given, else the model directory's grammar.yaml."""
    model_dir = model_path(model_dir)
    if grammar is not None and not str(grammar).strip():
        raise GrammarError("the grammar is an empty file name (leave it out for the model's own)")
    path = Path(grammar) if grammar else model_dir / GRAMMAR_FILE
    if not model_dir.is_dir():
        raise ModelDirError(f"{model_dir}: not a model directory")
    if not grammar and not path.is_file():
        raise GrammarError(f"{model_dir}: no {GRAMMAR_FILE} in the model directory; name a "
                           "grammar file (--grammar FILE, or grammar=FILE in the demo)")
    return path


def default_min_confidence(model_dir: str | Path, search: str,
                           grammar: str | Path | None = None) -> float:
    """The grammar search's calibrated threshold for this grammar (`calibrated_confidence`);
    0 for the free search, which refuses by similarity."""
    return calibrated_confidence(model_dir, grammar) if search == "grammar" else 0.0


def grammar_digest(grammar: str | Path) -> str:
    """What a calibration is tied to: the grammar file's bytes (its SHA-256, shortened)."""
    return hashlib.sha256(Path(grammar).read_bytes()).hexdigest()[:16]


def calibrated_confidence(model_dir: str | Path, grammar: str | Path | None = None) -> float:
    """The grammar search's `min_confidence` calibrated for this model (DIR/intents.json) and
    this grammar file (None: the model's own), else DEFAULT_MIN_CONFIDENCE: a threshold found
    with one grammar says nothing of another. The file is untrusted: a bad one is a one-line
    error."""
    path = model_path(model_dir) / CALIBRATION_FILE
    if not path.is_file():
        return DEFAULT_MIN_CONFIDENCE
    try:
        saved = json.loads(read_text(path, 1 << 16, "the calibration"))
        value, digest = saved.get("min_confidence"), saved.get("grammar_sha256")
    except (UntrustedInputError, json.JSONDecodeError, AttributeError, RecursionError) as err:
        raise ModelDirError(f"{path}: not a calibration file ({first_line(err)})") from None
    if isinstance(value, bool) or not isinstance(value, int | float) or not 0 <= value <= 1:
        raise ModelDirError(f"{path}: min_confidence must be a number in [0, 1], got {value!r}")
    if digest is not None and grammar_digest(grammar_file(model_dir, grammar)) != digest:
        return DEFAULT_MIN_CONFIDENCE
    return float(value)


def agreement(sentence: str, free: str | None) -> float:
    """How far the free path's text agrees with the grammar sentence, in [0, 1]: 1 - their
    character edit distance / the longer one's length (1 without a free path). Where the
    model hears little (its CTC best path mostly blank, as on a long sentence over a telephone
    line) a short grammar sentence fits the frames cheaply, and only what it heard tells.
    Characters, not words: a one-word command heard with one letter off still mostly agrees.
    """
    if free is None:
        return 1.0
    return Levenshtein.normalized_similarity(sentence, normalize_text(free))


def free_text(transcriber: Transcriber, found: Hypothesis | None) -> str | None:
    """The free path's text (the CTC best path the grammar search was scored against)."""
    if found is None or found.free_tokens is None:
        return None
    return transcriber.tokenizer.decode(found.free_tokens)


def nbest_texts(transcriber: Transcriber, found: Hypothesis | None) -> list[tuple[str, float]]:
    """The grammar search's n-best sentences as texts, each with its log-probability per
    token (EOS included) times the best one's length: the search ranks by the per-token
    score, and a total would favour short sentences over the one it chose."""
    if found is None or not found.nbest:
        return []
    tokens = len(found.nbest[0][0]) + 1
    return [(transcriber.tokenizer.decode(ids), score / (len(ids) + 1) * tokens)
            for ids, score in found.nbest]


class IntentRecognizer:
    """A model and a grammar: audio in, Intent out.

        recognizer = IntentRecognizer.from_pretrained("exp/voice_commands")
        recognizer.recognize(["command.wav"])[0].describe()   # "timer amount=five unit=minutes"
    """

    def __init__(self, transcriber: Transcriber, parser: IntentParser) -> None:
        self.transcriber, self.parser = transcriber, parser

    @classmethod
    def from_pretrained(cls, model_dir: str | Path, grammar: str | Path | None = None,
                        device: str = "cpu", search: str = "grammar",
                        threshold: float = DEFAULT_THRESHOLD,
                        min_confidence: float | None = None) -> "IntentRecognizer":
        """`min_confidence` None: `default_min_confidence`."""
        loaded = Grammar.load(grammar_file(model_dir, grammar))
        transcriber = Transcriber.from_pretrained(
            model_dir, device=device, grammar=loaded if search == "grammar" else None)
        if min_confidence is None:
            min_confidence = default_min_confidence(model_dir, search, grammar)
        return cls(transcriber, IntentParser(loaded, search, threshold, min_confidence))

    def recognize(self, audio: list) -> list[Intent]:
        """Each input (a path, or a waveform at the model's rate) is one utterance; with the
        grammar search and a CTC head, each slot understood also gets its time span."""
        rate = self.transcriber.sample_rate
        waves = [load_audio(a, rate) if isinstance(a, str | Path) else a for a in audio]
        align = self.parser.search == "grammar" and self.transcriber.network.has_ctc
        return [self._timed(self.parser.parse(text, found, nbest_texts(self.transcriber, found),
                                              free_text(self.transcriber, found)), found)
                for text, found in self.transcriber.transcribe_scored(waves, align)]

    def _timed(self, intent: Intent, found: Hypothesis) -> Intent:
        """The intent with each slot's span in seconds into the utterance: from the first
        frame of its first word to the frame where the word after it starts (or the end of
        the last word), by CTC forced alignment of the sentence found."""
        reading = self.parser.grammar.parse(intent.text) if intent.understood else None
        words = found.words if found is not None else None
        if reading is None or not words or len(words) != len(intent.text.split()):
            return intent
        step = self.transcriber.network.frame_seconds
        origin = self.transcriber.options.lead_in_ms / 1000
        edges = [w.start for w in words] + [words[-1].end]
        times = {span.name: (round(edges[span.start] * step - origin, 3),
                             round(edges[span.end] * step - origin, 3))
                 for span in reading.slots}
        return replace(intent, slot_times=times)


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
    """One row; `slots` may be left out (no slots), but when present it must be an object."""
    row = json.loads(line)
    if not isinstance(row, dict):
        raise ManifestError("expected a JSON object")
    intent, slots = row.get("intent"), row.get("slots", {})
    if intent is not None and not isinstance(intent, str):
        raise ManifestError(f"intent must be a string or null, got {reprlib.repr(intent)}")
    if not isinstance(slots, dict) or not all(isinstance(v, str) for v in slots.values()):
        raise ManifestError("slots must be an object mapping names to strings, got "
                            f"{reprlib.repr(slots)}")
    if intent is None and slots:
        raise ManifestError(f"a non-command (intent null) has no slots, got {reprlib.repr(slots)}")
    for text in (intent, *slots, *slots.values(), row.get("audio_filepath")):
        if isinstance(text, str) and not _is_unicode(text):
            raise ManifestError(f"{one_line(reprlib.repr(text))} is not valid Unicode (a lone "
                                "surrogate)")
    return audio_path(row.get("audio_filepath"), root), intent, slots


def _is_unicode(text: str) -> bool:
    """False for a lone surrogate: JSON allows "\\ud800", UTF-8 (and so any output) does not."""
    try:
        text.encode("utf-8")
    except UnicodeEncodeError:
        return False
    return True


Result = tuple[str | None, dict[str, str], Intent]  # expected intent and slots, what was heard


def evaluate(recognizer: IntentRecognizer, manifest: str | Path, batch: int = 32) -> dict:
    """Score every row of a manifest (`read_commands`)."""
    return acceptance(recognize_manifest(recognizer, manifest, batch))


def at_confidence(results: list[Result], min_confidence: float) -> list[Result]:
    """The results as a parser with this `min_confidence` would have given them."""
    return [(name, slots, intent if intent.confidence >= min_confidence
             else replace(intent, name=None, slots={})) for name, slots, intent in results]


def calibrate(results: list[Result]) -> float:
    """The `min_confidence` of least risk on these results (found with min_confidence 0):
    share of commands not right + CALIBRATION_COST x share of non-commands accepted. Ties go
    to the lowest threshold, the one that refuses fewest."""
    commands = max(1, sum(name is not None for name, _, _ in results))
    non_commands = max(1, sum(name is None for name, _, _ in results))
    candidates = sorted({0.0} | {min(1.0, math.nextafter(i.confidence, math.inf))
                                 for name, _, i in results if name is None and i.understood})

    def risk(threshold: float) -> float:
        found = at_confidence(results, threshold)
        missed = sum(not is_right(i, name, slots) for name, slots, i in found if name is not None)
        accepted = sum(i.understood for name, _, i in found if name is None)
        return missed / commands + CALIBRATION_COST * accepted / non_commands

    return min(candidates, key=lambda t: (risk(t), t))


def recognize_manifest(recognizer: IntentRecognizer, manifest: str | Path,
                       batch: int = 32) -> list[Result]:
    """What the recognizer makes of every row of a manifest (`read_commands`)."""
    rows = read_commands(manifest)
    results: list[tuple[str | None, dict, Intent]] = []
    with progress(total=len(rows), desc="evaluating", unit="utt") as bar:
        for start in range(0, len(rows), batch):
            chunk = rows[start:start + batch]
            heard = recognizer.recognize([audio for audio, _, _ in chunk])
            results += [(name, slots, intent)
                        for (_, name, slots), intent in zip(chunk, heard, strict=True)]
            bar.update(len(chunk))
    return results


def format_report(report: dict) -> str:
    false = report["false_acceptance"]
    lines = []
    if report["commands"]:
        lines.append(f"command acceptance: {100 * report['command_acceptance']:.2f}% of "
                     f"{report['commands']} commands (intent and every slot right)")
    if report["non_commands"]:
        lines.append(f"non-commands accepted as commands: {100 * false:.2f}% of "
                     f"{report['non_commands']}")
    lines += [f"  {tsv_field(name):24s} {100 * row['acceptance']:6.2f}%  ({row['n']})"
              for name, row in report["per_intent"].items()]
    return "\n".join(lines)


# ---------------------------------------------------------------------------- command line


def _program() -> str:
    """The name this program was run by: the installed command, else the module."""
    return PROG if Path(sys.argv[0]).name == PROG else MODULE


def _arguments(argv: list[str]) -> argparse.Namespace:
    command = argv[0] if argv and argv[0] in COMMANDS else None
    args = argument_parser(command).parse_args(argv[1:] if command else argv)
    args.command = command
    return args


def argument_parser(command: str | None) -> ArgumentParser:
    """The options of a command (`evaluate`, `calibrate`), or of reading files (None)."""
    program = _program()
    parser = ArgumentParser(
        prog=program + (f" {command}" if command else ""),
        description=COMMANDS.get(command or "", __doc__.splitlines()[0]),
        epilog=None if command else "Also: " + ", ".join(f"{program} {name} --help"
                                                         for name in COMMANDS))
    parser.add_argument("--model", type=model_path, default=DEFAULT_MODEL,
                        help="a model directory written by training, or a shipped model's name "
                             "(default: %(default)s)")
    parser.add_argument("--grammar", help="grammar file (default: the model's grammar.yaml)")
    parser.add_argument("--device", default="cpu", help="auto, cpu, cuda or cuda:N (default: cpu)")
    if command != "calibrate":
        parser.add_argument("--search", choices=SEARCHES, default="grammar",
                            help="search inside the grammar, or transcribe freely and match")
        parser.add_argument("--threshold", type=float, default=DEFAULT_THRESHOLD,
                            help="free search: lowest similarity to a grammar sentence")
        parser.add_argument("--min-confidence", type=float,
                            help="lowest confidence that counts (default: the model's "
                                 f"calibrated one, else {DEFAULT_MIN_CONFIDENCE}; free: 0)")
    if command:
        parser.add_argument("--manifest", required=True,
                            help="JSON lines {audio_filepath, intent (null: no command), slots}")
        parser.add_argument("--json", metavar="FILE", help="also write the report as JSON")
    else:
        parser.add_argument("--json", action="store_true", help="one JSON object per file")
        parser.add_argument("files", nargs="+", help="audio files, each one utterance")
    return parser


def check_calibration_manifest(manifest: str | Path, grammar: Grammar) -> None:
    """A ManifestError unless the manifest can calibrate: MIN_CALIBRATION_ROWS commands and as
    many non-commands (with none, every threshold refuses nothing wrongly, and the lowest,
    which accepts everything, would win), and only intents the grammar has."""
    rows = read_commands(manifest)
    commands = sum(intent is not None for _, intent, _ in rows)
    if min(commands, len(rows) - commands) < MIN_CALIBRATION_ROWS:
        raise ManifestError(f"{manifest}: calibrating needs at least {MIN_CALIBRATION_ROWS} "
                            f"commands and {MIN_CALIBRATION_ROWS} non-commands (intent null); "
                            f"it has {commands} and {len(rows) - commands}")
    unknown = sorted({intent for _, intent, _ in rows if intent is not None}
                     - set(grammar.intents))
    if unknown:
        raise ManifestError(f"{manifest}: intent {unknown[0]!r} is not one of the grammar's")


def check_outputs(args: argparse.Namespace) -> None:
    """Usage errors, before any work, for a --json report or a calibration that would replace
    a file read (the manifest, the grammar, the model's files) or cannot be written."""
    reads = [str(args.manifest)] if "manifest" in args else []
    reads += [str(args.grammar)] if args.grammar else []
    parser = argument_parser(args.command)
    if "manifest" in args and args.json:
        check_output(parser, "--json", args.json, [*reads, *model_files(args.model)])
    if "search" not in args:  # calibrate writes the model's intents.json
        check_output(parser, "calibrating into", Path(args.model) / CALIBRATION_FILE, reads)


def _calibrate(args: argparse.Namespace) -> dict:
    """Pick min_confidence on the manifest, write DIR/intents.json, return the report there."""
    recognizer = IntentRecognizer.from_pretrained(args.model, args.grammar, args.device,
                                                  min_confidence=0.0)
    check_calibration_manifest(args.manifest, recognizer.parser.grammar)
    results = recognize_manifest(recognizer, args.manifest)
    chosen = calibrate(results)
    report = acceptance(at_confidence(results, chosen))
    grammar = grammar_file(args.model, args.grammar)
    saved = {"min_confidence": chosen, "grammar": str(grammar),
             "grammar_sha256": grammar_digest(grammar), "manifest": str(args.manifest),
             "cost_of_a_false_acceptance": CALIBRATION_COST, "dev": report}
    save_text(json.dumps(saved, indent=1) + "\n", Path(args.model) / CALIBRATION_FILE)
    print(f"min_confidence {chosen:.4f} (written to {Path(args.model) / CALIBRATION_FILE})")
    return report


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
            print(f"{tsv_field(path)}\t{tsv_field(intent.describe())}\t{intent.confidence:.2f}\t"
                  f"{tsv_field(intent.text)}", flush=True)
    return 1 if failed else 0


@quiet_pipe
def main(argv: list[str] | None = None) -> int:
    args = _arguments(sys.argv[1:] if argv is None else argv)
    check_outputs(args)
    try:
        if "search" not in args:
            report = _calibrate(args)
        else:
            recognizer = IntentRecognizer.from_pretrained(
                args.model, args.grammar, args.device, args.search, args.threshold,
                args.min_confidence)
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

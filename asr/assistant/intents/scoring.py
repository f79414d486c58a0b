"""How well a recognizer understands a manifest of commands and non-commands, and the
grammar search's `min_confidence` chosen on one.

Command acceptance is Picovoice's metric: the share of utterances whose intent and every slot
value are right, a non-command (manifest `intent` null) counting as right when it is refused.
`calibrate` picks the threshold that minimises the share of commands refused plus
CALIBRATION_COST times the share of non-commands accepted (a Bayes risk, not a quantile: a dev
set of a few dozen non-commands cannot pin a 1% false acceptance, and one non-command that fits
the grammar perfectly must not push the threshold to 1)."""

import json
import math
import reprlib
from collections import Counter, defaultdict
from dataclasses import replace
from pathlib import Path

from asr.checkpoint import ModelDirError
from asr.cli import one_line, tsv_field
from asr.data import ManifestError, audio_path
from asr.grammar import Grammar
from asr.models import model_path, package_problem
from asr.progress import progress
from asr.untrusted import UntrustedInputError, read_text

from .calibration import save_calibration
from .parser import Intent
from .recognizer import IntentRecognizer

MAX_MANIFEST_BYTES = 256 << 20
CALIBRATION_COST = 2.0  # `calibrate`: a non-command accepted costs as much as two refused
MIN_CALIBRATION_ROWS = 10  # `calibrate` needs this many commands and as many non-commands
NON_COMMAND = "(non-command)"  # the per-intent row of the non-commands
REFUSED = "(refused)"  # a confusion's side when the recognizer understood nothing
REPORTED_CONFUSIONS = 5  # `format_report` prints the commonest; the JSON report keeps all

Row = tuple[str, str | None, dict[str, str]]  # audio path, intent or None, slots
Result = tuple[str | None, dict[str, str], Intent]  # expected intent and slots, what was heard


def acceptance(results: list[Result]) -> dict:
    """Command acceptance overall, among commands, false acceptance among non-commands, and
    per intent."""
    per_intent: dict[str, list[bool]] = defaultdict(list)
    for expected, slots, intent in results:
        per_intent[expected or NON_COMMAND].append(intent.is_right(expected, slots))
    commands = [ok for name, oks in per_intent.items() if name != NON_COMMAND for ok in oks]
    others = per_intent.get(NON_COMMAND, [])
    return {"utterances": len(results),
            "acceptance": _share(commands + others),
            "command_acceptance": _share(commands), "commands": len(commands),
            "false_acceptance": 1 - _share(others) if others else None,
            "non_commands": len(others),
            "per_intent": {name: {"n": len(oks), "acceptance": _share(oks)}
                           for name, oks in sorted(per_intent.items())}}


def _share(flags: list[bool]) -> float:
    return sum(flags) / len(flags) if flags else 0.0


def read_commands(manifest: str | Path) -> list[Row]:
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


def _command_row(line: str, root: Path) -> Row:
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


def recognize_rows(recognizer: IntentRecognizer, rows: list[Row], batch: int = 32) -> list[Result]:
    """What the recognizer makes of each row, `batch` utterances at a time."""
    results: list[Result] = []
    with progress(total=len(rows), desc="evaluating", unit="utt") as bar:
        for start in range(0, len(rows), batch):
            chunk = rows[start:start + batch]
            heard = recognizer.recognize([audio for audio, _, _ in chunk])
            results += [(name, slots, intent)
                        for (_, name, slots), intent in zip(chunk, heard, strict=True)]
            bar.update(len(chunk))
    return results


def recognize_manifest(recognizer: IntentRecognizer, manifest: str | Path,
                       batch: int = 32) -> list[Result]:
    """What the recognizer makes of every row of a manifest (`read_commands`)."""
    return recognize_rows(recognizer, read_commands(manifest), batch)


def evaluate(recognizer: IntentRecognizer, manifest: str | Path, batch: int = 32) -> dict:
    """Score every row of a manifest (`read_commands`): `acceptance`'s report, what was
    heard instead of what was said (`confusions`), and every utterance's result."""
    rows = read_commands(manifest)
    results = recognize_rows(recognizer, rows, batch)
    return {**acceptance(results), "confusions": confusions(results),
            "results": [utterance_result(audio, result)
                        for (audio, _, _), result in zip(rows, results, strict=True)]}


def confusions(results: list[Result]) -> list[dict]:
    """Each wrong result's (said, heard) pair as `Intent.describe` writes it, with how often
    it happened, commonest first: "digit digit=six" heard as "digit digit=eight", a command
    REFUSED, a non-command (NON_COMMAND) taken for a command."""
    pairs = Counter((_described(expected, slots), _described(intent.name, intent.slots, REFUSED))
                    for expected, slots, intent in results if not intent.is_right(expected, slots))
    return [{"said": said, "heard": heard, "n": n} for (said, heard), n in pairs.most_common()]


def _described(name: str | None, slots: dict[str, str], nothing: str = NON_COMMAND) -> str:
    return Intent(name, slots).describe() if name is not None else nothing


def utterance_result(audio: str, result: Result) -> dict:
    """One utterance of an evaluation: what it says, what was heard, and whether it was right."""
    expected, slots, intent = result
    return {"audio_filepath": audio, "intent": expected, "slots": slots,
            "right": intent.is_right(expected, slots),
            "heard": {"intent": intent.name, "slots": intent.slots,
                      "confidence": intent.confidence, "text": intent.text,
                      "free_text": intent.heard}}


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
        missed = sum(not i.is_right(name, slots) for name, slots, i in found if name is not None)
        accepted = sum(i.understood for name, _, i in found if name is None)
        return missed / commands + CALIBRATION_COST * accepted / non_commands

    return min(candidates, key=lambda t: (risk(t), t))


def calibrate_model(model_dir: str | Path, manifest: str | Path,
                    grammar: str | Path | None = None, device: str = "cpu",
                    into_package: bool = False) -> tuple[float, dict]:
    """Choose the grammar search's min_confidence for a model directory (and a grammar file;
    None: its own) on a manifest, and write it to DIR/intents.json: the threshold and the
    report of the manifest at it. The installed package's model is refused before any work
    unless `into_package` (`save_calibration`)."""
    if not into_package and package_problem(model_path(model_dir)):
        raise ModelDirError(f"{model_path(model_dir)} "
                            f"{package_problem(model_path(model_dir), 'a calibration')}")
    recognizer = IntentRecognizer.from_pretrained(model_dir, grammar, device, min_confidence=0.0)
    rows = read_commands(manifest)
    check_calibration_rows(rows, recognizer.parser.grammar, manifest)
    results = recognize_rows(recognizer, rows)
    chosen = calibrate(results)
    report = acceptance(at_confidence(results, chosen))
    save_calibration(model_dir, grammar, chosen, into_package, manifest=str(manifest),
                     cost_of_a_false_acceptance=CALIBRATION_COST, dev=report)
    return chosen, report


def check_calibration_rows(rows: list[Row], grammar: Grammar, manifest: str | Path) -> None:
    """A ManifestError unless the manifest's rows can calibrate: MIN_CALIBRATION_ROWS commands
    and as many non-commands (with none, every threshold refuses nothing wrongly, and the
    lowest, which accepts everything, would win), and only intents the grammar has."""
    commands = sum(intent is not None for _, intent, _ in rows)
    if min(commands, len(rows) - commands) < MIN_CALIBRATION_ROWS:
        raise ManifestError(f"{manifest}: calibrating needs at least {MIN_CALIBRATION_ROWS} "
                            f"commands and {MIN_CALIBRATION_ROWS} non-commands (intent null); "
                            f"it has {commands} and {len(rows) - commands}")
    unknown = sorted({intent for _, intent, _ in rows if intent is not None}
                     - set(grammar.intents))
    if unknown:
        raise ManifestError(f"{manifest}: intent {unknown[0]!r} is not one of the grammar's")


def format_report(report: dict) -> str:
    """`acceptance`'s report as lines: what applies of commands and non-commands, one line
    per intent, then (an evaluation's report) the commonest confusions."""
    lines = []
    if report["commands"]:
        lines.append(f"command acceptance: {100 * report['command_acceptance']:.2f}% of "
                     f"{report['commands']} commands (intent and every slot right)")
    if report["non_commands"]:
        lines.append(f"non-commands accepted as commands: {100 * report['false_acceptance']:.2f}% "
                     f"of {report['non_commands']}")
    lines += [f"  {tsv_field(name):24s} {100 * row['acceptance']:6.2f}%  ({row['n']})"
              for name, row in report["per_intent"].items()]
    if report.get("confusions"):
        lines.append("most often heard wrong (said -> heard, times):")
        lines += [f"  {tsv_field(row['said'])} -> {tsv_field(row['heard'])}  ({row['n']})"
                  for row in report["confusions"][:REPORTED_CONFUSIONS]]
    return "\n".join(lines)

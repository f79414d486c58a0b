"""`asr-intents` (`python -m asr.assistant.intents` from a checkout): the intents of audio
files, and a recognizer's acceptance and threshold on a manifest. Its commands:

    asr-intents [recognize] --model DIR a.wav ...    # intent and slots per file (the default)
    asr-intents evaluate --model DIR --manifest commands.jsonl
    asr-intents calibrate --model DIR --manifest dev.jsonl
"""

import argparse
import json
import sys
from collections.abc import Callable
from dataclasses import asdict
from pathlib import Path

from asr.audio import AudioError
from asr.checkpoint import CALIBRATION_FILE, ModelDirError
from asr.cli import ArgumentParser, check_output, print_error, quiet_pipe, save_report, tsv_field
from asr.data import ManifestError
from asr.grammar import GrammarError
from asr.models import DEFAULT as DEFAULT_MODEL
from asr.models import model_path
from asr.outputs import model_files

from .parser import DEFAULT_MIN_CONFIDENCE, DEFAULT_THRESHOLD, SEARCHES
from .recognizer import IntentRecognizer
from .scoring import calibrate_model, evaluate, format_report

PROG = "asr-intents"  # the installed command (pyproject's [project.scripts])
MODULE = "python -m asr.assistant.intents"  # the same, run from a checkout
DEFAULT_COMMAND = "recognize"
COMMANDS = {"recognize": "Read the intent and slots of each audio file (the default command).",
            "evaluate": "Score intents on a manifest.",
            "calibrate": "Choose the grammar search's min_confidence on dev."}
ERRORS = (GrammarError, ModelDirError, ManifestError, AudioError, ValueError)


def _program() -> str:
    """The name this program was run by: the installed command, else the module."""
    return PROG if Path(sys.argv[0]).name == PROG else MODULE


def argument_parser(command: str | None = None) -> ArgumentParser:
    """The program's parser (None), or the parser of one of its COMMANDS."""
    program = _program()
    top = ArgumentParser(
        prog=program, formatter_class=argparse.RawDescriptionHelpFormatter,
        description="Speech -> intent: which command of a grammar each utterance means, and how "
        f"surely.\nCOMMAND is {DEFAULT_COMMAND} when left out.",
        epilog="Each command's options:\n" + "\n".join(f"  {program} {name} --help"
                                                      for name in COMMANDS))
    commands = top.add_subparsers(dest="command", metavar="COMMAND", parser_class=ArgumentParser,
                                  help=", ".join(COMMANDS))
    for name, text in COMMANDS.items():
        _add_options(commands.add_parser(name, help=text, description=text), name)
    return top if command is None else commands.choices[command]


def _add_options(parser: ArgumentParser, command: str) -> None:
    parser.add_argument("--model", type=model_path, default=DEFAULT_MODEL,
                        help="a model directory written by training, or a shipped model's name "
                             "(default: %(default)s)")
    parser.add_argument("--grammar", help="grammar file (default: the model's grammar.yaml); "
                             "ha:en or a custom_sentences folder: Home Assistant's sentences")
    parser.add_argument("--device", default="cpu", help="auto, cpu, cuda or cuda:N (default: cpu)")
    if command != "calibrate":
        parser.add_argument("--home", help="Home Assistant's sentences: a YAML file of the "
                                           "home's areas, floors and devices "
                                           "(docs/home_assistant.md)")
        parser.add_argument("--search", choices=SEARCHES, default="grammar",
                            help="search inside the grammar, or transcribe freely and match")
        parser.add_argument("--threshold", type=float, default=DEFAULT_THRESHOLD,
                            help="free search: lowest similarity to a grammar sentence")
        parser.add_argument("--min-confidence", type=float,
                            help="lowest confidence that counts (default: the model's "
                                 f"calibrated one, else {DEFAULT_MIN_CONFIDENCE}; free: 0)")
    if command == "recognize":
        parser.add_argument("--json", action="store_true", help="one JSON object per file")
        parser.add_argument("files", nargs="+", help="audio files, each one utterance")
    else:
        parser.add_argument("--manifest", required=True,
                            help="JSON lines {audio_filepath, intent (null: no command), slots}")
        parser.add_argument("--json", metavar="FILE", help="also write the report as JSON")
    parser.set_defaults(run=RUNS[command])


def parse_arguments(argv: list[str]) -> argparse.Namespace:
    """The arguments, with `recognize` as the command when none is named."""
    if not argv or argv[0] not in (*COMMANDS, "-h", "--help"):
        argv = [DEFAULT_COMMAND, *argv]
    return argument_parser().parse_args(argv)


def check_outputs(args: argparse.Namespace) -> None:
    """Usage errors, before any work, for a --json report or a calibration that would replace
    a file read (the manifest, the grammar, the model's files) or cannot be written."""
    reads = [str(args.manifest)] if args.command != DEFAULT_COMMAND else []
    reads += [str(args.grammar)] if args.grammar else []
    parser = argument_parser(args.command)
    if args.command != DEFAULT_COMMAND and args.json:
        check_output(parser, "--json", args.json, [*reads, *model_files(args.model)])
    if args.command == "calibrate":
        check_output(parser, "calibrating into", Path(args.model) / CALIBRATION_FILE, reads)


def _recognizer(args: argparse.Namespace) -> IntentRecognizer:
    return IntentRecognizer.from_pretrained(args.model, args.grammar, args.device, args.search,
                                            args.threshold, args.min_confidence, args.home)


def _recognize(args: argparse.Namespace) -> int:
    """Print each file's intent (a line, or a JSON object); a file that cannot be read is an
    error line, and the status 1 once all are done."""
    recognizer, failed = _recognizer(args), 0
    for path in args.files:
        try:
            intent = recognizer.recognize([path])[0]
        except AudioError as err:
            print_error(err)
            failed += 1
            continue
        if args.json:
            print(json.dumps({"file": path, **asdict(intent)}), flush=True)
        else:
            print(f"{tsv_field(path)}\t{tsv_field(intent.describe())}\t{intent.confidence:.2f}\t"
                  f"{tsv_field(intent.text)}", flush=True)
    return 1 if failed else 0


def _evaluate(args: argparse.Namespace) -> int:
    return _report(evaluate(_recognizer(args), args.manifest), args)


def _calibrate(args: argparse.Namespace) -> int:
    """Pick min_confidence on the manifest, write DIR/intents.json, report the manifest there."""
    chosen, report = calibrate_model(args.model, args.manifest, args.grammar, args.device)
    print(f"min_confidence {chosen:.4f} (written to {model_path(args.model) / CALIBRATION_FILE})")
    return _report(report, args)


def _report(report: dict, args: argparse.Namespace) -> int:
    if args.json:
        save_report(report, args.json)
    print(format_report(report))
    return 0


RUNS: dict[str, Callable[[argparse.Namespace], int]] = {
    "recognize": _recognize, "evaluate": _evaluate, "calibrate": _calibrate}


@quiet_pipe
def main(argv: list[str] | None = None) -> int:
    args = parse_arguments(sys.argv[1:] if argv is None else argv)
    check_outputs(args)
    try:
        return args.run(args)
    except ERRORS as err:
        print_error(err)
        return 1

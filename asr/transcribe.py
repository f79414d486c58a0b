"""Transcribe audio files: `python -m asr.transcribe --model DIR FILE [FILE ...]`.

Prints `FILE<TAB>text` per file; `--timestamps` prints `FILE<TAB>start<TAB>end<TAB>text` per
utterance instead; `--json` prints one JSON object per file (with `segments` under
`--timestamps`). Files of any length are streamed and cut into utterances by the VAD. A file
that cannot be read gets one error line on stderr; the others are still transcribed, and the
exit status is 1.
"""

import argparse
import json
import sys
from pathlib import Path

from asr.audio import AudioError
from asr.checkpoint import ModelDirError
from asr.decoding import MODES
from asr.stream import check_audio_file
from asr.transcriber import BACKENDS, Transcriber, Transcript


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("files", nargs="+", help="WAV or FLAC files, any sample rate and length")
    parser.add_argument("--model", required=True, help="model directory written by training")
    parser.add_argument("--json", action="store_true", help="one JSON object per file")
    parser.add_argument("--timestamps", action="store_true",
                        help="print each utterance with its start and end (seconds)")
    add_decoding_arguments(parser)
    args = parser.parse_args(argv)
    try:
        transcriber = Transcriber.from_pretrained(args.model, args.device,
                                                  batch_size=args.batch_size,
                                                  backend=args.backend, **decoding_overrides(args))
    except (ModelDirError, ValueError) as err:
        print(f"error: {err}", file=sys.stderr)
        return 1
    names, failed = [], 0
    for name in args.files:
        try:
            check_audio_file(name)
            names.append(name)
        except AudioError as err:
            print(f"error: {err}", file=sys.stderr)
            failed += 1
    try:
        results = transcriber.transcribe(names, show_progress=True) if names else []
    except AudioError as err:  # a file that went bad after its header was read
        print(f"error: {err}", file=sys.stderr)
        return 1
    for name, result in zip(names, results, strict=True):
        print(format_result(name, result, args.json, args.timestamps))
    return 1 if failed else 0


def add_decoding_arguments(parser: argparse.ArgumentParser) -> None:
    """Options shared with `asr.evaluate`: they override the model's saved `decode` config."""
    parser.add_argument("--beam-size", type=int, help="1 = greedy")
    parser.add_argument("--ctc-weight", type=float, help="joint CTC/attention weight (0..1)")
    parser.add_argument("--mode", choices=MODES, help="ctc_greedy: CTC head only, fastest")
    parser.add_argument("--words", help="a text file of the only words that may be written "
                                        "(a task's vocabulary, e.g. the ten digits)")
    parser.add_argument("--lm", help="language model directory (python -m asr.train_lm) to fuse")
    parser.add_argument("--lm-weight", type=float, help="log P_att + W log P_lm (default 1.0)")
    parser.add_argument("--lead-in-ms", type=float,
                        help="silence put before each utterance, for clips cut tight to the speech")
    parser.add_argument("--batch-size", type=int, default=16)
    parser.add_argument("--device", default="auto")
    parser.add_argument("--backend", choices=BACKENDS, default="torch",
                        help="onnx: the graphs python -m asr.export wrote, in onnxruntime")


def decoding_overrides(args: argparse.Namespace) -> dict:
    pairs = {"beam_size": args.beam_size, "ctc_weight": args.ctc_weight, "mode": args.mode,
             "words": read_words(args.words) if args.words else None, "lm": args.lm,
             "lm_weight": args.lm_weight, "lead_in_ms": args.lead_in_ms}
    return {key: value for key, value in pairs.items() if value is not None}


def read_words(path: str) -> list[str]:
    """The words of a word-list file (whitespace-separated, any number per line)."""
    try:
        words = Path(path).read_text(encoding="utf-8").split()
    except OSError as err:
        raise ValueError(f"{path}: cannot read the word list ({err.strerror})") from None
    except UnicodeDecodeError:
        raise ValueError(f"{path}: the word list is not UTF-8 text") from None
    if not words:
        raise ValueError(f"{path}: the word list is empty")
    return words


def format_result(name: str, result: Transcript, as_json: bool, timestamps: bool) -> str:
    if as_json:
        record = {"file": name, "text": result.text}
        if timestamps:
            record["segments"] = [{"start": s.start, "end": s.end, "text": s.text}
                                  for s in result.segments]
        return json.dumps(record)
    if timestamps:
        return "\n".join(f"{name}\t{s.start:.2f}\t{s.end:.2f}\t{s.text}" for s in result.segments)
    return f"{name}\t{result.text}"


if __name__ == "__main__":
    sys.exit(main())

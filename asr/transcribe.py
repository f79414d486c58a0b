"""Transcribe audio files: `python -m asr.transcribe --model DIR FILE [FILE ...]`.

Prints `FILE<TAB>text` per file (or JSON lines with `--json`). A file that cannot be read gets
one error line on stderr; the others are still transcribed, and the exit status is 1.
"""

import argparse
import json
import sys

from asr.audio import AudioError
from asr.checkpoint import ModelDirError
from asr.transcriber import Transcriber


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("files", nargs="+", help="WAV or FLAC files, any sample rate")
    parser.add_argument("--model", required=True, help="model directory written by training")
    parser.add_argument("--json", action="store_true", help="one JSON object per line")
    parser.add_argument("--beam-size", type=int, help="override the model's decoding beam")
    parser.add_argument("--batch-size", type=int, default=16)
    parser.add_argument("--device", default="auto")
    args = parser.parse_args(argv)
    options = {"beam_size": args.beam_size} if args.beam_size else {}
    try:
        transcriber = Transcriber.from_pretrained(args.model, args.device, **options)
    except ModelDirError as err:
        print(f"error: {err}", file=sys.stderr)
        return 1
    waves, names, failed = [], [], 0
    for name in args.files:
        try:
            waves.append(transcriber.load(name))
            names.append(name)
        except AudioError as err:
            print(f"error: {err}", file=sys.stderr)
            failed += 1
    for name, text in zip(names, transcriber.transcribe_waves(waves, args.batch_size),
                          strict=True):
        print(json.dumps({"file": name, "text": text}) if args.json else f"{name}\t{text}")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())

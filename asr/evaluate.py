"""Score a model on a manifest: `python -m asr.evaluate --model DIR --manifest FILE.jsonl`.

Prints WER, CER and the real-time factor (decoding seconds per audio second); `--json OUT`
also writes every utterance's reference, hypothesis and error counts. Audio is read a batch at
a time (utterances of similar declared duration together), so a manifest of any size is
scored in the memory of one batch; a progress bar counts the utterances on a terminal.
"""

import sys
import time
from pathlib import Path

from asr.audio import AudioError, load_audio
from asr.checkpoint import ModelDirError
from asr.cli import ArgumentParser, check_output, print_error, quiet_pipe, save_report
from asr.data import ManifestError, read_manifest
from asr.metrics import char_errors, word_errors
from asr.models import DEFAULT as DEFAULT_MODEL
from asr.models import model_path
from asr.outputs import model_files
from asr.progress import progress
from asr.transcribe import add_decoding_arguments, decoding_overrides, set_threads
from asr.transcriber import Transcriber

PROG = "asr-evaluate"  # the name usage errors begin with


def evaluate(transcriber: Transcriber, manifest: str | Path) -> dict:
    """Transcribe every utterance of a manifest, each whole (manifests hold utterances already
    cut), and score it against the references. Only decoding counts in the real-time factor."""
    utts = read_manifest(manifest)
    order = sorted(range(len(utts)), key=lambda i: utts[i].duration)
    hyps = [""] * len(utts)
    seconds, samples = 0.0, 0
    with progress(total=len(utts), desc="evaluating", unit="utt") as bar:
        for start in range(0, len(order), transcriber.batch_size):
            batch = order[start:start + transcriber.batch_size]
            waves = [load_audio(utts[i].audio_filepath, transcriber.sample_rate) for i in batch]
            started = time.perf_counter()
            for i, hyp in zip(batch, transcriber.transcribe_waves(waves), strict=True):
                hyps[i] = hyp
            seconds += time.perf_counter() - started
            samples += sum(len(w) for w in waves)
            bar.update(len(batch))
    audio_seconds = samples / transcriber.sample_rate
    rows = []
    for utt, hyp in zip(utts, hyps, strict=True):
        rows.append({"audio_filepath": utt.audio_filepath, "reference": utt.text,
                     "hypothesis": hyp, "words": word_errors(utt.text, hyp).as_dict(),
                     "chars": char_errors(utt.text, hyp).as_dict()})
    return {"manifest": str(manifest), "utterances": len(utts), "wer": _rate(rows, "words"),
            "cer": _rate(rows, "chars"), "rtf": seconds / audio_seconds,
            "audio_seconds": audio_seconds, "decode_seconds": seconds, "results": rows}


def _rate(rows: list[dict], unit: str) -> float:
    errors = sum(r[unit]["substitutions"] + r[unit]["deletions"] + r[unit]["insertions"]
                 for r in rows)
    length = sum(r[unit]["reference_length"] for r in rows)
    return errors / length if length else float(errors > 0)


@quiet_pipe
def main(argv: list[str] | None = None) -> int:
    parser = ArgumentParser(prog=PROG, description=__doc__.splitlines()[0])
    parser.add_argument("--model", type=model_path, default=DEFAULT_MODEL,
                        help="a model directory written by training, or a shipped model's name "
                             "(default: %(default)s)")
    parser.add_argument("--manifest", required=True, help="JSON-lines manifest to score")
    parser.add_argument("--json", help="write the scores and every utterance's result here")
    add_decoding_arguments(parser)
    args = parser.parse_args(argv)
    if args.json:
        check_output(parser, "--json", args.json, [args.manifest, *model_files(args.model)])
    set_threads(args)
    try:
        transcriber = Transcriber.from_pretrained(args.model, args.device, vad=None,
                                                  batch_size=args.batch_size,
                                                  backend=args.backend, threads=args.threads,
                                                  **decoding_overrides(args))
        result = evaluate(transcriber, args.manifest)
        if args.json:
            save_report(result, args.json)
    except (AudioError, ManifestError, ModelDirError, ValueError) as err:
        print_error(err)
        return 1
    print(f"{result['manifest']}: {result['utterances']} utterances, "
          f"WER {100 * result['wer']:.2f}%, CER {100 * result['cer']:.2f}%, "
          f"RTF {result['rtf']:.4f}")
    return 0


if __name__ == "__main__":
    sys.exit(main())

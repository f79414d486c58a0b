"""How far along base models are: WER and CER of the CTC head's best path and of the attention
decoder, on the same fixed samples of held-out manifests, for each model directory given.

    python -m recipes.base.compare exp/ab_stack exp/ab_conv asr/models/base \
        [--set dev=data/base_all/dev.jsonl:120 --set words=data/base_all/test_words.jsonl:120 \
         --set coffee=data/eval_coffee/dev.jsonl:60]

Early in training, before any word comes out whole, the CER of either path still tells two
recipes apart; the samples are drawn once (seed 0), so every model hears the same files.
"""

import argparse
import random
import sys

from asr.checkpoint import ModelDirError
from asr.data import ManifestError, read_manifest
from asr.metrics import error_rate
from asr.text import normalize_text
from asr.transcriber import Transcriber

DEFAULT_SETS = ["dev=data/base_all/dev.jsonl:120", "words=data/base_all/test_words.jsonl:120",
                "coffee=data/eval_coffee/dev.jsonl:60"]
MODES = {"ctc": {"mode": "ctc_greedy"}, "attention": {}}


def sample(spec: str) -> tuple[str, list]:
    """NAME=MANIFEST:COUNT -> the name and COUNT utterances drawn with seed 0."""
    name, _, rest = spec.partition("=")
    manifest, _, count = rest.rpartition(":")
    utterances = read_manifest(manifest)
    random.Random(0).shuffle(utterances)
    return name, utterances[:int(count)]


def scores(model: str, sets: dict[str, list]) -> dict[str, dict[str, tuple[float, float]]]:
    """mode -> set -> (WER, CER) of `model` (greedy search, no voice detection)."""
    found = {}
    for mode, options in MODES.items():
        transcriber = Transcriber.from_pretrained(model, "cpu", vad=None, **options)
        found[mode] = {}
        for name, utterances in sets.items():
            heard = transcriber.transcribe([u.audio_filepath for u in utterances])
            pairs = [(normalize_text(u.text), normalize_text(h.text))
                     for u, h in zip(utterances, heard, strict=True)]
            found[mode][name] = (error_rate(pairs), error_rate(pairs, "char"))
    return found


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("models", nargs="+", help="model directories (or a shipped model's name)")
    parser.add_argument("--set", action="append", dest="sets", metavar="NAME=MANIFEST:COUNT",
                        help=f"a sample to score (default: {' '.join(DEFAULT_SETS)})")
    args = parser.parse_args(argv)
    try:
        sets = dict(sample(spec) for spec in args.sets or DEFAULT_SETS)
        for model in args.models:
            for mode, found in scores(model, sets).items():
                cells = [f"{name} WER {100 * w:.1f} CER {100 * c:.1f}"
                         for name, (w, c) in found.items()]
                print(f"{model}\t{mode}\t" + " | ".join(cells), flush=True)
    except (ManifestError, ModelDirError, ValueError) as err:
        print(f"error: {err}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())

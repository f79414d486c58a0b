"""Synthetic speech of a recipe's words, by the synthetic corpus's training voices.

    python -m recipes.common.synthetic --vocabulary digits --max-words 7 --out data/fsdd_synthetic
    python -m recipes.common.synthetic --vocabulary speech_commands --max-words 1 \
        --out data/speech_commands_synthetic [--count 1500] [--jobs 2]
    python -m recipes.common.synthetic --text data/cathy/lm/fortunes.txt --max-words 15 \
        --out data/cathy_synthetic

A real corpus with few speakers (FSDD has three to train on) or few examples of a word
(Speech Commands' 25 "other" words, about seven clips each) narrows a fine-tuned model to
what it heard. Hearing the same words from many other voices while it fine-tunes keeps it
general: utterances of 1 to `max_words` words drawn from the vocabulary, each by a voice
drawn as the synthetic voice-command corpus draws its training voices (espeak-ng, flite,
festival; never its held-out dev/test voices), with its speed, pitch, warp, padding, noise
and level (`recipes.common.synthesis`). On FSDD and on Speech Commands 1500 of them lower
the fine-tuned model's WER on people it never heard (the figures: recipes/fsdd/RESULTS.md,
recipes/speech_commands/RESULTS.md).

`--text FILE` speaks whole sentences instead: lines of FILE (one sentence a line, as
`recipes.cathy.lm_text` writes them) of MIN_SENTENCE_WORDS to `max_words` words, drawn at
random, for a one-speaker corpus of an hour (cathy has heard ~2100 distinct words) to meet
more of the words it must spell. On cathy they gain little without a language model and
nothing with one, so its recipe does not use them (recipes/cathy/RESULTS.md).

Writes OUT/wavs/train/*.wav and OUT/train.jsonl (absolute audio paths), for a recipe's
`prepare --rehearse OUT/train.jsonl`.
"""

import argparse
import json
from collections.abc import Callable, Sequence
from pathlib import Path

import numpy as np

from asr.checkpoint import save_text
from asr.grammar import Sentence
from recipes.common.corpora import AUXILIARY, COMMANDS, DIGITS
from recipes.common.synthesis import Job, synthesize_all
from recipes.common.voices import choose_voice, discover_voices, split_voices

VOCABULARIES = {"digits": DIGITS, "speech_commands": COMMANDS + AUXILIARY}
MIN_SENTENCE_WORDS = 4

Draw = Callable[[np.random.Generator], str]


def word_strings(words: Sequence[str], max_words: int) -> Draw:
    """Draws 1 to `max_words` words of the vocabulary, with repeats."""
    def draw(rng: np.random.Generator) -> str:
        return " ".join(words[i] for i in rng.integers(0, len(words),
                                                       size=rng.integers(1, max_words + 1)))
    return draw


def sentences(paths: Sequence[Path], max_words: int) -> Draw:
    """Draws one of the lines of `paths` that have MIN_SENTENCE_WORDS to `max_words` words."""
    pool = []
    for path in paths:
        try:
            lines = Path(path).read_text(encoding="utf-8").splitlines()
        except (OSError, UnicodeDecodeError) as err:
            raise SystemExit(f"error: {path}: cannot read the sentences ({err})") from None
        pool += [" ".join(words) for words in map(str.split, lines)
                 if MIN_SENTENCE_WORDS <= len(words) <= max_words]
    if not pool:
        raise SystemExit(f"error: {', '.join(map(str, paths))}: no line of "
                         f"{MIN_SENTENCE_WORDS}-{max_words} words")
    return lambda rng: pool[rng.integers(len(pool))]


def plan(out: Path, draw: Draw, count: int, seed: int, sample_rate: int = 16000) -> list[Job]:
    """`count` utterances, each text by `draw` and its voice; all drawn from (seed, index), so
    the corpus is the same however many processes synthesise it."""
    voices = split_voices(discover_voices())["train"]
    jobs = []
    for index in range(count):
        rng = np.random.default_rng([seed, index])
        text = draw(rng)
        jobs.append(Job("train", index, Sentence(text, "synthetic"),
                        choose_voice(voices, "train", rng), seed, sample_rate, str(out)))
    return jobs


def generate(out: Path, draw: Draw, count: int = 1500, seed: int = 0,
             processes: int = 1) -> Path:
    """Synthesise the utterances into `out`; the manifest's path."""
    out = Path(out)
    (out / "wavs" / "train").mkdir(parents=True, exist_ok=True)
    records = synthesize_all(plan(out, draw, count, seed), processes)
    for record in records:
        record["audio_filepath"] = str((out / record["audio_filepath"]).resolve())
    manifest = out / "train.jsonl"
    save_text("".join(json.dumps(record) + "\n" for record in records), manifest)
    return manifest


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    source = parser.add_mutually_exclusive_group(required=True)
    source.add_argument("--vocabulary", choices=sorted(VOCABULARIES))
    source.add_argument("--text", type=Path, nargs="+", help="files of sentences, one a line")
    parser.add_argument("--max-words", type=int, default=1, help="words per utterance at most")
    parser.add_argument("--out", type=Path, required=True)
    parser.add_argument("--count", type=int, default=1500)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--jobs", type=int, default=1, help="synthesis processes")
    args = parser.parse_args(argv)
    if args.max_words < 1 or args.count < 1:
        parser.error("--max-words and --count must be at least 1")
    if args.text:
        draw, what = sentences(args.text, args.max_words), "sentences"
    else:
        draw, what = word_strings(VOCABULARIES[args.vocabulary], args.max_words), args.vocabulary
    manifest = generate(args.out, draw, args.count, args.seed, args.jobs)
    print(f"{manifest}: {args.count} synthetic utterances ({what}, up to {args.max_words} words)")


if __name__ == "__main__":
    main()

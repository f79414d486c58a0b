"""Inference against pocketsphinx: WER and CPU real-time factor on real recordings.

    python -m benchmarks.inference prepare --out data/bench          # speaker-split manifests
    python -m asr.train data.train_manifest=data/bench/train.jsonl \\
        data.dev_manifest=data/bench/dev.jsonl trainer.out_dir=exp/bench ...
    python -m benchmarks.inference --threads 2 --json OUT.json run --model ours=exp/bench \\
        --task digits=data/bench/test_digits.jsonl --task words=data/bench/test_words.jsonl
    (common options such as --threads and --json go before the sub-command)

Contenders, on the same 16 kHz waveforms (FSDD's 8 kHz digits are resampled, as our front end
does): pocketsphinx's bundled US English model with its default trigram LM, the same model
constrained by a JSGF grammar of the task's words, and each of our models decoded greedily,
with its beam, and with its beam limited to the task's words (`decode.words`, the grammar's
counterpart). Splits hold out speakers: FSDD's `yweweler` and every 7th Speech Commands speaker
are only ever tested on. Utterances are decoded one at a time by every contender (a streaming
recogniser's case), alternating contenders utterance by utterance; RTF is CPU time of the
decoding call over audio seconds, median over utterances, and the summed time over summed audio.

WUW Corpus II's free sentences (people on telephone lines, 8 kHz mu-law) are a task of their
own: `prepare` also runs the WUW recipe when `--data` holds `wuw/`, and its held-out speakers'
sentences are OUT/wuw/test_sentences.jsonl, the test set of `recipes/wuw` (train a model with
`bash recipes/wuw/run.sh`). A task whose references are sentences gets no grammar rows: a
grammar or word list of the test transcripts' own words would tell the recognisers the answer.

    python -m benchmarks.inference run --model wuw=exp/wuw/averaged \
        --task wuw_sentences=data/bench/wuw/test_sentences.jsonl
"""

import sys
import time
from pathlib import Path

import numpy as np
import torch

from asr.audio import load_audio
from asr.metrics import error_rate
from asr.text import normalize_text
from benchmarks.harness import (
    COMMAND_WORDS,
    DIGITS,
    base_parser,
    fsdd,
    markdown_table,
    median,
    report,
    require_data,
    sample,
    set_threads,
    speaker_of,
    speech_commands,
    write_manifest,
)

SAMPLE_RATE = 16000
TEST_SPEAKER_FSDD = "yweweler"


def speaker_roles(*lists: list[tuple[Path, str]]) -> dict[str, str]:
    """One role per Speech Commands speaker, over every list: every 7th speaker is test, the
    next dev, the rest train. Speakers of the first list (the test task) are numbered first, so
    adding training-only words never moves a test speaker."""
    order: list[str] = []
    for items in lists:
        order += sorted({speaker_of(f) for f, _ in items} - set(order))
    return {s: ("test", "dev", *["train"] * 5)[i % 7] for i, s in enumerate(order)}


def split(items: list[tuple[Path, str]], roles: dict[str, str]) -> dict[str, list]:
    parts: dict[str, list] = {"train": [], "dev": [], "test": []}
    for f, word in items:
        parts[roles[speaker_of(f)]].append((f, word))
    return parts


def prepare(root: Path, out: Path) -> None:
    """Train/dev manifests of digits and command words; test manifests per task."""
    require_data(root)
    digits = fsdd(root)
    held_out = [(f, w) for f, w in digits if speaker_of(f) == TEST_SPEAKER_FSDD]
    seen = [(f, w) for f, w in digits if speaker_of(f) != TEST_SPEAKER_FSDD]
    fsdd_dev = [(f, w) for f, w in seen if int(f.stem.split("_")[2]) < 5]
    fsdd_train = [(f, w) for f, w in seen if int(f.stem.split("_")[2]) >= 5]
    command_words = speech_commands(root, COMMAND_WORDS)
    spoken_digits = speech_commands(root, DIGITS)  # from `_unknown_`: more voices for digits
    roles = speaker_roles(command_words, spoken_digits)
    words, more_digits = split(command_words, roles), split(spoken_digits, roles)
    manifests = {
        "train": fsdd_train + words["train"] + more_digits["train"],
        "dev": fsdd_dev + words["dev"] + more_digits["dev"],
        "test_digits": held_out,
        "test_words": words["test"],
    }
    out.mkdir(parents=True, exist_ok=True)
    for name, items in manifests.items():
        write_manifest(out / f"{name}.jsonl", items)
        print(f"{out / name}.jsonl: {len(items)} utterances")
    if (root / "wuw").is_dir():
        from recipes.wuw import prepare as wuw

        sentences = wuw.prepare(root / "wuw", out / "wuw")["test_sentences"]
        print(f"{sentences}: {len(sentences.read_text().splitlines())} utterances")


class Pocketsphinx:
    """pocketsphinx's bundled en-us model; `words` given: a JSGF grammar of them, else its LM."""

    def __init__(self, words: list[str] | None = None) -> None:
        from pocketsphinx import Decoder, set_loglevel

        set_loglevel("FATAL")
        self.decoder = Decoder(samprate=SAMPLE_RATE)
        if words:
            grammar = ("#JSGF V1.0;\ngrammar task;\npublic <utterance> = "
                       + " | ".join(sorted(set(words))) + ";\n")
            self.decoder.add_jsgf_string("task", grammar)
            self.decoder.activate_search("task")

    def __call__(self, wave: torch.Tensor) -> str:
        pcm = (wave.numpy().clip(-1, 1) * 32767).astype(np.int16).tobytes()
        self.decoder.start_utt()
        self.decoder.process_raw(pcm, full_utt=True)
        self.decoder.end_utt()
        hyp = self.decoder.hyp()
        return normalize_text(hyp.hypstr) if hyp is not None else ""


class Ours:
    """One of our model directories, decoding one utterance per call."""

    def __init__(self, directory: Path, beam_size: int, words: list[str] | None = None) -> None:
        from asr.transcriber import Transcriber

        self.transcriber = Transcriber.from_pretrained(directory, device="cpu", beam_size=beam_size,
                                                       words=words)

    def __call__(self, wave: torch.Tensor) -> str:
        return self.transcriber.transcribe_waves([wave])[0]


def contenders(models: list[tuple[str, Path]], words: list[str] | None,
               with_pocketsphinx: bool) -> dict:
    """Every system; `words` None (a sentence task): none limited to the task's words."""
    found = {}
    if with_pocketsphinx:
        found["pocketsphinx (default LM)"] = Pocketsphinx()
        if words is not None:
            found["pocketsphinx (JSGF grammar)"] = Pocketsphinx(words)
    for name, directory in models:
        found[f"{name} greedy"] = Ours(directory, beam_size=1)
        found[f"{name} beam 5"] = Ours(directory, beam_size=5)
        if words is not None:
            found[f"{name} beam 5, task words"] = Ours(directory, beam_size=5, words=words)
    return found


def score_task(systems: dict, manifest: Path, limit: int | None, seed: int) -> dict:
    """Every system on every utterance, alternating systems per utterance (rotating the first)."""
    from asr.data import read_manifest

    utts = sample(read_manifest(manifest), limit, seed)
    waves = [load_audio(u.audio_filepath, SAMPLE_RATE) for u in utts]
    names = list(systems)
    pairs = {n: [] for n in names}
    cpu = {n: [] for n in names}
    for i, (utt, wave) in enumerate(zip(utts, waves, strict=True)):
        for name in names[i % len(names):] + names[:i % len(names)]:
            started = time.process_time()
            hyp = systems[name](wave)
            cpu[name].append(time.process_time() - started)
            pairs[name].append((normalize_text(utt.text), hyp))
    audio = [len(w) / SAMPLE_RATE for w in waves]
    return {name: {"utterances": len(utts), "wer": error_rate(pairs[name]),
                   "rtf_median": median([c / a for c, a in zip(cpu[name], audio, strict=True)]),
                   "rtf_total": sum(cpu[name]) / sum(audio),
                   "examples": pairs[name][:5]} for name in names}


def run(args) -> None:
    set_threads(args.threads)
    try:
        import pocketsphinx  # noqa: F401
        with_pocketsphinx = True
    except ImportError:
        with_pocketsphinx = False
        print("note: pocketsphinx is not installed (pip install '.[bench]'): its rows are skipped")
    models = [_named(m) for m in args.model]
    rows, results = [], {}
    for task, manifest in (_named(t) for t in args.task):
        from asr.data import read_manifest

        texts = [normalize_text(u.text).split() for u in read_manifest(manifest)]
        words = sorted({w for text in texts for w in text})
        sentences = any(len(text) > 1 for text in texts)
        scores = score_task(contenders(models, None if sentences else words, with_pocketsphinx),
                            manifest, args.limit, args.seed)
        results[task] = {"manifest": str(manifest), "words": words, "systems": scores}
        for name, s in scores.items():
            rows.append([task, name, s["utterances"], f"{100 * s['wer']:.1f}%", s["rtf_median"],
                         s["rtf_total"]])
    table = markdown_table(["task", "system", "utterances", "WER", "CPU RTF (median)",
                            "CPU RTF (total)"], rows)
    report(f"Inference vs pocketsphinx ({args.threads} thread(s))", table, {"tasks": results},
           args.json)


def _named(value: str) -> tuple[str, Path]:
    name, sep, path = value.partition("=")
    if not sep or not name:
        raise SystemExit(f"error: expected NAME=PATH, got {value!r}")
    if not Path(path).exists():
        raise SystemExit(f"error: {path}: not found")
    return name, Path(path)


def main(argv: list[str] | None = None) -> None:
    parser = base_parser(__doc__.splitlines()[0])
    sub = parser.add_subparsers(dest="command", required=True)
    prep = sub.add_parser("prepare", help="write speaker-split manifests")
    prep.add_argument("--out", type=Path, required=True)
    go = sub.add_parser("run", help="score pocketsphinx and our models")
    go.add_argument("--model", action="append", default=[], help="NAME=MODEL_DIR (repeatable)")
    go.add_argument("--task", action="append", required=True, help="NAME=TEST_MANIFEST (repeatable)")
    go.add_argument("--limit", type=int, help="at most this many utterances per task (seeded)")
    args = parser.parse_args(argv)
    if args.command == "prepare":
        prepare(args.data, args.out)
    else:
        run(args)


if __name__ == "__main__":
    sys.exit(main())

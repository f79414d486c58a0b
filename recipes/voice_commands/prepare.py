"""Synthesise a voice-command corpus: a grammar's sentences spoken by many synthetic voices.

    python -m recipes.voice_commands.prepare --out data/voice_commands
    python -m recipes.voice_commands.prepare --grammar coffee.yaml --out data/coffee

The grammar is a Rhino context file (`asr/grammar/__init__.py`; default: commands.yaml beside this
file). Each intent's sentences are enumerated when there are at most POOL sentences, and
sampled otherwise, so a grammar that expands to millions of sentences costs no more than a
small one. The corpus is sized in hours of speech (--hours), planned from each sentence's
expected duration before anything is synthesised: a grammar of long sentences gets fewer
utterances, and training on it takes as long as on the default grammar.

Train, dev and test differ in both sentences and voices, so the test word error rate measures
what a user would meet: commands phrased in ways the model never heard (e.g. "open the editor
please"), spoken by voices it never heard. Voices come from espeak-ng (accents x variants),
flite and festival; each utterance gets a random speed and pitch, a random vocal-tract length
(a resampling warp that shifts formants, as in VTLP), random leading and trailing silence,
coloured noise plus mains hum at a random SNR (most utterances) and a random level.
Everything is drawn from --seed, per utterance, so the corpus is the same for any --jobs.

Writes OUT/wavs/{split}/*.wav (16-bit PCM), OUT/{train,dev,test}.jsonl (NeMo manifests with
paths relative to OUT; each line also has the `intent` and `slots` it means, null for speech
that is no command), OUT/sample.wav + sample.txt (one test utterance), OUT/grammar.yaml (the
grammar, for the model directory), OUT/noise.jsonl and OUT/babble.jsonl (what training-time
noise and babble draw from: background clips and the real training speakers' speech),
OUT/calibration.jsonl (what `asr-intents calibrate` chooses the rejection threshold on: dev
with every real dev recording, where dev.jsonl holds a sample) and OUT/.done. With real
recordings (`real.py`) also OUT/test_real.jsonl (people saying commands) and
OUT/test_other.jsonl (people saying other things), both of speakers never heard in training.

The parts: `sentence_splits` (which sentences each split speaks), `recipes.common.voices` (which
voices), `recipes.common.synthesis` (speaking and augmenting one utterance) and `real` (recordings of people);
this module plans the corpus, runs the synthesis and writes the manifests.
"""

import argparse
import hashlib
import json
import random
import shutil
import sys
import time
from collections import Counter
from pathlib import Path

import numpy as np

from asr.checkpoint import atomic_write, save_text
from asr.grammar import Grammar, GrammarError, Sentence
from recipes.common import add_synthesis_options, positive, positive_hours, write_manifests
from recipes.common.ownership import claim, rebuilt
from recipes.common.real import (
    DEFAULT_REAL_ROOT,
    coloured_noise_clips,
    dev_sample,
    real_records,
)
from recipes.common.sentence_splits import (
    SPLITS,
    draw_seconds,
    draw_sentences,
    intent_pools,
    sentence_pool,
    split_sentences,
)
from recipes.common.synthesis import (
    WARP_RANGE,
    Job,
    expected_seconds,
    synthesize_all,
)
from recipes.common.voices import (
    ENGINE_WEIGHTS,
    FLITE_F0,
    Voice,
    choose_voice,
    discover_voices,
    split_voices,
)

DEFAULT_GRAMMAR = Path(__file__).with_name("commands.yaml")
# Synthetic audio of dev and test, as shares of training's (--hours).
HELD_OUT_SHARES = {"dev": 0.05, "test": 0.1}


def plan(args: argparse.Namespace, pools: dict[str, list[Sentence]],
         voices: dict[str, list[Voice]]) -> list[Job]:
    """Every utterance to synthesise: its split, sentence and voice."""
    sentences = split_sentences(pools, args.seed)
    jobs = []
    for split_index, split in enumerate(SPLITS):
        drawn = draw_split(args, split, sentence_pool(sentences[split]))
        for index, sentence in enumerate(drawn):
            rng = np.random.default_rng([args.seed, split_index, index, 1])
            voice = choose_voice(voices[split], split, rng)
            jobs.append(Job(split, index, sentence, voice, args.seed, args.sample_rate,
                            str(args.out)))
    return jobs


def draw_split(args: argparse.Namespace, split: str, pool: list[Sentence]) -> list[Sentence]:
    """The split's sentences, in order: as many as its count option says, or enough for its
    share of --hours by their expected durations (long sentences make fewer utterances)."""
    rng = random.Random(f"{args.seed}:{split}")
    count = getattr(args, split)
    if count is not None:
        return draw_sentences(pool, count, rng)
    hours = args.hours * HELD_OUT_SHARES.get(split, 1.0)
    return draw_seconds(pool, 3600 * hours, rng, lambda sentence: expected_seconds(sentence.text))


def settings(args: argparse.Namespace, voices: list[Voice], real: dict[str, list[dict]]) -> dict:
    """What the corpus depends on (not --jobs): a change means it must be generated again."""
    grammar = hashlib.sha256(args.grammar.read_bytes()).hexdigest()[:16]
    return {"hours": args.hours, "train": args.train, "dev": args.dev, "test": args.test,
            "seed": args.seed,
            "real": {split: len(records) for split, records in real.items()},
            "real_repeat": args.real_repeat,
            "sample_rate": args.sample_rate, "grammar": grammar, "warp": list(WARP_RANGE),
            "engine_weights": ENGINE_WEIGHTS,
            "flite_f0": {name: list(hz) for name, hz in FLITE_F0.items()},
            "voices": [f"{voice.engine}:{voice.name}" for voice in voices]}

def write_corpus(out: Path, records: list[dict], real: dict[str, list[dict]],
                 grammar: Path, real_repeat: int = 1) -> None:
    """The manifests, the grammar and the sample a user can transcribe first.

    Real recordings join train and dev. calibration.jsonl is dev with every real dev
    recording instead of a sample, since it is scored once rather than after every epoch:
    hundreds of non-commands, where a threshold chosen on dev's few dozen moves with them.
    The real test speakers get manifests of their own (test_real.jsonl: commands,
    test_other.jsonl: speech and noise that is no command), so test.jsonl keeps measuring
    unseen sentences and synthetic voices. Train lists each real command `real_repeat` times,
    so that a few thousand people are heard beside thousands of synthetic utterances.
    """
    synthetic = {split: [r for r in records if r["audio_filepath"].startswith(f"wavs/{split}/")]
                 for split in SPLITS}
    train = [r for r in real["train"] for _ in range(real_repeat if r["kind"] == "command" else 1)]
    noise = [r for r in real["train"] if r["kind"] == "noise"] + coloured_noise_clips(out)
    write_manifests(out, {"train": synthetic["train"] + train,
                          "dev": synthetic["dev"] + real["dev"],
                          "test": synthetic["test"],
                          "calibration": synthetic["dev"] + real.get("calibration", []),
                          "noise": noise,
                          "babble": [r for r in real["train"] if r["kind"] != "noise"]},  # voices
                    names=(*SPLITS, "calibration", "noise", "babble"))
    people = {"test_real": [r for r in real["test"] if r["kind"] == "command"],
              "test_other": [r for r in real["test"]
                             if r["kind"] in ("other", "sentence", "wake_word", "noise")]}
    for name in people:
        (out / f"{name}.jsonl").unlink(missing_ok=True)
    write_manifests(out, people, names=[name for name, rows in people.items() if rows])
    tests = synthetic["test"]
    clear = [r for r in tests if " " in r["text"] and (r["snr_db"] is None or r["snr_db"] >= 20)]
    sample = (clear or tests)[0]
    audio = (out / sample["audio_filepath"]).read_bytes()
    atomic_write(out / "sample.wav", lambda f: f.write(audio))
    save_text(sample["text"] + "\n", out / "sample.txt")
    save_text(grammar.read_text(encoding="utf-8"), out / "grammar.yaml")


def summary(records: list[dict], real: dict[str, list[dict]], elapsed: float) -> str:
    """The corpus in a few lines: each split's size, and the word training hears least."""
    lines = []
    for split in SPLITS:
        rows = [r for r in records if r["audio_filepath"].startswith(f"wavs/{split}/")]
        hours = sum(r["duration"] for r in rows) / 3600
        people = real[split]
        lines.append(f"  {split:5s}: {len(rows):5d} utterances, {hours:5.2f} h, "
                     f"{len({r['text'] for r in rows}):4d} sentences, "
                     f"{len({(r['engine'], r['voice']) for r in rows}):3d} voices; real: "
                     f"{len(people):4d} recordings, {len({r['voice'] for r in people}):3d} speakers")
    heard = Counter(word for r in records if r["audio_filepath"].startswith("wavs/train/")
                    for word in r["text"].split())
    word, times = min(heard.items(), key=lambda item: (item[1], item[0]))
    return "\n".join(["voice-command corpus:", *lines,
                      f"  every word of training's sentences said at least {times} times "
                      f"(\"{word}\")", f"  synthesised in {elapsed:.0f} s"])


def parse_args(argv: list[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--out", type=Path, default=Path("data/voice_commands"))
    parser.add_argument("--grammar", type=Path, default=DEFAULT_GRAMMAR,
                        help="the commands, as a Rhino context YAML file (default: %(default)s)")
    parser.add_argument("--hours", type=positive_hours, default=4.1,
                        help="hours of synthetic training speech; dev and test get "
                             f"{', '.join(f'{100 * v:g}%%' for v in HELD_OUT_SHARES.values())} "
                             "of it (default: %(default)s)")
    parser.add_argument("--train", type=positive, help="training utterances, instead of --hours")
    parser.add_argument("--dev", type=positive, help="dev utterances, instead of --hours' share")
    parser.add_argument("--test", type=positive, help="test utterances, instead of --hours' share")
    add_synthesis_options(parser, DEFAULT_REAL_ROOT)
    parser.add_argument("--real-repeat", type=positive, default=1,
                        help="times each real command recording is listed in train (default: "
                             "%(default)s)")
    return parser.parse_args(argv)


def main(argv: list[str] | None = None) -> None:
    args = parse_args(argv)
    claim(args.out, "voice_commands", [f"wavs/{split}" for split in SPLITS])
    start = time.monotonic()
    try:
        grammar = Grammar.load(args.grammar)
    except GrammarError as err:
        sys.exit(f"error: {err}")
    pools = intent_pools(grammar, args.seed)
    voices = discover_voices()
    use_real = args.real_root is not None and str(args.real_root) != "none"
    real = real_corpus(args.real_root, args.out, pools) if use_real else \
        {split: [] for split in SPLITS}
    wanted = settings(args, voices, real)
    done = args.out / ".done"
    if done.is_file() and done.read_text(errors="replace") == json.dumps(wanted, indent=1) + "\n":
        print(f"{args.out}: already prepared")
        return
    rebuilt(args.out, done, wanted)
    done.unlink(missing_ok=True)
    for split in SPLITS:
        wavs = args.out / "wavs" / split
        if wavs.exists():
            shutil.rmtree(wavs)
        wavs.mkdir(parents=True)
    jobs = plan(args, pools, split_voices(voices))
    print(f"synthesising {len(jobs)} utterances into {args.out} with {args.jobs} process(es)")
    try:
        records = synthesize_all(jobs, args.jobs)
    except RuntimeError as err:
        sys.exit(f"error: {err}")
    write_corpus(args.out, records, real, args.grammar, args.real_repeat)
    save_text(json.dumps(wanted, indent=1) + "\n", done)
    print(summary(records, real, time.monotonic() - start))


def real_corpus(root: Path, out: Path, pools: dict[str, list[Sentence]]) -> dict[str, list[dict]]:
    """Real recordings (`real.py`) per split, each command word with its grammar meaning, and
    under "calibration" every dev recording, of which "dev" is a sample."""
    known = {s.text: s for group in pools.values() for s in group}
    real = real_records(root, out, set(known), dev_size=None)
    for rows in real.values():
        for row in rows:
            sentence = known.get(row["text"])
            row["intent"], row["slots"] = (sentence.intent, sentence.slots) if sentence else (None, {})
    real["calibration"], real["dev"] = real["dev"], dev_sample(real["dev"])
    return real


if __name__ == "__main__":
    main()

"""Prepare the base model's corpus: broad English text spoken by many synthetic voices, and
every real person of `../shared/data` with what they really said.

    python -m recipes.base.prepare --out data/base
    python -m recipes.base.prepare --out data/base --hours 0.02 --no-kokoro   # a toy corpus
    python -m recipes.base.prepare --out data/base_alone --text alone --hours 0.4

The second form says only the one-word commands, each alone (`recipes.base.text.alone_text`),
with no real people: a corpus that `recipes.base.merge` joins to the broad ones.

The text (`recipes.base.text`) spans every grammar of the project and of `../shared/data`
(their training sentences only), a grammar of requests across many domains, book prompts,
numbers, dates, times, letters and thousands of common words in carrier phrases, so that a
grammar written later meets words the model has heard or can spell from sound. The voices are
Kokoro-82M's English voices (`tools/setup_kokoro.sh`; the nearest to people), espeak-ng, flite
and festival; each utterance gets a random speed, vocal-tract warp, padding, noise and level
(`recipes.common.synthesis`). Synthesised speech is cached by content (`ASR_TTS_CACHE`), so a
larger or a repeated prepare synthesises only what is new.

Real people (`recipes.voice_commands.real` and `recipes.cathy.prepare`) are split by speaker
(cathy, the one reader, by prompt) exactly as their own recipes split them, so a held-out
person is held out for every model. Training hears the train speakers; the held-out ones make
the test manifests by kind of speech:

- `test.jsonl`: held-out sentences in held-out synthetic voices;
- `test_words.jsonl`: people saying one word (Speech Commands, FSDD digits);
- `test_read.jsonl`: cathy reading held-out book prompts;
- `test_phone.jsonl`: people on telephone lines (WUW Corpus II), wake words and free sentences.

Noise with no voice in it (Speech Commands' background clips, coloured noise) trains and is
scored with the empty transcript, so that the model learns to write nothing where nobody speaks
rather than invent a word; those clips are also the training-time noise mixed under speech.

Writes OUT/wavs/{split}/*.wav, OUT/{train,dev}.jsonl and the test manifests above, OUT/noise.jsonl
and OUT/babble.jsonl (training-time noise and other voices), OUT/sample.wav + sample.txt and
OUT/.done (the settings the corpus was made with: a run with the same settings does nothing).
"""

import argparse
import hashlib
import json
import random
import shutil
import sys
import time
from collections import Counter, defaultdict
from pathlib import Path

import numpy as np

from asr.checkpoint import atomic_write, save_text
from asr.grammar import Sentence
from recipes.base.text import ALONE_SHARES, SOURCE_SHARES, Line, alone_text, corpus_text
from recipes.common import SPLITS, add_synthesis_options, hash_split, positive_hours
from recipes.common.corpora import CATHY_DEV_PERCENT, CATHY_TEST_PERCENT, SALT, arctic_utterances
from recipes.common.ownership import claim, rebuilt
from recipes.common.real import DEFAULT_REAL_ROOT, coloured_noise_clips, real_records
from recipes.common.synthesis import STATS, Job, expected_seconds, synthesize_all
from recipes.common.voices import Voice, choose_voice, discover_voices, split_voices

# Synthetic dev and test audio, as shares of training's --hours.
HELD_OUT_SHARES = {"dev": 0.04, "test": 0.08}
# Test manifests of real people, by the corpus they come from.
REAL_TESTS = {"speech_commands": "test_words", "fsdd": "test_words", "cathy": "test_read",
              "wuw": "test_phone"}
# Dev is scored after every epoch: this many real recordings beside the synthetic ones.
DEV_REAL = 300
# Bumped when the manifests a corpus is written into change: an older corpus is written again
# (from the synthesis cache).
LAYOUT = 2


def family(source: str) -> str:
    """The SOURCE_SHARES key of a source: "grammar:coffee" belongs to "grammar"."""
    return source.partition(":")[0]


def draw_lines(lines: list[Line], seconds: float, rng: random.Random,
               shares: dict[str, float] = SOURCE_SHARES) -> list[Line]:
    """Lines for `seconds` of expected speech: each family of sources gets its `shares` of
    them, split evenly among its sources, and each source is drawn in reshuffled passes (every
    line once before any twice)."""
    by_source: dict[str, list[Line]] = defaultdict(list)
    for line in lines:
        by_source[line.source].append(line)
    members = Counter(family(source) for source in by_source)
    total = sum(shares.get(name, 0.0) for name in members)
    drawn = []
    for source, group in sorted(by_source.items()):
        name = family(source)
        budget = seconds * shares.get(name, 0.0) / total / members[name]
        order: list[Line] = []
        spent = 0.0
        while spent < budget:
            if not order:
                order = list(group)
                rng.shuffle(order)
            drawn.append(order.pop())
            spent += expected_seconds(drawn[-1].text)
    rng.shuffle(drawn)
    return drawn


def plan(text: dict[str, list[Line]], voices: dict[str, list[Voice]], hours: float, seed: int,
         sample_rate: int, out: Path, shares: dict[str, float] = SOURCE_SHARES) -> list[Job]:
    """Every utterance to synthesise: its split, sentence and voice."""
    jobs = []
    for split_index, split in enumerate(SPLITS):
        seconds = 3600 * hours * HELD_OUT_SHARES.get(split, 1.0)
        lines = draw_lines(text[split], seconds, random.Random(f"{seed}:{split}"), shares)
        for index, line in enumerate(lines):
            rng = np.random.default_rng([seed, split_index, index, 1])
            voice = choose_voice(voices[split], split, rng)
            jobs.append(Job(split, index, Sentence(line.text, line.source), voice, seed,
                            sample_rate, str(out)))
    return jobs


def chosen_voices(voices: list[Voice], names: set[str] | None) -> list[Voice]:
    """The voices `--voices` names (all when None), ENGINE:* for all of an engine's; a name
    that is not there is an error."""
    if names is None:
        return voices
    found = {f"{voice.engine}:{voice.name}": voice for voice in voices}
    engines = {name.removesuffix(":*") for name in names if name.endswith(":*")}
    named = names - {f"{engine}:*" for engine in engines}
    missing = sorted(named - found.keys()) + sorted(
        f"{engine}:*" for engine in engines if not any(v.engine == engine for v in voices))
    if missing:
        sys.exit(f"error: --voices: no such voice here: {', '.join(missing)}")
    return sorted({found[name] for name in named} | {v for v in voices if v.engine in engines})


def voices_per_split(voices: list[Voice]) -> dict[str, list[Voice]]:
    """`split_voices`, a split without voices of its own hearing the training ones."""
    splits = split_voices(voices)
    fallback = splits["train"] or voices
    return {split: found or fallback for split, found in splits.items()}


def cathy_records(root: Path) -> dict[str, list[dict]]:
    """cathy's readings per split, by prompt as `recipes.cathy.prepare` splits them."""
    import soundfile as sf

    splits: dict[str, list[dict]] = {name: [] for name in SPLITS}
    folder = root / "cathy"
    if not folder.is_dir():
        return splits
    for audio, prompt, text in arctic_utterances(folder):
        split = hash_split(prompt, CATHY_DEV_PERCENT, CATHY_TEST_PERCENT, SALT)
        splits[split].append({"audio_filepath": str(audio), "text": text,
                              "duration": round(sf.info(str(audio)).duration, 3), "voice": "cathy",
                              "engine": "real", "source": "cathy", "kind": "sentence",
                              "prompt": prompt})
    return splits


def real_corpus(root: Path, out: Path) -> dict[str, list[dict]]:
    """Every real recording per split, with its real transcript."""
    real = real_records(root, out, set())
    for split, rows in cathy_records(root).items():
        real[split] += rows
    return real


def write_corpus(out: Path, records: list[dict], real: dict[str, list[dict]]) -> None:
    """The manifests: train and dev (synthetic and real), the tests by kind, noise, babble."""
    def write(name: str, rows: list[dict]) -> None:
        save_text("".join(json.dumps(row, ensure_ascii=False) + "\n" for row in rows),
                  out / f"{name}.jsonl")

    synthetic = {split: [r for r in records if r["audio_filepath"].startswith(f"wavs/{split}/")]
                 for split in SPLITS}
    people = [r for r in real["train"] if r["kind"] != "noise"]
    noise = [r for r in real["train"] if r["kind"] == "noise"] + coloured_noise_clips(out)
    dev_real = real["dev"]
    if len(dev_real) > DEV_REAL:
        dev_real = sorted(random.Random(0).sample(dev_real, DEV_REAL),
                          key=lambda r: r["audio_filepath"])
    write("train", synthetic["train"] + people + noise)
    write("dev", synthetic["dev"] + dev_real)
    write("test", synthetic["test"])
    for name in sorted(set(REAL_TESTS.values())):
        write(name, [r for r in real["test"] if r["kind"] != "noise"
                     and REAL_TESTS[r["source"]] == name])
    write("noise", noise)
    write("babble", people)
    clear = [r for r in synthetic["test"] if " " in r["text"] and (r["snr_db"] or 99) >= 20]
    sample = (clear or synthetic["test"])[0]
    audio = (out / sample["audio_filepath"]).read_bytes()
    atomic_write(out / "sample.wav", lambda f: f.write(audio))
    save_text(sample["text"] + "\n", out / "sample.txt")


def settings(args: argparse.Namespace, voices: list[Voice], text: dict[str, list[Line]],
             real: dict[str, list[dict]]) -> dict:
    """What the corpus depends on (not --jobs): a change means it must be made again."""
    digest = hashlib.sha256("\n".join(f"{split}\t{line.source}\t{line.text}" for split in SPLITS
                                      for line in text[split]).encode()).hexdigest()[:16]
    return {"layout": LAYOUT, "hours": args.hours, "seed": args.seed,
            "sample_rate": args.sample_rate, "text": digest,
            "real": {split: len(rows) for split, rows in real.items()},
            "voices": [f"{voice.engine}:{voice.name}" for voice in voices]}


def summary(records: list[dict], real: dict[str, list[dict]], synthesised: int,
            elapsed: float) -> str:
    lines = ["base corpus:"]
    for split in SPLITS:
        rows = [r for r in records if r["audio_filepath"].startswith(f"wavs/{split}/")]
        engines = Counter(r["engine"] for r in rows)
        lines.append(f"  {split:5s}: {len(rows):6d} synthetic utterances, "
                     f"{sum(r['duration'] for r in rows) / 3600:5.2f} h "
                     f"({', '.join(f'{e} {n}' for e, n in sorted(engines.items()))}); real: "
                     f"{len(real[split]):5d} recordings, "
                     f"{sum(r['duration'] for r in real[split]) / 3600:5.2f} h")
    lines.append(f"  {synthesised} utterances synthesised, {len(records) - synthesised} from the "
                 f"cache, in {elapsed:.0f} s")
    return "\n".join(lines)


def parse_args(argv: list[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--out", type=Path, default=Path("data/base"))
    parser.add_argument("--hours", type=positive_hours, default=3.0,
                        help="hours of synthetic training speech (default: %(default)s)")
    add_synthesis_options(parser, DEFAULT_REAL_ROOT)
    parser.add_argument("--text", choices=("broad", "alone"), default="broad",
                        help="broad: every source of recipes.base.text, with the real people; "
                             "alone: the one-word commands, each said alone, without them")
    parser.add_argument("--no-kokoro", dest="kokoro", action="store_false",
                        help="leave out Kokoro's voices even when tools/setup_kokoro.sh set them up")
    parser.add_argument("--voices", type=lambda text: set(text.split(",")),
                        help="only these voices, as ENGINE:NAME,... (e.g. kokoro:af_heart,"
                             "espeak-ng:en-us+m3) or ENGINE:* (e.g. kokoro:*: all of Kokoro's); "
                             "a split left with none hears the training voices")
    return parser.parse_args(argv)


def main(argv: list[str] | None = None) -> None:
    args = parse_args(argv)
    claim(args.out, "base", [f"wavs/{split}" for split in SPLITS])
    start = time.monotonic()
    broad = args.text == "broad"
    use_real = broad and args.real_root is not None and str(args.real_root) != "none"
    real_root = args.real_root if use_real else None
    text, shares = ((corpus_text(real_root, args.seed), SOURCE_SHARES) if broad
                    else (alone_text(), ALONE_SHARES))
    voices = chosen_voices(discover_voices(kokoro=args.kokoro), args.voices)
    real = real_corpus(real_root, args.out) if use_real else {split: [] for split in SPLITS}
    wanted = settings(args, voices, text, real)
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
    jobs = plan(text, voices_per_split(voices), args.hours, args.seed, args.sample_rate, args.out,
                shares)
    print(f"synthesising {len(jobs)} utterances into {args.out} with {args.jobs} process(es)")
    before = STATS["synthesised"]
    try:
        records = synthesize_all(jobs, args.jobs)
    except RuntimeError as err:
        sys.exit(f"error: {err}")
    write_corpus(args.out, records, real)
    save_text(json.dumps(wanted, indent=1) + "\n", done)
    print(summary(records, real, STATS["synthesised"] - before, time.monotonic() - start))


if __name__ == "__main__":
    main()

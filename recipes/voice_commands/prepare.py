"""Synthesise a voice-command corpus: a grammar's sentences spoken by many synthetic voices.

    python -m recipes.voice_commands.prepare --out data/voice_commands
    python -m recipes.voice_commands.prepare --grammar coffee.yaml --out data/coffee

The grammar is a Rhino context file (`asr/assistant/grammar.py`; default: commands.yaml beside this
file). Each intent's sentences are enumerated when there are at most POOL sentences, and
sampled otherwise, so a grammar that expands to millions of sentences costs no more than a
small one. Train, dev and test differ in both sentences and voices, so the test word error rate measures
what a user would meet: commands phrased in ways the model never heard (e.g. "open the editor
please"), spoken by voices it never heard. Voices come from espeak-ng (accents x variants),
flite and festival; each utterance gets a random speed and pitch, a random vocal-tract length
(a resampling warp that shifts formants, as in VTLP), random leading and trailing silence,
coloured noise plus mains hum at a random SNR (most utterances) and a random level.
Everything is drawn from --seed, per utterance, so the corpus is the same for any --jobs.

Writes OUT/wavs/{split}/*.wav (16-bit PCM), OUT/{train,dev,test}.jsonl (NeMo manifests with
paths relative to OUT; each line also has the `intent` and `slots` it means, null for speech
that is no command), OUT/sample.wav + sample.txt (one test utterance), OUT/grammar.yaml (the
grammar, for the model directory) and OUT/.done. With real recordings (`real.py`) also
OUT/test_real.jsonl (people saying commands) and OUT/test_other.jsonl (people saying other
things), both of speakers never heard in training.
"""

import argparse
import hashlib
import json
import math
import os
import random
import shutil
import subprocess
import sys
import tempfile
import time
from collections import defaultdict
from dataclasses import dataclass
from multiprocessing import Pool
from pathlib import Path

import librosa
import numpy as np
import soundfile as sf

from asr.assistant.grammar import Grammar, GrammarError, Sentence
from asr.checkpoint import atomic_write, save_text
from asr.progress import progress
from recipes.voice_commands.real import real_records

SPLITS = ("train", "dev", "test")
DEFAULT_GRAMMAR = Path(__file__).with_name("commands.yaml")
# Sentences per intent at most: enumerated below this, sampled above it.
POOL = 4000
# Share of each intent's non-core sentences held out for dev and test (cores stay in train).
SENTENCE_FRACTIONS = {"dev": 0.1, "test": 0.2}
# Every intent gets at least this share of a split's sentence pool, so that small intents
# ("what time is it", single words) are not drowned by the 480 timer sentences.
MIN_INTENT_SHARE = 0.04

ESPEAK_ACCENTS = ("en-gb", "en-us", "en-gb-scotland", "en-gb-x-rp", "en-gb-x-gbclan",
                  "en-gb-x-gbcwmd", "en-029", "en-us-nyc")
# Human-sounding espeak-ng variants; whispering, echoing and robot variants are left out.
ESPEAK_VARIANTS = (
    "m1 m2 m3 m4 m5 m6 m7 m8 f1 f2 f3 f4 f5 klatt klatt2 klatt3 klatt4 klatt5 klatt6 croak "
    "grandpa grandma Alex Andy adam benjamin boris david edward Gene Mike max paul pedro robert "
    "quincy michel Hugo john norbert Storm travis victor Annie Andrea Alicia aunty "
    "belinda linda anika steph shelby"
).split()
FLITE_SKIP = {"awb_time"}  # a limited-domain voice: it can only say clock times
# Voices heard only in dev or test, keyed by (engine, espeak variant or voice name). Each split
# keeps the same kinds of espeak variants: male, female, klatt, named ones. flite's natural male
# voices awb and rms are the nearest to a person: awb trains, rms is held out for test; dev
# holds festival's ked instead.
HELD_OUT = {
    **{("espeak-ng", v): "dev" for v in ("m4", "f3", "klatt3", "Andy", "linda")},
    **{("espeak-ng", v): "test" for v in ("m7", "f4", "klatt5", "robert", "Annie")},
    ("festival", "ked_diphone"): "dev",
    ("flite", "rms"): "test",
}
# Share of each engine's voices per split. Training leans on flite's voices (twice their share
# in dev and test): they are the nearest to people, and espeak-ng's many formant voices are
# easier to generalise across than from them to a human-like voice. festival is 5-10x slower
# than flite (it loads its voice per call); its voices are kal and ked (diphone, like flite's
# kal) and an HTS slt.
ENGINE_WEIGHTS = {"train": {"espeak-ng": 0.62, "flite": 0.36, "festival": 0.02},
                  "held_out": {"espeak-ng": 0.8, "flite": 0.18, "festival": 0.02}}
# Mean pitch range (Hz) per flite voice; rms ignores the setting. slt spans male and female
# pitch: with the warp below it and awb stand in for the natural voices of people.
FLITE_F0 = {"kal": (85, 130), "kal16": (85, 130), "awb": (100, 150), "slt": (95, 230)}

# Vocal-tract length warp: the speech is resampled as if recorded at rate * warp, scaling every
# formant (and the pitch) by `warp`. A handful of flite voices become a continuum of speakers, so
# the model does not learn "the two human-like voices of training" but human-like speech.
WARP_RANGE = (0.85, 1.18)
NOISY_FRACTION = 0.8
_SHARED = Path(__file__).resolve().parents[2].parent / "shared" / "data"
DEFAULT_REAL_ROOT = _SHARED if _SHARED.is_dir() else None
NOISE_COLORS = ("white", "pink", "brown")


@dataclass(frozen=True, order=True)
class Voice:
    """A synthetic voice: the unit that train, dev and test never share."""

    engine: str
    variant: str  # espeak-ng variant (m3, klatt2, ...) or the flite/festival voice name
    accent: str = ""  # espeak-ng language, e.g. en-gb-scotland

    @property
    def name(self) -> str:
        return f"{self.accent}+{self.variant}" if self.accent else self.variant


@dataclass(frozen=True)
class Job:
    """One utterance to synthesise; everything random is drawn from (seed, split, index)."""

    split: str
    index: int
    sentence: Sentence
    voice: Voice
    seed: int
    sample_rate: int
    out: str

    @property
    def relpath(self) -> str:
        return f"wavs/{self.split}/{self.split}_{self.index:06d}.wav"


# ---------------------------------------------------------------------------- sentences


def intent_pools(grammar: Grammar, seed: int) -> dict[str, list[Sentence]]:
    """Each intent's sentences: all of them, or POOL draws for a large intent."""
    return {intent: grammar.sentences(intent, POOL, random.Random(f"{seed}:{intent}"))
            for intent in grammar.intents}


def split_sentences(pools: dict[str, list[Sentence]], seed: int) -> dict[str, list[Sentence]]:
    """Sentences per split: multi-word sentences disjoint, every intent in every split.

    Each core sentence (no optional part said: "open the editor") stays in train, so every
    word is trained on and dev and test hold unseen combinations of known parts ("open the
    editor please"). One-word sentences ("yes", "three") are a closed set and appear in all
    three splits, and so do the sentences of an intent that has nothing but cores.
    """
    rng = random.Random(seed)
    splits: dict[str, list[Sentence]] = {name: [] for name in SPLITS}
    for _, group in sorted(pools.items()):
        extras = [s for s in group if not s.core and " " in s.text]
        if not extras:
            for name in SPLITS:
                splits[name] += group
            continue
        rng.shuffle(extras)
        counts = {name: max(1, round(fraction * len(extras)))
                  for name, fraction in SENTENCE_FRACTIONS.items()}
        splits["dev"] += extras[:counts["dev"]]
        splits["test"] += extras[counts["dev"]:counts["dev"] + counts["test"]]
        splits["train"] += extras[counts["dev"] + counts["test"]:]
        splits["train"] += [s for s in group if s.core or " " not in s.text]
    return {name: sorted(found, key=lambda s: s.text) for name, found in splits.items()}


def sentence_pool(sentences: list[Sentence]) -> list[Sentence]:
    """The sentences, those of small intents repeated so each intent gets a fair share."""
    by_intent: dict[str, list[Sentence]] = defaultdict(list)
    for sentence in sentences:
        by_intent[sentence.intent].append(sentence)
    floor = MIN_INTENT_SHARE * len(sentences)
    return [sentence for group in by_intent.values()
            for sentence in group * max(1, math.ceil(floor / len(group)))]


def draw_sentences(pool: list[Sentence], count: int, rng: random.Random) -> list[Sentence]:
    """`count` sentences by round-robin over reshuffled passes: the whole pool is covered."""
    drawn: list[Sentence] = []
    while len(drawn) < count:
        order = list(pool)
        rng.shuffle(order)
        drawn += order
    return drawn[:count]


# ---------------------------------------------------------------------------- voices


def _output(args: list[str]) -> str:
    return subprocess.run(args, capture_output=True, text=True, check=True).stdout


def espeak_voices() -> list[Voice]:
    """The curated accents x variants that this espeak-ng installation has."""
    listed = [line.split() for line in _output(["espeak-ng", "--voices=en"]).splitlines()[1:]]
    accents = {cols[1] for cols in listed if len(cols) > 4 and not cols[4].startswith("mb/")}
    listed = [line.split() for line in _output(["espeak-ng", "--voices=variant"]).splitlines()[1:]]
    variants = {cols[4].removeprefix("!v/") for cols in listed if len(cols) > 4}
    return [Voice("espeak-ng", variant, accent) for accent in ESPEAK_ACCENTS if accent in accents
            for variant in ESPEAK_VARIANTS if variant in variants]


def flite_voices() -> list[Voice]:
    names = _output(["flite", "-lv"]).partition(":")[2].split()
    return [Voice("flite", name) for name in names if name not in FLITE_SKIP]


def festival_voices() -> list[Voice]:
    listed = _output(["festival", "-b", "(print (voice.list))"]).strip("()\n ").split()
    return [Voice("festival", name) for name in listed if name != "nil"]  # nil: no voices


def discover_voices() -> list[Voice]:
    """All usable voices; a missing optional engine is skipped with a note."""
    if shutil.which("espeak-ng") is None:
        sys.exit("error: espeak-ng not found; install it with `apt-get install espeak-ng`")
    voices = espeak_voices()
    for engine, needs, find in (("flite", ("flite",), flite_voices),
                                ("festival", ("festival", "text2wave"), festival_voices)):
        if all(shutil.which(program) for program in needs):
            voices += find()
        else:
            print(f"note: {engine} not found, skipping its voices (apt-get install {engine})")
    return sorted(voices)


def split_voices(voices: list[Voice]) -> dict[str, list[Voice]]:
    """Voices per split: the HELD_OUT ones in dev or test, all others in train."""
    splits: dict[str, list[Voice]] = {name: [] for name in SPLITS}
    for voice in voices:
        splits[HELD_OUT.get((voice.engine, voice.variant), "train")].append(voice)
    return splits


def choose_voice(voices: list[Voice], split: str, rng: np.random.Generator) -> Voice:
    """An engine by the split's ENGINE_WEIGHTS (among those present), then one of its voices
    uniformly."""
    shares = ENGINE_WEIGHTS["train" if split == "train" else "held_out"]
    engines = sorted({voice.engine for voice in voices})
    weights = np.array([shares[engine] for engine in engines])
    engine = engines[rng.choice(len(engines), p=weights / weights.sum())]
    candidates = [voice for voice in voices if voice.engine == engine]
    return candidates[rng.integers(len(candidates))]


# ---------------------------------------------------------------------------- audio


def _engine_command(voice: Voice, text: str, wav: str, rng: np.random.Generator) -> list[str]:
    """The synthesiser's argument list with a random speed (and pitch where it takes one)."""
    if voice.engine == "espeak-ng":
        # -a 40: full amplitude clips with some variants; the level is set later anyway.
        return ["espeak-ng", "-v", voice.name, "-s", str(rng.integers(130, 201)),
                "-p", str(rng.integers(30, 71)), "-a", "40", "-w", wav, text]
    stretch = f"{rng.uniform(0.85, 1.2):.2f}"
    if voice.engine == "flite":
        pitch = []
        if voice.name in FLITE_F0:
            f0 = rng.uniform(*FLITE_F0[voice.name])
            pitch = ["--setf", f"int_f0_target_mean={f0:.0f}"]
        return ["flite", "-voice", voice.name, "--setf", f"duration_stretch={stretch}", *pitch,
                "-t", text, "-o", wav]
    return ["text2wave", "-o", wav, "-eval", f"(voice_{voice.name})",
            "-eval", f"(Parameter.set 'Duration_Stretch {stretch})"]


def synthesize(voice: Voice, text: str, rng: np.random.Generator) -> tuple[np.ndarray, int]:
    """Speak `text` into a temporary WAV and read it back as mono float32."""
    handle, wav = tempfile.mkstemp(suffix=".wav")
    os.close(handle)
    try:
        args = _engine_command(voice, text, wav, rng)
        stdin = text if voice.engine == "festival" else None
        done = subprocess.run(args, input=stdin, capture_output=True, text=True)
        if done.returncode != 0 or os.path.getsize(wav) == 0:
            raise RuntimeError(f"{voice.engine} failed for voice {voice.name} on {text!r}: "
                               f"{done.stderr.strip()[:200]}")
        samples, rate = sf.read(wav, dtype="float32", always_2d=True)
    finally:
        os.remove(wav)
    return samples.mean(axis=1), rate


def trim(wave: np.ndarray, rate: int, margin: float = 0.02) -> np.ndarray:
    """Cut the engine's own silence (engines differ) so the padding added later is the only one."""
    loud = np.flatnonzero(np.abs(wave) > 0.01 * np.abs(wave).max())
    if loud.size == 0:
        return wave
    pad = int(margin * rate)
    return wave[max(0, loud[0] - pad):loud[-1] + pad + 1]


def colored_noise(length: int, color: str, rng: np.random.Generator) -> np.ndarray:
    """White, pink (1/f power) or brown (1/f^2 power) noise with unit RMS."""
    noise = rng.standard_normal(length)
    if color != "white":
        spectrum = np.fft.rfft(noise)
        frequency = np.maximum(np.arange(spectrum.size), 1)
        spectrum /= frequency ** (0.5 if color == "pink" else 1.0)
        noise = np.fft.irfft(spectrum, length)
    return noise / max(float(np.sqrt(np.mean(noise**2))), 1e-12)


def hum(length: int, rate: int, rng: np.random.Generator) -> np.ndarray:
    """Mains hum (50 or 60 Hz and two harmonics) at -30 to -10 dB relative to unit RMS."""
    mains = (50, 60)[rng.integers(2)]
    t = np.arange(length) / rate
    tone = sum(np.sin(2 * np.pi * k * mains * t + rng.uniform(0, 2 * np.pi)) / k
               for k in (1, 2, 3))
    level = 10 ** (rng.uniform(-30, -10) / 20)
    return level * tone / np.sqrt(np.mean(tone**2))


def add_noise(wave: np.ndarray, speech_power: float, rate: int,
              rng: np.random.Generator) -> tuple[np.ndarray, float | None]:
    """Noise plus hum at a random 5-40 dB SNR for NOISY_FRACTION of utterances; the SNR used."""
    if rng.random() >= NOISY_FRACTION:
        return wave, None
    snr = float(rng.uniform(5, 40))
    color = NOISE_COLORS[rng.integers(len(NOISE_COLORS))]
    noise = colored_noise(wave.size, color, rng) + hum(wave.size, rate, rng)
    noise *= np.sqrt(speech_power / (np.mean(noise**2) * 10 ** (snr / 10)))
    return wave + noise, round(snr, 1)


def render(job: Job) -> dict:
    """Synthesise, clean up, pad, add noise, set a random level and write one utterance."""
    rng = np.random.default_rng([job.seed, SPLITS.index(job.split), job.index])
    wave, rate = synthesize(job.voice, job.sentence.text, rng)
    warp = float(rng.uniform(*WARP_RANGE))
    speech = librosa.resample(trim(wave, rate), orig_sr=rate * warp, target_sr=job.sample_rate,
                              res_type="soxr_hq")
    lead, tail = (int(rng.uniform(0.05, 0.4) * job.sample_rate) for _ in range(2))
    padded = np.concatenate([np.zeros(lead), speech, np.zeros(tail)])
    noisy, snr = add_noise(padded, float(np.mean(speech**2)), job.sample_rate, rng)
    noisy *= rng.uniform(0.25, 0.95) / max(float(np.abs(noisy).max()), 1e-9)
    sf.write(Path(job.out) / job.relpath, noisy, job.sample_rate, subtype="PCM_16")
    return {"audio_filepath": job.relpath, "text": job.sentence.text,
            "duration": round(noisy.size / job.sample_rate, 3), "voice": job.voice.name,
            "engine": job.voice.engine, "intent": job.sentence.intent,
            "slots": job.sentence.slots, "warp": round(warp, 3), "snr_db": snr}


# ---------------------------------------------------------------------------- corpus


def plan(args: argparse.Namespace, pools: dict[str, list[Sentence]],
         voices: dict[str, list[Voice]]) -> list[Job]:
    """Every utterance to synthesise: its split, sentence and voice."""
    sentences = split_sentences(pools, args.seed)
    jobs = []
    for split_index, split in enumerate(SPLITS):
        drawn = draw_sentences(sentence_pool(sentences[split]), getattr(args, split),
                               random.Random(f"{args.seed}:{split}"))
        for index, sentence in enumerate(drawn):
            rng = np.random.default_rng([args.seed, split_index, index, 1])
            voice = choose_voice(voices[split], split, rng)
            jobs.append(Job(split, index, sentence, voice, args.seed, args.sample_rate,
                            str(args.out)))
    return jobs


def settings(args: argparse.Namespace, voices: list[Voice], real: dict[str, list[dict]]) -> dict:
    """What the corpus depends on (not --jobs): a change means it must be generated again."""
    grammar = hashlib.sha256(args.grammar.read_bytes()).hexdigest()[:16]
    return {"train": args.train, "dev": args.dev, "test": args.test, "seed": args.seed,
            "real": {split: len(records) for split, records in real.items()},
            "sample_rate": args.sample_rate, "grammar": grammar, "warp": list(WARP_RANGE),
            "engine_weights": ENGINE_WEIGHTS,
            "flite_f0": {name: list(hz) for name, hz in FLITE_F0.items()},
            "voices": [f"{voice.engine}:{voice.name}" for voice in voices]}


def synthesize_all(jobs: list[Job], processes: int) -> list[dict]:
    """Render every job, in order, with a pool of `processes` workers (under a progress bar)."""
    def bar(records):
        return list(progress(records, "synthesising", total=len(jobs), unit="utt"))

    if processes <= 1:
        return bar(render(job) for job in jobs)
    with Pool(processes) as pool:
        return bar(pool.imap(render, jobs, chunksize=8))


def write_corpus(out: Path, records: list[dict], real: dict[str, list[dict]],
                 grammar: Path) -> None:
    """The manifests, the grammar and the sample a user can transcribe first.

    Real recordings join train and dev; their test speakers get manifests of their own
    (test_real.jsonl: commands, test_other.jsonl: speech and noise that is no command), so
    test.jsonl keeps measuring unseen sentences and synthetic voices.
    """
    for split in SPLITS:
        synthetic = [r for r in records if r["audio_filepath"].startswith(f"wavs/{split}/")]
        lines = [json.dumps(r) + "\n" for r in synthetic + (real[split] if split != "test" else [])]
        save_text("".join(lines), out / f"{split}.jsonl")
    for name, kinds in (("test_real", ("command",)), ("test_other", ("other", "sentence",
                                                                     "wake_word", "noise"))):
        (out / f"{name}.jsonl").unlink(missing_ok=True)
        rows = [r for r in real["test"] if r["kind"] in kinds]
        if rows:
            save_text("".join(json.dumps(r) + "\n" for r in rows), out / f"{name}.jsonl")
    tests = [r for r in records if r["audio_filepath"].startswith("wavs/test/")]
    clear = [r for r in tests if " " in r["text"] and (r["snr_db"] is None or r["snr_db"] >= 20)]
    sample = (clear or tests)[0]
    audio = (out / sample["audio_filepath"]).read_bytes()
    atomic_write(out / "sample.wav", lambda f: f.write(audio))
    save_text(sample["text"] + "\n", out / "sample.txt")
    save_text(grammar.read_text(encoding="utf-8"), out / "grammar.yaml")
    noise = [r for r in real["train"] if r["kind"] == "noise"] + coloured_noise_clips(out)
    save_text("".join(json.dumps(r) + "\n" for r in noise), out / "noise.jsonl")


def coloured_noise_clips(out: Path, seconds: float = 2.0, rate: int = 16000) -> list[dict]:
    """Two clips of each noise colour (OUT/wavs/noise), so that training-time noise
    (`data.augment.noise`) has a source even without real recordings."""
    rng = np.random.default_rng(0)
    (out / "wavs" / "noise").mkdir(parents=True, exist_ok=True)
    records = []
    for color in NOISE_COLORS:
        for take in range(2):
            relpath = f"wavs/noise/{color}_{take}.wav"
            noise = 0.1 * colored_noise(int(seconds * rate), color, rng)
            sf.write(out / relpath, noise.astype(np.float32), rate, subtype="PCM_16")
            records.append({"audio_filepath": relpath, "text": "", "duration": seconds,
                            "kind": "noise", "intent": None, "slots": {}})
    return records


def summary(records: list[dict], real: dict[str, list[dict]], elapsed: float) -> str:
    lines = []
    for split in SPLITS:
        rows = [r for r in records if r["audio_filepath"].startswith(f"wavs/{split}/")]
        hours = sum(r["duration"] for r in rows) / 3600
        people = real[split]
        lines.append(f"  {split:5s}: {len(rows):5d} utterances, {hours:5.2f} h, "
                     f"{len({r['text'] for r in rows}):4d} sentences, "
                     f"{len({(r['engine'], r['voice']) for r in rows}):3d} voices; real: "
                     f"{len(people):4d} recordings, {len({r['voice'] for r in people}):3d} speakers")
    return "\n".join(["voice-command corpus:", *lines, f"  synthesised in {elapsed:.0f} s"])


def positive(value: str) -> int:
    number = int(value)
    if number < 1:
        raise argparse.ArgumentTypeError(f"must be at least 1, got {value}")
    return number


def parse_args(argv: list[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--out", type=Path, default=Path("data/voice_commands"))
    parser.add_argument("--grammar", type=Path, default=DEFAULT_GRAMMAR,
                        help="the commands, as a Rhino context YAML file (default: %(default)s)")
    parser.add_argument("--train", type=positive, default=6000, help="training utterances")
    parser.add_argument("--dev", type=positive, default=300, help="dev utterances")
    parser.add_argument("--test", type=positive, default=600, help="test utterances")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--jobs", type=positive, default=2, help="worker processes")
    parser.add_argument("--sample-rate", type=positive, default=16000)
    parser.add_argument("--real-root", type=Path, default=DEFAULT_REAL_ROOT,
                        help="folder with speech_commands/, fsdd/ and wuw/ to add real speakers from "
                             "(default: ../shared/data when present); 'none' for synthetic only")
    return parser.parse_args(argv)


def main(argv: list[str] | None = None) -> None:
    args = parse_args(argv)
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
    if done.is_file() and json.loads(done.read_text()) == wanted:
        print(f"{args.out}: already prepared")
        return
    done.unlink(missing_ok=True)
    for split in SPLITS:
        shutil.rmtree(args.out / "wavs" / split, ignore_errors=True)
        (args.out / "wavs" / split).mkdir(parents=True, exist_ok=True)
    jobs = plan(args, pools, split_voices(voices))
    print(f"synthesising {len(jobs)} utterances into {args.out} with {args.jobs} process(es)")
    records = synthesize_all(jobs, args.jobs)
    write_corpus(args.out, records, real, args.grammar)
    save_text(json.dumps(wanted, indent=1) + "\n", done)
    print(summary(records, real, time.monotonic() - start))


def real_corpus(root: Path, out: Path, pools: dict[str, list[Sentence]]) -> dict[str, list[dict]]:
    """Real recordings (`real.py`), each command word with its grammar meaning."""
    known = {s.text: s for group in pools.values() for s in group}
    real = real_records(root, out, set(known))
    for rows in real.values():
        for row in rows:
            sentence = known.get(row["text"])
            row["intent"], row["slots"] = (sentence.intent, sentence.slots) if sentence else (None, {})
    return real


if __name__ == "__main__":
    main()

"""Speaking one utterance of the voice-command corpus: a synthetic voice, then augmentation.

Each utterance gets a random speed and pitch, a random vocal-tract length (a resampling warp
that shifts formants, as in VTLP), random leading and trailing silence, coloured noise plus
mains hum at a random SNR (most utterances) and a random level. Everything is drawn from
(seed, split, index), so the corpus is the same for any number of worker processes.

An engine's raw speech is kept in a cache (ASR_TTS_CACHE, default ~/.cache/asr/tts) named by what
it depends on, so that preparing a corpus again speaks nothing again: Kokoro's neural voices take
about a CPU second per second of speech.
"""

import hashlib
import io
import json
import os
import stat
import subprocess
import tempfile
from collections import Counter
from dataclasses import dataclass
from functools import cache
from multiprocessing import Pool
from pathlib import Path

import librosa
import numpy as np
import soundfile as sf

from asr.grammar import Sentence
from asr.progress import progress
from recipes.common import SPLITS, kokoro
from recipes.common.voices import FLITE_F0, Voice

# Vocal-tract length warp: the speech is resampled as if recorded at rate * warp, scaling every
# formant (and the pitch) by `warp`. A handful of flite voices become a continuum of speakers, so
# the model does not learn "the two human-like voices of training" but human-like speech.
WARP_RANGE = (0.85, 1.18)
NOISY_FRACTION = 0.8
NOISE_COLORS = ("white", "pink", "brown")
PADDING = (0.05, 0.4)  # seconds of silence before and after the speech, drawn uniformly
# An utterance's expected speech: seconds per sentence and per character of its text, over the
# engines' mix of voices, speeds and warps (a least-squares fit on two synthesised corpora,
# BENCHMARKS.md), so that a corpus can be sized in hours before it is synthesised.
SPEECH_SECONDS = (0.25, 0.0516)
# Bumped when an engine is called differently for the same parameters: the cache's old entries
# then go unused.
CACHE_FORMAT = 1
# How many of synthesize_all's utterances an engine spoke ("synthesised") and the cache served
# ("cached"), over this process's calls, its workers' included.
STATS: Counter[str] = Counter()


def expected_seconds(text: str) -> float:
    """The expected duration of an utterance of `text`, its padding included."""
    per_sentence, per_character = SPEECH_SECONDS
    return sum(PADDING) + per_sentence + per_character * len(text)


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


def draw_parameters(voice: Voice, rng: np.random.Generator) -> dict[str, str]:
    """The engine's random speed (and pitch where it takes one), as the engine is given them."""
    if voice.engine == "espeak-ng":
        return {"speed": str(rng.integers(130, 201)), "pitch": str(rng.integers(30, 71))}
    factor = f"{rng.uniform(0.85, 1.2):.2f}"
    if voice.engine == "kokoro":
        return {"speed": factor}
    if voice.engine == "flite" and voice.name in FLITE_F0:
        return {"stretch": factor, "f0": f"{rng.uniform(*FLITE_F0[voice.name]):.0f}"}
    return {"stretch": factor}


def _engine_command(voice: Voice, text: str, wav: str, parameters: dict[str, str]) -> list[str]:
    """The synthesiser's argument list, writing `wav`."""
    if voice.engine == "espeak-ng":
        # -a 40: full amplitude clips with some variants; the level is set later anyway.
        return ["espeak-ng", "-v", voice.name, "-s", parameters["speed"], "-p", parameters["pitch"],
                "-a", "40", "-w", wav, text]
    stretch = parameters["stretch"]
    if voice.engine == "flite":
        pitch = ["--setf", f"int_f0_target_mean={parameters['f0']}"] if "f0" in parameters else []
        return ["flite", "-voice", voice.name, "--setf", f"duration_stretch={stretch}", *pitch,
                "-t", text, "-o", wav]
    return ["text2wave", "-o", wav, "-eval", f"(voice_{voice.name})",
            "-eval", f"(Parameter.set 'Duration_Stretch {stretch})"]


def speak(voice: Voice, text: str, parameters: dict[str, str]) -> tuple[np.ndarray, int]:
    """The engine's output as 16-bit samples (frames x channels) and its sample rate."""
    if voice.engine == "kokoro":
        wave, rate = kokoro.speak(text, voice.name, float(parameters["speed"]))
        return np.clip(np.round(wave * 32768), -32768, 32767).astype(np.int16)[:, None], rate
    handle, wav = tempfile.mkstemp(suffix=".wav")
    os.close(handle)
    try:
        args = _engine_command(voice, text, wav, parameters)
        stdin = text if voice.engine == "festival" else None
        done = subprocess.run(args, input=stdin, capture_output=True, text=True)
        if done.returncode != 0 or os.path.getsize(wav) == 0:
            raise RuntimeError(f"{voice.engine} failed for voice {voice.name} on {text!r}: "
                               f"{done.stderr.strip()[:200]}")
        return sf.read(wav, dtype="int16", always_2d=True)
    finally:
        os.remove(wav)


@cache
def engine_version(engine: str) -> str:
    """What names the engine's build: a new one may speak differently, so its cache is another."""
    if engine == "kokoro":
        return kokoro.version()
    return subprocess.run([engine, "--version"], capture_output=True, text=True).stdout.strip()


def cache_path(voice: Voice, text: str, parameters: dict[str, str]) -> Path:
    """Where the cache keeps this utterance's raw synthesis: named by the SHA-256 of everything it
    depends on, under ASR_TTS_CACHE (default ~/.cache/asr/tts)."""
    key = json.dumps([CACHE_FORMAT, voice.engine, voice.name, text, parameters,
                      engine_version(voice.engine)], sort_keys=True)
    digest = hashlib.sha256(key.encode()).hexdigest()
    return cache_root() / digest[:2] / f"{digest}.flac"


def cache_root() -> Path:
    """ASR_TTS_CACHE (default ~/.cache/asr/tts); a RuntimeError naming it unless it is a folder
    this process can write in, or can be made as one."""
    root = Path(os.environ.get("ASR_TTS_CACHE") or Path.home() / ".cache" / "asr" / "tts")
    nearest = next(p for p in (root, *root.absolute().parents) if os.path.lexists(p))
    if not nearest.is_dir():
        raise RuntimeError(f"ASR_TTS_CACHE={root}: {nearest} is not a folder; point it at one")
    if not os.access(nearest, os.W_OK | os.X_OK):
        raise RuntimeError(f"ASR_TTS_CACHE={root}: cannot write in {nearest}; point it at a "
                           "folder of yours")
    return root


def cached_samples(path: Path) -> tuple[np.ndarray, int] | None:
    """A cache entry's 16-bit samples and rate, or None when it must be synthesised again: it
    is missing, a link or no regular file (never followed out of the cache), its bytes differ
    from the SHA-256 stored beside it (cut, emptied, altered or replaced by other speech), or
    it does not decode. An entry older than the digests is checked by decoding it whole, and
    its digest is stored then."""
    digest_file = path.with_name(path.name + ".sha256")
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW)
    except OSError:
        return None
    with os.fdopen(fd, "rb") as entry:
        if not stat.S_ISREG(os.fstat(entry.fileno()).st_mode):
            return None
        data = entry.read()
    found = hashlib.sha256(data).hexdigest()
    try:
        stored = None if digest_file.is_symlink() or not digest_file.exists() \
            else digest_file.read_text(encoding="ascii").strip()
    except (OSError, UnicodeDecodeError):
        return None
    if stored is not None and stored != found:
        return None
    try:
        samples, rate = sf.read(io.BytesIO(data), dtype="int16", always_2d=True)
    except (sf.LibsndfileError, RuntimeError, ValueError):
        return None
    if len(samples) == 0:
        return None
    if stored is None:
        _write_atomically(digest_file, lambda name: Path(name).write_text(found + "\n"))
    return samples, rate


def _write_atomically(path: Path, write) -> None:
    """`write(temporary name)`, then the file renamed into `path` (a link there is replaced,
    not followed), so that parallel workers never read half a file."""
    path.parent.mkdir(parents=True, exist_ok=True)
    handle, temporary = tempfile.mkstemp(dir=path.parent, suffix=".tmp")
    os.close(handle)
    try:
        write(temporary)
        os.replace(temporary, path)
    except BaseException:
        os.remove(temporary)
        raise


def synthesize(voice: Voice, text: str, rng: np.random.Generator) -> tuple[np.ndarray, int, bool]:
    """Speak `text` with a random speed and pitch as mono float32; whether it came from the cache.

    The parameters are drawn before the cache is asked, so the rng's later draws, and hence the
    corpus, are the same either way. A miss (or an entry that fails its check, `cached_samples`)
    stores the 16-bit samples losslessly (FLAC) and their SHA-256 beside them, each written to a
    temporary file and renamed."""
    parameters = draw_parameters(voice, rng)
    path = cache_path(voice, text, parameters)
    found = cached_samples(path)
    if found is not None:
        samples, rate = found
    else:
        samples, rate = speak(voice, text, parameters)
        buffer = io.BytesIO()
        sf.write(buffer, samples, rate, format="FLAC", subtype="PCM_16")
        data = buffer.getvalue()
        _write_atomically(path, lambda name: Path(name).write_bytes(data))
        _write_atomically(path.with_name(path.name + ".sha256"),
                          lambda name: Path(name).write_text(hashlib.sha256(data).hexdigest()
                                                             + "\n"))
    return (samples.astype(np.float32) / 32768).mean(axis=1), rate, found is not None


def trim(wave: np.ndarray, rate: int, margin: float = 0.02) -> np.ndarray:
    """Cut the engine's own silence (engines differ) so the padding added later is the only one."""
    loud = np.flatnonzero(np.abs(wave) > 0.01 * np.abs(wave).max())
    if loud.size == 0:
        return wave
    pad = int(margin * rate)
    return wave[max(0, loud[0] - pad):loud[-1] + pad + 1]


def colored_noise(length: int, color: str, rng: np.random.Generator) -> np.ndarray:
    """White, pink (1/f power) or brown (1/f^2 power) noise with unit RMS. The coloured ones
    are shaped at a multiple of 4096 samples, then cut to `length`: the FFT of a length with a
    large prime factor is many times slower (BENCHMARKS.md)."""
    noise = rng.standard_normal(length)
    if color != "white":
        size = -(-length // 4096) * 4096
        spectrum = np.fft.rfft(noise, size)
        frequency = np.maximum(np.arange(spectrum.size), 1)
        spectrum /= frequency ** (0.5 if color == "pink" else 1.0)
        noise = np.fft.irfft(spectrum, size)[:length]
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
    wave, rate, cached = synthesize(job.voice, job.sentence.text, rng)
    warp = float(rng.uniform(*WARP_RANGE))
    speech = librosa.resample(trim(wave, rate), orig_sr=rate * warp, target_sr=job.sample_rate,
                              res_type="soxr_hq")
    lead, tail = (int(rng.uniform(*PADDING) * job.sample_rate) for _ in range(2))
    padded = np.concatenate([np.zeros(lead), speech, np.zeros(tail)])
    noisy, snr = add_noise(padded, float(np.mean(speech**2)), job.sample_rate, rng)
    noisy *= rng.uniform(0.25, 0.95) / max(float(np.abs(noisy).max()), 1e-9)
    sf.write(Path(job.out) / job.relpath, noisy, job.sample_rate, subtype="PCM_16")
    return {"audio_filepath": job.relpath, "text": job.sentence.text,
            "duration": round(noisy.size / job.sample_rate, 3), "voice": job.voice.name,
            "engine": job.voice.engine, "intent": job.sentence.intent,
            "slots": job.sentence.slots, "warp": round(warp, 3), "snr_db": snr, "cached": cached}


def synthesize_all(jobs: list[Job], processes: int) -> list[dict]:
    """Render every job, in order, with a pool of `processes` workers (under a progress bar).
    Whether each came from the cache goes into STATS, not into the records (the manifest's lines).
    A cache that cannot be used (ASR_TTS_CACHE a file) is a RuntimeError before any work."""
    cache_root()

    def bar(records):
        return list(progress(records, "synthesising", total=len(jobs), unit="utt"))

    if processes <= 1:
        records = bar(render(job) for job in jobs)
    else:
        with Pool(processes) as pool:
            records = bar(pool.imap(render, jobs, chunksize=8))
    STATS.update("cached" if record.pop("cached") else "synthesised" for record in records)
    return records

"""Real people for a voice-command corpus: each recording with what was said in it.

Synthetic voices are not people. When a folder laid out like `../shared/data` is at hand, three
corpora of real recordings join the corpus (see its README):

- commands: recordings whose words are a grammar sentence: Speech Commands' words ("yes",
  "stop", "three", ...; 127 speakers, 16 kHz), the Free Spoken Digit Dataset's digits (4
  speakers, 8 kHz; training resamples), WUW sentences that happen to be commands;
- speech that is no command, with its real transcript: Speech Commands' other words
  ("marvin", "bed", command words the grammar lacks), FSDD's digits the grammar lacks, and WUW
  Corpus II, 121 people on telephone lines saying wake words alone and inside free sentences.
  The model learns to hear people whatever they say; deciding that what was heard is no
  command is the intent search's job (`asr.assistant.intents`), never a label of silence;
- noise: Speech Commands' background clips, with the empty text (no voice in them).

Everything is split by speaker, so dev and test hold people the model never heard: FSDD's four
by name, Speech Commands' by a stable hash of the speaker id (noise clips by file name), WUW's
as its own recipe splits them (`recipes.common.corpora.session_splits`: calls grouped into
speakers), so a WUW
test speaker is a test speaker for every model. Speech Commands and FSDD are referenced in
place; WUW's headerless mu-law is converted to WAV under OUT/wavs/wuw, since the training loader
reads only self-describing audio files.
"""

import hashlib
import random
from collections.abc import Iterator
from pathlib import Path

import numpy as np
import soundfile as sf

from asr.audio import audio_duration
from asr.progress import progress
from asr.text import normalize_transcription
from recipes.common import corpora
from recipes.common.synthesis import NOISE_COLORS, colored_noise

_SHARED = Path(__file__).resolve().parents[2].parent / "shared" / "data"
DEFAULT_REAL_ROOT = _SHARED if _SHARED.is_dir() else None  # ../shared/data beside a checkout
# FSDD has four speakers: two train, one dev, one test.
FSDD_SPLIT = {"jackson": "train", "lucas": "train", "nicolas": "dev", "yweweler": "test"}
# Shares of Speech Commands speakers (and noise clips) held out.
HELD_OUT_SHARE = {"dev": 0.1, "test": 0.2}
# Dev is scored after every epoch: a sample of its real recordings is enough to pick the best.
DEV_RECORDINGS = 200
# Training hears WUW utterances up to this long (a free sentence can last 20 s and would cost
# more training time than it teaches); dev and test keep them all.
MAX_OTHER_SECONDS = 6.0


def speaker_split(speaker: str) -> str:
    """train, dev or test for a speaker id, stable across runs and machines."""
    bucket = int(hashlib.sha256(speaker.encode()).hexdigest()[:8], 16) / 0xFFFFFFFF
    if bucket < HELD_OUT_SHARE["test"]:
        return "test"
    return "dev" if bucket < HELD_OUT_SHARE["test"] + HELD_OUT_SHARE["dev"] else "train"


def _record(path: Path, text: str, speaker: str, source: str, kind: str,
            duration: float | None = None) -> dict:
    seconds = audio_duration(path) if duration is None else duration
    return {"audio_filepath": str(path.resolve()), "text": text, "duration": round(seconds, 3),
            "voice": speaker, "engine": "real", "source": source, "kind": kind}


def speech_commands(root: Path, words: set[str]) -> Iterator[tuple[str, dict]]:
    """(split, record): every word with its transcript (a command when it is a grammar
    sentence), background noise as noise."""
    for path in corpora.clips(root):
        text, group = corpora.describe(path)
        if path.parent.name == corpora.SILENCE:
            yield speaker_split(path.stem), _record(path, "", "noise", "speech_commands", "noise")
        else:
            kind = "command" if text in words else "other"
            yield speaker_split(group), _record(path, text, group, "speech_commands", kind)


def fsdd(root: Path, words: set[str]) -> Iterator[tuple[str, dict]]:
    """(split, record) for every FSDD recording: a command when its digit is a grammar sentence."""
    for path, digit, speaker, _ in corpora.recordings(root):
        if speaker in FSDD_SPLIT:
            text = corpora.DIGITS[digit]
            kind = "command" if text in words else "other"
            yield FSDD_SPLIT[speaker], _record(path, text, speaker, "fsdd", kind)


def wuw(root: Path, out: Path, grammar_sentences: set[str]) -> Iterator[tuple[str, dict]]:
    """(split, record) for WUW utterances (converted to WAV), each with its words: a command
    when they are a grammar sentence."""
    entries = corpora.entries(root)
    splits = corpora.session_splits(entries)
    for entry in entries:
        text = normalize_transcription(entry["transcription"])
        if not text:  # only markup ("[click]", a cut-off "-perator"): no words to teach
            continue
        wav, duration = corpora.to_wav(root, entry, out / "wavs" / "wuw")
        kind = "sentence" if corpora.is_sentence(entry) else "wake_word"
        kind = "command" if text in grammar_sentences else kind
        record = _record(wav, text, f"wuw:{entry['sessionNumber']}", "wuw", kind, duration)
        yield splits[entry["sessionNumber"]], record


def dev_sample(records: list[dict], size: int = DEV_RECORDINGS) -> list[dict]:
    """A sample of `size` dev records, the same on every machine (all of them when no more)."""
    if len(records) <= size:
        return records
    return sorted(random.Random(0).sample(records, size), key=lambda r: r["audio_filepath"])


def real_records(root: Path, out: Path, grammar_sentences: set[str],
                 dev_size: int | None = DEV_RECORDINGS) -> dict[str, list[dict]]:
    """Records per split from whichever corpora `root` holds. Training leaves out WUW
    utterances over MAX_OTHER_SECONDS; dev keeps a sample of `dev_size` (None: all)."""
    words = {text for text in grammar_sentences if " " not in text}
    splits: dict[str, list[dict]] = {"train": [], "dev": [], "test": []}
    sources = [("speech_commands", lambda d: speech_commands(d, words)),
               ("fsdd", lambda d: fsdd(d, words)),
               ("wuw", lambda d: wuw(d, out, grammar_sentences))]
    for folder, read in sources:
        if (root / folder).is_dir():
            for split, record in progress(read(root / folder), f"real speech: {folder}",
                                          unit="file"):
                if not (split == "train" and record["duration"] > MAX_OTHER_SECONDS):
                    splits[split].append(record)
    if dev_size is not None:
        splits["dev"] = dev_sample(splits["dev"], dev_size)
    return splits


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

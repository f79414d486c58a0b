"""Real people's voices for the voice-command corpus: command words and digits, split by speaker.

Synthetic voices are not people. When a folder laid out like `../shared/data` is at hand
(Speech Commands and the Free Spoken Digit Dataset, see its README), the words of the grammar
that people recorded there join the corpus: "yes", "stop", "left", "three", ... from 127
Speech Commands speakers and 4 FSDD speakers, and Speech Commands' background-noise clips as
empty transcripts (the model must say nothing for noise). Speakers are split by a stable hash
(FSDD's four by name), so dev and test are people the model never heard. The files are
referenced in place, never copied.
"""

import hashlib
import random
from pathlib import Path

from asr.audio import audio_duration
from recipes.fsdd import prepare as fsdd_recipe
from recipes.speech_commands import prepare as sc
from recipes.voice_commands.grammar import DIGITS, WORDS

# FSDD has four speakers: two train, one dev, one test.
FSDD_SPLIT = {"jackson": "train", "lucas": "train", "nicolas": "dev", "yweweler": "test"}
# Shares of Speech Commands speakers (and noise clips) held out, by hash.
HELD_OUT_SHARE = {"dev": 0.1, "test": 0.2}
# Dev is scored after every epoch: a sample of its real recordings is enough to pick the best.
DEV_RECORDINGS = 200


def speaker_split(speaker: str) -> str:
    """train, dev or test for a speaker id, stable across runs and machines."""
    bucket = int(hashlib.sha256(speaker.encode()).hexdigest()[:8], 16) / 0xFFFFFFFF
    if bucket < HELD_OUT_SHARE["test"]:
        return "test"
    return "dev" if bucket < HELD_OUT_SHARE["test"] + HELD_OUT_SHARE["dev"] else "train"


def _record(path: Path, text: str, speaker: str, source: str) -> dict:
    return {"audio_filepath": str(path.resolve()), "text": text,
            "duration": round(audio_duration(path), 3), "voice": speaker, "engine": "real",
            "source": source}


def speech_commands(root: Path) -> list[tuple[str, dict]]:
    """(split, record) for the grammar's words said by Speech Commands speakers, and noise.

    Clips are found and named by the speech_commands recipe; other unknown words ("bed",
    "marvin") are not in the grammar and are left out.
    """
    items = []
    for path in sc.clips(root):
        text, group = sc.describe(path)
        if path.parent.name == sc.SILENCE:
            items.append((speaker_split(path.stem), _record(path, "", "noise", "speech_commands")))
        elif text in WORDS + DIGITS:
            items.append((speaker_split(group), _record(path, text, group, "speech_commands")))
    return items


def fsdd(root: Path) -> list[tuple[str, dict]]:
    """(split, record) for every FSDD digit recording (8 kHz; training resamples)."""
    return [(FSDD_SPLIT[speaker], _record(path, DIGITS[digit], speaker, "fsdd"))
            for path, digit, speaker, _ in fsdd_recipe.recordings(root) if speaker in FSDD_SPLIT]


def real_records(root: Path) -> dict[str, list[dict]]:
    """Records per split from whichever of the two corpora `root` holds."""
    splits: dict[str, list[dict]] = {"train": [], "dev": [], "test": []}
    if (root / "speech_commands").is_dir():
        for split, record in speech_commands(root / "speech_commands"):
            splits[split].append(record)
    if (root / "fsdd").is_dir():
        for split, record in fsdd(root / "fsdd"):
            splits[split].append(record)
    if len(splits["dev"]) > DEV_RECORDINGS:
        splits["dev"] = sorted(random.Random(0).sample(splits["dev"], DEV_RECORDINGS),
                               key=lambda r: r["audio_filepath"])
    return splits

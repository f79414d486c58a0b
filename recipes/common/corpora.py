"""The layouts of the shared real corpora, read by more than one recipe: Speech Commands,
the Free Spoken Digit Dataset and WUW Corpus II (each recipe's prepare.py says how it uses
them). The voice-command recipe's real people come from all three, split by speaker the way
each corpus's own recipe splits it, so a held-out speaker is held out for every model.
"""

import json
import re
from collections import defaultdict
from collections.abc import Iterable
from datetime import datetime
from itertools import pairwise
from pathlib import Path

import soundfile as sf

from asr.checkpoint import atomic_write
from asr.text import normalize_transcription
from recipes.common import hash_split

# Salts the speaker hash: unsalted, Speech Commands' own rule puts its whole test archive in one split.
SALT = "asr-recipes:"

# ---------------------------------------------------------------- Speech Commands v0.02

COMMANDS = ("yes", "no", "up", "down", "left", "right", "on", "off", "stop", "go")
# The 25 other words of v0.02 (its `_unknown_` clips): 15 words and the ten digits.
AUXILIARY = ("backward", "bed", "bird", "cat", "dog", "follow", "forward", "happy", "house",
             "learn", "marvin", "sheila", "tree", "visual", "wow", "zero", "one", "two", "three",
             "four", "five", "six", "seven", "eight", "nine")
UNKNOWN, SILENCE = "_unknown_", "_silence_"


def describe(path: Path) -> tuple[str, str]:
    """(transcript, group) of one clip: the group is its speaker, or the clip for silence."""
    folder, stem = path.parent.name, path.stem
    if folder == SILENCE:
        return "", f"silence:{stem}"
    head, sep, _ = stem.partition("_nohash_")
    if not sep:
        raise SystemExit(f"error: {path}: expected a name like SPEAKER_nohash_N.wav")
    if folder == UNKNOWN:
        word, _, speaker = head.rpartition("_")
        return word.replace("_", " "), speaker
    return folder, head


def clips(root: Path, unknown: bool = True, silence: bool = True) -> list[Path]:
    folders = [*COMMANDS, *([UNKNOWN] if unknown else []), *([SILENCE] if silence else [])]
    found = [path for folder in folders for path in sorted((root / folder).glob("*.wav"))]
    if not found:
        raise SystemExit(f"error: {root}: no Speech Commands clips ({{word}}/*.wav)")
    return found


# ---------------------------------------------------------------- Free Spoken Digit Dataset

DIGITS = "zero one two three four five six seven eight nine".split()
DIGIT_SET = frozenset(DIGITS)
NAME = re.compile(r"(\d)_([A-Za-z]+)_(\d+)\.wav")


def recordings(root: Path) -> list[tuple[Path, int, str, int]]:
    """(path, digit, speaker, take) of every FSDD recording under `root`."""
    folder = root / "recordings" if (root / "recordings").is_dir() else root
    found = []
    for path in sorted(folder.glob("*.wav")):
        match = NAME.fullmatch(path.name)
        if match:
            found.append((path.resolve(), int(match[1]), match[2], int(match[3])))
    if not found:
        raise SystemExit(f"error: {folder}: no FSDD recordings ({{digit}}_{{speaker}}_{{take}}.wav)")
    return found


# ---------------------------------------------------------------- WUW Corpus II

WUW_FORMAT = {"format": "RAW", "subtype": "ULAW", "samplerate": 8000, "channels": 1}
KEYWORDS = ("operator", "thinkengine", "onword", "wildfire", "voyager")  # utterances 1-5, 6-10
WUW_DEV_PERCENT, WUW_TEST_PERCENT = 15.0, 20.0  # its speaker groups held out
SAME_CALLER_GAP = 3600.0  # seconds between the starts of two calls by one caller, at most
MIN_SHARED_WORDS = 4


def entries(root: Path) -> list[dict]:
    """data.json's utterances 001-010 (upstream keeps them in one list under a single key)."""
    path = Path(root) / "data.json"
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError) as err:
        raise SystemExit(f"error: {path}: cannot read the corpus index ({err})") from None
    found = [entry for group in (data.values() if isinstance(data, dict) else [data])
             for entry in group if "001" <= entry.get("utteranceNumber", "") <= "010"]
    if not found:
        raise SystemExit(f"error: {path}: no utterances 001-010")
    return found


def keyword(entry: dict) -> str:
    """The keyword an utterance was asked for, by its number."""
    return KEYWORDS[(int(entry["utteranceNumber"]) - 1) % len(KEYWORDS)]


def is_sentence(entry: dict) -> bool:
    return entry["utteranceNumber"] >= "006"


def read_ulaw(path: Path):
    """A headerless 8 kHz mu-law file as int16 samples."""
    samples, _ = sf.read(str(path), dtype="int16", **WUW_FORMAT)
    return samples


def to_wav(root: Path, entry: dict, folder: Path) -> tuple[Path, float]:
    """The entry's audio as FOLDER/{name}.wav (written once, atomically) and its duration."""
    wav = folder / (Path(entry["filePath"]).stem + ".wav")
    if not wav.is_file():
        samples = read_ulaw(Path(root) / entry["filePath"])
        folder.mkdir(parents=True, exist_ok=True)
        atomic_write(wav, lambda f: sf.write(f, samples, WUW_FORMAT["samplerate"], format="WAV",
                                             subtype="PCM_16"))
    return wav, sf.info(str(wav)).duration


def _started(calls: list[dict]) -> datetime:
    return min(datetime.fromisoformat(e["dateRecorded"].replace("Z", "+00:00")) for e in calls)


def _script_words(entry: dict) -> str:
    """A sentence's words without its keywords: what a reused script has in common."""
    return " ".join(w for w in normalize_transcription(entry["transcription"]).split()
                    if w not in KEYWORDS)


def speaker_groups(items: Iterable[dict]) -> dict[str, str]:
    """Session number -> speaker group id ("wuw:" + its first session), by the rule of
    recipes/wuw/prepare.py's docstring."""
    sessions: dict[str, list[dict]] = defaultdict(list)
    for entry in items:
        sessions[entry["sessionNumber"]].append(entry)
    parent = {s: s for s in sessions}

    def root(s: str) -> str:
        while parent[s] != s:
            s = parent[s] = parent[parent[s]]
        return s

    def join(a: str, b: str) -> None:
        ra, rb = root(a), root(b)
        parent[max(ra, rb)] = min(ra, rb)

    callers: dict[tuple[str, str], list[tuple[datetime, str]]] = defaultdict(list)
    for s, calls in sessions.items():
        callers[calls[0]["gender"], calls[0]["dialect"]].append((_started(calls), s))
    for starts in callers.values():
        starts.sort()
        for (before, a), (after, b) in pairwise(starts):
            if (after - before).total_seconds() <= SAME_CALLER_GAP:
                join(a, b)
    scripts: dict[str, str] = {}
    for s, calls in sorted(sessions.items()):
        for entry in filter(is_sentence, calls):
            words = _script_words(entry)
            if len(words.split()) >= MIN_SHARED_WORDS:
                join(scripts.setdefault(words, s), s)
    return {s: f"wuw:{root(s)}" for s in sessions}


def session_splits(items: list[dict], dev_percent: float = WUW_DEV_PERCENT,
                   test_percent: float = WUW_TEST_PERCENT) -> dict[str, str]:
    """Session number -> train, dev or test, whole speaker groups together."""
    return {s: hash_split(group, dev_percent, test_percent, SALT)
            for s, group in speaker_groups(items).items()}


# ---------------------------------------------------------------- cathy (CMU ARCTIC prompts)

ARCTIC_NAME = re.compile(r"(arctic_[ab]\d{4})_\d+")
# cathy is split by prompt (every take of a prompt in one split), with the shared SALT.
CATHY_DEV_PERCENT, CATHY_TEST_PERCENT = 5.0, 10.0


def arctic_utterances(root: Path) -> list[tuple[Path, str, str]]:
    """(audio, prompt id, text) for every transcript under `root` that has its audio."""
    found = []
    for text_path in sorted(root.rglob("arctic_*.txt")):
        match = ARCTIC_NAME.fullmatch(text_path.stem)
        audio = next((p for p in (text_path.with_suffix(".flac"), text_path.with_suffix(".wav"))
                      if p.is_file()), None)
        if not match or audio is None:
            continue
        try:
            text = text_path.read_text(encoding="utf-8").strip()
        except UnicodeDecodeError:
            raise SystemExit(f"error: {text_path}: not UTF-8 text") from None
        found.append((audio.resolve(), match[1], text))
    if not found:
        raise SystemExit(f"error: {root}: no ARCTIC utterances (arctic_*_N.txt with audio)")
    return found

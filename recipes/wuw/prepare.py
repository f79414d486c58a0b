"""WUW Corpus II: real people on telephone lines saying wake words, alone and in sentences.

    python -m recipes.wuw.prepare --root ../shared/data/wuw --out data/wuw
    python -m recipes.wuw.prepare --out data/wuw   # downloads github.com/wake-up-word/wuw-corpus-ii

Upstream's layout: `calls/{session}/WUWII{session}_{utt}.ulaw`, headerless 8 kHz mu-law, and
`data.json` (one list of entries under one key) with each file's transcription, gender,
dialect, phone type, session and utterance numbers, and the keyword's start and end in
seconds. Utterances 001-005 are the five keywords alone (Operator, ThinkEngine, Onword,
Wildfire, Voyager), 006-010 each inside a free sentence; 000 (the caller's name) is not used.

Each file is read through soundfile as RAW mu-law (WUW_FORMAT) and written once as 16-bit WAV
under OUT/wavs, since training reads only self-describing audio files. Transcripts keep the
corpus' markup in `transcription` and its words in `text` (`asr.text.normalize_transcription`);
an utterance with no words left (`[[skip]]`, `(( ))`, a lone fragment `-perator`, an empty
file) is left out.

Splits are by *speaker*, which the corpus does not name: it numbers calls, and a person may
have called several times. Calls join one speaker group (`speaker_groups`) when

- they have the same gender and dialect and each began within SAME_CALLER_GAP of the one
  before (chained): a caller dialling again at once, e.g. from another phone (landline,
  cell, speakerphone); or
- they share a free sentence of at least MIN_SHARED_WORDS words besides the keyword: the same
  person calling back another day with the same sentences, or several people reading one
  script, which must not be heard in training and then scored.

A call lasts about 2.5 minutes and back-to-back calls of one gender and dialect start 2.4-5
minutes apart; the hour leaves room for a pause. The rule errs on one side: it may put two
people in one group (105 groups where the shared copy's README counts 121 speakers), which only
coarsens the split, but splits one person's calls only if they called again more than an hour
later with new sentences, or their calls disagree on gender or dialect. Whole groups go to
train, dev or test by the hash of the group's id (`recipes.common.hash_split`). Scripts are
matched word for word only: many callers paraphrase the same prompts ("hi john how are you
wait just a second while I invoke my personal assistant"), and joining calls that share any
run of 8 words would make one group of 28 calls. As it is, 5 of the 155 test sentences share
a run of 6 words (keywords aside) with a training sentence.

Writes OUT/{train,dev,test}.jsonl (every utterance) and OUT/{dev,test}_sentences.jsonl (the
free sentences: task (a), transcription, and task (b), finding the keyword with its time:
`python -m recipes.wuw.spot`). Each line also has speaker (group), session, kind (wake_word
or sentence), keyword, keyword_start/keyword_end (null where the corpus' times are unusable),
gender, dialect, phonetype and the raw transcription.
"""

import json
from collections import defaultdict
from collections.abc import Iterable, Mapping
from datetime import datetime
from itertools import pairwise
from pathlib import Path

import soundfile as sf

from asr.checkpoint import atomic_write
from asr.progress import progress
from asr.text import normalize_transcription
from recipes.common import (
    SPLITS,
    download,
    hash_split,
    manifest_line,
    percent_split_cli,
    write_manifests,
)

URL = "https://github.com/wake-up-word/wuw-corpus-ii/archive/HEAD.zip"
WUW_FORMAT = {"format": "RAW", "subtype": "ULAW", "samplerate": 8000, "channels": 1}
KEYWORDS = ("operator", "thinkengine", "onword", "wildfire", "voyager")  # utterances 1-5, 6-10
DEV_PERCENT, TEST_PERCENT = 15.0, 20.0
SALT = "asr-recipes:"
SAME_CALLER_GAP = 3600.0  # seconds between the starts of two calls by one caller, at most
MIN_SHARED_WORDS = 4
MIN_SECONDS = 0.1


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
    """Session number -> speaker group id ("wuw:" + its first session), by the module's rule."""
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


def session_splits(items: list[dict], dev_percent: float = DEV_PERCENT,
                   test_percent: float = TEST_PERCENT) -> dict[str, str]:
    """Session number -> train, dev or test, whole speaker groups together."""
    return {s: hash_split(group, dev_percent, test_percent, SALT)
            for s, group in speaker_groups(items).items()}


def keyword_span(entry: dict, text: str, duration: float) -> tuple[float | None, float | None]:
    """The keyword's (start, end) in seconds, or (None, None) where the corpus gives no usable
    time (0-0, end before start, past the end) or the transcript lacks the keyword."""
    start, end = float(entry["startTime"]), float(entry["endTime"])
    if keyword(entry) in text.split() and 0 <= start < end <= duration + 0.01:
        return start, end
    return None, None


def record(root: Path, entry: dict, wavs: Path, group: str) -> dict | None:
    """One manifest line, or None for an utterance with no words or no audio."""
    text = normalize_transcription(entry["transcription"])
    if not text:
        return None
    wav, duration = to_wav(root, entry, wavs)
    if duration < MIN_SECONDS:
        return None
    start, end = keyword_span(entry, text, duration)
    return manifest_line(wav.resolve(), text, duration, speaker=group,
                         session=entry["sessionNumber"],
                         kind="sentence" if is_sentence(entry) else "wake_word",
                         keyword=keyword(entry), keyword_start=start, keyword_end=end,
                         gender=entry["gender"], dialect=entry["dialect"],
                         phonetype=entry["phonetype"], transcription=entry["transcription"])


def prepare(root: Path | None, out: Path, *, dev_percent: float = DEV_PERCENT,
            test_percent: float = TEST_PERCENT) -> dict[str, Path]:
    """Write the manifests (module docstring); their paths by name."""
    out = Path(out)
    if root is None:
        root = download(URL, out / "download", marker="data.json")
    items = entries(Path(root))
    groups = speaker_groups(items)
    lines: dict[str, list[dict]] = defaultdict(list)
    for entry in progress(items, "wuw: mu-law to wav", unit="utt"):
        line = record(Path(root), entry, out / "wavs", groups[entry["sessionNumber"]])
        if line is not None:
            lines[hash_split(line["speaker"], dev_percent, test_percent, SALT)].append(line)
    for split in ("dev", "test"):
        lines[f"{split}_sentences"] = [r for r in lines[split] if r["kind"] == "sentence"]
    return write_manifests(out, lines, names=(*SPLITS, "dev_sentences", "test_sentences"))


def summary(paths: Mapping[str, Path]) -> str:
    lines = ["WUW Corpus II:"]
    for name, path in paths.items():
        rows = [json.loads(line) for line in path.read_text().splitlines()]
        minutes = sum(r["duration"] for r in rows) / 60
        sentences = sum(r["kind"] == "sentence" for r in rows)
        timed = sum(r["keyword_start"] is not None for r in rows if r["kind"] == "sentence")
        lines.append(f"  {name:14s}: {len(rows):5d} utterances ({sentences} sentences, {timed} "
                     f"with keyword times), {minutes:5.1f} min, "
                     f"{len({r['speaker'] for r in rows}):3d} speaker groups, "
                     f"{len({r['session'] for r in rows}):3d} calls")
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> None:
    percent_split_cli(argv, __doc__.split("\n\n")[0], "data/wuw", prepare, summary, DEV_PERCENT,
                      TEST_PERCENT)


if __name__ == "__main__":
    main()

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
from collections.abc import Mapping
from pathlib import Path

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
from recipes.common.corpora import (
    SALT,
    WUW_DEV_PERCENT,
    WUW_TEST_PERCENT,
    entries,
    is_sentence,
    keyword,
    speaker_groups,
    to_wav,
)

URL = "https://github.com/wake-up-word/wuw-corpus-ii/archive/HEAD.zip"
DEV_PERCENT, TEST_PERCENT = WUW_DEV_PERCENT, WUW_TEST_PERCENT
MIN_SECONDS = 0.1


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

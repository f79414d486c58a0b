"""Task (b): find the wake word in a free sentence, with its time; detections and false alarms.

    python -m recipes.wuw.spot --model exp/wuw/averaged --manifest data/wuw/test_sentences.jsonl \
        [--tolerance 0.5] [--json spot.json]

Each sentence of the manifest whose keyword has a time in the corpus (`keyword_start`,
`keyword_end`; 147 of the 155 test sentences) is transcribed by the model (its saved decoding
settings, whole utterance, no VAD), and every word of the transcript is given a time by CTC
forced alignment (`asr.alignment`). Then, per sentence:

- a *detection*: the transcript has the sentence's keyword at a time that overlaps the
  reference span widened by `--tolerance` seconds on each side (the first such occurrence);
- a *false alarm*: every other occurrence of any of the five keywords in the transcript
  (the keyword at the wrong time, a second time, or another keyword);
- non-keyword speech: the sentence's duration less its reference keyword span.

Reported: detection rate (detections / sentences), false alarms per hour of non-keyword
speech, and the mean start and end error of the detections. People also *mention* the
keywords ("I'm going to use the word _Wildfire_ in a sentence ... Wildfire"); a false alarm on
a keyword that the reference transcript has more often than the one timed occurrence is
counted apart as a mention (a correct transcription, a wrong wake-up), so the false alarms
that are recognition errors show separately.
"""

import argparse
import json
import sys
from collections import Counter
from pathlib import Path

import torch

from asr.alignment import align_text
from asr.audio import AudioError, load_audio
from asr.checkpoint import ModelDirError, save_text
from asr.data import ManifestError, iter_manifest
from asr.progress import progress
from asr.transcriber import Transcriber
from recipes.common.corpora import KEYWORDS

DEFAULT_TOLERANCE = 0.5  # seconds


def score_sentence(words: list, keyword: str, start: float, end: float, tolerance: float,
                   reference: str) -> dict:
    """One sentence's detection (and its start/end errors), false alarms and mentions, from
    the timed words of its transcript."""
    said = Counter(w for w in reference.split() if w in KEYWORDS)
    said[keyword] -= 1  # the timed occurrence
    detected, false_alarms, mentions = None, 0, 0
    for word in words:
        if word.word not in KEYWORDS:
            continue
        hit = (word.word == keyword and word.start < end + tolerance
               and word.end > start - tolerance)
        if hit and detected is None:
            detected = (word.start - start, word.end - end)
        elif said[word.word] > 0:
            said[word.word] -= 1
            mentions += 1
        else:
            false_alarms += 1
    start_error, end_error = detected if detected is not None else (None, None)
    return {"detected": detected is not None, "start_error": start_error,
            "end_error": end_error, "false_alarms": false_alarms, "mentions": mentions}


def spot(model_dir: Path, manifest: Path, tolerance: float) -> dict:
    """Score every timed sentence of `manifest` (module docstring); totals and per sentence."""
    utterances = list(iter_manifest(manifest))  # one-line errors for bad lines, missing audio
    lines = [json.loads(line) for line in manifest.read_text(encoding="utf-8").splitlines()
             if line.strip()]
    timed = [(row, u.audio_filepath) for row, u in zip(lines, utterances, strict=True)
             if row.get("keyword_start") is not None]
    if not timed:
        raise ValueError(f"{manifest}: no sentence with a keyword time (keyword_start)")
    transcriber = Transcriber.from_pretrained(model_dir, device="cpu", vad=None)
    waves = [load_audio(path, transcriber.sample_rate) for _, path in timed]
    texts = transcriber.transcribe_waves(waves)
    sentences = []
    for (row, _), wave, text in progress(zip(timed, waves, texts, strict=True), "aligning",
                                         total=len(timed), unit="utt"):
        words = align_text(transcriber.model, transcriber.tokenizer, wave, text)
        result = score_sentence(words, row["keyword"], row["keyword_start"], row["keyword_end"],
                                tolerance, row["text"])
        sentences.append({"audio_filepath": row["audio_filepath"], "reference": row["text"],
                          "hypothesis": text, "keyword": row["keyword"],
                          "reference_span": [row["keyword_start"], row["keyword_end"]],
                          "words": [[w.word, round(w.start, 3), round(w.end, 3)] for w in words
                                    if w.word in KEYWORDS], **result})
    return {"model": str(model_dir), "manifest": str(manifest), "tolerance_s": tolerance,
            **totals([row for row, _ in timed], sentences), "per_sentence": sentences}


def totals(rows: list[dict], sentences: list[dict]) -> dict:
    hours = sum(r["duration"] - (r["keyword_end"] - r["keyword_start"]) for r in rows) / 3600
    hits = [s for s in sentences if s["detected"]]
    alarms = sum(s["false_alarms"] for s in sentences)
    mentions = sum(s["mentions"] for s in sentences)

    def mean_abs(key: str) -> float | None:
        return sum(abs(s[key]) for s in hits) / len(hits) if hits else None

    return {"sentences": len(sentences), "detections": len(hits),
            "detection_rate": len(hits) / len(sentences), "false_alarms": alarms,
            "mentions": mentions, "non_keyword_hours": hours,
            "false_alarms_per_hour": alarms / hours,
            "false_alarms_and_mentions_per_hour": (alarms + mentions) / hours,
            "mean_abs_start_error_s": mean_abs("start_error"),
            "mean_abs_end_error_s": mean_abs("end_error")}


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--model", type=Path, required=True, help="a model directory")
    parser.add_argument("--manifest", type=Path, required=True,
                        help="sentences with keyword times (recipes.wuw.prepare)")
    parser.add_argument("--tolerance", type=float, default=DEFAULT_TOLERANCE,
                        help="seconds the keyword may lie outside its reference span")
    parser.add_argument("--threads", type=int, help="torch CPU threads")
    parser.add_argument("--json", type=Path, help="also write totals and each sentence here")
    args = parser.parse_args(argv)
    if args.threads:
        torch.set_num_threads(args.threads)
    try:
        result = spot(args.model, args.manifest, args.tolerance)
    except (AudioError, ManifestError, ModelDirError, ValueError) as err:
        print(f"error: {err}", file=sys.stderr)
        sys.exit(1)
    if args.json:
        save_text(json.dumps(result, indent=1) + "\n", args.json)
    print(f"{result['sentences']} sentences: detection rate {100 * result['detection_rate']:.1f}% "
          f"(tolerance {args.tolerance} s), {result['false_alarms']} false alarms = "
          f"{result['false_alarms_per_hour']:.1f} per hour of non-keyword speech "
          f"({result['non_keyword_hours']:.3f} h; {result['mentions']} more on keywords the "
          f"speakers said: {result['false_alarms_and_mentions_per_hour']:.1f} per hour with them)")
    if result["detections"]:
        print(f"keyword time error of the detections: start {result['mean_abs_start_error_s']:.3f}"
              f" s, end {result['mean_abs_end_error_s']:.3f} s (mean absolute)")


if __name__ == "__main__":
    main()

"""A transcript as the files whisper writes: txt, srt, vtt, tsv and json.

- txt: each segment's text on a line of its own.
- srt: numbered cues, `HH:MM:SS,mmm --> HH:MM:SS,mmm`, a blank line after each.
- vtt: `WEBVTT`, then cues timed `MM:SS.mmm` (hours only from the first hour on).
- tsv: a `start<TAB>end<TAB>text` header, then one row per segment in whole milliseconds.
- json: the file, its text and every segment with its scores (and words when timed).

With word timings, a subtitle cue runs from its first word's start to its last word's end;
`highlight_words` makes one cue per word instead, the segment's text with that word
underlined (`<u>word</u>`), and plain cues over the gaps between words, as whisper's
`--highlight_words`. Text goes on one line (newlines and tabs become spaces) and any arrow of
two or more dashes ("-->", "--->", ...), which would read as a cue's timing line, becomes "->".
"""

import json
import re
from collections.abc import Iterator
from dataclasses import asdict

from asr.transcriber import Segment, Transcript

FORMATS = ("txt", "srt", "vtt", "tsv", "json")
Cue = tuple[float, float, str]
_ARROW = re.compile(r"-{2,}>")


def format_timestamp(seconds: float, always_include_hours: bool = False,
                     decimal_marker: str = ".") -> str:
    """`[HH:]MM:SS.mmm` (rounded to the millisecond); hours always with `always_include_hours`."""
    if seconds < 0:
        raise ValueError(f"a timestamp cannot be negative, got {seconds}")
    milliseconds = round(seconds * 1000)
    hours, milliseconds = divmod(milliseconds, 3_600_000)
    minutes, milliseconds = divmod(milliseconds, 60_000)
    seconds, milliseconds = divmod(milliseconds, 1000)
    head = f"{hours:02d}:" if always_include_hours or hours else ""
    return f"{head}{minutes:02d}:{seconds:02d}{decimal_marker}{milliseconds:03d}"


def cue_text(text: str) -> str:
    """`text` on one line, with no "-->" left in it: any run of dashes before ">" becomes
    "->" (replacing "-->" alone would turn "--->" into "-->")."""
    return _ARROW.sub("->", " ".join(text.split()))


def cues(transcript: Transcript, highlight_words: bool = False) -> Iterator[Cue]:
    """The subtitle cues of a transcript: (start, end, text)."""
    for segment in transcript.segments:
        words = segment.words or []
        if not words:
            yield segment.start, segment.end, cue_text(segment.text)
        elif not highlight_words:
            yield words[0].start, words[-1].end, cue_text(segment.text)
        else:
            yield from _highlighted(segment)


def _highlighted(segment: Segment) -> Iterator[Cue]:
    words = [cue_text(w.word) for w in segment.words]
    last = segment.words[0].start
    for i, word in enumerate(segment.words):
        if round(word.start, 3) > round(last, 3):  # a gap between words: the plain line
            yield last, word.start, " ".join(words)
        yield word.start, word.end, " ".join(f"<u>{w}</u>" if j == i else w
                                             for j, w in enumerate(words))
        last = word.end


def to_txt(transcript: Transcript) -> str:
    return "".join(f"{cue_text(s.text)}\n" for s in transcript.segments)


def to_srt(transcript: Transcript, highlight_words: bool = False) -> str:
    return "".join(f"{i}\n{format_timestamp(start, True, ',')} --> "
                   f"{format_timestamp(end, True, ',')}\n{text}\n\n"
                   for i, (start, end, text) in enumerate(cues(transcript, highlight_words), 1))


def to_vtt(transcript: Transcript, highlight_words: bool = False) -> str:
    return "WEBVTT\n\n" + "".join(f"{format_timestamp(start)} --> {format_timestamp(end)}\n"
                                  f"{text}\n\n"
                                  for start, end, text in cues(transcript, highlight_words))


def to_tsv(transcript: Transcript) -> str:
    return "start\tend\ttext\n" + "".join(
        f"{round(1000 * s.start)}\t{round(1000 * s.end)}\t{cue_text(s.text)}\n"
        for s in transcript.segments)


def record(name: str, transcript: Transcript, segments: bool = True) -> dict:
    """The json format's object: `file`, `text` and (with `segments`) every segment with its
    `id`, times, text, `avg_logprob`, `no_speech_prob`, `confidence` and, when timed, its
    `words` (`word`, `start`, `end`, `probability`)."""
    out: dict = {"file": name, "text": transcript.text}
    if segments:
        out["segments"] = [{"id": i, **{k: v for k, v in asdict(s).items()
                                        if k != "words" or v is not None}}
                           for i, s in enumerate(transcript.segments)]
    return out


def render(transcript: Transcript, fmt: str, name: str, highlight_words: bool = False) -> str:
    """The text of a `fmt` file (one of FORMATS) for the input `name`."""
    if fmt == "json":
        return json.dumps(record(name, transcript)) + "\n"
    if fmt == "srt":
        return to_srt(transcript, highlight_words)
    if fmt == "vtt":
        return to_vtt(transcript, highlight_words)
    if fmt == "tsv":
        return to_tsv(transcript)
    if fmt == "txt":
        return to_txt(transcript)
    raise ValueError(f"output format must be one of {', '.join(FORMATS)}, got {fmt!r}")

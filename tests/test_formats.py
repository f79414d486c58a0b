"""Transcript files as whisper writes them: every format's exact text for a known transcript."""

import json

import pytest

from asr.formats import FORMATS, cues, format_timestamp, record, render
from asr.transcriber import Segment, Transcript, Word

pytestmark = pytest.mark.tier("fast")


def transcript(words: bool = False) -> Transcript:
    """Two segments, the second past the first hour; optionally with timed words."""
    first = Segment(0.5, 1.75, "show me my photos", -0.25, 0.01, 0.9)
    second = Segment(3600.2, 3601.0, "yes", -0.5, 0.125, 0.75)
    if words:
        first.words = [Word("show", 0.5, 0.7, 0.9), Word("me", 0.7, 0.8, 0.8),
                       Word("my", 1.0, 1.2, 0.7), Word("photos", 1.25, 1.7, 0.6)]
        second.words = []  # the CTC head could not align it: cue times are the segment's
    return Transcript("show me my photos yes", [first, second])


@pytest.mark.parametrize("seconds,hours,marker,expected", [
    (0.0, False, ".", "00:00.000"),
    (1.5, True, ",", "00:00:01,500"),
    (59.9996, False, ".", "01:00.000"),
    (3661.0415, False, ".", "01:01:01.042"),
    (36000.0, True, ",", "10:00:00,000"),
])
def test_timestamps(seconds, hours, marker, expected):
    assert format_timestamp(seconds, hours, marker) == expected


def test_negative_timestamp_is_refused():
    with pytest.raises(ValueError, match="cannot be negative"):
        format_timestamp(-0.001)


def test_srt_vtt_tsv_txt_exactly():
    t = transcript()
    assert render(t, "srt", "a.wav") == (
        "1\n00:00:00,500 --> 00:00:01,750\nshow me my photos\n\n"
        "2\n01:00:00,200 --> 01:00:01,000\nyes\n\n")
    assert render(t, "vtt", "a.wav") == (
        "WEBVTT\n\n00:00.500 --> 00:01.750\nshow me my photos\n\n"
        "01:00:00.200 --> 01:00:01.000\nyes\n\n")
    assert render(t, "tsv", "a.wav") == "start\tend\ttext\n500\t1750\tshow me my photos\n" \
                                        "3600200\t3601000\tyes\n"
    assert render(t, "txt", "a.wav") == "show me my photos\nyes\n"


def test_json_schema():
    assert json.loads(render(transcript(words=True), "json", "dir/a b.wav")) == {
        "file": "dir/a b.wav", "text": "show me my photos yes", "segments": [
            {"id": 0, "start": 0.5, "end": 1.75, "text": "show me my photos", "avg_logprob": -0.25,
             "no_speech_prob": 0.01, "confidence": 0.9, "words": [
                 {"word": "show", "start": 0.5, "end": 0.7, "probability": 0.9},
                 {"word": "me", "start": 0.7, "end": 0.8, "probability": 0.8},
                 {"word": "my", "start": 1.0, "end": 1.2, "probability": 0.7},
                 {"word": "photos", "start": 1.25, "end": 1.7, "probability": 0.6}]},
            {"id": 1, "start": 3600.2, "end": 3601.0, "text": "yes", "avg_logprob": -0.5,
             "no_speech_prob": 0.125, "confidence": 0.75, "words": []}]}
    without = record("a.wav", transcript())
    assert "words" not in without["segments"][0]
    assert record("a.wav", transcript(), segments=False) == {"file": "a.wav",
                                                            "text": "show me my photos yes"}


def test_word_timed_cues_and_highlighted_words():
    t = transcript(words=True)
    assert list(cues(t)) == [(0.5, 1.7, "show me my photos"), (3600.2, 3601.0, "yes")]
    assert render(t, "srt", "a.wav", highlight_words=True) == (
        "1\n00:00:00,500 --> 00:00:00,700\n<u>show</u> me my photos\n\n"
        "2\n00:00:00,700 --> 00:00:00,800\nshow <u>me</u> my photos\n\n"
        "3\n00:00:00,800 --> 00:00:01,000\nshow me my photos\n\n"  # the pause between words
        "4\n00:00:01,000 --> 00:00:01,200\nshow me <u>my</u> photos\n\n"
        "5\n00:00:01,200 --> 00:00:01,250\nshow me my photos\n\n"
        "6\n00:00:01,250 --> 00:00:01,700\nshow me my <u>photos</u>\n\n"
        "7\n01:00:00,200 --> 01:00:01,000\nyes\n\n")
    assert render(t, "vtt", "a.wav", highlight_words=True).splitlines()[2:5] == [
        "00:00.500 --> 00:00.700", "<u>show</u> me my photos", ""]


def test_text_stays_on_its_line_and_cue():
    """Tabs, newlines and "-->" in a segment's text cannot break a row or a cue."""
    t = Transcript("x", [Segment(0.0, 1.0, "a\tb\nc --> d\r\ne", 0.0, 0.0, 1.0)])
    assert render(t, "tsv", "a.wav") == "start\tend\ttext\n0\t1000\ta b c -> d e\n"
    assert render(t, "srt", "a.wav") == "1\n00:00:00,000 --> 00:00:01,000\na b c -> d e\n\n"
    assert render(t, "txt", "a.wav") == "a b c -> d e\n"


@pytest.mark.parametrize("text", ["--->", "a ----> b", "<!--->", "-- >", "x-->y-->z"])
def test_no_arrow_survives_escaping(text):
    """Replacing "-->" alone turned "--->" into "-->": a cue's timing line inside its text."""
    t = Transcript("x", [Segment(0.0, 1.0, text, 0.0, 0.0, 1.0)])
    for fmt in ("srt", "vtt", "tsv", "txt"):
        rendered = render(t, fmt, "a.wav")
        assert rendered.count("-->") == (fmt in ("srt", "vtt")), (fmt, rendered)


def test_no_segments_no_cues():
    empty = Transcript("", [])
    assert [render(empty, fmt, "a.wav") for fmt in FORMATS] == [
        "", "", "WEBVTT\n\n", "start\tend\ttext\n", '{"file": "a.wav", "text": "", "segments": []}\n']

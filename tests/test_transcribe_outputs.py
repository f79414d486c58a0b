"""What transcription gives beyond text: word times, scores, files as whisper writes them,
stdin, any format soundfile reads, odd file names, and files that fail half way."""

import io
import json
import shutil
import struct
import subprocess
import sys

import numpy as np
import pytest
import soundfile as sf

from asr.audio import AudioError
from asr.formats import FORMATS, render
from asr.transcribe import main
from asr.transcriber import Transcriber, Transcript
from conftest import ROOT
from test_transcriber import long_recording


@pytest.fixture(scope="module")
def recording(overfit_model, tmp_path_factory):
    """Four of the model's utterances in one file with pauses, and each one's span."""
    model_dir, entries, _ = overfit_model
    path = tmp_path_factory.mktemp("outputs") / "four.wav"
    chosen = [entries[i] for i in (0, 2, 4, 7)]
    return path, long_recording(chosen, path), [text for _, text in chosen]


def test_words_are_timed_inside_their_segments_in_order(overfit_model, recording):
    model_dir, _, _ = overfit_model
    path, spans, texts = recording
    transcriber = Transcriber.from_pretrained(model_dir, device="cpu", beam_size=1)
    timed = transcriber.transcribe(path, word_timestamps=True)
    plain = transcriber.transcribe(path)
    assert [s.text for s in timed.segments] == texts
    assert [[w.word for w in s.words] for s in timed.segments] == [[t] for t in texts]
    times = [t for s in timed.segments for w in s.words for t in (w.start, w.end)]
    assert times == sorted(times)
    for segment, (start, end) in zip(timed.segments, spans, strict=True):
        [word] = segment.words
        assert segment.start <= word.start < word.end == segment.end
        assert start - 0.3 <= word.start <= end  # where the word is said
        assert 0 < word.probability <= 1 and 0 < segment.confidence <= 1
        assert segment.avg_logprob < 0 and 0 <= segment.no_speech_prob <= 1
    for with_words, without in zip(timed.segments, plain.segments, strict=True):
        assert without.words is None
        assert (with_words.start, with_words.end, with_words.text, with_words.confidence) == \
            (without.start, without.end, without.text, without.confidence)
    transcriber.model.ctc = None
    with pytest.raises(ValueError, match="word timestamps need a model with a CTC head"):
        transcriber.transcribe(path, word_timestamps=True)


def test_files_for_each_input_and_stdin(overfit_model, recording, tmp_path):
    """`-` reads stdin (here a FLAC file); every input gets its five files, which are exactly
    what the formats make of the API's result; a bad file gets one line, the others their
    files, and the status is 1."""
    model_dir, entries, _ = overfit_model
    path, _, _ = recording
    flac = tmp_path / "said.flac"
    sf.write(flac, *sf.read(entries[3][0]))
    bad = tmp_path / "notes.wav"
    bad.write_text("not audio at all")
    out = tmp_path / "out"
    with flac.open("rb") as stdin:
        result = subprocess.run(
            [sys.executable, "-m", "asr.transcribe", "--model", str(model_dir), "--beam-size", "1",
             "--word-timestamps", "--output-format", "all", "--output-dir", str(out),
             str(path), str(bad), "-"], stdin=stdin, cwd=ROOT, capture_output=True, text=True,
            timeout=300)
    assert result.returncode == 1 and result.stdout == ""
    assert result.stderr.splitlines() == [
        f"error: {bad}: not readable as audio (Format not recognised.)"]
    assert sorted(p.name for p in out.iterdir()) == sorted(
        f"{stem}.{fmt}" for stem in ("four", "stdin") for fmt in FORMATS)
    transcriber = Transcriber.from_pretrained(model_dir, device="cpu", beam_size=1)
    expected = transcriber.transcribe([path, flac], word_timestamps=True)
    assert expected[1].text == entries[3][1]
    for stem, name, transcript in (("four", str(path), expected[0]), ("stdin", "-", expected[1])):
        for fmt in ("txt", "srt", "vtt", "tsv"):  # times come from the VAD and aligned frames
            assert (out / f"{stem}.{fmt}").read_text() == render(transcript, fmt, name), fmt
        assert rounded(json.loads((out / f"{stem}.json").read_text())) == \
            rounded(json.loads(render(transcript, "json", name)))


def rounded(value):
    """JSON with its floats to 4 places: scores computed with another number of threads (in
    another process) may differ in their last bits."""
    if isinstance(value, float):
        return round(value, 4)
    if isinstance(value, list):
        return [rounded(v) for v in value]
    if isinstance(value, dict):
        return {key: rounded(v) for key, v in value.items()}
    return value


def test_stdout_word_lines_and_json(overfit_model, recording, capsys):
    model_dir, _, _ = overfit_model
    path, _, texts = recording
    args = ["--model", str(model_dir), "--beam-size", "1", "--word-timestamps", str(path)]
    assert main(args) == 0
    lines = [line.split("\t") for line in capsys.readouterr().out.splitlines()]
    assert [(name, word) for name, _, _, word in lines] == [(str(path), t) for t in texts]
    assert main(["--json", *args]) == 0
    record = json.loads(capsys.readouterr().out)
    assert [[w["word"] for w in s["words"]] for s in record["segments"]] == [[t] for t in texts]
    assert [f"{w['start']:.2f}" for s in record["segments"] for w in s["words"]] == \
        [start for _, start, _, _ in lines]


def test_stdin_wav_of_unknown_length(overfit_model, monkeypatch, capsys):
    """A WAV written to a pipe by a streaming tool: its header cannot say how long it is."""
    model_dir, entries, _ = overfit_model
    wav = bytearray(entries[0][0].read_bytes())
    data = wav.index(b"data")
    wav[4:8] = wav[data + 4:data + 8] = struct.pack("<I", 0xFFFFFFFF)
    monkeypatch.setattr(sys, "stdin", io.TextIOWrapper(io.BytesIO(bytes(wav))))
    assert main(["--model", str(model_dir), "-"]) == 0
    assert capsys.readouterr().out == f"-\t{entries[0][1]}\n"


@pytest.mark.parametrize("fmt,subtype", [("OGG", "VORBIS"), ("MP3", "MPEG_LAYER_III"),
                                          ("FLAC", "PCM_24"), ("AIFF", "PCM_16")])
def test_any_format_soundfile_reads(overfit_model, tmp_path, capsys, fmt, subtype):
    model_dir, entries, _ = overfit_model
    speech, rate = sf.read(entries[4][0], dtype="float32")
    path = tmp_path / f"said.{fmt.lower()}"
    sf.write(path, speech, rate, format=fmt, subtype=subtype)
    assert main(["--model", str(model_dir), str(path)]) == 0
    assert capsys.readouterr().out == f"{path}\t{entries[4][1]}\n"


def test_odd_file_names_keep_their_lines(overfit_model, tmp_path, capsys):
    """A tab or a newline in a file name is escaped on stdout; the files are named after it."""
    model_dir, entries, _ = overfit_model
    odd = tmp_path / "a\tb\nc\\d.wav"
    shutil.copy(entries[0][0], odd)
    assert main(["--model", str(model_dir), str(odd)]) == 0
    escaped = str(tmp_path) + "/a\\tb\\nc\\\\d.wav"
    assert capsys.readouterr().out == f"{escaped}\t{entries[0][1]}\n"
    assert main(["--model", str(model_dir), "--output-format", "tsv", "--output-dir",
                 str(tmp_path / "out"), str(odd)]) == 0
    [tsv] = (tmp_path / "out").iterdir()
    assert tsv.name == "a\tb\nc\\d.tsv"
    rows = tsv.read_text().splitlines()
    assert rows[0] == "start\tend\ttext" and [r.split("\t")[2] for r in rows[1:]] == [entries[0][1]]


def test_a_file_that_fails_half_way_loses_no_other(overfit_model, tmp_path, capsys):
    """NaN samples after the first block (70 s in) are found mid-stream, after the file was
    accepted: that file gets its error line, the files around it their results."""
    model_dir, entries, _ = overfit_model
    late = tmp_path / "late.wav"
    wave = np.zeros(70 * 16000, np.float32)
    wave[-100:] = np.nan
    sf.write(late, wave, 16000, subtype="FLOAT")
    files = [str(entries[0][0]), str(late), str(entries[5][0])]
    assert main(["--model", str(model_dir), "--output-format", "txt", "--output-dir",
                 str(tmp_path / "out"), *files]) == 1
    assert capsys.readouterr().err == f"error: {late}: contains NaN or infinite samples\n"
    assert sorted(p.name for p in (tmp_path / "out").iterdir()) == sorted(
        [f"{entries[0][0].stem}.txt", f"{entries[5][0].stem}.txt"])
    transcriber = Transcriber.from_pretrained(model_dir, device="cpu")
    results = list(transcriber.transcribe_each(files))
    assert isinstance(results[1], AudioError) and results[1].path == str(late)
    assert [r.text for r in results if isinstance(r, Transcript)] == [entries[0][1], entries[5][1]]
    with pytest.raises(AudioError, match="contains NaN"):
        transcriber.transcribe(files)


def test_argument_clashes_are_refused_before_loading(tmp_path, capsys):
    for args, problem in [
        (["--output-dir", "out", "a/x.wav", "b/x.flac"],
         "a/x.wav and b/x.flac would both write x.* in the output folder"),
        (["--highlight-words", "x.wav"], "--highlight-words needs --word-timestamps"),
        (["-", "-"], "- (stdin) can be given once"),
    ]:
        with pytest.raises(SystemExit) as stop:
            main(["--model", str(tmp_path / "none"), *args])
        assert stop.value.code == 2
        assert capsys.readouterr().err.splitlines()[-1].endswith(f"error: {problem} (see --help)")

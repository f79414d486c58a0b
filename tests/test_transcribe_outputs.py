"""What transcription gives beyond text: word times, scores, files as whisper writes them,
stdin, any format soundfile reads, odd file names, and files that fail half way."""

import io
import json
import os
import shlex
import shutil
import stat
import struct
import subprocess
import sys

import numpy as np
import pytest
import soundfile as sf
import torch

from asr import transcribe
from asr.audio import AudioError
from asr.evaluate import main as evaluate_main
from asr.formats import FORMATS, render
from asr.transcribe import main
from asr.transcriber import Transcriber, Transcript
from helpers import ROOT
from test_transcriber import long_recording

pytestmark = [pytest.mark.tier("fast"), pytest.mark.data]


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


@pytest.mark.subprocess
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


def test_an_output_never_replaces_an_input(tmp_path, capsys):
    """An audio file named x.tsv, transcribed with --output-dir beside it, was replaced by
    its own tsv; the same file reached through a link to its folder is caught too."""
    (tmp_path / "d").mkdir()
    (tmp_path / "link").symlink_to(tmp_path / "d")
    audio = tmp_path / "d" / "x.tsv"
    audio.write_bytes(b"RIFF audio")
    for args in (["--output-dir", str(tmp_path / "d")],
                 ["--output-format", "tsv", "--output-dir", str(tmp_path / "link")]):
        with pytest.raises(SystemExit) as stop:
            main(["--model", str(tmp_path / "none"), *args, str(audio)])
        assert stop.value.code == 2
        assert capsys.readouterr().err.splitlines()[-1].endswith(
            f"is the input {audio}: its output would replace it; pick another --output-dir "
            "(see --help)")
    assert audio.read_bytes() == b"RIFF audio"


def test_files_written_honour_the_umask(overfit_model, tmp_path):
    """Every file used to be 0600 (mkstemp's mode); as open() would: 0666 less the umask,
    and a file replaced keeps its own mode."""
    model_dir, entries, _ = overfit_model
    old = os.umask(0o022)
    try:
        main(["--model", str(model_dir), "--output-format", "txt", "--output-dir",
              str(tmp_path), str(entries[0][0])])
        written = tmp_path / f"{entries[0][0].stem}.txt"
        assert stat.S_IMODE(written.stat().st_mode) == 0o644
        written.chmod(0o640)
        os.umask(0o077)
        main(["--model", str(model_dir), "--output-format", "txt", "--output-dir",
              str(tmp_path), str(entries[0][0])])
        assert stat.S_IMODE(written.stat().st_mode) == 0o640
    finally:
        os.umask(old)


def test_threads_and_no_vad(overfit_model, recording, capsys):
    """--threads N sets the threads of either backend; --no-vad decodes a file whole, as one
    segment from its first sample to its last."""
    model_dir, _, _ = overfit_model
    path, spans, _ = recording
    threads = torch.get_num_threads()
    try:
        assert main(["--model", str(model_dir), "--threads", "1", "--no-vad", "--timestamps",
                     str(path)]) == 0
        assert torch.get_num_threads() == 1
    finally:
        torch.set_num_threads(threads)
    [row] = capsys.readouterr().out.splitlines()
    assert row.split("\t")[1:3] == ["0.00", f"{sf.info(path).duration:.2f}"]
    for bad in (["--threads", "0"], ["--threads", "many"], ["--vad=no"]):
        with pytest.raises(SystemExit) as stop:
            main(["--model", str(model_dir), *bad, str(path)])
        assert stop.value.code == 2


@pytest.mark.subprocess
def test_a_closed_pipe_ends_the_command_quietly(overfit_model, recording):
    """`asr-transcribe ... | head -1` ended in a BrokenPipeError traceback."""
    model_dir, _, _ = overfit_model
    path, _, _ = recording
    command = [sys.executable, "-m", "asr.transcribe", "--model", str(model_dir), "--timestamps",
               *[str(path)] * 40]
    run = subprocess.run(f"{shlex.join(command)} | head -1; echo \"${{PIPESTATUS[0]}}\"",
                         shell=True, executable="/bin/bash", cwd=ROOT, capture_output=True,
                         text=True, timeout=300)
    first, status = run.stdout.splitlines()
    assert first.startswith(f"{path}\t") and status == "141"
    assert run.stderr == ""


class Endless(io.RawIOBase):
    """A stdin of `size` zero bytes that counts what was read of it."""

    def __init__(self, size: int, head: bytes = b"") -> None:
        self.left, self.head, self.taken = size, head, 0

    def readable(self) -> bool:
        return True

    def readinto(self, buffer) -> int:
        chunk = (self.head + bytes(min(len(buffer), self.left)))[:len(buffer)]
        self.head = self.head[len(chunk):]
        self.left -= len(chunk)
        buffer[:len(chunk)] = chunk
        self.taken += len(chunk)
        return len(chunk)


def test_stdin_that_is_no_audio_is_not_copied_whole(overfit_model, monkeypatch, capsys):
    """`cat /dev/zero | asr-transcribe -` copied stdin to a temp file until the disk was full."""
    model_dir, entries, _ = overfit_model
    zeros = Endless(1 << 40)
    monkeypatch.setattr(sys, "stdin", io.TextIOWrapper(io.BufferedReader(zeros)))
    assert main(["--model", str(model_dir), "-"]) == 1
    assert capsys.readouterr().err.startswith("error: -: not readable as audio")
    assert zeros.taken <= 2 << 20
    wav = entries[0][0].read_bytes()
    monkeypatch.setattr(transcribe, "MAX_STDIN_BYTES", len(wav) + (3 << 20))
    endless_wav = Endless(1 << 40, wav[:44])  # a header, then zeros without end
    monkeypatch.setattr(sys, "stdin", io.TextIOWrapper(io.BufferedReader(endless_wav)))
    assert main(["--model", str(model_dir), "-"]) == 1
    assert capsys.readouterr().err.startswith("error: -: more than ")
    assert endless_wav.taken <= len(wav) + (5 << 20)


def test_reports_and_outputs_never_replace_what_is_read(tmp_path, capsys):
    """asr-evaluate --json onto its manifest replaced the manifest; an audio file named
    metrics.wav transcribed into the model directory replaced the model's metrics.json."""
    model, manifest = tmp_path / "model", tmp_path / "test.jsonl"
    model.mkdir()
    (model / "metrics.json").write_text("{}")
    manifest.write_text("{}\n")
    audio = tmp_path / "metrics.wav"
    audio.write_bytes(b"RIFF")
    for run, argv, problem in [
            (evaluate_main, ["--manifest", str(manifest), "--json", str(manifest)],
             f"--json {manifest} is {manifest}: the output would replace it"),
            (evaluate_main, ["--manifest", str(manifest), "--json", str(model / "metrics.json")],
             f"--json {model / 'metrics.json'} is {model / 'metrics.json'}: the output would "
             "replace it"),
            (main, ["--output-dir", str(model), str(audio)],
             f"{model / 'metrics.json'} is the input {model / 'metrics.json'}: its output would "
             "replace it; pick another --output-dir")]:
        with pytest.raises(SystemExit) as stop:
            run(["--model", str(model), *argv])
        assert stop.value.code == 2
        assert capsys.readouterr().err.splitlines()[-1].endswith(f"error: {problem} (see --help)")
    assert manifest.read_text() == "{}\n" and (model / "metrics.json").read_text() == "{}"


def test_pipes_named_as_files_are_read_as_stdin_is(overfit_model, tmp_path):
    """`cat x.wav | asr-transcribe /dev/stdin` and `asr-transcribe <(cat x.wav)` were refused
    as "empty file" (a pipe's size is 0): a FIFO or character device named is copied as `-` is,
    with the same bounds (`/dev/zero` costs a megabyte, then one error line)."""
    model_dir, entries, _ = overfit_model
    wav, text = entries[3]
    fifo = tmp_path / "fifo.wav"
    os.mkfifo(fifo)
    command = (f"cat {shlex.quote(str(wav))} > {shlex.quote(str(fifo))} & "
               f"cat {shlex.quote(str(wav))} | {shlex.quote(sys.executable)} -m asr.transcribe "
               f"--model {shlex.quote(str(model_dir))} --beam-size 1 /dev/stdin "
               f"<(cat {shlex.quote(str(wav))}) {shlex.quote(str(fifo))} /dev/zero")
    result = subprocess.run(["bash", "-c", command], cwd=ROOT, capture_output=True, text=True,
                            timeout=300)
    lines = result.stdout.splitlines()
    assert [line.split("\t")[1] for line in lines] == [text] * 3
    assert lines[0].startswith("/dev/stdin\t") and lines[1].startswith("/dev/fd/")
    assert lines[2].startswith(f"{fifo}\t")
    assert result.stderr.splitlines() == ["error: /dev/zero: not readable as audio (Format not "
                                          "recognised.)"]
    assert result.returncode == 1

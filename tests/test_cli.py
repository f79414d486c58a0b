"""The evaluate and transcribe command lines, end to end, with exact expected output."""

import json
import subprocess
import sys

import pytest

from asr.transcribe import main as transcribe_main
from helpers import ROOT, fsdd_file
from test_transcriber import long_recording

pytestmark = [pytest.mark.tier("fast"), pytest.mark.data]


def run(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", *args], cwd=ROOT, capture_output=True,
                          text=True, timeout=300)


def test_transcribe_prints_file_and_text(overfit_model):
    model_dir, entries, _ = overfit_model
    files = [str(path) for path, _ in entries[:3]]
    result = run("asr.transcribe", "--model", str(model_dir), *files)
    assert result.returncode == 0, result.stderr
    assert result.stdout.splitlines() == [f"{f}\t{text}" for f, (_, text) in
                                          zip(files, entries[:3], strict=True)]


def test_transcribe_json_and_bad_file(overfit_model, tmp_path):
    """One bad file gets a one-line error; the others are still transcribed; exit status 1."""
    model_dir, entries, _ = overfit_model
    bad = tmp_path / "notes.wav"
    bad.write_text("not audio at all")
    result = run("asr.transcribe", "--json", "--beam-size", "3", "--model", str(model_dir),
                 str(entries[0][0]), str(bad))
    assert result.returncode == 1
    assert json.loads(result.stdout) == {"file": str(entries[0][0]), "text": entries[0][1]}
    assert result.stderr.strip().splitlines() == [
        f"error: {bad}: not readable as audio (Format not recognised.)"]


def test_transcribe_timestamps(overfit_model, tmp_path, capsys):
    """Two words in one file: a line per segment (text lines, and in JSON), in order.
    In-process (`main`), as a subprocess costs a torch import."""
    model_dir, entries, _ = overfit_model
    path = tmp_path / "two.wav"
    spans = long_recording([entries[1], entries[5]], path)
    assert transcribe_main(["--timestamps", "--beam-size", "1", "--model", str(model_dir),
                            str(path)]) == 0
    lines = [line.split("\t") for line in capsys.readouterr().out.splitlines()]
    assert [(f, text) for f, _, _, text in lines] == [(str(path), entries[1][1]),
                                                      (str(path), entries[5][1])]
    for (_, start, end, _), (clip_start, clip_end) in zip(lines, spans, strict=True):
        assert clip_start - 0.3 <= float(start) < float(end) <= clip_end + 0.3
    assert transcribe_main(["--timestamps", "--json", "--mode", "ctc_greedy", "--model",
                            str(model_dir), str(path)]) == 0
    record = json.loads(capsys.readouterr().out)
    assert record["text"] == f"{entries[1][1]} {entries[5][1]}"
    assert [s["text"] for s in record["segments"]] == [entries[1][1], entries[5][1]]
    assert [round(float(v), 2) for s in record["segments"] for v in (s["start"], s["end"])] == \
        [float(v) for _, start, end, _ in lines for v in (start, end)]


def test_transcribe_missing_model(tmp_path):
    result = run("asr.transcribe", "--model", str(tmp_path / "nope"), str(fsdd_file(1)))
    assert result.returncode == 1
    assert result.stderr.strip() == f"error: {tmp_path / 'nope'}: not a model directory"


def test_evaluate_scores_and_writes_json(overfit_model, tmp_path):
    model_dir, entries, run_info = overfit_model
    out = tmp_path / "scores.json"
    result = run("asr.evaluate", "--model", str(model_dir), "--manifest",
                 str(run_info["manifest"]), "--json", str(out))
    assert result.returncode == 0, result.stderr
    assert result.stdout.startswith(f"{run_info['manifest']}: 8 utterances, WER 0.00%, CER 0.00%")
    scores = json.loads(out.read_text())
    assert scores["wer"] == 0.0 and len(scores["results"]) == 8
    assert [r["hypothesis"] for r in scores["results"]] == [t for _, t in entries]
    assert scores["results"][0]["words"] == {"substitutions": 0, "deletions": 0,
                                             "insertions": 0, "reference_length": 1}


def test_evaluate_bad_manifest(overfit_model, tmp_path):
    model_dir, _, _ = overfit_model
    manifest = tmp_path / "bad.jsonl"
    manifest.write_text('{"audio_filepath": "a.wav", "text": "x"}\n')
    result = run("asr.evaluate", "--model", str(model_dir), "--manifest", str(manifest))
    assert result.returncode == 1
    assert result.stderr.strip() == f"error: {manifest}:1: missing key(s) duration"

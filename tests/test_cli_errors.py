"""The command lines given bad input: one `error: ...` line, a non-zero status, no traceback.

Also Hydra misuse (a misspelt group, a missing option, an unknown key): Hydra's own message,
then one hint line listing the config groups and their options.
"""

import os
import shutil
import subprocess
import sys

import numpy as np
import pytest
import soundfile as sf
import torch

from asr.train import config_choices
from asr.transcribe import main as transcribe_main
from asr.transcribe import read_words
from helpers import ROOT, small_real_set, write_manifest

pytestmark = [pytest.mark.tier("fast"), pytest.mark.data]


def run(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", *args], cwd=ROOT, capture_output=True,
                          text=True, timeout=300)


@pytest.mark.parametrize("override,hydra_says", [
    ("modle=small", ["Could not override 'modle'.", "Key 'modle' is not in struct"]),
    ("model=huge", ["In 'train': Could not find 'model/huge'", "Available options in 'model':"]),
    ("optim.lrr=1", ["Could not override 'optim.lrr'.", "Key 'lrr' not in 'AdamConfig'"]),
])
def test_hydra_misuse_gets_hydras_error_and_the_valid_choices(tmp_path, override, hydra_says):
    result = run("asr.train", override, f"trainer.out_dir={tmp_path}")
    assert result.returncode == 1 and "Traceback" not in result.stderr
    lines = result.stderr.splitlines()
    assert all(line in lines for line in hydra_says)
    assert lines[-1] == f"hint: config groups: {config_choices()}; keys: python -m asr.train --cfg job"
    assert "model=base|s2t_m|s2t_s|small|tiny" in lines[-1] and "decode=beam|ctc_greedy|greedy" in lines[-1]


@pytest.mark.subprocess
def test_train_without_a_model_directory_says_so_in_one_line(tmp_path):
    result = subprocess.run([sys.executable, "-m", "asr.train", f"data.root={tmp_path}"],
                            cwd=tmp_path, capture_output=True, text=True, timeout=300)
    assert result.returncode == 1
    assert result.stderr.splitlines() == [
        "error: no value for trainer.out_dir: give it on the command line (trainer.out_dir=...)"]


def truncated_copy(source, path):
    """The first 1000 bytes of a 16-bit mono WAV (44-byte header): 956 bytes of audio."""
    path.write_bytes(source.read_bytes()[:1000])
    return path


def truncated(path, source) -> str:
    declared = 2 * sf.info(str(source)).frames
    return f"{path}: truncated: header declares {declared} bytes of audio, file holds 956"


def test_train_cli_names_the_bad_file(tmp_path):
    entries = small_real_set()[:2]
    manifest = write_manifest(tmp_path / "train.jsonl", entries)
    bad = truncated_copy(entries[1][0], tmp_path / "cut.wav")
    manifest.write_text(manifest.read_text().replace(str(entries[1][0]), str(bad)))
    result = run("asr.train", f"data.train_manifest={manifest}", f"data.dev_manifest={manifest}",
                 f"trainer.out_dir={tmp_path / 'model'}", "model=tiny", "trainer.num_threads=1")
    assert result.returncode == 1
    assert result.stderr.splitlines() == [
        f"error: {truncated(bad, entries[1][0])} (data.on_error=skip leaves such files out)"]


def test_evaluate_cli_names_the_bad_file(overfit_model, tmp_path):
    model_dir, entries, _ = overfit_model
    bad = truncated_copy(entries[0][0], tmp_path / "cut.wav")
    manifest = write_manifest(tmp_path / "test.jsonl", [entries[1], (entries[0][0], "one")])
    manifest.write_text(manifest.read_text().replace(str(entries[0][0]), str(bad)))
    result = run("asr.evaluate", "--model", str(model_dir), "--manifest", str(manifest))
    assert result.returncode == 1 and result.stdout == ""
    assert result.stderr.splitlines() == [f"error: {truncated(bad, entries[0][0])}"]


def test_transcribe_cli_transcribes_what_it_can(overfit_model, tmp_path):
    """Valid oddities are transcribed, every bad file gets its line, and the status is 1."""
    model_dir, entries, _ = overfit_model
    speech, rate = sf.read(str(entries[0][0]), dtype="float32")
    surround = tmp_path / "six.wav"
    sf.write(str(surround), np.tile(speech[:, None], (1, 6)), rate, subtype="PCM_U8")
    one_sample = tmp_path / "one.wav"
    sf.write(str(one_sample), speech[:1], rate)
    (tmp_path / "folder.wav").mkdir()
    bad = [tmp_path / "missing.wav", tmp_path / "folder.wav",
           truncated_copy(entries[0][0], tmp_path / "cut.wav")]
    files = [entries[0][0], bad[0], surround, bad[1], one_sample, bad[2], entries[4][0]]
    result = run("asr.transcribe", "--model", str(model_dir), *map(str, files))
    assert result.returncode == 1
    out = [line.split("\t") for line in result.stdout.splitlines()]
    assert [name for name, _ in out] == [str(f) for f in files if f not in bad]
    assert out[0][1] == out[1][1] == entries[0][1]  # 6-channel 8-bit: the same word
    assert out[3][1] == entries[4][1]
    assert result.stderr.splitlines() == [
        f"error: {bad[0]}: no such file", f"error: {bad[1]}: is a directory, not an audio file",
        f"error: {truncated(bad[2], entries[0][0])}"]


def test_word_list_option(overfit_model, tmp_path):
    """`--words FILE` limits what is written; a missing, empty or non-UTF-8 list is one line."""
    model_dir, entries, _ = overfit_model
    words = tmp_path / "words.txt"
    words.write_text("one\nstop yes\n")
    result = run("asr.transcribe", "--model", str(model_dir), "--words", str(words),
                 str(entries[0][0]), str(entries[5][0]))
    assert result.returncode == 0, result.stderr
    assert [line.split("\t")[1] for line in result.stdout.splitlines()] == ["one", "stop"]
    missing = tmp_path / "missing.txt"
    result = run("asr.evaluate", "--model", str(model_dir), "--words", str(missing),
                 "--manifest", "x")
    assert result.returncode == 1 and result.stdout == ""
    assert result.stderr.splitlines() == [
        f"error: {missing}: cannot read the word list (No such file or directory)"]
    empty, binary = tmp_path / "empty.txt", tmp_path / "binary.txt"
    empty.write_text(" \n")
    binary.write_bytes(b"\xff\xfe\x00one")
    for path, problem in [(empty, "the word list is empty"),
                          (binary, "the word list is not UTF-8 text")]:
        with pytest.raises(ValueError) as err:
            read_words(str(path))
        assert str(err.value) == f"{path}: {problem}"


def test_transcribe_arguments_are_checked_in_one_line(overfit_model, tmp_path, capsys):
    """`--batch-size 0` printed every transcript empty with status 0; a device that does not
    exist, a word list that is a device or a FIFO (reading one never ends) are one line too."""
    model_dir, entries, _ = overfit_model
    fifo = tmp_path / "words.fifo"
    os.mkfifo(fifo)
    clip = str(entries[0][0])
    for options, expected in [
            (["--batch-size", "0"], "asr-transcribe: error: argument --batch-size: must be in "
                                    "[1, 4096], got 0 (see --help)"),
            (["--lead-in-ms", "inf"], "error: decode.lead_in_ms must be a finite number, got inf"),
            (["--beam-size", "100000"], "error: decode.beam_size must be in [1, 64], got 100000"),
            (["--device", "cuda:9"], "error: device cuda:9: no CUDA GPU is available here "
                                     "(use cpu)" if not torch.cuda.is_available() else
             "error: device cuda:9: there is no such GPU"),
            (["--words", "/dev/zero"], "error: /dev/zero: the word list is not a regular file "
                                       "(a device, pipe or socket); refused"),
            (["--words", str(fifo)], f"error: {fifo}: the word list is not a regular file (a "
                                     "device, pipe or socket); refused"),
            (["--mode", "fast"], "asr-transcribe: error: argument --mode: invalid choice: 'fast' ")]:
        try:
            status = transcribe_main(["--model", str(model_dir), *options, clip])
        except SystemExit as stop:  # argparse's usage errors
            status = stop.code
        err = capsys.readouterr().err
        assert status in (1, 2) and len(err.splitlines()) == 1, err
        assert err.startswith(expected), err


def test_transcribe_keeps_every_good_file_and_escapes_names(overfit_model, tmp_path, capsys):
    """A file that goes bad halfway (NaN samples after its first block) used to discard the
    transcripts of the good files around it; names with a tab or a newline broke the
    tab-separated output (and an error line)."""
    model_dir, entries, _ = overfit_model
    late_nan = tmp_path / "late\nnan.wav"
    samples = np.zeros(70 * 16000, np.float32)
    samples[(1 << 20) + 5] = np.nan
    sf.write(late_nan, samples, 16000, subtype="FLOAT")
    odd = tmp_path / "tab\there\\.wav"
    shutil.copy(entries[0][0], odd)
    status = transcribe_main(["--model", str(model_dir), str(odd), str(late_nan),
                              str(entries[5][0])])
    out, err = capsys.readouterr()
    assert status == 1
    assert out.splitlines() == [f"{tmp_path}/tab\\there\\\\.wav\t{entries[0][1]}",
                                f"{entries[5][0]}\t{entries[5][1]}"]
    assert err.splitlines() == [f"error: {tmp_path}/late\\nnan.wav: contains NaN or infinite "
                                "samples"]

"""ONNX export: the exported graphs, run by onnxruntime, decode real speech as the torch model does.

The tiny model trained on eight real utterances is exported by the command line, fp32 and
int8. Its hypotheses on real recordings (those it learnt, others it never heard, background
noise) must be identical with the torch model's and with its graphs', greedy, in beam search
with CTC prefix scores, without the key/value cache and with CTC alone, and their confidences
must agree to float rounding. Random models of the other architectures (relative and rotary
positions, local attention, convolution subsampling, MFCC, no CTC head) export with graphs
equal to the torch model to 1e-4 on shapes other than the traced ones.
"""

import shutil
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
import soundfile as sf
import torch
from hydra import compose, initialize_config_dir
from omegaconf import open_dict

from asr.checkpoint import ModelDirError, build_model, save_model_dir
from asr.config import register_configs
from asr.export import export_onnx
from asr.tokenizer import Tokenizer
from asr.transcriber import Transcriber
from conftest import COMMANDS, FSDD, ROOT, noise_clips

SEARCHES = {"greedy": {"beam_size": 1, "ctc_weight": 0.0},
            "beam with CTC": {"beam_size": 4, "ctc_weight": 0.5},
            "beam without cache": {"beam_size": 3, "ctc_weight": 0.0, "kv_cache": False},
            "CTC alone": {"mode": "ctc_greedy", "beam_size": 1, "ctc_weight": 0.0}}


@pytest.fixture(scope="module")
def exported(overfit_model, tmp_path_factory) -> Path:
    """`python -m asr.export` of the overfit model, with its int8 copy beside it."""
    model_dir, _, _ = overfit_model
    out = tmp_path_factory.mktemp("export") / "onnx"
    run = subprocess.run([sys.executable, "-m", "asr.export", "--model", str(model_dir),
                          "--format", "onnx", "--quantize", "int8", "--out", str(out)],
                         cwd=ROOT, capture_output=True, text=True, timeout=300)
    assert run.returncode == 0, run.stderr
    lines = run.stdout.splitlines()
    assert lines[0].startswith(f"{out}: encoder.onnx, decoder.onnx; largest |onnx - torch| ")
    assert lines[1] == f"{out}_int8: encoder.onnx, decoder.onnx with int8 weights"
    return out


def real_audio(overfit_model) -> list[Path]:
    """What the model learnt, eight recordings it never heard and four clips of noise."""
    _, entries, _ = overfit_model
    unheard = sorted(FSDD.glob("*_theo_1*.wav"))[:4] + sorted((COMMANDS / "yes").glob("*.wav"))[5:9]
    return [path for path, _ in entries] + unheard + noise_clips(0, 4)


@pytest.mark.parametrize("search", SEARCHES)
def test_onnx_decodes_as_torch(overfit_model, exported, search):
    model_dir, entries, _ = overfit_model
    options = SEARCHES[search]
    ours = Transcriber.from_pretrained(model_dir, "cpu", vad=None, **options)
    onnx = Transcriber.from_pretrained(exported, vad=None, backend="onnx", **options)
    waves = [ours.load(path) for path in real_audio(overfit_model)]
    expected, found = ours.transcribe_scored(waves), onnx.transcribe_scored(waves)
    assert [text for text, _ in found] == [text for text, _ in expected]
    assert len({text for text, _ in found}) > len(entries) // 2  # not one answer for everything
    if search != "CTC alone":  # (which spells some words of the tiny model short)
        assert [text for text, _ in found[:len(entries)]] == [text for _, text in entries]
    for (_, a), (_, b) in zip(found, expected, strict=True):  # scores, to float rounding
        assert (a.confidence, a.avg_logprob, a.no_speech_prob) == pytest.approx(
            (b.confidence, b.avg_logprob, b.no_speech_prob), abs=1e-5)


def test_onnx_transcribes_a_long_file_as_torch(overfit_model, exported, tmp_path):
    """The model directory itself serves backend="onnx" (its onnx/ folder); a recording of
    four digits with pauses is cut by the VAD and timed alike, word times (CTC alignment)
    included; the scores agree to float rounding."""
    model_dir = tmp_path / "model"
    shutil.copytree(overfit_model[0], model_dir)
    (model_dir / "onnx").symlink_to(exported, target_is_directory=True)
    parts = []
    for digit, speaker in [(1, "jackson"), (4, "lucas"), (7, "nicolas"), (9, "yweweler")]:
        wave, rate = sf.read(FSDD / f"{digit}_{speaker}_0.wav", dtype="float32")
        parts += [np.zeros(rate), wave]
    path = tmp_path / "digits.wav"
    sf.write(path, np.concatenate(parts + [np.zeros(rate)]), rate)
    ours = Transcriber.from_pretrained(model_dir, "cpu").transcribe(path, word_timestamps=True)
    onnx = Transcriber.from_pretrained(model_dir, backend="onnx").transcribe(
        path, word_timestamps=True)
    assert onnx.text == ours.text
    assert [(s.start, s.end, s.text, [(w.word, w.start, w.end) for w in s.words])
            for s in onnx.segments] == \
        [(s.start, s.end, s.text, [(w.word, w.start, w.end) for w in s.words])
         for s in ours.segments]  # every segment's and word's times
    for a, b in zip(onnx.segments, ours.segments, strict=True):  # scores, to float rounding
        assert (a.avg_logprob, a.no_speech_prob, a.confidence) == pytest.approx(
            (b.avg_logprob, b.no_speech_prob, b.confidence), abs=1e-5)
        assert [w.probability for w in a.words] == pytest.approx(
            [w.probability for w in b.words], abs=1e-5)
    assert len(ours.segments) >= 4 and {"one", "four", "seven", "nine"} <= set(ours.text.split())


def test_int8_export_still_knows_what_it_learnt(overfit_model, exported):
    model_dir, entries, _ = overfit_model
    int8 = Transcriber.from_pretrained(exported.with_name("onnx_int8"), vad=None, backend="onnx",
                                       **SEARCHES["beam with CTC"])
    texts = int8.transcribe_waves([int8.load(path) for path, _ in entries])
    assert texts == [text for _, text in entries]


def random_model(directory: Path, *overrides: str) -> Path:
    """An untrained model directory of the given architecture (conf/model/tiny.yaml based)."""
    register_configs()
    with initialize_config_dir(config_dir=str(ROOT / "conf"), version_base="1.3"):
        cfg = compose("train", overrides=["model=tiny", *overrides])
    tokenizer = Tokenizer.train(["turn on the kitchen lights", "what time is it please"] * 20,
                                40, "bpe")
    with open_dict(cfg):
        cfg.model.n_vocab = tokenizer.vocab_size
        cfg.model.n_input = cfg.features.n_mels if cfg.features.kind == "fbank" \
            else cfg.features.n_mfcc
    torch.manual_seed(0)
    save_model_dir(directory, build_model(cfg), tokenizer, cfg)
    return directory


@pytest.mark.parametrize("overrides", [
    ("model.pos=rope", "model.attention=local", "model.attention_window=4",
     "model.subsampling=conv2d"),
    ("features=mfcc", "features.utterance_cmn=true", "model.pos=sinusoidal+relative",
     "model.norm=post", "model.ctc_weight=0"),
], ids=["rope-local-conv2d", "mfcc-relative-post-no-ctc"])
def test_every_architecture_exports(tmp_path, overrides):
    model_dir = random_model(tmp_path / "model", *overrides)
    differences = export_onnx(model_dir, tmp_path / "onnx")
    assert set(differences) == {"encoder", "decoder"} | ({"ctc"} if "model.ctc_weight=0"
                                                          not in overrides else set())
    assert max(differences.values()) < 1e-4, differences


def test_export_errors_are_one_line(overfit_model, tmp_path):
    model_dir, _, _ = overfit_model
    run = subprocess.run([sys.executable, "-m", "asr.export", "--model", str(tmp_path / "none"),
                          "--format", "onnx"], cwd=ROOT, capture_output=True, text=True)
    assert run.returncode == 1 and run.stdout == ""
    assert run.stderr.splitlines() == [f"error: {tmp_path / 'none'}: not a model directory"]
    with pytest.raises(ModelDirError, match=r"missing encoder.onnx \(export the model first: "):
        Transcriber.from_pretrained(tmp_path, backend="onnx")
    with pytest.raises(ValueError, match="backend must be torch or onnx, got 'tensorrt'"):
        Transcriber.from_pretrained(model_dir, backend="tensorrt")

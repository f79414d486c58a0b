"""A deeper base model grown from the packaged one (recipes/base/grow.py) computes what it
computes, on real speech, and bad requests end in one line."""

import shutil

import pytest
import torch

from asr.checkpoint import load_model_dir
from asr.models import model_path
from asr.training.pretrained import hours_heard
from asr.transcriber import Transcriber
from helpers import fsdd_file, require_shared
from recipes.base import grow

pytestmark = [pytest.mark.tier("fast"), pytest.mark.data]


def test_layers_are_copied_in_turn_as_evenly_as_the_count_allows():
    assert grow.layer_sources(6, 12) == [0, 0, 1, 1, 2, 2, 3, 3, 4, 4, 5, 5]
    assert grow.layer_sources(3, 5) == [0, 0, 1, 1, 2]
    assert grow.layer_sources(2, 2) == [0, 1]


def test_the_grown_model_writes_what_the_packaged_one_writes(tmp_path):
    require_shared()
    out = tmp_path / "deep"
    grow.main(["--model", "base", "--out", str(out), "--encoder-layers", "9"])
    deep, _, config = load_model_dir(out)
    base, _, _ = load_model_dir(model_path("base"))
    assert config.model.n_encoder_layers == 9 and len(deep.encoder.blocks) == 9
    assert hours_heard(str(out)) == hours_heard("base") > 0  # for the run it starts
    clips = [fsdd_file(digit, "lucas", 3) for digit in (0, 4, 7)]
    ours, theirs = Transcriber.from_pretrained(out), Transcriber.from_pretrained("base")
    waves = [ours.load(path) for path in clips]
    feats, lengths = base.frontend(torch.stack([w[:4000] for w in waves]),
                                   torch.tensor([4000] * 3))
    with torch.no_grad():
        torch.testing.assert_close(deep.encoder(feats, lengths)[0],
                                   base.encoder(feats, lengths)[0], atol=1e-5, rtol=1e-5)
    assert ours.transcribe_waves(waves) == theirs.transcribe_waves(waves) == \
        ["zero", "four", "seven"]


@pytest.mark.parametrize(("args", "message"), [
    (["--encoder-layers", "4"], "--encoder-layers 4: the model has 6"),
    (["--encoder-layers", "12", "--model", "/nonexistent"], "/nonexistent: not a model directory"),
])
def test_bad_requests_end_in_one_line(tmp_path, capsys, args, message):
    argv = ["--model", "base", "--out", str(tmp_path / "deep"), *args]
    with pytest.raises(SystemExit) as exit_:
        grow.main(argv)
    assert message in str(exit_.value) and "\n" not in str(exit_.value)
    assert not (tmp_path / "deep").exists()


def test_a_folder_in_use_is_not_written_over(tmp_path):
    (tmp_path / "deep").mkdir()
    (tmp_path / "deep" / "notes.txt").write_text("mine")
    with pytest.raises(SystemExit, match="exists and is not empty"):
        grow.main(["--model", "base", "--out", str(tmp_path / "deep"), "--encoder-layers", "8"])
    assert (tmp_path / "deep" / "notes.txt").read_text() == "mine"


def test_grow_and_export_refuse_what_the_loader_refuses(tmp_path, capsys):
    """grow with decode.lm_weight NaN and asr.export of a model whose lm/lm.pt holds NaN
    exited 0, and the loader then refused what they wrote: they run its checks first."""
    import torch
    from omegaconf import OmegaConf

    from asr.export import main as export_main
    from asr.lm import LM_FILE, LM_FOLDER
    from asr.models import FOLDER
    from recipes.base.grow import main as grow_main

    nan_weight, nan_lm = tmp_path / "nan_weight", tmp_path / "nan_lm"
    for folder in (nan_weight, nan_lm):
        shutil.copytree(FOLDER / "base", folder)
    config = OmegaConf.load(nan_weight / "config.yaml")
    config.decode.lm_weight = float("nan")
    OmegaConf.save(config, nan_weight / "config.yaml")
    saved = torch.load(nan_lm / LM_FOLDER / LM_FILE, weights_only=True)
    first = next(iter(saved["state_dict"]))
    saved["state_dict"][first] = torch.full_like(saved["state_dict"][first], float("nan"))
    torch.save(saved, nan_lm / LM_FOLDER / LM_FILE)
    with pytest.raises(SystemExit) as stop:
        grow_main(["--model", str(nan_weight), "--out", str(tmp_path / "grown"),
                   "--encoder-layers", "12"])
    assert "lm_weight" in str(stop.value.code) and str(stop.value.code).count("\n") == 0
    assert not (tmp_path / "grown").exists() and [p.name for p in tmp_path.iterdir()
                                                  if p.name.startswith(".")] == []
    assert export_main(["--model", str(nan_lm), "--format", "onnx"]) == 1
    error = capsys.readouterr().err
    assert error.startswith(f"error: {nan_lm / LM_FOLDER / LM_FILE}:") and "finite" in error
    assert error.count("\n") == 1 and not (nan_lm / "onnx").exists()

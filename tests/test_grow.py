"""A deeper base model grown from the packaged one (recipes/base/grow.py) computes what it
computes, on real speech, and bad requests end in one line."""


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

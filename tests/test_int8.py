"""int8 weights (`asr.checkpoint.quantize_int8`, `recipes.base.ship --int8`): the shipped model
stored in int8 is half fp16's bytes and hears real people as fp16 does; a model.pt whose int8
matrices and scales do not fit is refused in one line."""

import shutil

import pytest
import torch

from asr.checkpoint import (
    INT8_SCALE,
    WEIGHTS,
    ModelDirError,
    load_model_dir,
    load_torch,
    quantize_int8,
    save_torch,
)
from asr.models import FOLDER
from asr.transcriber import Transcriber
from helpers import COMMANDS, FSDD, require_shared

pytestmark = pytest.mark.tier("slow")

SHIPPED = FOLDER / "base"
MATRIX = "decoder.token_embedding.weight"
pytestmark = pytest.mark.skipif(not (SHIPPED / "model.pt").is_file(),
                                reason="no base model shipped (bash recipes/base/run.sh)")
# Clips of speakers no model of ours trained on; the shipped model hears the first two right.
HEARD = {FSDD / "7_yweweler_0.wav": "seven", COMMANDS / "stop" / "27c30960_nohash_1.wav": "stop"}
HARD = [FSDD / "0_yweweler_11.wav", COMMANDS / "left" / "0c540988_nohash_0.wav"]


@pytest.fixture(scope="module")
def int8_dir(tmp_path_factory):
    folder = tmp_path_factory.mktemp("int8") / "base"
    shutil.copytree(SHIPPED, folder)
    save_torch(quantize_int8(load_torch(SHIPPED / WEIGHTS)), folder / WEIGHTS)
    return folder


def test_int8_weights_are_half_the_bytes_and_within_a_step_of_fp16(int8_dir):
    stored = load_torch(int8_dir / WEIGHTS)
    assert stored[MATRIX].dtype == torch.int8 and stored[MATRIX + INT8_SCALE].dtype == torch.float32
    assert (int8_dir / WEIGHTS).stat().st_size < 0.55 * (SHIPPED / WEIGHTS).stat().st_size
    fp16 = load_model_dir(SHIPPED)[0].state_dict()
    int8 = load_model_dir(int8_dir)[0].state_dict()
    for name, value in fp16.items():
        assert int8[name].dtype == value.dtype
        if value.dim() >= 2:  # at most half a step of its row's 1/127 of the largest
            step = value.abs().amax(dim=tuple(range(1, value.dim())), keepdim=True) / 127
            assert ((int8[name] - value).abs() <= step / 2 + 1e-6).all(), name
        else:
            assert torch.equal(int8[name], value), name


def test_int8_weights_hear_real_people_as_fp16_does(int8_dir):
    require_shared()
    files = [*HEARD, *HARD]
    fp16 = Transcriber.from_pretrained(str(SHIPPED), device="cpu", vad=None)
    int8 = Transcriber.from_pretrained(str(int8_dir), device="cpu", vad=None)
    heard = [t.text for t in int8.transcribe(files)]
    assert heard[:len(HEARD)] == list(HEARD.values())
    assert heard == [t.text for t in fp16.transcribe(files)]  # the hard ones, right or not, too


def spoiled(state: dict, how: str) -> dict:
    state = dict(state)
    scale = state[MATRIX + INT8_SCALE]
    if how == "no scales":
        del state[MATRIX + INT8_SCALE]
    elif how == "flat scales":
        state[MATRIX + INT8_SCALE] = scale.flatten()
    elif how == "negative":
        state[MATRIX + INT8_SCALE] = -scale
    elif how == "nan":
        state[MATRIX + INT8_SCALE] = scale * float("nan")
    elif how == "orphan":
        state["nothing" + INT8_SCALE] = scale
    return state


REFUSALS = {
    "no scales": f"{MATRIX} is int8 without its scales \\({MATRIX}{INT8_SCALE}\\)",
    "flat scales": f"{MATRIX}{INT8_SCALE} must be positive scales of shape \\(128, 1\\) for the "
                   f"int8 matrix {MATRIX} \\(128, 192\\)",
    "negative": f"{MATRIX}{INT8_SCALE} must be positive scales of shape",
    "nan": f"{MATRIX}{INT8_SCALE} holds NaN or infinite values; refused",
    "orphan": f"nothing{INT8_SCALE} scales no int8 tensor",
}


@pytest.mark.parametrize("how", list(REFUSALS))
def test_int8_weights_that_do_not_fit_are_refused_in_one_line(int8_dir, tmp_path, how):
    folder = tmp_path / "base"
    shutil.copytree(int8_dir, folder)
    save_torch(spoiled(load_torch(int8_dir / WEIGHTS), how), folder / WEIGHTS)
    with pytest.raises(ModelDirError, match=f"^{folder / WEIGHTS}: {REFUSALS[how]}") as caught:
        load_model_dir(folder)
    assert "\n" not in str(caught.value)

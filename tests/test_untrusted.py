"""Model directories from strangers: nothing in them is ever executed, nothing makes loading
hang or exhaust memory, and nothing in them is used unchecked.

A pickle whose __reduce__ runs a shell command is planted as model.pt or checkpoint.pt; a
config names os.system as a `_target_` or carries a YAML Python tag. Loading refuses each with
one clear error, and the marker file the payload would create never appears. A billion laughs,
deep nesting, interpolations, values of the wrong type or out of range, absurd sizes, NaN
weights, weights of other shapes, a tokenizer of another model, special and huge files: each is
one clear error too, before anything is built from it.
"""

import io
import os
import pickle
import re
import resource
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
import sentencepiece as spm
import torch
from omegaconf import OmegaConf

from asr.checkpoint import (
    CHECKPOINT,
    CONFIG,
    TOKENIZER,
    WEIGHTS,
    ModelDirError,
    check_targets,
    load_model_dir,
)
from asr.tokenizer import Tokenizer
from helpers import ROOT, fsdd_file, train_config, write_untrained_model

pytestmark = [pytest.mark.tier("fast"), pytest.mark.data]


class Payload:
    """Unpickling this runs `touch MARKER`."""

    def __init__(self, marker) -> None:
        self.marker = marker

    def __reduce__(self):
        return os.system, (f"touch {self.marker}",)


@pytest.fixture(scope="module")
def pristine(tmp_path_factory):
    """A real (untrained) tiny model directory, as training writes it, and its manifest."""
    tmp = tmp_path_factory.mktemp("pristine")
    write_untrained_model(tmp)
    return tmp


@pytest.fixture
def model_dir(pristine, tmp_path):
    """A fresh copy of the pristine model directory (and its manifest) for one test to spoil."""
    shutil.copy(pristine / "train.jsonl", tmp_path / "train.jsonl")
    return Path(shutil.copytree(pristine / "model", tmp_path / "model"))


def plant_pickle(path, marker, style: str) -> None:
    payload = {"model": {"weight": Payload(marker)}}
    if style == "torch.save":
        torch.save(payload, path)
    else:
        path.write_bytes(pickle.dumps(payload, protocol=2))


def test_the_payload_is_live(tmp_path):
    """Plain unpickling does run it: the refusals below are not vacuous."""
    pickle.loads(pickle.dumps(Payload(tmp_path / "ran")))
    assert (tmp_path / "ran").exists()


@pytest.mark.parametrize("style", ["torch.save", "raw pickle"])
def test_malicious_weights_are_refused(model_dir, tmp_path, style):
    marker = tmp_path / "pwned"
    plant_pickle(model_dir / WEIGHTS, marker, style)
    with pytest.raises(ModelDirError) as caught:
        load_model_dir(model_dir)
    assert str(caught.value) == (f"{model_dir / WEIGHTS}: refused: it holds a pickled reference "
                                 "to posix.system, which could run code; only tensors are loaded")
    assert not marker.exists()


@pytest.mark.subprocess
def test_transcribe_cli_refuses_malicious_weights(model_dir, tmp_path):
    marker = tmp_path / "pwned"
    plant_pickle(model_dir / WEIGHTS, marker, "torch.save")
    result = subprocess.run([sys.executable, "-m", "asr.transcribe", "--model", str(model_dir),
                             str(fsdd_file(1))], cwd=ROOT, capture_output=True, text=True,
                            timeout=120)
    assert result.returncode == 1 and result.stdout == ""
    assert result.stderr.splitlines() == [
        f"error: {model_dir / WEIGHTS}: refused: it holds a pickled reference to posix.system, "
        "which could run code; only tensors are loaded"]
    assert not marker.exists()


@pytest.mark.train
def test_malicious_training_checkpoint_is_refused(model_dir, tmp_path):
    """`trainer.resume=true` on a planted checkpoint.pt refuses it before using anything."""
    from asr.train import Trainer

    marker = tmp_path / "pwned"
    plant_pickle(model_dir / CHECKPOINT, marker, "torch.save")
    cfg = train_config(tmp_path, tmp_path / "train.jsonl", "trainer.resume=true")
    with pytest.raises(ModelDirError) as caught:
        Trainer(cfg)
    assert str(caught.value) == (f"{model_dir / CHECKPOINT}: refused: it holds a pickled "
                                 "reference to posix.system, which could run code; only "
                                 "tensors are loaded")
    assert not marker.exists()


def test_corrupt_files_are_named(model_dir):
    weights = model_dir / WEIGHTS
    weights.write_bytes(weights.read_bytes()[:100])
    with pytest.raises(ModelDirError, match=rf"^{weights}: cannot load \(PytorchStreamReader"):
        load_model_dir(model_dir)
    (model_dir / TOKENIZER).write_bytes(b"not a sentencepiece model")
    with pytest.raises(ModelDirError, match=rf"^{model_dir / TOKENIZER}: not a sentencepiece"):
        load_model_dir(model_dir)


@pytest.mark.subprocess
@pytest.mark.parametrize("section,target", [
    ("optim", "os.system"),
    ("optim", "builtins.exec"),
    ("optim", "subprocess.run"),
    ("optim", "torch.optim.sgd.torch.os.system"),  # an attribute chain through an allowed module
    ("scheduler", "asr.checkpoint.save_text"),  # this package, but a writer, not a schedule
    ("scheduler", "asr.scheduler.LambdaLR.__init__"),
    ("scheduler", "asr.scheduler._private"),
    ("model", "${oc.env:TARGET}"),  # interpolations are not resolved to find the target
    ("decode.nested.deeper", "os.system"),
])
def test_targets_outside_the_allowlist_are_refused(model_dir, tmp_path, section, target):
    config = OmegaConf.load(model_dir / CONFIG)
    OmegaConf.update(config, f"{section}._target_", target, force_add=True)
    OmegaConf.update(config, f"{section}.command", f"touch {tmp_path / 'pwned'}", force_add=True)
    (model_dir / CONFIG).write_text(OmegaConf.to_yaml(config))
    with pytest.raises(ModelDirError) as caught:
        load_model_dir(model_dir)
    assert str(caught.value) == (
        f"{model_dir / CONFIG}: {section}._target_: {target!r} is not allowed (a model directory "
        "may name only torch.optim optimisers and schedulers and asr.scheduler schedules)")
    assert not (tmp_path / "pwned").exists()


@pytest.mark.parametrize("target", ["torch.optim.Adam", "torch.optim.AdamW",
                                    "torch.optim.lr_scheduler.StepLR", "asr.scheduler.noam"])
def test_optimisers_and_schedules_are_allowed(target):
    check_targets(OmegaConf.create({"optim": {"_target_": target}}), "config.yaml")


def test_yaml_python_tags_are_not_executed(model_dir, tmp_path):
    marker = tmp_path / "pwned"
    text = (model_dir / CONFIG).read_text()
    (model_dir / CONFIG).write_text(f"evil: !!python/object/apply:os.system ['touch {marker}']\n"
                                    + text)
    with pytest.raises(ModelDirError) as caught:
        load_model_dir(model_dir)
    assert str(caught.value).startswith(f"{model_dir / CONFIG}: not a plain YAML config (could "
                                        "not determine a constructor for the tag")
    assert not marker.exists()


# ---------------------------------------------------------------------------- bounded loading

LAUGHS = "\nlol0: &a0 [x, x, x, x, x, x, x, x, x]\n" + "".join(
    f"lol{i}: &a{i} [*a{i - 1}, *a{i - 1}, *a{i - 1}, *a{i - 1}, *a{i - 1}, *a{i - 1}]\n"
    for i in range(1, 12))  # 500 bytes that expand to 3 billion strings


@pytest.mark.subprocess
@pytest.mark.train
def test_a_billion_laughs_in_config_yaml_is_refused_at_once(model_dir, tmp_path):
    """A few hundred bytes of nested aliases made loading run for minutes: now every way in
    (the API, the command line, fine-tuning) refuses them before anything is built."""
    from asr.train import Trainer, TrainingError
    from asr.transcriber import Transcriber

    config = model_dir / CONFIG
    config.write_text(config.read_text() + LAUGHS)
    line = len(config.read_text().splitlines()) - 10  # the first alias
    expected = f"{config}:{line}: YAML aliases are not allowed"
    with pytest.raises(ModelDirError) as caught:
        Transcriber.from_pretrained(model_dir, device="cpu")
    assert str(caught.value) == expected
    cfg = train_config(tmp_path / "new", tmp_path / "train.jsonl", f"trainer.init_from={model_dir}")
    with pytest.raises(TrainingError, match=f"^trainer.init_from: {re.escape(expected)}$"):
        Trainer(cfg)
    result = subprocess.run([sys.executable, "-m", "asr.transcribe", "--model", str(model_dir),
                             str(fsdd_file(1))], cwd=ROOT, capture_output=True, text=True,
                            timeout=60)
    assert (result.returncode, result.stderr) == (1, f"error: {expected}\n")


@pytest.mark.parametrize("extra,problem", [
    ("\ndeep: " + "[" * 40 + "]" * 40 + "\n", "YAML nested deeper than 32 levels; refused"),
    ("\nsneaky: ${oc.env:HOME}\n", "sneaky: interpolations are not allowed (a model directory's "
                                   "config is saved resolved)"),
    ("\n" + "#" * (1 << 20), "the config is larger than 1048576 bytes; refused"),
])
def test_configs_that_only_a_loader_would_choke_on_are_refused(model_dir, extra, problem):
    config = model_dir / CONFIG
    config.write_text(config.read_text() + extra)
    with pytest.raises(ModelDirError) as caught:
        load_model_dir(model_dir)
    message = str(caught.value)
    assert message.startswith(f"{config}") and message.endswith(problem)


@pytest.mark.parametrize("key,value,problem", [
    ("decode", 5, "decode must be a mapping, got 5"),
    ("decode.colour", 1, "decode: unknown key(s) colour (expected some of beam_size, "),
    ("decode.beam_size", 0, "decode.beam_size must be in [1, 64], got 0"),
    ("decode.beam_size", "five", "decode.beam_size must be an integer, got 'five'"),
    ("decode.max_len_ratio", 1e9, "decode.max_len_ratio must be in [0.01, 2], got 1000000000.0"),
    ("decode.lead_in_ms", float("inf"), "decode.lead_in_ms must be a finite number, got inf"),
    ("decode.kv_cache", "maybe", "decode.kv_cache must be true or false, got 'maybe'"),
    ("model.n_encoder_layers", 10**7, "model.n_encoder_layers must be in [0, 128], got 10000000"),
    ("model.n_head", 3, "model.n_head (3) must divide model.d_model (64)"),
    ("model.colour", 1, "model: unknown key(s) colour (expected some of attention, "),
    ("features.n_fft", 10**9, "features.n_fft must be in [16, 8192], got 1000000000"),
    ("features.hop_ms", 0, "features.hop_ms must be in [0.1, 1000], got 0.0"),
])
def test_every_section_has_a_schema(model_dir, key, value, problem):
    """Wrong types, unknown keys and values that would hang, exhaust memory or divide by zero
    are refused with the key named; decode values are bounded."""
    from asr.transcriber import Transcriber

    config = OmegaConf.load(model_dir / CONFIG)
    OmegaConf.update(config, key, value, force_add=True, merge=False)
    (model_dir / CONFIG).write_text(OmegaConf.to_yaml(config))
    with pytest.raises(ModelDirError) as caught:
        Transcriber.from_pretrained(model_dir, device="cpu")
    assert str(caught.value).startswith(f"{model_dir / CONFIG}: {problem}")


def test_absurd_sizes_are_refused_before_anything_is_allocated(model_dir):
    """d_model 16384 with 128 layers is within each field's range but would take hundreds of
    GB: the network's shapes are compared with the weights on the meta device first."""
    config = OmegaConf.load(model_dir / CONFIG)
    config.model.d_model, config.model.d_ff = 16384, 65536
    config.model.n_encoder_layers = config.model.n_decoder_layers = 128
    (model_dir / CONFIG).write_text(OmegaConf.to_yaml(config))
    peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    with pytest.raises(ModelDirError, match=rf"^{model_dir / WEIGHTS}: weights do not fit the "
                                            r"config \(\d+ tensor\(s\) missing"):
        load_model_dir(model_dir)
    assert resource.getrusage(resource.RUSAGE_SELF).ru_maxrss - peak < 1 << 20  # kB: 1 GB


def edit_weights(path, edit) -> None:
    """Apply `edit` to the saved weights: in place, or by returning what to save instead."""
    state = torch.load(path, weights_only=True)
    result = edit(state)
    torch.save(result if isinstance(result, dict | list) else state, path)


@pytest.mark.parametrize("edit,problem", [
    (lambda s: s["ctc.bias"].fill_(float("nan")), "ctc.bias holds NaN or infinite values; refused"),
    (lambda s: s["decoder.ln.weight"].__setitem__(0, float("inf")),
     "decoder.ln.weight holds NaN or infinite values; refused"),
    (lambda s: list(s.values()), "not a state dict (a mapping of names to tensors)"),
    (lambda s: {**s, "ctc.bias": "zeros"}, "not a state dict (a mapping of names to tensors)"),
    (lambda s: {**s, "ctc.bias": torch.zeros(7)},
     "weights do not fit the config (ctc.bias is (7,), the config makes (20,))"),
    (lambda s: {k: v for k, v in s.items() if k != "ctc.bias"},
     "weights do not fit the config (1 tensor(s) missing, e.g. ctc.bias)"),
    (lambda s: {**unpacked(s), "encoder.blocks.0.attn.key.weight": torch.zeros(3, 3)},
     "weights do not fit the config (1 tensor(s) missing, e.g. encoder.blocks.0.attn.qkv.weight)"),
])
def test_weights_must_be_finite_tensors_of_the_configs_shapes(model_dir, edit, problem):
    """NaN weights used to decode every input to nothing, with exit status 0."""
    edit_weights(model_dir / WEIGHTS, edit)
    with pytest.raises(ModelDirError) as caught:
        load_model_dir(model_dir)
    assert str(caught.value) == f"{model_dir / WEIGHTS}: {problem}"


def unpacked(state: dict) -> dict:
    """`state` with separate query, key and value layers (whisper's layout) in place of the
    packed `qkv` (self-attention) and `kv` (cross-attention) ones."""
    out = {}
    for key, value in state.items():
        for packed, names in ((".qkv.", ("query", "key", "value")), (".kv.", ("key", "value"))):
            if packed in key:
                head, kind = key.split(packed)
                out |= {f"{head}.{name}.{kind}": part
                        for name, part in zip(names, value.chunk(len(names)), strict=True)}
                break
        else:
            out[key] = value
    return out


def test_weights_with_separate_query_key_value_layers_load_packed(model_dir):
    """A model saved with separate projections (whisper's layout) loads into the packed
    layers with the same numbers."""
    packed = load_model_dir(model_dir)[0].state_dict()
    edit_weights(model_dir / WEIGHTS, unpacked)
    assert "decoder.blocks.0.cross_attn.value.bias" in torch.load(model_dir / WEIGHTS)
    loaded = load_model_dir(model_dir)[0].state_dict()
    assert loaded.keys() == packed.keys()
    assert all(torch.equal(loaded[k], packed[k]) for k in packed)


def test_the_tokenizer_must_be_the_models(model_dir):
    path = model_dir / TOKENIZER
    path.write_bytes(Tokenizer.train(["a b c d e f g h i j k l m n"] * 5, 30).model_proto)
    with pytest.raises(ModelDirError, match=rf"^{path}: 30 pieces, the model's config says "
                                            r"model.n_vocab=20$"):
        load_model_dir(model_dir)
    proto = io.BytesIO()  # sentencepiece's own special ids: <unk> = 0, no padding
    spm.SentencePieceTrainer.train(sentence_iterator=iter(["one two four"] * 5),
                                   model_writer=proto, vocab_size=20, hard_vocab_limit=False,
                                   minloglevel=2)
    path.write_bytes(proto.getvalue())
    with pytest.raises(ModelDirError, match=rf"^{path}: special ids \(pad, unk, bos, eos\) are "
                                            r"\(-1, 0, 1, 2\), not \(0, 1, 2, 3\)"):
        load_model_dir(model_dir)
    path.write_bytes(b"")
    with pytest.raises(ModelDirError, match=rf"^{path}: not a sentencepiece model"):
        load_model_dir(model_dir)


def test_special_files_and_huge_files_are_refused_without_reading(model_dir):
    os.truncate(model_dir / WEIGHTS, 9 << 30)  # sparse: no disk used
    with pytest.raises(ModelDirError, match=rf"^{model_dir / WEIGHTS}: larger than 8589934592 "
                                            "bytes; refused$"):
        load_model_dir(model_dir)
    (model_dir / TOKENIZER).unlink()
    os.mkfifo(model_dir / TOKENIZER)  # reading a FIFO would wait for a writer forever
    with pytest.raises(ModelDirError, match=rf"^{model_dir / TOKENIZER}: not a regular file$"):
        load_model_dir(model_dir)

"""Fuzzing what a stranger controls: model directories and command-line arguments.

Hypothesis spoils a copy of a real (untrained) tiny model directory: its config.yaml (a value
of the wrong type or out of every range, an unknown key, a section that is no mapping, YAML
aliases, deep nesting, bytes that are no YAML), its weights (cut short, a tensor dropped,
reshaped, made NaN or replaced), its tokenizer (cut short, random bytes) and a language
model's file; or it passes a bad value to a command-line option. Every run, in-process
through the command's `main(argv)`, must end with status 1 or 2 and exactly one line on
stderr, never a traceback (an exception escaping `main` fails the test), and without
raising the process's peak memory by 512 MB (a size out of range is refused, not allocated).
"""

import contextlib
import io
import math
import resource
import shutil
import tempfile
import typing
from collections.abc import Callable
from pathlib import Path

import pytest
import torch
import yaml
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from asr import evaluate, transcribe
from asr.assistant import intents
from asr.search import MODES
from helpers import COMMANDS, write_untrained_lm, write_untrained_model

pytestmark = [pytest.mark.tier("slow"), pytest.mark.data]

FUZZ = settings(max_examples=25, deadline=None, derandomize=True,
                suppress_health_check=[HealthCheck.function_scoped_fixture,
                                       HealthCheck.too_slow])
CLIP = sorted((COMMANDS / "yes").glob("*.wav"))[0]  # 1 s of real speech


@pytest.fixture(scope="module")
def pristine(tmp_path_factory) -> Path:
    tmp = tmp_path_factory.mktemp("fuzz")
    write_untrained_lm(write_untrained_model(tmp), tmp / "lm")
    return tmp


@contextlib.contextmanager
def spoilt_copy(pristine: Path):
    """A fresh copy of the model directory and language model for one example."""
    with tempfile.TemporaryDirectory() as tmp:
        yield (Path(shutil.copytree(pristine / "model", Path(tmp) / "model")),
               Path(shutil.copytree(pristine / "lm", Path(tmp) / "lm")))


def refuses(main: Callable[[list[str]], int], argv: list[str]) -> str:
    """Run a command line in-process; it must refuse in one line, the process's peak memory
    (ru_maxrss, in KB) grown by under 512 MB. Returns that line."""
    out, err = io.StringIO(), io.StringIO()
    peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        try:
            status = main(argv)
        except SystemExit as stop:  # argparse's usage errors
            status = stop.code
    grown = (resource.getrusage(resource.RUSAGE_SELF).ru_maxrss - peak) >> 10
    lines = err.getvalue().splitlines()
    assert status in (1, 2), (status, out.getvalue(), err.getvalue())
    assert len(lines) == 1 and "Traceback" not in lines[0], err.getvalue()
    assert grown < 512, f"the peak memory grew by {grown} MB"
    return lines[0]


def transcribe_with(model: Path, *options: str) -> str:
    return refuses(transcribe.main, ["--model", str(model), *options, str(CLIP)])


# ---------------------------------------------------------------------------- config.yaml

def _fields() -> dict[str, dict[str, object]]:
    """The fields of each section of a model directory's config, and their types."""
    from asr.decoding import DecodingOptions
    from asr.features import FeatureConfig
    from asr.model import ModelDimensions
    return {section: typing.get_type_hints(cls) for section, cls in (
        ("model", ModelDimensions), ("features", FeatureConfig), ("decode", DecodingOptions))}


FIELDS = _fields()
NUMBERS = (int, float)
huge = st.sampled_from([10**12, -10**12, 2**70, -1e30, 1e30])
not_finite = st.sampled_from([math.nan, math.inf, -math.inf])
junk = st.one_of(st.text(max_size=12), st.lists(st.integers(), max_size=3),
                 st.dictionaries(st.text(max_size=4), st.integers(), max_size=2))


def invalid_value(kind: object) -> st.SearchStrategy:
    """Values no field of this kind accepts: out of every range, non-finite, the wrong type."""
    if kind in NUMBERS:
        return st.one_of(huge, not_finite, junk, st.booleans())
    if kind is bool:
        return st.one_of(st.integers(), st.text(max_size=8).filter(lambda t: t.strip()), junk)
    if kind is str:  # the choices fields (mode, kind, norm, pos, attention, subsampling)
        return st.one_of(st.text(min_size=1, max_size=12).filter(
            lambda t: t not in {*MODES, "fbank", "mfcc", "pre", "post", "tfixup", "sinusoidal",
                                "relative", "rope", "full", "local", "stack", "conv2d",
                                "none"}), st.integers(), st.lists(st.text(), max_size=2))
    return st.one_of(st.integers(), st.dictionaries(st.text(max_size=4), st.integers(),
                                                    min_size=1, max_size=2))  # words, lm


@st.composite
def bad_configs(draw) -> Callable[[dict], None]:
    """An edit of the parsed config that no loader may accept."""
    section = draw(st.sampled_from(sorted(FIELDS)))
    choice = draw(st.sampled_from(["value", "unknown key", "not a mapping", "missing"]))
    if choice == "value":
        name = draw(st.sampled_from(sorted(FIELDS[section])))
        value = draw(invalid_value(FIELDS[section][name]))
        return lambda config: config[section].__setitem__(name, value)
    if choice == "unknown key":
        key = draw(st.text(min_size=1, max_size=10).filter(lambda k: k not in FIELDS[section]))
        return lambda config: config[section].__setitem__(key, draw(st.integers()))
    if choice == "not a mapping" and section != "decode":
        value = draw(st.one_of(st.integers(), st.text(max_size=5), st.lists(st.integers())))
        return lambda config: config.__setitem__(section, value)
    return lambda config: config.pop(section if section != "decode" else "model")


@FUZZ
@given(edit=bad_configs())
def test_spoilt_config_values(pristine, edit):
    with spoilt_copy(pristine) as (model, _):
        config = yaml.safe_load((model / "config.yaml").read_text())
        edit(config)
        (model / "config.yaml").write_text(yaml.safe_dump(config, allow_unicode=True))
        transcribe_with(model)


@st.composite
def bad_yaml(draw) -> str:
    """Text that is no acceptable config whatever it is appended to: aliases, deep nesting,
    Python tags, tabs that break the syntax, interpolations."""
    depth = draw(st.integers(33, 2000))
    return draw(st.sampled_from([
        "\nx: &a [1, 2]\ny: *a\n",
        "\nlol0: &l0 [x, x, x, x, x, x, x, x, x]\n" + "".join(
            f"lol{i}: &l{i} [*l{i - 1}, *l{i - 1}, *l{i - 1}, *l{i - 1}]\n" for i in range(1, 15)),
        "\ndeep: " + "[" * depth + "]" * depth + "\n",
        "\ndeep: " + "{a: " * depth + "1" + "}" * depth + "\n",
        "\nevil: !!python/object/apply:os.system ['true']\n",
        "\n\tbroken: [\n",
        f"\nsneaky: ${{oc.env:{draw(st.sampled_from(['HOME', 'PATH', 'X']))}}}\n",
        "\n" + draw(st.binary(min_size=1, max_size=64)).hex() + ": [unclosed\n"]))


@FUZZ
@given(extra=bad_yaml())
def test_spoilt_config_yaml(pristine, extra):
    with spoilt_copy(pristine) as (model, _):
        with (model / "config.yaml").open("a") as f:
            f.write(extra)
        transcribe_with(model)


# ---------------------------------------------------------------------------- weights, tokenizer


@st.composite
def bad_weights(draw) -> Callable[[Path], None]:
    how = draw(st.sampled_from(["cut", "drop", "reshape", "non-finite", "not a tensor",
                                "not a dict"]))
    if how == "cut":
        fraction = draw(st.floats(0.0, 0.99))
        return lambda path: path.write_bytes(path.read_bytes()[:int(fraction * path.stat().st_size)])
    index = draw(st.integers(0, 10**6))
    bad = draw(st.sampled_from([math.nan, math.inf, -math.inf]))
    shape = draw(st.lists(st.integers(0, 5), max_size=3))
    replacement = draw(st.one_of(st.integers(), st.text(max_size=5), st.none()))

    def spoil(path: Path) -> None:
        state = torch.load(path, weights_only=True)
        key = sorted(state)[index % len(state)]
        if how == "drop":
            del state[key]
        elif how == "reshape":
            state[key] = torch.zeros(shape if list(shape) != list(state[key].shape) else [7])
        elif how == "non-finite":
            floats = sorted(k for k, v in state.items() if v.is_floating_point())
            tensor = state[floats[index % len(floats)]]
            tensor.view(-1)[index % tensor.numel()] = bad
        elif how == "not a tensor":
            state[key] = replacement
        else:
            state = list(state.values())
        torch.save(state, path)
    return spoil


@FUZZ
@given(spoil=bad_weights())
def test_spoilt_weights(pristine, spoil):
    with spoilt_copy(pristine) as (model, _):
        spoil(model / "model.pt")
        transcribe_with(model)


@FUZZ
@given(cut=st.floats(0.0, 0.95), noise=st.binary(max_size=512), how=st.sampled_from(
    ["cut", "noise", "noise after a cut"]))
def test_spoilt_tokenizer(pristine, cut, noise, how):
    with spoilt_copy(pristine) as (model, _):
        path = model / "tokenizer.model"
        data = path.read_bytes()
        kept = data[:int(cut * len(data))] if how != "noise" else b""
        path.write_bytes(kept + (noise if how != "cut" else b""))
        transcribe_with(model)


@st.composite
def bad_lms(draw) -> Callable[[dict], None]:
    how = draw(st.sampled_from(["dims value", "dims key", "no dims", "state"]))
    name = draw(st.sampled_from(["n_vocab", "d_model", "n_head", "d_ff", "n_layers", "dropout"]))
    value = draw(st.one_of(huge, not_finite, junk, st.just(-1), st.just(0)).filter(
        lambda v: not (name == "dropout" and v == 0)))
    index = draw(st.integers(0, 100))

    def spoil(saved: dict) -> None:
        if how == "dims value":
            saved["dims"][name] = value
        elif how == "dims key":
            saved["dims"]["colour"] = value
        elif how == "no dims":
            del saved["dims"]
        else:
            state = saved["state_dict"]
            state[sorted(state)[index % len(state)]] = torch.full((3,), math.nan)
    return spoil


@FUZZ
@given(spoil=bad_lms())
def test_spoilt_language_model(pristine, spoil):
    with spoilt_copy(pristine) as (model, lm):
        saved = torch.load(lm / "lm.pt", weights_only=True)
        spoil(saved)
        torch.save(saved, lm / "lm.pt")
        transcribe_with(model, "--lm", str(lm))


# ---------------------------------------------------------------------------- arguments

BAD_OPTIONS = {
    "--batch-size": st.one_of(st.integers(max_value=0), st.integers(min_value=4097)).map(str),
    "--beam-size": st.one_of(st.integers(max_value=0), st.integers(min_value=65)).map(str),
    "--ctc-weight": st.one_of(st.floats(min_value=1.0), st.floats(max_value=-1e-9)).map(str),
    "--lead-in-ms": st.one_of(st.floats(min_value=5000.001), st.floats(max_value=-1e-9),
                              not_finite).map(str),
    "--lm-weight": st.one_of(st.floats(min_value=100.001), st.floats(max_value=-1e-9),
                             not_finite).map(str),
    "--device": st.text(max_size=10).filter(lambda d: d != "auto" and not d.startswith("cpu")),
    "--mode": st.text(max_size=10).filter(lambda m: m not in MODES),
}


@FUZZ
@given(option=st.sampled_from(sorted(BAD_OPTIONS)), data=st.data(),
       command=st.sampled_from(["transcribe", "evaluate"]))
def test_bad_option_values(pristine, option, data, command):
    value = data.draw(BAD_OPTIONS[option])
    model = pristine / "model"
    if command == "transcribe":
        transcribe_with(model, f"{option}={value}")
    else:
        refuses(evaluate.main, ["--model", str(model), "--manifest", str(pristine / "train.jsonl"),
                                f"{option}={value}"])


@FUZZ
@given(option=st.sampled_from(["--threshold", "--min-confidence", "--device", "--grammar"]),
       value=st.one_of(st.floats(min_value=1.0, exclude_min=True), st.floats(max_value=-1e-9),
                       not_finite).map(str))
def test_bad_intent_options(pristine, option, value):
    if option == "--grammar":
        value = "/dev/zero" if "-" in value else "/nonexistent/grammar.yaml"
    refuses(intents.main, ["--model", str(pristine / "model"), f"{option}={value}", str(CLIP)])

"""The model directory: everything needed to use a trained model, written atomically.

    config.yaml      resolved config (data only: model sizes, features, decoding, training)
    model.pt         weights of the best epoch (state dict: tensors only, CMVN included; a
                     shipped model's matrices in fp16, or int8 with per-row scales)
    tokenizer.model  sentencepiece BPE model
    metrics.json     per-epoch losses and dev WER, and the hours of audio the weights heard
    checkpoint.pt    last training state, for `trainer.resume=true`

A model directory may come from a stranger, so loading treats every file as untrusted:
nothing in it is ever executed, and nothing in it can make loading hang or run out of memory.
Each file has a size limit. The config is YAML data read without aliases (`asr.untrusted`)
and without interpolations (it is saved resolved), and the only `_target_`s it may name are
torch optimisers and schedulers and this package's schedules (`check_targets`), so a future
caller that instantiates from a downloaded config cannot be led to call anything else. Its
`model` and `features` sections must be exactly the fields of their dataclasses, within
range. Weights are loaded with `torch.load(weights_only=True)`, which refuses pickled code;
they must be a state dict of finite tensors whose names and shapes are those of the network
the config describes (checked on the meta device, before the network is allocated), and the
tokenizer must have the model's vocabulary and special ids.
"""

import dataclasses
import errno
import importlib
import json
import os
import pickle
import random
import re
import stat
import warnings
from pathlib import Path

import torch
from omegaconf import DictConfig, OmegaConf
from torch.optim.lr_scheduler import LRScheduler

from asr.attention import MultiHeadAttention
from asr.features import FeatureConfig, FrontEnd
from asr.model import ModelDimensions, SpeechTransformer
from asr.tokenizer import BOS_ID, EOS_ID, PAD_ID, UNK_ID, Tokenizer
from asr.untrusted import UntrustedInputError, first_line, from_section, read_file, read_yaml

CONFIG, WEIGHTS, TOKENIZER, METRICS, CHECKPOINT = (
    "config.yaml", "model.pt", "tokenizer.model", "metrics.json", "checkpoint.pt")
# The layout of saved weights (a model's, a language model's, a training checkpoint's), and what
# each version changed; `upgrade_weights` brings an older one to this. 1: separate query, key
# and value projections (whisper's layout); 2: packed, one linear layer for self-attention's
# three and one for cross-attention's key and value (`asr.attention.packed`).
WEIGHTS_FORMAT = 2
FORMAT_KEY = "format"  # the version, in a training checkpoint and a language model file
SEPARATE = {"qkv": ("query", "key", "value"), "kv": ("key", "value")}  # version 1's parts
GRAMMAR_FILE = "grammar.yaml"  # the grammar a model directory was trained for
CALIBRATION_FILE = "intents.json"  # the grammar search's threshold calibrated on dev
TRAINING = "TRAINING.json"  # a shipped model's record: what it heard, how to train it on
DIRECT_NUMBERS = 1 << 26  # a network under this many numbers (256 MB) is built at once
MAX_CONFIG_BYTES = 1 << 20  # a config is a few kB
MAX_TOKENIZER_BYTES = 64 << 20  # sentencepiece: about 1 MB for 32k pieces
MAX_TORCH_BYTES = 8 << 30  # weights (and a training checkpoint: weights and optimiser state)
# A matrix stored in int8 (`quantize_int8`) has its per-row scales beside it, under its name and
# this suffix; loading turns the pair back into fp32 (`dequantize_int8`).
INT8_SCALE = ".int8_scale"


class ModelDirError(ValueError):
    """A model directory that cannot be loaded; the message names the path."""


# What a model directory's config may name as `_target_`: module -> test of the named object.
ALLOWED_TARGETS = {
    "torch.optim": lambda obj: isinstance(obj, type) and issubclass(obj, torch.optim.Optimizer),
    "torch.optim.lr_scheduler": lambda obj: isinstance(obj, type) and issubclass(obj, LRScheduler),
    "asr.scheduler": lambda obj: callable(obj) and getattr(obj, "__module__", "") == "asr.scheduler",
}
_PARTIAL = ".tmp"  # suffix of atomic_write's temp files
_NAME_CHARACTERS = "abcdefghijklmnopqrstuvwxyz0123456789_"
_RANDOM = random.SystemRandom()


def atomic_write(path: Path, write) -> None:
    """Write through `write(file)` to a temp file, fsync, then rename over `path`.

    A crash leaves either the old file or the new one, never a half-written file under the
    real name; the folder is fsynced too, so the rename itself survives a power cut. The file
    gets the permissions `open()` would give it: those of the file it replaces, or 0666 less
    the umask. Only a regular file (or nothing) is replaced: a device, pipe or folder at
    `path` is refused, never swapped for a file. An error (a full disk, say) is an OSError
    naming `path`, and leaves the old file as it was.
    """
    mode = _replaced_mode(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = _create_temp(path)
    try:
        with os.fdopen(fd, "wb") as f:
            if mode is not None:
                os.fchmod(f.fileno(), mode)
            write(f)
            f.flush()
            os.fsync(f.fileno())
        os.replace(tmp, path)
    except BaseException as err:
        tmp.unlink(missing_ok=True)
        if isinstance(err, OSError):
            raise OSError(err.errno, err.strerror or str(err), str(path)) from None
        raise
    folder = os.open(path.parent, os.O_RDONLY)
    try:
        os.fsync(folder)
    finally:
        os.close(folder)


def _replaced_mode(path: Path) -> int | None:
    """The permission bits of the regular file at `path` (None when there is none); an
    OSError if something else is there."""
    try:
        info = os.stat(path)
    except FileNotFoundError:
        return None
    if not stat.S_ISREG(info.st_mode):
        raise OSError(errno.EEXIST, "exists and is not a regular file; refused", str(path))
    return stat.S_IMODE(info.st_mode)


def _create_temp(path: Path) -> tuple[int, Path]:
    """A new hidden file beside `path`, `.NAME.XXXXXXXX.tmp`, created as `open()` creates
    files (mode 0666, which the kernel narrows by the umask); its descriptor and path."""
    return _fresh(path, lambda tmp: os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL
                                            | os.O_CLOEXEC, 0o666))


def make_temp_dir(path: Path) -> Path:
    """A new hidden folder beside `path`, `.NAME.XXXXXXXX.tmp`, created as `mkdir` creates
    folders (0777 less the umask), to fill and then rename to `path`."""
    return _fresh(path, lambda tmp: os.mkdir(tmp, 0o777))[1]


def _fresh(path: Path, create):
    """`create(name)` of the first free temp name beside `path`, and that name. The random
    part comes from the OS, never from the generators training seeds."""
    for _ in range(100):
        suffix = "".join(_RANDOM.choices(_NAME_CHARACTERS, k=8))
        tmp = path.parent / f".{path.name}.{suffix}{_PARTIAL}"
        try:
            return create(tmp), tmp
        except FileExistsError:
            continue
    raise FileExistsError(errno.EEXIST, "no free temporary name", str(path))


def remove_partial_files(directory: Path, names: str) -> list[Path]:
    """Delete the temp files that atomic_write leaves when a kill cuts a write short, for the
    files whose names match the regular expression `names` (those the caller writes): a
    hidden file of anyone else's, even one ending in .tmp, is left alone.

    Only the one process that writes a directory (training, holding its lock) may call this.
    """
    own = re.compile(rf"\.(?:{names})\.[a-z0-9_]{{8}}{re.escape(_PARTIAL)}")
    partial = sorted(p for p in directory.iterdir() if own.fullmatch(p.name)) \
        if directory.is_dir() else []
    for path in partial:
        path.unlink(missing_ok=True)
    return partial


def save_torch(obj, path: Path) -> None:
    """`torch.save` through `atomic_write`. torch's zip writer turns what cut a write short (a
    full disk's OSError, a Ctrl-C's KeyboardInterrupt) into a RuntimeError of its own when it
    closes the archive; the original is raised instead (an OSError naming `path`)."""
    def write(f) -> None:
        recorder = _WriteErrors(f)
        try:
            torch.save(obj, recorder)
        except RuntimeError:
            if recorder.error is None:
                raise
            raise recorder.error from None
    atomic_write(path, write)


class _WriteErrors:
    """A file's `write` (what torch.save calls), remembering what it raised."""

    def __init__(self, file) -> None:
        self.file, self.error = file, None

    def write(self, data) -> int:
        try:
            return self.file.write(data)
        except BaseException as err:
            self.error = err
            raise

    def flush(self) -> None:
        self.file.flush()


def save_text(text: str, path: Path) -> None:
    atomic_write(path, lambda f: f.write(text.encode("utf-8")))


def load_torch(path: Path, device: str | torch.device = "cpu", max_bytes: int = MAX_TORCH_BYTES):
    """Load tensors and plain containers only: a pickle that names any other Python object
    (which is how a pickle runs code) is refused before that object is ever looked up."""
    try:
        info = Path(path).stat()
    except FileNotFoundError:
        raise ModelDirError(f"{path}: not found") from None
    except (OSError, ValueError) as err:
        raise ModelDirError(f"{path}: cannot load ({first_line(err)})") from None
    if not stat.S_ISREG(info.st_mode):
        raise ModelDirError(f"{path}: not a regular file; refused")
    if info.st_size > max_bytes:
        raise ModelDirError(f"{path}: larger than {max_bytes} bytes; refused")
    try:
        with warnings.catch_warnings():  # torch warns about pickle protocols on the way
            warnings.simplefilter("ignore")
            return torch.load(path, map_location=device, weights_only=True)
    except pickle.UnpicklingError as err:
        found = re.search(r"GLOBAL (\S+)", str(err))
        if found:
            raise ModelDirError(f"{path}: refused: it holds a pickled reference to "
                                f"{found.group(1)}, which could run code; only tensors are "
                                "loaded") from None
        raise ModelDirError(f"{path}: refused: not a file of tensors") from None
    except Exception as err:  # torch raises RuntimeError, EOFError, ... for corrupt files
        raise ModelDirError(f"{path}: cannot load ({first_line(err)})") from None


def load_state_dict(path: Path, device: str | torch.device = "cpu") -> dict[str, torch.Tensor]:
    """`load_torch` of a file that must hold a state dict of finite tensors."""
    return check_state_dict(load_torch(path, device), path)


def check_state_dict(state: object, source: str | Path) -> dict[str, torch.Tensor]:
    """`state` itself, once it is a mapping of names to ordinary (dense) tensors, every
    floating-point one finite: NaN weights would decode every input to nothing, silently."""
    if not (isinstance(state, dict) and all(isinstance(key, str) and isinstance(value, torch.Tensor)
                                            and value.layout == torch.strided
                                            for key, value in state.items())):
        raise ModelDirError(f"{source}: not a state dict (a mapping of names to tensors)")
    for key, value in state.items():
        if (value.is_floating_point() or value.is_complex()) and not torch.isfinite(value).all():
            raise ModelDirError(f"{source}: {key} holds NaN or infinite values; refused")
    return state


def quantize_int8(state: dict[str, torch.Tensor]) -> dict[str, torch.Tensor]:
    """Matrices (and embeddings, convolutions) as int8 with one fp32 scale per output row
    (symmetric: the row's largest magnitude is 127); vectors and buffers as they are. Half of
    fp16's bytes; decoding computes in fp32 from the dequantised weights."""
    stored = {}
    for name, value in state.items():
        if not (value.is_floating_point() and value.dim() >= 2):
            stored[name] = value
            continue
        weight = value.float()
        rows = tuple(range(1, weight.dim()))
        scale = (weight.abs().amax(dim=rows, keepdim=True) / 127).clamp(min=1e-12)
        stored[name] = torch.round(weight / scale).clamp(-127, 127).to(torch.int8)
        stored[name + INT8_SCALE] = scale
    return stored


def dequantize_int8(state: dict[str, torch.Tensor], source: str | Path) -> dict[str, torch.Tensor]:
    """`state` with each int8 matrix and its scales (`quantize_int8`) turned back into one fp32
    tensor; a pair that does not fit (no scales, scales of another shape or not positive,
    scales of nothing) is refused in one line naming `source`."""
    scales = {name[:-len(INT8_SCALE)]: value for name, value in state.items()
              if name.endswith(INT8_SCALE)}
    weights = {}
    for name, value in state.items():
        if name.endswith(INT8_SCALE):
            continue
        if value.dtype == torch.int8:
            value = _dequantized(name, value, scales.pop(name, None), source)
        weights[name] = value
    if scales:
        raise ModelDirError(f"{source}: {next(iter(scales))}{INT8_SCALE} scales no int8 tensor")
    return weights


def _dequantized(name: str, value: torch.Tensor, scale: torch.Tensor | None,
                 source: str | Path) -> torch.Tensor:
    if scale is None:
        raise ModelDirError(f"{source}: {name} is int8 without its scales ({name}{INT8_SCALE})")
    shape = (value.shape[0], *([1] * (value.dim() - 1))) if value.dim() >= 2 else None
    if shape is None or not scale.is_floating_point() or tuple(scale.shape) != shape \
            or not bool((scale > 0).all()):
        raise ModelDirError(f"{source}: {name}{INT8_SCALE} must be positive scales of shape "
                            f"{shape} for the int8 matrix {name} {tuple(value.shape)}")
    return value.float() * scale.float()


def check_shapes(state: dict[str, torch.Tensor], network: torch.nn.Module,
                 source: str | Path) -> None:
    """The names, shapes and kinds (floating point or not) of `state` must be those of
    `network`'s state dict (build it on the meta device: nothing is allocated)."""
    expected = network.state_dict()
    problem = None
    if missing := sorted(expected.keys() - state.keys()):
        problem = f"{len(missing)} tensor(s) missing, e.g. {missing[0]}"
    elif unexpected := sorted(state.keys() - expected.keys()):
        problem = f"{len(unexpected)} unexpected tensor(s), e.g. {unexpected[0]}"
    for key, want in expected.items():
        if problem is None and state[key].shape != want.shape:
            problem = f"{key} is {tuple(state[key].shape)}, the config makes {tuple(want.shape)}"
        elif problem is None and state[key].is_floating_point() != want.is_floating_point():
            problem = f"{key} holds {state[key].dtype}, the config makes {want.dtype}"
    if problem:
        raise ModelDirError(f"{source}: weights do not fit the config ({problem})")


def build_model(config: DictConfig) -> SpeechTransformer:
    """Construct the network from the `model` and `features` sections of a config."""
    return SpeechTransformer(*model_settings(config, "bad model/features config"))


def model_settings(config: DictConfig, source: str | Path) -> tuple[ModelDimensions, FeatureConfig]:
    """The `model` and `features` sections: exactly their dataclasses' fields, in range."""
    try:
        return (from_section(ModelDimensions, section(config, "model"), "model"),
                from_section(FeatureConfig, section(config, "features"), "features"))
    except (TypeError, ValueError) as err:
        raise ModelDirError(f"{source}: {first_line(err)}") from None


def section(config: DictConfig, name: str) -> object:
    """A top-level section of a config as plain data (None when absent)."""
    value = config.get(name)
    return OmegaConf.to_container(value, resolve=True) if OmegaConf.is_config(value) else value


def check_targets(config: DictConfig, source: str | Path) -> None:
    """Refuse a config naming any `_target_` outside ALLOWED_TARGETS (read, never resolved
    through interpolation, so `${...}` tricks are refused too)."""
    for key, target in _targets(OmegaConf.to_container(config, resolve=False), ""):
        if not (isinstance(target, str) and _allowed_target(target)):
            raise ModelDirError(f"{source}: {key}: {target!r} is not allowed (a model directory "
                                "may name only torch.optim optimisers and schedulers and "
                                "asr.scheduler schedules)")


def _targets(node, path: str):
    """(dotted key, value) of every `_target_` in a plain container tree."""
    return ((key, value) for key, value in _nodes(node, path)
            if key.rpartition(".")[2] == "_target_")


def _nodes(node, path: str):
    """(dotted key, value) of every entry of a plain container tree, at any depth."""
    if isinstance(node, dict):
        items = node.items()
    elif isinstance(node, list):
        items = enumerate(node)
    else:
        return
    for key, value in items:
        where = f"{path}.{key}" if path else str(key)
        yield where, value
        yield from _nodes(value, where)


def _allowed_target(target: str) -> bool:
    module, _, name = target.rpartition(".")
    if module not in ALLOWED_TARGETS or not name.isidentifier() or name.startswith("_"):
        return False
    return ALLOWED_TARGETS[module](getattr(importlib.import_module(module), name, None))


def weights_format(state: dict) -> int:
    """The layout a state dict was saved in, read off its names (a model.pt holds no
    version): only version 1 has separate key projections."""
    return 1 if any(name.endswith((".key.weight", ".key.bias")) for name in state) else 2


def upgrade_weights(state: dict, network: torch.nn.Module, version: int | None = None) -> None:
    """Rewrite, in place, a state dict saved in an older layout (`version`, else read off its
    names) into `network`'s, WEIGHTS_FORMAT; parts that do not fit are left for the shape
    check to name."""
    if (version or weights_format(state)) < 2:
        for name, module in network.named_modules():
            if isinstance(module, MultiHeadAttention):
                _pack_projections(module, state, f"{name}." if name else "")


def upgrade_optimizer(ckpt: dict, model: torch.nn.Module) -> dict:
    """A training checkpoint's optimiser state for `model` (WEIGHTS_FORMAT), from the layout
    of the checkpoint's own weights: the per-element moments of version 1's separate layers,
    stacked, are the packed layer's exactly (the step count is shared)."""
    saved, optim = ckpt["model"], ckpt["optimizer"]
    version = ckpt.get(FORMAT_KEY) or weights_format(saved)
    if version >= 2 or len(optim["param_groups"]) != 1:
        return optim
    names = [name for name, _ in model.named_parameters()]
    parts = {name: _separate_names(name) for name in names}
    wanted = {part for group in parts.values() for part in group}
    index = {key: i for i, key in enumerate(k for k in saved if k in wanted)}  # saved order
    state = {}
    for i, name in enumerate(names):
        found = [optim["state"][index[part]] for part in parts[name]
                 if part in index and index[part] in optim["state"]]
        if found:
            state[i] = {key: torch.cat([s[key] for s in found]) if value.dim() else value
                        for key, value in found[0].items()}
    return {"state": state, "param_groups": [{**optim["param_groups"][0],
                                              "params": list(range(len(names)))}]}


def _separate_names(name: str) -> list[str]:
    """The names a packed projection's parameter had in version 1, in their packed order
    ("x.qkv.bias" -> "x.query.bias", "x.key.bias", "x.value.bias"); another name alone."""
    head, _, kind = name.rpartition(".")
    prefix, _, layer = head.rpartition(".")
    parts = SEPARATE.get(layer)
    return [f"{prefix}.{part}.{kind}" if prefix else f"{part}.{kind}" for part in parts] \
        if parts else [name]


def _pack_projections(module: MultiHeadAttention, state: dict, prefix: str) -> None:
    """One attention layer's version-1 weights and biases, stacked in query, key, value
    order."""
    layer = "qkv" if module.qkv is not None else "kv"
    for kind in ("weight", "bias"):
        keys = [f"{prefix}{name}.{kind}" for name in SEPARATE[layer]]
        if not all(k in state for k in keys):
            continue
        try:
            state[f"{prefix}{layer}.{kind}"] = torch.cat([state[k] for k in keys])
        except RuntimeError:  # parts that do not stack: left for the shape check to name
            continue
        for k in keys:
            del state[k]


def save_model_dir(directory: Path, model: SpeechTransformer, tokenizer: Tokenizer,
                   config: DictConfig) -> None:
    """Write weights, config and tokenizer (each atomically)."""
    config = OmegaConf.merge(config, {"model": dataclasses.asdict(model.dims)})
    save_text(OmegaConf.to_yaml(config, resolve=True), directory / CONFIG)
    atomic_write(directory / TOKENIZER, lambda f: f.write(tokenizer.model_proto))
    save_torch(model.state_dict(), directory / WEIGHTS)


def load_model_dir(directory: str | Path, device: str | torch.device = "cpu",
                   ) -> tuple[SpeechTransformer, Tokenizer, DictConfig]:
    """Rebuild a trained model, ready for inference (eval mode, on `device`)."""
    if not isinstance(directory, str | os.PathLike):
        raise ModelDirError(f"a model directory must be a path, got {directory!r}")
    directory = Path(directory)
    if not directory.is_dir():
        raise ModelDirError(f"{directory}: not a model directory")
    for path in (directory / name for name in (CONFIG, WEIGHTS, TOKENIZER)):
        if path.exists() and not path.is_file():
            raise ModelDirError(f"{path}: not a regular file")
        if not path.is_file():
            raise ModelDirError(f"{directory}: missing {path.name}")
    config = load_config(directory / CONFIG)
    dims, features = model_settings(config, directory / CONFIG)
    tokenizer = load_tokenizer(directory / TOKENIZER, dims.n_vocab)
    state = dequantize_int8(load_state_dict(directory / WEIGHTS), directory / WEIGHTS)
    try:
        frontend = FrontEnd(features)  # small (its settings are bounded), and needed for real
        network = shape_network(lambda: SpeechTransformer(dims, features, frontend),
                                network_bound(dims))
    except (RuntimeError, ValueError) as err:
        raise ModelDirError(f"{directory / CONFIG}: {first_line(err)}") from None
    upgrade_weights(state, network)
    check_shapes(state, network, directory / WEIGHTS)
    model = network if not is_meta(network) else SpeechTransformer(dims, features, frontend)
    model.load_state_dict(state)
    return model.to(device).eval(), tokenizer, config


def network_bound(dims: ModelDimensions) -> int:
    """More numbers than the network of `dims` holds (its parameters and buffers): each
    layer's projections, the positions' tables, the front end, the vocabulary's three
    matrices, twice over."""
    d, width = dims.d_model, dims.d_model + dims.d_ff
    layer = 8 * d * width + (2 * dims.max_relative_distance + 1) * d
    front = 9 * dims.conv_channels ** 2 + (dims.conv_channels + dims.stack) * dims.n_input * d
    return 2 * ((dims.n_encoder_layers + dims.n_decoder_layers) * layer + front
                + 3 * dims.n_vocab * d + 65536 * d)


def shape_network(build, bound: int) -> torch.nn.Module:
    """The network `build` makes, for the weights' shape check: built for real when `bound`
    (more numbers than it holds) is at most DIRECT_NUMBERS, so it serves as the model too;
    else on the meta device, where nothing is allocated (an untrusted config may describe
    hundreds of GB). Building on the meta device runs torch's Python reference kernels,
    which load its compiler: a second at start-up that a model of a safe size never pays."""
    if bound <= DIRECT_NUMBERS:
        return build()
    with torch.device("meta"):
        return build()


def is_meta(network: torch.nn.Module) -> bool:
    return next(network.parameters()).is_meta


def load_tokenizer(path: Path, n_vocab: int | None = None) -> Tokenizer:
    """A sentencepiece model with this package's special ids (and `n_vocab` pieces)."""
    try:
        tokenizer = Tokenizer(read_file(path, MAX_TOKENIZER_BYTES, "the tokenizer"))
    except UntrustedInputError as err:
        raise ModelDirError(str(err)) from None
    except (RuntimeError, OSError, TypeError) as err:
        raise ModelDirError(f"{path}: not a sentencepiece model ({first_line(err)})") from None
    if tokenizer.vocab_size == 0:  # what sentencepiece makes of empty (or no protobuf) bytes
        raise ModelDirError(f"{path}: not a sentencepiece model (no pieces)")
    sp = tokenizer.sp
    specials = (sp.pad_id(), sp.unk_id(), sp.bos_id(), sp.eos_id())
    if specials != (PAD_ID, UNK_ID, BOS_ID, EOS_ID):
        raise ModelDirError(f"{path}: special ids (pad, unk, bos, eos) are {specials}, not "
                            f"{(PAD_ID, UNK_ID, BOS_ID, EOS_ID)}: not a tokenizer of this toolkit")
    if n_vocab is not None and tokenizer.vocab_size != n_vocab:
        raise ModelDirError(f"{path}: {tokenizer.vocab_size} pieces, the model's config says "
                            f"model.n_vocab={n_vocab}")
    return tokenizer


def load_config(path: Path) -> DictConfig:
    """A model directory's config: a YAML mapping of plain data with allowed targets only."""
    try:
        text = read_yaml(path, MAX_CONFIG_BYTES, "the config")
    except UntrustedInputError as err:
        raise ModelDirError(str(err)) from None
    try:
        config = OmegaConf.create(text)
    except Exception as err:  # yaml's errors (e.g. a !!python tag), OmegaConf's own
        raise ModelDirError(f"{path}: not a plain YAML config ({first_line(err)})") from None
    if not isinstance(config, DictConfig):
        raise ModelDirError(f"{path}: not a plain YAML config (expected a mapping)")
    check_targets(config, path)
    for key, value in _nodes(OmegaConf.to_container(config, resolve=False), ""):
        if isinstance(value, str) and "${" in value:
            raise ModelDirError(f"{path}: {key}: interpolations are not allowed (a model "
                                "directory's config is saved resolved)")
    return config


def save_metrics(directory: Path, metrics: dict) -> None:
    save_text(json.dumps(metrics, indent=2) + "\n", directory / METRICS)

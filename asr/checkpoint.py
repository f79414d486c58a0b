"""The model directory: everything needed to use a trained model, written atomically.

    config.yaml      resolved config (data only: model sizes, features, decoding, training)
    model.pt         weights of the best epoch (state dict: tensors only, CMVN included)
    tokenizer.model  sentencepiece BPE model
    metrics.json     per-epoch losses and dev WER
    checkpoint.pt    last training state, for `trainer.resume=true`

Loading uses `torch.load(weights_only=True)`, which refuses pickled code, and builds the model
from the config's plain fields: nothing in a model directory is ever executed. The config is
YAML data (OmegaConf's safe loader: no Python tags), and the only `_target_`s it may name are
torch optimisers and schedulers and this package's schedules (`check_targets`), so a future
caller that instantiates from a downloaded config cannot be led to call anything else.
"""

import dataclasses
import importlib
import json
import os
import pickle
import re
import tempfile
import warnings
from pathlib import Path

import torch
from omegaconf import DictConfig, OmegaConf
from omegaconf.errors import OmegaConfBaseException
from torch.optim.lr_scheduler import LRScheduler

from asr.features import FeatureConfig
from asr.model import ModelDimensions, SpeechTransformer
from asr.tokenizer import Tokenizer

CONFIG, WEIGHTS, TOKENIZER, METRICS, CHECKPOINT = (
    "config.yaml", "model.pt", "tokenizer.model", "metrics.json", "checkpoint.pt")


class ModelDirError(ValueError):
    """A model directory that cannot be loaded; the message names the path."""


# What a model directory's config may name as `_target_`: module -> test of the named object.
ALLOWED_TARGETS = {
    "torch.optim": lambda obj: isinstance(obj, type) and issubclass(obj, torch.optim.Optimizer),
    "torch.optim.lr_scheduler": lambda obj: isinstance(obj, type) and issubclass(obj, LRScheduler),
    "asr.scheduler": lambda obj: callable(obj) and getattr(obj, "__module__", "") == "asr.scheduler",
}
_PARTIAL = ".tmp"  # suffix of atomic_write's temp files


def atomic_write(path: Path, write) -> None:
    """Write through `write(file)` to a temp file, fsync, then rename over `path`.

    A crash leaves either the old file or the new one, never a half-written file under the
    real name; the folder is fsynced too, so the rename itself survives a power cut.
    """
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.", suffix=_PARTIAL)
    try:
        with os.fdopen(fd, "wb") as f:
            write(f)
            f.flush()
            os.fsync(f.fileno())
        os.replace(tmp, path)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise
    folder = os.open(path.parent, os.O_RDONLY)
    try:
        os.fsync(folder)
    finally:
        os.close(folder)


def remove_partial_files(directory: Path) -> list[Path]:
    """Delete the temp files of writes that a kill cut short (atomic_write cleans up otherwise).

    Only the one process that writes a directory (training) may call this.
    """
    partial = sorted(directory.glob(f".*{_PARTIAL}")) if directory.is_dir() else []
    for path in partial:
        path.unlink(missing_ok=True)
    return partial


def save_torch(obj, path: Path) -> None:
    atomic_write(path, lambda f: torch.save(obj, f))


def save_text(text: str, path: Path) -> None:
    atomic_write(path, lambda f: f.write(text.encode("utf-8")))


def load_torch(path: Path, device: str | torch.device = "cpu"):
    """Load tensors and plain containers only: a pickle that names any other Python object
    (which is how a pickle runs code) is refused before that object is ever looked up."""
    try:
        with warnings.catch_warnings():  # torch warns about pickle protocols on the way
            warnings.simplefilter("ignore")
            return torch.load(path, map_location=device, weights_only=True)
    except FileNotFoundError:
        raise ModelDirError(f"{path}: not found") from None
    except pickle.UnpicklingError as err:
        found = re.search(r"GLOBAL (\S+)", str(err))
        if found:
            raise ModelDirError(f"{path}: refused: it holds a pickled reference to "
                                f"{found.group(1)}, which could run code; only tensors are "
                                "loaded") from None
        raise ModelDirError(f"{path}: refused: not a file of tensors") from None
    except Exception as err:  # torch raises RuntimeError, EOFError, ... for corrupt files
        raise ModelDirError(f"{path}: cannot load ({_first_line(err)})") from None


def build_model(config: DictConfig) -> SpeechTransformer:
    """Construct the network from the `model` and `features` sections of a config."""
    try:
        dims = ModelDimensions(**OmegaConf.to_container(config.model, resolve=True))
        features = FeatureConfig(**OmegaConf.to_container(config.features, resolve=True))
        return SpeechTransformer(dims, features)
    except (TypeError, ValueError, RuntimeError, OmegaConfBaseException) as err:
        raise ModelDirError(f"bad model/features config: {_first_line(err)}") from None


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
    if isinstance(node, dict):
        items = node.items()
    elif isinstance(node, list):
        items = enumerate(node)
    else:
        return
    for key, value in items:
        where = f"{path}.{key}" if path else str(key)
        if key == "_target_":
            yield where, value
        else:
            yield from _targets(value, where)


def _allowed_target(target: str) -> bool:
    module, _, name = target.rpartition(".")
    if module not in ALLOWED_TARGETS or not name.isidentifier() or name.startswith("_"):
        return False
    return ALLOWED_TARGETS[module](getattr(importlib.import_module(module), name, None))


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
    directory = Path(directory)
    if not directory.is_dir():
        raise ModelDirError(f"{directory}: not a model directory")
    for name in (CONFIG, WEIGHTS, TOKENIZER):
        if not (directory / name).is_file():
            raise ModelDirError(f"{directory}: missing {name}")
    config = load_config(directory / CONFIG)
    try:
        tokenizer = Tokenizer.load(directory / TOKENIZER)
    except (RuntimeError, OSError) as err:
        raise ModelDirError(f"{directory / TOKENIZER}: not a sentencepiece model "
                            f"({_first_line(err)})") from None
    model = build_model(config)
    try:
        model.load_state_dict(load_torch(directory / WEIGHTS))
    except RuntimeError as err:
        raise ModelDirError(f"{directory / WEIGHTS}: weights do not fit the config "
                            f"({str(err).splitlines()[0]})") from None
    return model.to(device).eval(), tokenizer, config


def load_config(path: Path) -> DictConfig:
    """A model directory's config: a YAML mapping of plain data with allowed targets only."""
    try:
        config = OmegaConf.load(path)
    except Exception as err:  # yaml's errors (e.g. a !!python tag), OSError, OmegaConf's own
        raise ModelDirError(f"{path}: not a plain YAML config ({_first_line(err)})") from None
    if not isinstance(config, DictConfig):
        raise ModelDirError(f"{path}: not a plain YAML config (expected a mapping)")
    check_targets(config, path)
    return config


def save_metrics(directory: Path, metrics: dict) -> None:
    save_text(json.dumps(metrics, indent=2) + "\n", directory / METRICS)


def _first_line(err: Exception) -> str:
    text = str(err).strip()
    return text.splitlines()[0] if text else type(err).__name__

"""The model directory: everything needed to use a trained model, written atomically.

    config.yaml      resolved config (data only: model sizes, features, decoding, training)
    model.pt         weights of the best epoch (state dict: tensors only, CMVN included)
    tokenizer.model  sentencepiece BPE model
    metrics.json     per-epoch losses and dev WER
    checkpoint.pt    last training state, for `trainer.resume=true`

Loading uses `torch.load(weights_only=True)`, which refuses pickled code, and builds the model
from the config's plain fields: nothing in a model directory is ever executed.
"""

import dataclasses
import json
import os
import tempfile
from pathlib import Path

import torch
from omegaconf import DictConfig, OmegaConf

from asr.features import FeatureConfig
from asr.model import ModelDimensions, SpeechTransformer
from asr.tokenizer import Tokenizer

CONFIG, WEIGHTS, TOKENIZER, METRICS, CHECKPOINT = (
    "config.yaml", "model.pt", "tokenizer.model", "metrics.json", "checkpoint.pt")


class ModelDirError(ValueError):
    """A model directory that cannot be loaded; the message names the path."""


def atomic_write(path: Path, write) -> None:
    """Write through `write(file)` to a temp file, fsync, then rename over `path`.

    A crash leaves either the old file or the new one, never a half-written file.
    """
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.", suffix=".tmp")
    try:
        with os.fdopen(fd, "wb") as f:
            write(f)
            f.flush()
            os.fsync(f.fileno())
        os.replace(tmp, path)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise


def save_torch(obj, path: Path) -> None:
    atomic_write(path, lambda f: torch.save(obj, f))


def save_text(text: str, path: Path) -> None:
    atomic_write(path, lambda f: f.write(text.encode("utf-8")))


def load_torch(path: Path, device: str | torch.device = "cpu"):
    """Load tensors and plain containers only (no arbitrary unpickling)."""
    try:
        return torch.load(path, map_location=device, weights_only=True)
    except FileNotFoundError:
        raise ModelDirError(f"{path}: not found") from None
    except Exception as err:  # torch raises UnpicklingError, RuntimeError, EOFError...
        first = str(err).strip().splitlines()[0] if str(err).strip() else type(err).__name__
        raise ModelDirError(f"{path}: cannot load safely ({first})") from None


def build_model(config: DictConfig) -> SpeechTransformer:
    """Construct the network from the `model` and `features` sections of a config."""
    try:
        dims = ModelDimensions(**OmegaConf.to_container(config.model, resolve=True))
        features = FeatureConfig(**OmegaConf.to_container(config.features, resolve=True))
    except TypeError as err:
        raise ModelDirError(f"bad model/features config: {err}") from None
    return SpeechTransformer(dims, features)


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
    config = OmegaConf.load(directory / CONFIG)
    tokenizer = Tokenizer.load(directory / TOKENIZER)
    model = build_model(config)
    try:
        model.load_state_dict(load_torch(directory / WEIGHTS))
    except RuntimeError as err:
        raise ModelDirError(f"{directory / WEIGHTS}: weights do not fit the config "
                            f"({str(err).splitlines()[0]})") from None
    return model.to(device).eval(), tokenizer, config


def save_metrics(directory: Path, metrics: dict) -> None:
    save_text(json.dumps(metrics, indent=2) + "\n", directory / METRICS)

"""Fine-tuning (`trainer.init_from`): a trained model's weights, CMVN statistics and tokenizer
replace the random start, the learnt CMVN and the new vocabulary, once checked to fit the run.
"""

import argparse
import hashlib
import json
import math
import sys
from dataclasses import asdict

from omegaconf import DictConfig, OmegaConf

from asr.checkpoint import METRICS, TRAINING, WEIGHTS, ModelDirError, load_model_dir
from asr.model import SpeechTransformer
from asr.models import model_path
from asr.text import normalize_text
from asr.tokenizer import UNK_ID, Tokenizer
from asr.training.options import TrainingError
from asr.untrusted import UntrustedInputError, read_file

# Settings that shape only training (losses, regularisation, SpecAugment): a fine-tuning run may
# change them. Every other model and features setting must be the one the weights were trained
# with (n_vocab and n_input follow from the tokenizer and the features).
TRAINING_ONLY = {"model": {"dropout", "label_smoothing", "ctc_weight", "guided_attention",
                           "guided_attention_width", "n_vocab", "n_input"},
                 "features": {"freq_masks", "freq_width", "time_masks", "time_width",
                              "time_max_ratio", "vtlp"}}
HEARD = "total_audio_hours_heard"  # a model directory's record of the audio its weights heard
MAX_RECORD_BYTES = 16 << 20  # metrics.json holds every epoch and the loss curve


def override(section: str, key: str, value: object) -> str:
    """One Hydra command-line override that sets section.key to value."""
    if value is None:
        return f"{section}.{key}=null"
    if isinstance(value, bool):
        return f"{section}.{key}={str(value).lower()}"
    if isinstance(value, (list, tuple)):
        return f"{section}.{key}=[{','.join(str(item) for item in value)}]"
    return f"{section}.{key}={value}"


def load(source: str) -> tuple[SpeechTransformer, Tokenizer]:
    """The model and tokenizer `source` names (a model directory or a packaged model)."""
    try:
        model, tokenizer, _ = load_model_dir(model_path(source))
    except ModelDirError as err:
        raise TrainingError(f"trainer.init_from: {err}") from None
    return model, tokenizer


def weights_sha256(source: str) -> str:
    """The sha256 of the weights file (model.pt) of `source` (a model directory or a packaged
    model): which weights a run started from, read when it starts, since a folder such as the
    latest round's is replaced by the rounds that train on from it."""
    path = model_path(source) / WEIGHTS
    try:
        with path.open("rb") as f:
            return hashlib.file_digest(f, "sha256").hexdigest()
    except OSError as err:
        raise TrainingError(f"trainer.init_from: {path}: cannot read ({err.strerror})") from None


def hours_heard(source: str) -> float | None:
    """The hours of audio the weights `source` names (a model directory or a packaged model)
    have heard in all, as their directory records it: a shipped model's TRAINING.json, or the
    metrics.json that training wrote; None where neither holds a number of hours."""
    directory = model_path(source)
    for name in (TRAINING, METRICS):
        if not (directory / name).is_file():
            continue
        try:
            hours = json.loads(read_file(directory / name, MAX_RECORD_BYTES)).get(HEARD)
        except (UntrustedInputError, ValueError, AttributeError):
            return None
        valid = isinstance(hours, (int, float)) and not isinstance(hours, bool) \
            and math.isfinite(hours) and hours >= 0
        return float(hours) if valid else None
    return None


def fixed_settings(model: SpeechTransformer) -> list[tuple[str, str, object]]:
    """(section, key, value) of every setting a fine-tuning of `model` must keep: what its weights
    were built with (a setting newer than their config has its default), less TRAINING_ONLY."""
    built = {"model": asdict(model.dims), "features": asdict(model.frontend.cfg)}
    return [(section, key, value) for section, free in TRAINING_ONLY.items()
            for key, value in built[section].items() if key not in free]


def network_overrides(source: str) -> list[str]:
    """The overrides that make a run's network and front end the ones `source`'s weights were
    trained as, so that any model directory can be fine-tuned without knowing its settings."""
    model, _ = load(source)
    return [override(*setting) for setting in fixed_settings(model)]


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(
        description="Print the Hydra overrides that fine-tuning a model directory needs "
                    "(its network and front end), one per line.")
    parser.add_argument("model", help="a model directory, or a packaged model's name (base)")
    args = parser.parse_args(argv)
    try:
        print("\n".join(network_overrides(args.model)))
    except TrainingError as err:
        sys.exit(f"error: {err}")


def load_pretrained(cfg: DictConfig, texts: list[str]) -> tuple[dict, Tokenizer]:
    """The weights (CMVN included) and tokenizer that `trainer.init_from` names, once checked
    to fit this run: the same network and front end, a CTC head on both sides or neither, and
    a vocabulary that spells every character of the training transcripts."""
    source = cfg.trainer.init_from
    model, tokenizer = load(source)
    mine = {section: OmegaConf.to_container(cfg[section], resolve=True) for section in TRAINING_ONLY}
    for section, key, value in fixed_settings(model):
        if mine[section].get(key) != value:
            raise TrainingError(f"trainer.init_from={source}: {section}.{key} is {value} there, "
                                f"{mine[section].get(key)} here; pass {section}.{key}={value} "
                                "(the network must be the one the weights were trained as)")
    if (cfg.model.ctc_weight > 0) != (model.ctc is not None):
        raise TrainingError(f"trainer.init_from={source}: model.ctc_weight must be "
                            f"{'> 0' if model.ctc is not None else '0'}, as there (the CTC "
                            "head is part of the weights)")
    chars = {c for text in texts for c in normalize_text(text)} - {" "}
    unknown = sorted(c for c in chars if UNK_ID in tokenizer.encode(c))
    if unknown:
        raise TrainingError(f"trainer.init_from={source}: its tokenizer cannot spell "
                            f"{' '.join(map(repr, unknown))} of the training transcripts")
    return model.state_dict(), tokenizer


if __name__ == "__main__":
    main()

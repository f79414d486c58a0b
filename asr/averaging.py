"""Checkpoint averaging: one model whose weights are the mean of several epochs' weights.

The weights at the ends of the last few epochs (or of the best few by dev WER) sit around
the same minimum; their mean is usually a little better than any one of them and smooths out
the epoch-to-epoch noise of a single pick (Vaswani et al. 2017, and the default of fairseq's
`average_checkpoints.py --num-epoch-checkpoints` and ESPnet's `--n_average` / `nbest`).

Training keeps the weights of selected epochs as `MODEL_DIR/epochs/epoch_NNNN.pt` when
`trainer.keep_checkpoints` (or `trainer.average_checkpoints`) is set: the last N epochs and
the best N by dev WER (ties by dev loss), so either selection can be averaged later.
"""

import json
from pathlib import Path

import torch

from asr.checkpoint import (
    METRICS,
    ModelDirError,
    load_model_dir,
    load_torch,
    save_metrics,
    save_model_dir,
    save_torch,
    upgrade_weights,
)

EPOCHS = "epochs"
AVERAGED = "averaged"  # where the averaged weights go, inside the run's out_dir
SELECTIONS = ("last", "best")


def epoch_path(model_dir: Path, epoch: int) -> Path:
    return Path(model_dir) / EPOCHS / f"epoch_{epoch:04d}.pt"


def select_epochs(history: list[dict], n: int, by: str) -> list[int]:
    """The epochs (numbers from 1) to average: the last `n`, or the best `n` by dev WER with
    dev loss breaking ties (small dev sets tie often); in increasing epoch order."""
    if by not in SELECTIONS:
        raise ValueError(f"averaging selection must be last or best, got {by!r}")
    if by == "last":
        chosen = history[-n:]
    else:
        chosen = sorted(history, key=lambda e: (e["dev_wer"], e["dev_loss"], -e["epoch"]))[:n]
    return sorted(e["epoch"] for e in chosen)


def save_epoch_weights(model_dir: Path, weights: dict, history: list[dict], keep: int) -> None:
    """Write the latest epoch's weights and delete those neither among the last `keep` nor
    the best `keep` epochs."""
    save_torch(weights, epoch_path(model_dir, history[-1]["epoch"]))
    wanted = set(select_epochs(history, keep, "last")) | set(select_epochs(history, keep, "best"))
    for path in (Path(model_dir) / EPOCHS).glob("epoch_*.pt"):
        if int(path.stem.removeprefix("epoch_")) not in wanted:
            path.unlink(missing_ok=True)


def average_weights(paths: list[Path]) -> dict[str, torch.Tensor]:
    """Element-wise mean of state dicts (summed in float64, returned in each tensor's dtype);
    integer tensors (counters) are taken from the last one."""
    if not paths:
        raise ValueError("no checkpoints to average")
    total: dict[str, torch.Tensor] = {}
    for path in paths:
        weights = load_torch(path)
        if total and weights.keys() != total.keys():
            raise ModelDirError(f"{path}: holds other tensors than {paths[0]}")
        for name, tensor in weights.items():
            if not tensor.is_floating_point():
                total[name] = tensor
            elif name in total and total[name].shape != tensor.shape:
                raise ModelDirError(f"{path}: {name} has shape {tuple(tensor.shape)}, not "
                                    f"{tuple(total[name].shape)}")
            else:
                total[name] = total.get(name, 0) + tensor.double()
    return {name: (total[name] / len(paths)).to(t.dtype) if t.is_floating_point() else t
            for name, t in weights.items()}


def average_epochs(model_dir: Path, history: list[dict], n: int,
                   by: str) -> tuple[list[int], dict[str, torch.Tensor]]:
    """The epochs `select_epochs` picks from `history` and the mean of their kept weights."""
    epochs = select_epochs(history, n, by)
    paths = [epoch_path(model_dir, e) for e in epochs]
    missing = [p.name for p in paths if not p.is_file()]
    if missing:
        raise ModelDirError(f"{Path(model_dir) / EPOCHS}: missing {', '.join(missing)} (train "
                            f"with trainer.keep_checkpoints>={n} to keep them)")
    return epochs, average_weights(paths)


def average_model_dir(model_dir: Path, n: int, by: str, out: Path) -> list[int]:
    """Write `out`, a model directory (config, tokenizer, averaged weights) from `model_dir`'s
    kept epochs; returns the epochs averaged."""
    model_dir = Path(model_dir)
    try:
        history = json.loads((model_dir / METRICS).read_text())["epochs"]
    except (OSError, ValueError, KeyError) as err:
        raise ModelDirError(f"{model_dir / METRICS}: no per-epoch history ({err})") from None
    epochs, weights = average_epochs(model_dir, history, n, by)
    model, tokenizer, config = load_model_dir(model_dir)
    upgrade_weights(weights, model)  # epochs kept in an older layout
    model.load_state_dict(weights)
    save_model_dir(Path(out), model, tokenizer, config)
    save_metrics(Path(out), {"averaged_epochs": epochs, "by": by, "source": str(model_dir)})
    return epochs

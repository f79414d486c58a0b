"""A deeper base model grown from a trained one, to train on from (`trainer.init_from`):

    python -m recipes.base.grow --model base --out exp/base_deep_init --encoder-layers 12

Each encoder layer is followed by copies of itself whose two output projections (the
self-attention's and the feed-forward's second layer) are zero. A Pre-LN block whose branches
add nothing is the identity, so the grown model writes exactly what the trained one writes, and
a run that trains it on starts from the trained model's accuracy instead of from scratch
(progressive stacking, Gong et al. 2019): a second, larger size without a second run of every
round. The hours its weights have heard are kept (its metrics.json), for the run it starts,
and so is the source's own language model (the folder its `decode.lm` names).
"""

import argparse
import shutil
import sys
import tempfile
from dataclasses import replace
from pathlib import Path

import torch
from omegaconf import DictConfig

from asr.checkpoint import ModelDirError, load_model_dir, save_metrics, save_model_dir
from asr.lm import copy_lm
from asr.model import SpeechTransformer
from asr.models import model_path, package_problem
from asr.tokenizer import Tokenizer
from asr.training.pretrained import HEARD, hours_heard
from asr.transcriber import Transcriber


def layer_sources(old: int, new: int) -> list[int]:
    """For each of `new` layers, the trained layer it copies: each of the `old` in turn, as
    evenly as `new` allows (earlier layers take the remainder)."""
    per, extra = divmod(new, old)
    return [j for j in range(old) for _ in range(per + (j < extra))]


def grow(model: SpeechTransformer, encoder_layers: int) -> SpeechTransformer:
    """`model` with `encoder_layers` encoder layers that computes what `model` computes."""
    old = model.dims.n_encoder_layers
    if model.dims.norm != "pre":
        raise ValueError(f"model.norm is {model.dims.norm}: only a Pre-LN block is the identity "
                         "when its branches add nothing")
    if old == 0 or encoder_layers < old:
        raise ValueError(f"--encoder-layers {encoder_layers}: the model has {old}; growing "
                         "needs at least that many, and a trained layer to copy")
    grown = SpeechTransformer(replace(model.dims, n_encoder_layers=encoder_layers),
                              model.frontend.cfg)
    state = {k: v for k, v in model.state_dict().items() if not k.startswith("encoder.blocks.")}
    sources = layer_sources(old, encoder_layers)
    for i, j in enumerate(sources):
        state |= {f"encoder.blocks.{i}.{k}": v.clone()
                  for k, v in model.encoder.blocks[j].state_dict().items()}
    grown.load_state_dict(state)
    with torch.no_grad():
        for i in range(1, encoder_layers):
            if sources[i - 1] == sources[i]:  # a copy: its branches add nothing
                block = grown.encoder.blocks[i]
                for layer in (block.attn.out, block.mlp[2]):
                    layer.weight.zero_()
                    layer.bias.zero_()
    return grown.eval()


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--model", required=True, help="a trained model directory, or base")
    parser.add_argument("--out", type=Path, required=True, help="the grown model directory")
    parser.add_argument("--encoder-layers", type=int, required=True)
    args = parser.parse_args(argv)
    if package_problem(args.out):
        sys.exit(f"error: --out {args.out} {package_problem(args.out, 'a grown model')}")
    if args.out.is_symlink() or (args.out.exists() and not args.out.is_dir()):
        sys.exit(f"error: --out {args.out}: a link or not a folder; name a new folder")
    if args.out.exists() and any(args.out.iterdir()):
        sys.exit(f"error: {args.out}: exists and is not empty")
    source = model_path(args.model)
    try:
        model, tokenizer, config = load_model_dir(source)
        grown = grow(model, args.encoder_layers)
        write_checked(args.out, source, grown, tokenizer, config)
    except (ModelDirError, ValueError) as err:
        sys.exit(f"error: {err}")
    params = sum(p.numel() for p in grown.parameters()) / 1e6
    print(f"{args.out}: {args.encoder_layers} encoder layers grown from {model.dims.n_encoder_layers} "
          f"of {source} ({params:.1f}M parameters), computing what they compute")


def write_checked(out: Path, source: Path, grown: SpeechTransformer, tokenizer: Tokenizer,
                  config: DictConfig) -> None:
    """The grown model directory written beside `out`, loaded as any model directory is (its
    language model and decoding settings included: a NaN `lm_weight` is refused here, not by
    the run it starts), then put in `out`'s place; nothing is left when a check fails."""
    out.parent.mkdir(parents=True, exist_ok=True)
    staging = Path(tempfile.mkdtemp(dir=out.parent, prefix=f".{out.name}."))
    try:
        if config.decode.lm is not None:  # its own language model, as the source fuses it
            copy_lm(source, staging, config.decode.lm)
        save_model_dir(staging, grown, tokenizer, config)
        heard = hours_heard(str(source))
        if heard is not None:  # what the grown weights heard: the source's, for the run they start
            save_metrics(staging, {HEARD: heard})
        Transcriber.from_pretrained(staging, "cpu", vad=None)
        if out.exists():
            out.rmdir()  # empty: checked before
        staging.rename(out)
    finally:
        shutil.rmtree(staging, ignore_errors=True)


if __name__ == "__main__":
    main()

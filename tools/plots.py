"""Figures of the training techniques, each a PNG made by one command (matplotlib, `.[plot]`).

    python -m tools.plots lr         [--out docs/lr_schedules.png]
    python -m tools.plots posenc     [--out docs/positional_encoding.png]
    python -m tools.plots attention  --model exp/voice_commands [--audio FILE] [--out ...]
    python -m tools.plots loss       --model exp/voice_commands [--out docs/loss_curves.png]

`lr` draws the schedules of asr/scheduler.py themselves (not copies of their formulas);
`attention` runs a trained model on one utterance and draws its spectrogram, the encoder's
self-attention and every head of the decoder's cross-attention (the alignment of tokens to
frames). Heads specialise: as in whisper's "alignment heads", a few follow the speech
monotonically while others attend to anchors, and the mean of heads blurs the two, so each
head is drawn with its monotonicity (correlation of token order and attended frame).
"""

import argparse
import json
from pathlib import Path

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402
import torch  # noqa: E402

from asr import scheduler as schedules  # noqa: E402
from asr.audio import AudioError, load_audio  # noqa: E402
from asr.checkpoint import METRICS, ModelDirError, atomic_write, load_model_dir  # noqa: E402
from asr.decoding import DecodingOptions, decode  # noqa: E402
from asr.model import sinusoids  # noqa: E402
from asr.tokenizer import BOS_ID  # noqa: E402

DOCS = Path(__file__).resolve().parents[1] / "docs"


def save(fig, path: Path) -> None:
    fig.tight_layout()
    atomic_write(path, lambda f: fig.savefig(f, format="png", dpi=100))
    plt.close(fig)
    print(f"wrote {path}")


def schedule_values(make, steps: int, **kwargs) -> list[float]:
    """The learning rate of steps 1..steps of a real schedule on a one-parameter Adam."""
    optimizer = torch.optim.Adam([torch.zeros(1, requires_grad=True)], lr=1.0,
                                 betas=kwargs.pop("betas", (0.9, 0.98)))
    factor = make(optimizer, **kwargs).lr_lambdas[0]
    return [factor(step) for step in range(steps)]


def plot_lr(out: Path) -> None:
    steps, warmup = 18000, 4000
    fig, (left, right) = plt.subplots(1, 2, figsize=(12, 4.2))
    noam = schedule_values(schedules.noam, steps, warmup_steps=warmup, d_model=512, scale=1.0)
    left.plot(range(1, steps + 1), noam)
    peak = max(noam)
    left.annotate(f"peak {peak:.2e} at step {warmup}", (warmup, peak), (warmup + 2500, peak),
                  arrowprops={"arrowstyle": "->"})
    left.set(title="Noam, warmup 4000, d_model 512 (optim.lr=1 scheduler.scale=1)",
             xlabel="step", ylabel="learning rate")
    curves = {
        "noam / inverse_sqrt (warmup 4000)": schedule_values(schedules.warmup_inverse_sqrt, steps,
                                                             warmup_steps=warmup),
        "cosine (warmup 4000, total 18000)": schedule_values(schedules.warmup_cosine, steps,
                                                             warmup_steps=warmup, total_steps=steps),
        "linear (warmup 4000)": schedule_values(schedules.linear_warmup, steps, warmup_steps=warmup),
        "exponential (tau 2000)": schedule_values(schedules.exponential_warmup, steps, tau=2000),
        "untuned exponential (beta2 .999: tau 1000)": schedule_values(
            schedules.untuned_exponential, steps, betas=(0.9, 0.999)),
        "untuned linear (beta2 .999: 2000 steps)": schedule_values(
            schedules.untuned_linear, steps, betas=(0.9, 0.999)),
        "none / constant": schedule_values(schedules.constant, steps),
    }
    for label, values in curves.items():
        right.plot(range(1, steps + 1), values, label=label)
    right.set(title="All schedules, as multiples of optim.lr", xlabel="step",
              ylabel="learning rate / optim.lr")
    right.legend(fontsize=8, loc="lower right")
    for ax in (left, right):
        ax.grid(alpha=0.3)
    save(fig, out)


def plot_posenc(out: Path) -> None:
    code = sinusoids(2000, 512)
    code = torch.cat([code[:, 0::2], code[:, 1::2]], dim=1)  # sines, then cosines
    fig, ax = plt.subplots(figsize=(10, 4.5))
    image = ax.imshow(code.T.numpy(), aspect="auto", cmap="RdBu", origin="lower", interpolation="nearest")
    ax.set(title="Sinusoidal positional encoding: 2000 positions, d_model 512 (model.pos=sinusoidal)",
           xlabel="position", ylabel="frequency index: sin (0-255), then cos (256-511)")
    fig.colorbar(image, ax=ax)
    save(fig, out)


def first_dev_utterance(config) -> Path:
    manifest = Path(config.data.dev_manifest)
    if not manifest.is_file():
        raise SystemExit(f"error: {manifest}: not found; pass --audio FILE")
    entry = json.loads(manifest.read_text().splitlines()[0])
    return (manifest.parent / entry["audio_filepath"]).resolve()


def capture_attention(model, wave: torch.Tensor, lengths: torch.Tensor) -> dict:
    """Decode greedily, then rerun the decoder on its own output, keeping attention weights.

    The encoder's last layer is kept as the mean of its heads; each cross-attention layer
    keeps all heads, (heads, tokens, frames).
    """
    weights: dict[str, torch.Tensor] = {}

    def keep(name):
        def hook(module, args, kwargs):
            kwargs = {k: v for k, v in kwargs.items() if k != "cache"}  # a full pass: no cache
            weights[name] = module.attention_weights(*args, **kwargs)[0]
        return hook

    handles = [model.encoder.blocks[-1].attn.register_forward_pre_hook(keep("encoder"),
                                                                       with_kwargs=True)]
    handles += [block.cross_attn.register_forward_pre_hook(keep(f"cross {i + 1}"), with_kwargs=True)
                for i, block in enumerate(model.decoder.blocks)]
    with torch.no_grad():
        ids = decode(model, wave, lengths, DecodingOptions(beam_size=1))[0]
        memory, memory_lengths = model.encode(wave, lengths)
        model.decoder(torch.tensor([[BOS_ID, *ids]]), memory, memory_lengths)
        feats, _ = model.frontend.raw(wave, lengths)
    for handle in handles:
        handle.remove()
    weights["encoder"] = weights["encoder"].mean(0)
    return {"ids": ids, "feats": feats[0], **weights}


def monotonicity(weights: torch.Tensor) -> float:
    """Correlation of token order and attended frame, for weights (tokens, frames).

    The attended frame of a token is the centroid of its attention; 1 means the tokens
    attend further into the audio in step with their order (a monotonic alignment), 0 no order.
    """
    centroid = weights @ torch.arange(weights.shape[1], dtype=weights.dtype)
    order = torch.arange(len(centroid), dtype=weights.dtype)
    centroid, order = centroid - centroid.mean(), order - order.mean()
    scale = centroid.norm() * order.norm()
    return float((centroid * order).sum() / scale) if scale > 0 else 0.0


def plot_attention(model_dir: Path, audio: Path | None, out: Path) -> None:
    try:
        model, tokenizer, config = load_model_dir(model_dir)
        audio = audio or first_dev_utterance(config)
        wave = load_audio(audio, model.frontend.cfg.sample_rate)
    except (ModelDirError, AudioError) as err:
        raise SystemExit(f"error: {err}") from None
    if model.dims.attention != "full":
        raise SystemExit("error: attention maps need a model with model.attention=full")
    got = capture_attention(model.eval(), wave[None], torch.tensor([len(wave)]))
    pieces = [tokenizer.sp.id_to_piece(i) for i in got["ids"]] + ["<eos>"]
    layers = [name for name in got if name.startswith("cross")]
    heads = model.dims.n_head
    fig = plt.figure(figsize=(3.2 * heads, 6.5 + 3 * len(layers)))
    grid = fig.add_gridspec(2 + len(layers), heads, height_ratios=[1, 1.6] + [1.3] * len(layers))
    ax = fig.add_subplot(grid[0, :])
    ax.imshow(got["feats"].T.numpy(), aspect="auto", origin="lower", cmap="magma")
    ax.set(title=f"{audio.name}: log-mel spectrogram -> \"{tokenizer.decode(got['ids'])}\"",
           xlabel="frame (10 ms)", ylabel="mel bin")
    ax = fig.add_subplot(grid[1, :])
    ax.imshow(got["encoder"].numpy(), aspect="auto", origin="lower", cmap="viridis")
    ax.set(title="encoder self-attention, last layer, mean of heads",
           xlabel=f"key position ({model.encoder.stride * 10} ms)", ylabel="query position")
    for row, name in enumerate(layers, start=2):
        for head in range(heads):
            weights = got[name][head, : len(pieces)]
            score = monotonicity(weights[:-1])  # the words, not <eos>
            print(f"cross-attention layer {name.split()[1]} head {head + 1}: "
                  f"monotonicity {score:+.2f}")
            ax = fig.add_subplot(grid[row, head])
            ax.imshow(weights.numpy(), aspect="auto", cmap="viridis")
            ax.set_yticks(range(len(pieces)), pieces if head == 0 else [], fontsize=7)
            ax.set_title(f"cross-attn layer {name.split()[1]} head {head + 1}: "
                         f"monotonic {score:+.2f}", fontsize=9)
            ax.set_xlabel(f"encoder position ({model.encoder.stride * 10} ms)", fontsize=8)
    save(fig, out)


def plot_loss(model_dir: Path, out: Path) -> None:
    path = model_dir / METRICS
    if not path.is_file():
        raise SystemExit(f"error: {path}: not found (not a trained model directory?)")
    metrics = json.loads(path.read_text())
    epochs = metrics["epochs"]
    fig, ax = plt.subplots(figsize=(8, 4.2))
    curve = metrics.get("loss_curve", [])
    if curve:
        ax.plot([p["step"] for p in curve], [p["train_loss"] for p in curve], alpha=0.5,
                label="train loss (per logging window)")
    steps = [e["step"] for e in epochs]
    ax.plot(steps, [e["train_loss"] for e in epochs], "o-", label="train loss (epoch mean)")
    ax.plot(steps, [e["dev_loss"] for e in epochs], "s-", label="dev loss")
    ax.set(xlabel="step", ylabel="loss (joint attention + CTC)", yscale="log",
           title=f"{model_dir}: training and dev loss")
    wer = ax.twinx()
    wer.plot(steps, [100 * e["dev_wer"] for e in epochs], "d:", color="C3", label="dev WER")
    wer.set_ylabel("dev WER (%)")
    lines = ax.get_legend_handles_labels()
    more = wer.get_legend_handles_labels()
    ax.legend(lines[0] + more[0], lines[1] + more[1], fontsize=8)
    ax.grid(alpha=0.3)
    save(fig, out)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    sub = parser.add_subparsers(dest="figure", required=True)
    for name, default in (("lr", "lr_schedules.png"), ("posenc", "positional_encoding.png"),
                          ("attention", "attention.png"), ("loss", "loss_curves.png")):
        p = sub.add_parser(name)
        p.add_argument("--out", type=Path, default=DOCS / default)
        if name in ("attention", "loss"):
            p.add_argument("--model", type=Path, required=True, help="a trained model directory")
        if name == "attention":
            p.add_argument("--audio", type=Path, help="default: the model's first dev utterance")
    args = parser.parse_args()
    torch.set_num_threads(1)
    if args.figure == "lr":
        plot_lr(args.out)
    elif args.figure == "posenc":
        plot_posenc(args.out)
    elif args.figure == "attention":
        plot_attention(args.model, args.audio, args.out)
    else:
        plot_loss(args.model, args.out)


if __name__ == "__main__":
    main()

"""Collect an ablation multirun: a Markdown table and a figure of the training-loss curves.

    python -m recipes.ablation.report exp/ablation

Reads every OUT/runs/*/config.yaml and metrics.json (what `asr.train` wrote), writes
OUT/results.md and OUT/loss_curves.png.
"""

import argparse
import json
import math
from pathlib import Path

from omegaconf import OmegaConf

from asr.checkpoint import atomic_write, save_text


def schedule_name(scheduler) -> str:
    name = scheduler["_target_"].rsplit(".", 1)[-1]
    if name == "constant":
        return "none"
    return f"{name} (warmup {scheduler.warmup_steps})" if "warmup_steps" in scheduler else name


def collect(out: Path) -> list[dict]:
    runs = []
    for run in sorted((out / "runs").iterdir()):
        if not (run / "metrics.json").is_file():
            print(f"warning: {run}: no metrics.json (run unfinished?), left out")
            continue
        cfg = OmegaConf.load(run / "config.yaml")
        metrics = json.loads((run / "metrics.json").read_text())
        curve = metrics.get("loss_curve", [])
        last = [p["train_loss"] for p in curve[-3:]]
        runs.append({"run": run.name, "scheduler": schedule_name(cfg.scheduler),
                     "norm": cfg.model.norm, "pos": cfg.model.pos, "curve": curve,
                     "final_loss": sum(last) / len(last) if last else math.nan,
                     "dev_loss": metrics["epochs"][-1]["dev_loss"],
                     "dev_wer": metrics["epochs"][-1]["dev_wer"], "steps": metrics["steps"]})
    norms = ["pre", "post", "tfixup"]
    return sorted(runs, key=lambda r: (r["scheduler"], norms.index(r["norm"]), r["pos"]))


def table(runs: list[dict]) -> str:
    lines = ["| scheduler | norm | pos | steps | final train loss | dev loss | dev WER |",
             "|---|---|---|---:|---:|---:|---:|"]
    for r in runs:
        lines.append(f"| {r['scheduler']} | {r['norm']} | {r['pos']} | {r['steps']} | "
                     f"{r['final_loss']:.3f} | {r['dev_loss']:.3f} | {100 * r['dev_wer']:.1f}% |")
    return "\n".join(lines) + "\n"


def plot(runs: list[dict], path: Path) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    norms = sorted({r["norm"] for r in runs}, key=["pre", "post", "tfixup"].index)
    schedules = sorted({r["scheduler"] for r in runs})
    fig, axes = plt.subplots(1, len(norms), figsize=(4.5 * len(norms), 3.6), sharey=True)
    for ax, norm in zip(list(getattr(axes, "flat", [axes])), norms, strict=True):
        for r in (r for r in runs if r["norm"] == norm):
            color = f"C{schedules.index(r['scheduler'])}"
            style = "-" if r["pos"] == "sinusoidal" else "--"
            ax.plot([p["step"] for p in r["curve"]], [p["train_loss"] for p in r["curve"]],
                    color=color, linestyle=style, label=f"{r['scheduler']}, {r['pos']}")
        ax.set_title(f"norm={norm}")
        ax.set_xlabel("step")
        ax.set_yscale("log")
        ax.grid(alpha=0.3)
    first = list(getattr(axes, "flat", [axes]))[0]
    first.set_ylabel("training loss (mean of 10 steps)")
    first.legend(fontsize=7)
    fig.tight_layout()
    atomic_write(path, lambda f: fig.savefig(f, format="png", dpi=110))
    plt.close(fig)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("out", type=Path, help="the ablation's output folder (holds runs/)")
    args = parser.parse_args()
    if not (args.out / "runs").is_dir():
        raise SystemExit(f"error: {args.out / 'runs'}: not found (run recipes/ablation/run.sh)")
    runs = collect(args.out)
    if not runs:
        raise SystemExit(f"error: {args.out / 'runs'}: no finished run")
    text = table(runs)
    save_text(text, args.out / "results.md")
    plot(runs, args.out / "loss_curves.png")
    print(text + f"\nwrote {args.out / 'results.md'} and {args.out / 'loss_curves.png'}")


if __name__ == "__main__":
    main()

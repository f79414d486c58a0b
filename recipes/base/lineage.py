"""Where a base model came from, as its TRAINING.json records it, so that a round can be traced
back through its parents and replayed:

    commit        the code's git commit when it was shipped (`code_modified`: tracked files
                  differed from it)
    parent        the weights the run started from (trainer.init_from) and their model.pt's
                  sha256, which training read when the run started (asr/training/state.py)
    experiment    the Hydra experiment and every override the run was started with (from Hydra's
                  record in the run directory, RUN/hydra/*/.hydra/overrides.yaml), and those of
                  each resumed part that differ (`resumed_with`)
    seeds         the training seed and each corpus's
    corpora       the prepared corpora whose speech the training manifest holds: each one's
                  folder, seed, hours and text digest (its .done, recipes/base/prepare.py)
    date          when it was shipped (UTC)

The hours heard, this round's and in all, are TRAINING.json's `audio_hours_heard` and
`total_audio_hours_heard` (recipes/base/ship.py's `trained_for`).
"""

import json
import subprocess
from datetime import datetime, timezone
from pathlib import Path

import yaml
from omegaconf import DictConfig

from asr.checkpoint import CONFIG, load_config
from asr.data import iter_manifest

ROOT = Path(__file__).resolve().parents[2]
DONE = ".done"  # a prepared corpus's settings (recipes/base/prepare.py)
HYDRA_OVERRIDES = Path(".hydra") / "overrides.yaml"


def lineage(model_dir: Path, corpus: Path, run: dict) -> dict:
    """The lineage fields of TRAINING.json for the weights in `model_dir`, trained on `corpus`;
    `run`: the metrics.json of the run that made them (`recipes.base.ship.run_metrics`)."""
    config = load_config(model_dir / CONFIG)
    parts = hydra_overrides(run_dir(model_dir))
    corpora = corpora_of(corpus)
    first = parts[0] if parts else None
    return {"commit": git_commit(), "code_modified": code_modified(),
            "parent": {"path": run.get("init_from"), "sha256": run.get("init_sha256")},
            "experiment": experiment(first), "overrides": first,
            "resumed_with": [part for part in parts[1:] if part != first],
            "seeds": {"training": training_seed(config),
                      "corpora": [c["seed"] for c in corpora]},
            "corpora": corpora,
            "date": datetime.now(timezone.utc).isoformat(timespec="seconds")}


def run_dir(model_dir: Path) -> Path:
    """The run directory of a model directory (an averaged model's: its run's)."""
    return model_dir.parent if model_dir.name == "averaged" else model_dir


def hydra_overrides(run: Path) -> list[list[str]]:
    """The command-line overrides of each part of the run (first the one that started it), as
    Hydra recorded them; none for a run that Hydra did not start."""
    parts = []
    for path in sorted(run.glob(f"hydra/*/{HYDRA_OVERRIDES}")):
        try:
            overrides = yaml.safe_load(path.read_text(encoding="utf-8"))
        except (OSError, UnicodeDecodeError, yaml.YAMLError):
            continue
        if isinstance(overrides, list) and all(isinstance(o, str) for o in overrides):
            parts.append(overrides)
    return parts


def experiment(overrides: list[str] | None) -> str | None:
    """The experiment an override list names (the last `experiment=`), None without one."""
    named = [o.split("=", 1)[1] for o in overrides or [] if o.startswith("experiment=")]
    return named[-1] if named else None


def training_seed(config: DictConfig) -> int | None:
    seed = config.get("seed")
    return seed if isinstance(seed, int) else None


def corpora_of(corpus: Path) -> list[dict]:
    """The prepared corpora whose synthetic speech `corpus`'s training manifest holds (a merged
    corpus's sources, `recipes.base.merge`; or the corpus itself), in the order first heard, with
    their settings."""
    folders: list[Path] = []
    manifest = corpus / "train.jsonl"
    for utterance in iter_manifest(manifest):
        path = Path(utterance.audio_filepath)
        if "wavs" in path.parts:
            folder = Path(*path.parts[:path.parts.index("wavs")])
            if folder not in folders:
                folders.append(folder)
    return [corpus_settings(folder) for folder in folders]


def corpus_settings(folder: Path) -> dict:
    """A prepared corpus's folder, seed, hours and text digest (None where it has no record)."""
    try:
        done = json.loads((folder / DONE).read_text(encoding="utf-8"))
    except (OSError, ValueError):
        done = {}
    done = done if isinstance(done, dict) else {}
    return {"path": str(folder), "seed": done.get("seed"), "hours": done.get("hours"),
            "text": done.get("text"), "voices": len(done.get("voices") or [])}


def git_commit() -> str | None:
    """The commit the code is at (None outside a git checkout)."""
    return _git("rev-parse", "HEAD")


def code_modified() -> bool | None:
    """Whether tracked files differ from that commit (None outside a git checkout)."""
    status = _git("status", "--porcelain", "--untracked-files=no")
    return None if status is None else bool(status)


def _git(*args: str) -> str | None:
    try:
        done = subprocess.run(["git", "-C", str(ROOT), *args], capture_output=True, text=True,
                              timeout=30)
    except (OSError, subprocess.TimeoutExpired):
        return None
    return done.stdout.strip() if done.returncode == 0 else None

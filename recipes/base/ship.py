"""Ship a trained base model inside the package: `asr/models/base`.

    python -m recipes.base.ship --model exp/base --corpus data/base --into-package \
        [--calibration exp/base/candidate]
    python -m recipes.base.ship --model exp/base --corpus data/base --out exp/base/shipped
    python -m recipes.base.ship --kept-from exp/base --out ~/.cache/asr/base/latest   # exit 0: yes

Weight matrices are stored in fp16 (half the bytes; decoding casts them back to fp32, and the
transcripts of the test manifests are checked against the fp32 model's before anything is
written), everything else (biases, norms, CMVN statistics) in fp32; `--int8` stores them in
int8 with one fp32 scale per row instead (half of fp16's bytes again; loading dequantises them,
`asr.checkpoint.dequantize_int8`, and the same check against fp32 runs). Beside the weights go the
config, the tokenizer, the default voice-command grammar (so `asr-demo` and `asr-intents`
work with no grammar given), its calibration for that grammar when one is given (the
intents.json that recipes/base/score.sh wrote beside the scored candidate) and TRAINING.json:
what the model was trained on, for how many steps and hours of audio (as its training recorded
them), its lineage (the code's commit, the parent weights' sha256, the experiment and overrides,
the seeds, the corpora and the date: recipes/base/lineage.py) and the command that continues its
training.

    python -m recipes.base.ship --lm exp/base_lm --lm-weight 0.75 --corpus data/base \
        [--model exp/base] --into-package

With `--lm` a language model (`recipes/base/lm.sh`) goes into the folder's lm/ (in fp16, the
same check against fp32 at beam 5) and its config's `decode.lm` and `decode.lm_weight` name it,
so free transcription fuses it by default; without `--model` it is added to the folder that is
shipped already. The folder's calibration is then chosen again, on the manifest its
intents.json names: the grammar search checks its sentence against the free transcript, which
the language model changes.

The package's folder (the default --out) is written only with --into-package; any --out must be
new, empty or a shipped model (shipping replaces it), and neither the model shipped nor a
folder holding it; the fp16 check needs at least MIN_CHECKED test utterances.
"""

import argparse
import json
import os
import shutil
import sys
import tempfile
from collections.abc import Iterator
from contextlib import contextmanager
from itertools import islice
from pathlib import Path

import torch
from omegaconf import OmegaConf

from asr.assistant.intents.calibration import calibrated_confidence, grammar_digest
from asr.assistant.intents.scoring import calibrate_model
from asr.checkpoint import (
    CALIBRATION_FILE,
    CONFIG,
    METRICS,
    TOKENIZER,
    TRAINING,
    WEIGHTS,
    ModelDirError,
    load_config,
    load_model_dir,
    load_torch,
    quantize_int8,
    save_text,
    save_torch,
)
from asr.data import ManifestError, iter_manifest
from asr.lm import LM_FILE, LM_FOLDER, load_lm
from asr.models import FOLDER, package_problem
from asr.training.pretrained import HEARD
from asr.transcriber import Transcriber
from recipes.base.lineage import lineage

MAX_BYTES = 25 << 20  # the package's budget for shipped weights
DEFAULT_GRAMMAR = Path(__file__).resolve().parents[1] / "voice_commands" / "commands.yaml"
CHECKED_UTTERANCES = 40  # per test manifest: fp16 must write what fp32 writes
MIN_CHECKED = 20  # utterances in all: a check of fewer (none: no test manifests) proves nothing
RECORDED = ("corpus_train_hours", "audio_hours_heard", HEARD)  # TrainState.heard, in metrics.json
CONTINUE = ("bash recipes/base/run.sh  # trains on from the latest round "
            "(recipes/base/README.md)")


def half_weights(state: dict[str, torch.Tensor]) -> dict[str, torch.Tensor]:
    """Matrices (and embeddings) in fp16, vectors and buffers as they are."""
    return {name: value.half() if value.is_floating_point() and value.dim() >= 2 else value
            for name, value in state.items()}


def trained_for(model_dir: Path) -> dict:
    """Epochs and steps of the run that made a model directory (an averaged model's: its run's)
    and the hours of audio its weights heard, as training recorded them in its metrics.json."""
    try:
        epochs = run_metrics(model_dir).get("epochs") or []
        recorded = json.loads((model_dir / METRICS).read_text())
        hours = {key: float(recorded[key]) for key in RECORDED}
    except (OSError, ValueError, KeyError, TypeError, AttributeError):
        sys.exit(f"error: {model_dir / METRICS}: no record of the hours of audio its weights "
                 f"heard ({', '.join(RECORDED)}, which asr.train writes)")
    return {"epochs": len(epochs), "steps": epochs[-1].get("step") if epochs else None,
            "corpus_train_hours": round(hours["corpus_train_hours"], 2),
            "audio_hours_heard": round(hours["audio_hours_heard"], 1),
            "total_audio_hours_heard": round(hours[HEARD], 1)}


def run_metrics(model_dir: Path) -> dict:
    """The metrics of the run that made a model directory (an averaged model's: its run's)."""
    metrics = json.loads((model_dir / METRICS).read_text())
    if "averaged_epochs" in metrics and (model_dir.parent / METRICS).is_file():
        metrics = json.loads((model_dir.parent / METRICS).read_text())
    return metrics


def last_step(model_dir: Path) -> int | None:
    """The step the run that made a model directory ended at (None before its first epoch)."""
    epochs = run_metrics(model_dir).get("epochs") or [{}]
    return epochs[-1].get("step")


def checked_files(corpus: Path, at_least: int = 0) -> list[str]:
    """The audio the fp16 check decodes: the first CHECKED_UTTERANCES of each test manifest
    of `corpus`; a ValueError when they are fewer than `at_least` (the command line asks for
    MIN_CHECKED)."""
    files = []
    try:
        for manifest in sorted(corpus.glob("test*.jsonl")):
            files += [u.audio_filepath
                      for u in islice(iter_manifest(manifest), CHECKED_UTTERANCES)]
    except OSError as err:
        raise ValueError(f"{corpus}: cannot read its test manifests ({err.strerror or err})"
                         ) from None
    if len(files) < at_least:
        raise ValueError(f"{corpus}: {len(files)} utterances in test*.jsonl manifests; the "
                         f"fp16 check needs at least {at_least} (--corpus names the prepared "
                         "corpus the model trained on)")
    return files


def same_transcripts(fp32: Path, fp16: Path, corpus: Path,
                     fp32_options: dict | None = None) -> tuple[int, int]:
    """(utterances, differing transcripts) over `checked_files(corpus)`, the fp32 model
    (with `fp32_options`) against its fp16 copy: greedy decoding, or beam 5 with a language
    model (`fp32_options` naming the fp32 one)."""
    files = checked_files(corpus)
    beam = {"beam_size": 5 if fp32_options else 1}
    texts = []
    for directory, options in ((fp32, {**beam, **(fp32_options or {})}), (fp16, beam)):
        transcriber = Transcriber.from_pretrained(str(directory), "cpu", vad=None, **options)
        texts.append([t.text for t in transcriber.transcribe(files)])
    return len(files), sum(a != b for a, b in zip(*texts, strict=True))


def claim_out(out: Path, model_dir: Path | None, into_package: bool) -> None:
    """A ValueError unless shipping may replace `out`: new, empty, or a shipped model (its
    TRAINING.json), never the model shipped or a folder holding it or in it (the run's
    checkpoint and metrics went with it), and in the installed package only with
    `into_package`. Checked before any work: shipping deletes what `out` held."""
    problem = None if into_package else package_problem(out, "a shipped model")
    if problem is not None:
        raise ValueError(f"--out {out} {problem}; or pass --into-package to ship it there")
    if model_dir is not None:
        here, model = Path(os.path.realpath(out)), Path(os.path.realpath(model_dir))
        if here.is_relative_to(model) or model.is_relative_to(here):
            raise ValueError(f"--out {out} is --model {model_dir} or holds it or lies in it: "
                             "shipping replaces --out, which would delete the run; pick "
                             "another --out")
    if out.is_symlink() or (out.exists() and not out.is_dir()):
        raise ValueError(f"--out {out} is a link or not a folder; name a folder")
    if out.is_dir() and any(out.iterdir()) and not (out / TRAINING).is_file():
        raise ValueError(f"--out {out} holds files but no shipped model ({TRAINING}); shipping "
                         "would delete them: pick a new or empty --out")


def calibration_for(scored: Path, out: Path) -> str:
    """The scored candidate's calibration (SCORED/intents.json), as the shipped folder's: it
    must hold for the default grammar, which the folder ships as its own grammar.yaml."""
    path = scored / CALIBRATION_FILE
    if not path.is_file():
        raise ModelDirError(f"{path}: no such calibration")
    value = calibrated_confidence(scored, DEFAULT_GRAMMAR)  # a bad file: a one-line error
    saved = json.loads(path.read_text())
    if saved.get("grammar_sha256") != grammar_digest(DEFAULT_GRAMMAR):
        raise ModelDirError(f"{path}: calibrated for another grammar than {DEFAULT_GRAMMAR}")
    return placed({**saved, "min_confidence": value}, out)


def placed(calibration: dict, out: Path) -> str:
    """A calibration as the shipped folder `out` keeps it: naming the grammar file there."""
    return json.dumps({**calibration, "grammar": str(out / "grammar.yaml")}, indent=1) + "\n"


def ship(model_dir: Path, corpus: Path, out: Path, command: str,
         calibration: Path | None = None, lm: tuple[Path, float] | None = None,
         int8: bool = False) -> dict:
    """Write the shipped folder next to `out` (its matrices in fp16, or in int8 with per-row
    scales: `asr.checkpoint.quantize_int8`), check it, then put it in place."""
    model, _, _ = load_model_dir(model_dir)
    kind = "int8" if int8 else "fp16"
    with staged(out) as staging:
        stored = quantize_int8 if int8 else half_weights
        save_torch(stored(model.state_dict()), staging / WEIGHTS)
        for name in (CONFIG, TOKENIZER):
            shutil.copyfile(model_dir / name, staging / name)
        shutil.copyfile(DEFAULT_GRAMMAR, staging / "grammar.yaml")
        if calibration is not None:
            save_text(calibration_for(calibration, out), staging / CALIBRATION_FILE)
        size = (staging / WEIGHTS).stat().st_size
        if size > MAX_BYTES:
            raise SystemExit(f"error: {model_dir}: {size / 2**20:.1f} MB of weights in {kind}, over the "
                             f"{MAX_BYTES >> 20} MB the package ships")
        checked, differ = same_transcripts(model_dir, staging, corpus)
        info = {**trained_for(model_dir), **lineage(model_dir, corpus, run_metrics(model_dir)),
                "source": str(model_dir), "corpus": str(corpus), "continue_with": command,
                "weights_mb": round(size / 2**20, 2),
                f"{kind}_check": {"utterances": checked, "transcripts_differing": differ}}
        if lm is not None:
            info["lm"] = add_lm(staging, *lm, corpus, out)
        save_text(json.dumps(info, indent=1) + "\n", staging / TRAINING)
    return info


def ship_lm(out: Path, lm_dir: Path, weight: float, corpus: Path) -> dict:
    """Add a language model to the shipped folder `out` (a checked copy takes its place)."""
    if not (out / TRAINING).is_file():
        raise ModelDirError(f"{out}: not a shipped model (no {TRAINING})")
    with staged(out) as staging:
        shutil.copytree(out, staging, dirs_exist_ok=True, ignore=shutil.ignore_patterns(LM_FOLDER))
        info = json.loads((staging / TRAINING).read_text())
        info["lm"] = add_lm(staging, lm_dir, weight, corpus, out)
        save_text(json.dumps(info, indent=1) + "\n", staging / TRAINING)
    return info


@contextmanager
def staged(out: Path) -> Iterator[Path]:
    """A new folder beside `out` to write the shipped model into; it replaces `out` when the
    block ends well, and is deleted either way."""
    out.parent.mkdir(parents=True, exist_ok=True)  # e.g. ~/.cache/asr/base on a fresh machine
    staging = Path(tempfile.mkdtemp(dir=out.parent, prefix=f".{out.name}."))
    staging.chmod(0o755)  # package data, readable by all (mkdtemp makes it the owner's alone)
    try:
        yield staging
        if out.exists():
            shutil.rmtree(out)
        staging.rename(out)
    finally:
        shutil.rmtree(staging, ignore_errors=True)


def add_lm(folder: Path, lm_dir: Path, weight: float, corpus: Path, out: Path) -> dict:
    """The language model in `lm_dir` into FOLDER/lm in fp16, named by the config's
    `decode.lm` at `weight`, and the folder's calibration chosen again with it (`recalibrate`;
    FOLDER becomes `out`); what it is, as TRAINING.json records it."""
    _, tokenizer, _ = load_model_dir(folder)
    load_lm(lm_dir, tokenizer)  # it must be a language model of this tokenizer
    saved = load_torch(lm_dir / LM_FILE)
    (folder / LM_FOLDER).mkdir()
    save_torch({**saved, "state_dict": half_weights(saved["state_dict"])},
               folder / LM_FOLDER / LM_FILE)
    shutil.copyfile(folder / TOKENIZER, folder / LM_FOLDER / TOKENIZER)
    config = load_config(folder / CONFIG)
    config.decode.lm, config.decode.lm_weight = LM_FOLDER, weight
    save_text(OmegaConf.to_yaml(config), folder / CONFIG)
    checked, differ = same_transcripts(folder, folder, corpus, {"lm": str(lm_dir.resolve())})
    return {"source": str(lm_dir), "weight": weight, "min_confidence": recalibrate(folder, out),
            "dev_loss": (saved.get("metrics") or {}).get("dev_loss"),
            "mb": round((folder / LM_FOLDER / LM_FILE).stat().st_size / 2**20, 2),
            "fp16_check": {"utterances": checked, "transcripts_differing": differ}}


def recalibrate(folder: Path, out: Path) -> float | None:
    """The grammar search's threshold chosen again on the manifest FOLDER/intents.json names
    (None: the folder holds no calibration). The grammar search checks its sentence against
    the free transcript, which fuses the language model: a threshold chosen without it does
    not hold with it."""
    path = folder / CALIBRATION_FILE
    if not path.is_file():
        return None
    manifest = json.loads(path.read_text()).get("manifest")
    if not isinstance(manifest, str) or not Path(manifest).is_file():
        raise ModelDirError(f"{path}: calibrated on {manifest!r}, which is not here; the threshold "
                            "must be chosen again with the language model")
    try:
        chosen, _ = calibrate_model(folder, manifest, into_package=True)  # out: claim_out
    except ManifestError as err:
        raise ModelDirError(f"{path}: {err}") from None
    save_text(placed(json.loads(path.read_text()), out), path)  # calibrate_model wrote it anew
    return chosen


def shipped_from(shipped: Path, run_dir: Path) -> bool:
    """Whether the shipped folder's weights are the run's: the run has ended and its result
    is kept, so training more means a new run, not resuming this one."""
    try:
        training = json.loads((shipped / TRAINING).read_text())
        steps = last_step(run_dir)
    except (OSError, ValueError):
        return False
    return came_from(training, run_dir, steps)


def came_from(training: object, run_dir: Path, steps: int | None) -> bool:
    """Whether a TRAINING.json's weights are the run's, which ended at `steps`: its source is
    the run directory or a folder in it (such as its averaged weights), and its steps are the
    run's. Every round trains in the same directory (exp/base), so the path alone would take
    an earlier round's weights for this one's."""
    try:
        kept = Path(training["source"]).resolve()
        kept_steps = training["steps"]
    except (KeyError, TypeError):
        return False
    return steps is not None and kept_steps == steps and run_dir.resolve() in (kept, kept.parent)


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--model", type=Path, help="the trained model directory")
    parser.add_argument("--corpus", type=Path, help="the prepared corpus it trained on")
    parser.add_argument("--out", type=Path, default=FOLDER / "base")
    parser.add_argument("--continue-with", default=CONTINUE,
                        help="the command that trains these weights on, for TRAINING.json")
    parser.add_argument("--calibration", type=Path, metavar="SCORED",
                        help="ship the intents.json that score.sh wrote into SCORED")
    parser.add_argument("--lm", type=Path, metavar="LM",
                        help="ship this language model (asr.train_lm) with the model, fused by "
                             "default into free transcription; without --model: add it to --out")
    parser.add_argument("--lm-weight", type=float, default=0.75,
                        help="its weight (decode.lm_weight; recipes/base/lm.sh picks it on dev)")
    parser.add_argument("--into-package", action="store_true",
                        help="--out may be the installed package's model (the default --out): "
                             "every user of the install gets what is shipped")
    parser.add_argument("--int8", action="store_true",
                        help="store the matrices in int8 with per-row scales (half of fp16's "
                             "bytes), checked against fp32 as fp16 is")
    parser.add_argument("--kept-from", type=Path, metavar="RUN",
                        help="ship nothing: exit 0 when --out's weights came from the run "
                             "directory RUN, 1 when not")
    args = parser.parse_args(argv)
    if args.kept_from is not None:
        sys.exit(0 if shipped_from(args.out, args.kept_from) else 1)
    if args.corpus is None or (args.model is None and args.lm is None):
        parser.error("--corpus and --model (or --lm) are required")
    if not 0 < args.lm_weight <= 100:
        parser.error(f"--lm-weight must be in (0, 100], got {args.lm_weight}")
    lm = None if args.lm is None else (args.lm, args.lm_weight)
    try:
        claim_out(args.out, args.model, args.into_package)
        checked_files(args.corpus, MIN_CHECKED)
        if args.model is None:
            info = ship_lm(args.out, *lm, args.corpus)
        else:
            info = ship(args.model, args.corpus, args.out, args.continue_with, args.calibration,
                        lm, args.int8)
    except ValueError as err:  # ModelDirError and ManifestError among them
        sys.exit(f"error: {err}")
    print(json.dumps(info, indent=1))


if __name__ == "__main__":
    main()

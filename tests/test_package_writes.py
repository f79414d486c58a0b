"""Nothing writes into the installed package's models (`asr.models.FOLDER`): every command and
entry point that writes is pointed at the real package folder (its name `base`, its path, a
link to it, a folder in it), is refused in one line, and every file of the package has the
same MD5 afterwards. A copy would not do: the check is on where the package is installed."""

import hashlib
import json
import sys
from pathlib import Path

import pytest

from asr.assistant.intents import calibrate_model, save_calibration
from asr.assistant.intents.cli import main as intents_main
from asr.checkpoint import ModelDirError
from asr.evaluate import main as evaluate_main
from asr.export import main as export_main
from asr.models import FOLDER
from asr.train import cli as train_cli
from asr.training.options import TrainingError
from asr.transcribe import main as transcribe_main
from helpers import fsdd_file, train_config, write_manifest
from recipes.base.grow import main as grow_main
from recipes.base.ship import main as ship_main

pytestmark = pytest.mark.tier("slow")

PKG = FOLDER / "base"
HINT = f"copy the model first: cp -r {PKG} mine/ (then use mine)"


def package_md5s() -> dict[str, str]:
    """Every file of the package's models folder -> its MD5 (names included)."""
    return {str(p.relative_to(FOLDER)): hashlib.md5(p.read_bytes()).hexdigest()
            for p in sorted(FOLDER.rglob("*")) if p.is_file()}


@pytest.fixture(scope="module")
def before() -> dict[str, str]:
    return package_md5s()


@pytest.fixture
def inputs(tmp_path) -> dict[str, Path]:
    wav = fsdd_file(3)
    manifest = write_manifest(tmp_path / "m.jsonl", [(wav, "three")])
    (tmp_path / "link").symlink_to(PKG)
    return {"wav": wav, "manifest": manifest, "link": tmp_path / "link", "tmp": tmp_path}


def commands(i: dict[str, Path]) -> dict[str, tuple]:
    """name -> (the entry point, its arguments)."""
    m, link = str(i["manifest"]), str(i["link"])
    return {
        "calibrate, no --model": (intents_main, ["calibrate", "--manifest", m]),
        "calibrate --model base": (intents_main, ["calibrate", "--model", "base", "--manifest", m]),
        "calibrate --model PKG": (intents_main, ["calibrate", "--model", str(PKG), "--manifest", m]),
        "calibrate --model a link to PKG": (intents_main,
                                            ["calibrate", "--model", link, "--manifest", m]),
        "evaluate --json into PKG": (intents_main, ["evaluate", "--manifest", m, "--json",
                                                    str(PKG / "report.json")]),
        "asr-evaluate --json into PKG": (evaluate_main, ["--manifest", m, "--json",
                                                         f"{link}/scores.json"]),
        "asr-transcribe --output-dir PKG": (transcribe_main, [
            "--output-dir", str(PKG), "--output-format", "txt", str(i["wav"])]),
        "export --model PKG (into PKG/onnx)": (export_main, ["--model", str(PKG), "--format",
                                                             "onnx"]),
        "export --out a link to PKG": (export_main, ["--model", str(PKG), "--format", "onnx",
                                                     "--out", f"{link}/onnx"]),
        "grow --out PKG/grown": (grow_main, ["--model", "base", "--out", str(PKG / "grown"),
                                             "--encoder-layers", "12"]),
        "grow --out FOLDER": (grow_main, ["--model", "base", "--out", str(FOLDER),
                                          "--encoder-layers", "12"]),
        "ship (its default --out)": (ship_main, ["--model", str(i["tmp"]), "--corpus",
                                                 str(i["tmp"])]),
        "ship --out a link to PKG": (ship_main, ["--model", str(i["tmp"]), "--corpus",
                                                 str(i["tmp"]), "--out", link]),
        "ship --lm into the shipped folder": (ship_main, ["--lm", str(i["tmp"]), "--corpus",
                                                          str(i["tmp"])]),
        "train trainer.out_dir=PKG": (train_cli, [f"trainer.out_dir={PKG}"]),
        "train trainer.out_dir=a link to PKG": (train_cli, [f"trainer.out_dir={link}/run"]),
        "train hydra.run.dir in PKG": (train_cli, [f"trainer.out_dir={i['tmp']}/run",
                                                   f"hydra.run.dir={PKG}/hydra"]),
    }


NAMES = list(commands({k: Path() for k in ("wav", "manifest", "link", "tmp")}))


def run(entry, argv: list[str], monkeypatch) -> int | str | None:
    """The status (or exit message) of a CLI's main, or of `asr.train`'s cli (argv in sys.argv)."""
    monkeypatch.setattr(sys, "argv", ["prog", *argv])
    try:
        return entry() if entry is train_cli else entry(argv)
    except SystemExit as stop:
        return stop.code


@pytest.mark.parametrize("name", NAMES)
def test_no_command_writes_into_the_package(name, inputs, before, monkeypatch, capsys):
    """`asr-intents calibrate` with no --model rewrote PKG/intents.json (0.2790 -> 0.0382 for
    every user of the install); a refused asr.train left PKG/hydra/<time>/train.log."""
    entry, argv = commands(inputs)[name]
    status = run(entry, argv, monkeypatch)
    captured = capsys.readouterr()
    message = (status if isinstance(status, str) else captured.err).strip()
    assert status not in (0, None), (name, captured)
    assert len(message.splitlines()) == 1 and HINT in message, message
    assert "inside the installed package's models" in message
    assert package_md5s() == before


def test_the_api_refuses_the_package_too(inputs, before):
    """calibrate_model and save_calibration, and a Trainer whose out_dir is the package."""
    for call in (lambda: calibrate_model("base", inputs["manifest"]),
                 lambda: save_calibration(inputs["link"], None, 0.5)):
        with pytest.raises(ModelDirError, match="inside the installed package's models"):
            call()
    from asr.train import Trainer
    with pytest.raises(TrainingError, match="trainer.out_dir is inside the installed package"):
        Trainer(train_config(inputs["tmp"], inputs["manifest"], f"trainer.out_dir={PKG}"))
    assert package_md5s() == before
    assert round(json.loads((PKG / "intents.json").read_text())["min_confidence"], 4) == 0.279


def test_ship_claims_its_out_before_deleting_it(tmp_path, capsys):
    """`recipes.base.ship --out DIR` deleted DIR whatever it held: --out equal to --model took
    the run's checkpoint and metrics; with no test manifests the fp16 check passed on 0."""
    from recipes.base.ship import MIN_CHECKED
    run, notes, corpus = tmp_path / "run", tmp_path / "notes", tmp_path / "corpus"
    for folder in (run, notes, corpus):
        folder.mkdir()
    (run / "checkpoint.pt").write_bytes(b"state")
    (notes / "todo.txt").write_text("keep me")
    for out, model, problem in [
            (run, run, f"--out {run} is --model {run} or holds it or lies in it"),
            (tmp_path, run, f"--out {tmp_path} is --model {run} or holds it or lies in it"),
            (notes, run, f"--out {notes} holds files but no shipped model (TRAINING.json)"),
            (tmp_path / "new", run, f"{corpus}: 0 utterances in test*.jsonl manifests; the fp16 "
                                    f"check needs at least {MIN_CHECKED}")]:
        with pytest.raises(SystemExit) as stop:
            ship_main(["--model", str(model), "--corpus", str(corpus), "--out", str(out)])
        assert problem in str(stop.value.code) and str(stop.value.code).startswith("error: ")
    assert (run / "checkpoint.pt").read_bytes() == b"state"
    assert (notes / "todo.txt").read_text() == "keep me" and not (tmp_path / "new").exists()

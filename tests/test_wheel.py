"""The package as a user installs it: a wheel, a fresh virtual environment, no checkout.

The wheel is built from a copy of the sources (so the checkout gets no build folders) without
build isolation or an index, and installed without dependencies into a new venv outside the
checkout; a .pth file lets that venv see the dependencies already installed for the tests
(torch and the rest are not downloaded again). Every console script then runs from an empty
folder: `--help`, the training config, a real (one-epoch) training, a transcription written
as files, and the voice-command demo on a recording.
"""

import ast
import json
import os
import re
import shutil
import subprocess
import sys
import sysconfig
import zipfile
from pathlib import Path

import pytest
import tomllib

from helpers import ROOT, write_manifest
from test_transcriber import long_recording

pytestmark = [pytest.mark.tier("slow"), pytest.mark.data]

SOURCES = ("pyproject.toml", "README.md", "LICENSE", "asr", "conf")


def build_wheel(tmp: Path) -> Path:
    source = tmp / "source"
    source.mkdir()
    for name in SOURCES:
        if (ROOT / name).is_dir():
            shutil.copytree(ROOT / name, source / name,
                            ignore=shutil.ignore_patterns("__pycache__"))
        else:
            shutil.copy(ROOT / name, source / name)
    subprocess.run([sys.executable, "-m", "pip", "wheel", "--no-deps", "--no-build-isolation",
                    "--no-index", "--quiet", "--wheel-dir", str(tmp / "dist"), str(source)],
                   check=True, capture_output=True, timeout=300)
    [wheel] = (tmp / "dist").glob("*.whl")
    return wheel


def fresh_venv(tmp: Path, wheel: Path) -> Path:
    """A venv with the wheel installed and this interpreter's packages visible behind it."""
    venv = tmp / "venv"
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(venv)], check=True,
                   timeout=120)
    python = venv / "bin" / "python"
    site = subprocess.run([python, "-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])"],
                          check=True, capture_output=True, text=True).stdout.strip()
    ours = {sysconfig.get_paths()[key] for key in ("purelib", "platlib")}
    Path(site, "_test_dependencies.pth").write_text("".join(f"{p}\n" for p in sorted(ours)))
    subprocess.run([sys.executable, "-m", "pip", "--python", str(python), "install", "--no-deps",
                    "--no-index", "--quiet", str(wheel)], check=True, capture_output=True,
                   timeout=300)
    return venv


@pytest.fixture(scope="module")
def installed(tmp_path_factory) -> dict:
    tmp = tmp_path_factory.mktemp("wheel")
    wheel = build_wheel(tmp)
    venv = fresh_venv(tmp, wheel)
    work = tmp / "work"  # an empty folder, nowhere near the checkout
    work.mkdir()
    env = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "PYTHONHOME")}

    def run(*args: str, check: bool = True) -> subprocess.CompletedProcess:
        command = [str(venv / "bin" / args[0]), *args[1:]]
        result = subprocess.run(command, cwd=work, env=env, capture_output=True, text=True,
                                timeout=300)
        if check:
            assert result.returncode == 0, (args, result.stderr[-2000:])
        return result

    return {"wheel": wheel, "venv": venv, "work": work, "env": env, "run": run}


def test_wheel_holds_the_library_and_its_configs_only(installed):
    names = zipfile.ZipFile(installed["wheel"]).namelist()
    configs = sorted(n.removeprefix("asr/conf/") for n in names if n.startswith("asr/conf/"))
    assert configs == sorted(str(p.relative_to(ROOT / "conf"))
                             for p in (ROOT / "conf").rglob("*.yaml"))
    assert "asr/conf/experiment/voice_commands.yaml" in names
    # every module of the source tree, subpackages (asr/assistant) included
    modules = sorted(n for n in names if n.endswith(".py") and not n.startswith("asr/conf/"))
    assert modules == sorted(str(p.relative_to(ROOT)) for p in (ROOT / "asr").rglob("*.py"))
    assert sorted({n.split("/")[0] for n in names if "dist-info" not in n}) == ["asr"]
    shipped = {str(p.relative_to(ROOT)) for p in (ROOT / "asr" / "models").rglob("*")
               if p.is_file() and "__pycache__" not in p.parts}
    assert shipped <= set(names), sorted(shipped - set(names))  # the base model's lm/ too
    assert any(n.endswith(".dist-info/licenses/LICENSE") for n in names)
    where = installed["run"]("python", "-c", "import asr; print(asr.__file__); print(asr.CONF_DIR)")
    module, conf = where.stdout.splitlines()
    assert module == str(installed["venv"] / "lib" / f"python{sys.version_info.major}."
                         f"{sys.version_info.minor}" / "site-packages" / "asr" / "__init__.py")
    assert conf == str(Path(module).parent / "conf")


@pytest.mark.subprocess
def test_every_console_script_answers_help(installed):
    entry_points = zipfile.ZipFile(installed["wheel"]).read(
        next(n for n in zipfile.ZipFile(installed["wheel"]).namelist()
             if n.endswith("entry_points.txt"))).decode()
    scripts = [line.split(" = ")[0] for line in entry_points.splitlines() if " = " in line]
    assert sorted(scripts) == ["asr-demo", "asr-evaluate", "asr-intents", "asr-train",
                               "asr-train-lm", "asr-transcribe", "asr-wake", "asr-wyoming"]
    running = [subprocess.Popen([installed["venv"] / "bin" / script, "--help"], text=True,
                                cwd=installed["work"], env=installed["env"],
                                stdout=subprocess.PIPE, stderr=subprocess.PIPE)
               for script in scripts]  # at once: each spends seconds importing torch
    for script, process in zip(scripts, running, strict=True):
        out, err = process.communicate(timeout=300)
        assert process.returncode == 0, (script, err)
        assert ("powered by Hydra" if script == "asr-train" else "usage:") in out, script


def test_train_config_composes_from_the_package(installed):
    job = installed["run"]("asr-train", "experiment=voice_commands", "--cfg", "job").stdout
    assert "speed:\n      enabled: false\n      factors:\n      - 0.9" in job  # the experiment's block
    bad = installed["run"]("asr-train", "model=huge", check=False)
    assert bad.returncode == 1 and "Traceback" not in bad.stderr
    assert bad.stderr.splitlines()[-1].startswith("hint: config groups: data=base|cathy|fsdd|")


def test_train_transcribe_and_demo_without_a_checkout(installed, overfit_model):
    model_dir, entries, run_info = overfit_model
    run, work = installed["run"], installed["work"]
    manifest = write_manifest(work / "train.jsonl", entries)
    trained = run("asr-train", f"data.train_manifest={manifest}", f"data.dev_manifest={manifest}",
                  f"trainer.out_dir={work / 'mine'}", "model=tiny", "tokenizer.vocab_size=40",
                  "trainer.max_epochs=1", "trainer.progress=false", "trainer.num_threads=2")
    assert str(work / "mine") in trained.stdout
    assert all((work / "mine" / name).is_file() for name in ("model.pt", "config.yaml",
                                                              "tokenizer.model"))

    audio = work / "two.wav"
    long_recording([entries[5], entries[6]], audio)
    run("asr-transcribe", "--model", str(model_dir), "--output-format", "all",
        "--output-dir", "out", "--word-timestamps", str(audio))
    assert sorted(p.name for p in (work / "out").iterdir()) == [
        f"two.{ext}" for ext in ("json", "srt", "tsv", "txt", "vtt")]
    assert (work / "out" / "two.txt").read_text() == f"{entries[5][1]}\n{entries[6][1]}\n"
    record = json.loads((work / "out" / "two.json").read_text())
    assert [[w["word"] for w in s["words"]] for s in record["segments"]] == [[entries[5][1]],
                                                                             [entries[6][1]]]

    grammar = work / "grammar.yaml"
    shutil.copy(ROOT / "recipes" / "voice_commands" / "commands.yaml", grammar)
    demo = run("asr-demo", "--input", str(audio), f"model_dir={model_dir}", f"grammar={grammar}",
               f"actions.home={work}", "device=cpu")
    lines = demo.stdout.splitlines()
    assert lines[-1] == "end of input: 2 utterances"
    assert [line.split('"')[1] for line in lines if line.startswith("  match: ")] == \
        [entries[5][1], entries[6][1]]


def _project() -> dict:
    return tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]


def test_the_index_page_has_its_metadata_and_live_links():
    """The README's links are relative, to files of the checkout (the project has no public home
    yet, so neither has pyproject a URL); authors are part of the page."""
    project = _project()
    assert project["authors"] and "urls" not in project
    links = re.findall(r"\]\(([^)\s]+)\)", (ROOT / "README.md").read_text())
    assert links and not [link for link in links if "speech-transformer-asr/" in link], links
    ours = [link.split("#")[0] for link in links if not link.startswith(("https://", "#"))]
    assert ours and all((ROOT / path).is_file() for path in ours), ours


def test_librosa_is_an_extra_the_package_never_imports():
    """The wheel required librosa, which no module of the installed package imports."""
    project = _project()
    assert not any(d.startswith("librosa") for d in project["dependencies"])
    extras = project["optional-dependencies"]
    assert all(any(d.startswith("librosa") for d in extras[name]) for name in ("recipes", "dev"))
    imported = {alias.name.split(".")[0] if isinstance(node, ast.Import) else node.module
                for path in (ROOT / "asr").rglob("*.py")
                for node in ast.walk(ast.parse(path.read_text()))
                if isinstance(node, ast.Import | ast.ImportFrom)
                for alias in node.names}
    assert "librosa" not in {name.split(".")[0] for name in imported if name}

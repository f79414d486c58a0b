"""Cases of the kinds round five added: writes into the installed package (every writer against
its real folder; its files' MD5s unchanged), recipe folders a merge or ship must not take,
spoilt synthesis-cache entries, a resume on changed data, number slots."""

import hashlib
import shutil
from pathlib import Path

from robustness.case import INTENTS, TRAIN, Cli, Work, case, run_cli
from robustness.train import _trainer


def _package() -> Path:
    from asr.models import FOLDER
    return FOLDER


def _md5s() -> dict[str, str]:
    return {str(p): hashlib.md5(p.read_bytes()).hexdigest()
            for p in sorted(_package().rglob("*")) if p.is_file()}


def _package_kept(make) -> object:
    """The writer `make(w, package base folder)` refused in one line, the package unchanged."""
    def run(w: Work) -> bool:
        before = _md5s()
        status, _, err = run_cli(make(w, _package() / "base"))
        message = err.strip()
        return status in (1, 2) and len(message.splitlines()) == 1 \
            and "copy the model first" in message and _md5s() == before
    return run


def _manifest(w: Work) -> str:
    return str(w.file("m.jsonl", f'{{"audio_filepath": "{w.clip}", "intent": null}}\n'))


case("package", "asr-intents calibrate, no --model", "ok")(_package_kept(
    lambda w, pkg: Cli(f"{INTENTS}.cli:main", ["calibrate", "--manifest", _manifest(w)])))
case("package", "asr-intents calibrate --model a link to the package", "ok")(_package_kept(
    lambda w, pkg: Cli(f"{INTENTS}.cli:main", [
        "calibrate", "--model", str((w.folder / "l").symlink_to(pkg) or w.folder / "l"),
        "--manifest", _manifest(w)])))
case("package", "asr-intents evaluate --json into the package", "ok")(_package_kept(
    lambda w, pkg: Cli(f"{INTENTS}.cli:main", ["evaluate", "--manifest", _manifest(w),
                                               "--json", str(pkg / "r.json")])))
case("package", "asr.export --model the package (into PKG/onnx)", "ok")(_package_kept(
    lambda w, pkg: Cli("asr.export:main", ["--model", str(pkg), "--format", "onnx"])))
case("package", "recipes.base.grow --out in the package", "ok")(_package_kept(
    lambda w, pkg: Cli("recipes.base.grow:main", ["--model", "base", "--out", str(pkg / "g"),
                                                  "--encoder-layers", "12"])))
case("package", "recipes.base.ship with its default --out", "ok")(_package_kept(
    lambda w, pkg: Cli("recipes.base.ship:main", ["--model", str(w.model), "--corpus",
                                                  str(w.folder)])))
case("package", "asr.train's Hydra run dir in the package", "ok")(_package_kept(
    lambda w, pkg: Cli(f"{TRAIN}:check_out_dir", [f"trainer.out_dir={w.folder}/run",
                                                  f"hydra.run.dir={pkg}/hydra"])))


def _merge_into_another_corpus(w: Work) -> bool:
    """merge --out another recipe's corpus: refused, its manifest kept."""
    for name, owner in (("a", "base"), ("b", "base"), ("other", "voice_commands")):
        (w.folder / name).mkdir()
        (w.folder / name / ".corpus").write_text(owner + "\n")
        (w.folder / name / ".done").write_text("{}\n")
        (w.folder / name / "train.jsonl").write_text(
            '{"audio_filepath": "a.wav", "duration": 1.0, "text": "a"}\n')
    kept = (w.folder / "other" / "train.jsonl").read_text()
    status, _, err = run_cli(Cli("recipes.base.merge:main", [
        str(w.folder / "a"), str(w.folder / "b"), "--out", str(w.folder / "other")]))
    return status == 1 and "not a base_merge corpus" in err \
        and (w.folder / "other" / "train.jsonl").read_text() == kept


case("recipe folders", "merge --out another recipe's corpus", "ok")(_merge_into_another_corpus)
case("recipe folders", "ship --out equal to --model")(lambda w: Cli(
    "recipes.base.ship:main", ["--model", str(w.model), "--corpus", str(w.folder), "--out",
                               str(w.model)]))


def _cache_entry_replaced(w: Work) -> bool:
    """A cache entry replaced by other speech is synthesised again, not served."""
    import os

    import numpy as np

    from recipes.common.synthesis import cache_path, draw_parameters, synthesize
    from recipes.common.voices import Voice
    if shutil.which("espeak-ng") is None:
        return True
    os.environ["ASR_TTS_CACHE"] = str(w.folder / "cache")
    voice = Voice("espeak-ng", "m3", "en-us")
    yes = synthesize(voice, "yes", np.random.default_rng(0))[0]
    synthesize(voice, "delete all my files", np.random.default_rng(0))
    path = cache_path(voice, "yes", draw_parameters(voice, np.random.default_rng(0)))
    shutil.copyfile(cache_path(voice, "delete all my files",
                               draw_parameters(voice, np.random.default_rng(0))), path)
    again, _, cached = synthesize(voice, "yes", np.random.default_rng(0))
    return not cached and np.array_equal(again, yes)


case("cache integrity", "an entry replaced by other speech", "ok", limit=30)(_cache_entry_replaced)


def _resume_on_other_data(w: Work):
    """One step, then a resume whose manifest has changed: a TrainingError line."""
    _trainer(w, w.folder / "r").fit()
    manifest = w.shared / "train.jsonl"
    changed = w.file("train.jsonl", manifest.read_text().splitlines()[0] + "\n")
    from asr.train import Trainer
    from helpers import train_config
    return Trainer(train_config(w.folder / "r", changed, "trainer.resume=true",
                                "trainer.max_steps=1", "trainer.max_epochs=1"))


case("train", "resume changes: trainer.resume=true on another manifest", limit=60)(_resume_on_other_data)


def _number_changed(w: Work) -> bool:
    """A grammar sentence whose number is not the one the free transcript says is refused."""
    from asr.assistant.intents.parser import IntentParser
    from asr.grammar import Grammar
    grammar = Grammar.from_yaml("context:\n  expressions:\n    timer:\n"
                                "      - \"set a timer for $pv.TwoDigitInteger:n minutes\"\n")
    parser = IntentParser(grammar, min_confidence=0.0)
    return parser.parse("set a timer for four minutes", free="set a timer for zero minutes"
                        ).name is None and parser.parse(
        "set a timer for four minutes", free="set a timer for four minutes").name == "timer"


case("number slots", "four minutes heard as zero minutes", "ok")(_number_changed)

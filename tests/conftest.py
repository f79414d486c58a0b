"""Shared fixtures: real recordings from ../shared/data and a tiny model trained on them; and
the tiers of the suite, marked from what each test does (`pytest_collection_modifyitems`):

- `train`: it trains a model (or uses a fixture that does);
- `subprocess`: it runs a program in a process of its own;
- `slow`: either of those, or a module whose every test costs seconds.

`pytest -m "not slow"` is the fast tier, for the edit-test loop; the whole suite (what CI runs)
is `bash tools/test.sh`.
"""

import atexit
import inspect
import json
import os
import shutil
import tempfile
from pathlib import Path

import pytest
import soundfile as sf
import torch
from hydra import compose, initialize_config_dir

from asr import CONF_DIR
from asr.config import register_configs

# The tests' synthesised speech goes to a cache of their own, empty at the start of the session,
# so that what a test says was synthesised or taken from the cache holds on any machine.
os.environ["ASR_TTS_CACHE"] = tempfile.mkdtemp(prefix="asr-tts-cache-")
atexit.register(shutil.rmtree, os.environ["ASR_TTS_CACHE"], True)

ROOT = Path(__file__).resolve().parents[1]
SHARED = ROOT.parent / "shared" / "data"
FSDD = SHARED / "fsdd" / "recordings"
COMMANDS = SHARED / "speech_commands"
DIGITS = "zero one two three four five six seven eight nine".split()


# Fixtures that train a model, and modules each of whose tests loads or synthesises for seconds.
TRAINED = {"overfit_model", "tiny_model", "command_model", "trained", "fsdd_out", "commands_out",
           "cathy_out"}
SLOW_MODULES = {"test_base", "test_base_model", "test_base_text", "test_bench", "test_bench_peers",
                "test_kokoro", "test_demo", "test_export", "test_gpu_check", "test_wheel",
                "test_fuzz", "test_fuzz_model_dirs", "test_shards", "test_techniques",
                "test_voice_commands"}


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    for item in items:
        try:
            source = inspect.getsource(item.function)
        except (AttributeError, OSError, TypeError):
            source = ""
        trains = bool(TRAINED & set(getattr(item, "fixturenames", ()))) or any(
            call in source for call in ("Trainer(", ".fit()", "train_main(", "prepare.main("))
        spawns = any(call in source for call in ("subprocess.", "Popen(", "run_process(",
                                                 "sys.executable"))
        if trains:
            item.add_marker(pytest.mark.train)
        if spawns:
            item.add_marker(pytest.mark.subprocess)
        if trains or spawns or item.module.__name__ in SLOW_MODULES:
            item.add_marker(pytest.mark.slow)


@pytest.fixture(autouse=True)
def _torch_threads():
    """Each test starts with the process's torch thread count: a benchmark that pins it (to
    measure on equal terms) must not change the numbers of the tests after it."""
    threads = torch.get_num_threads()
    yield
    torch.set_num_threads(threads)


def require_shared() -> None:
    if not FSDD.is_dir():
        pytest.fail(f"real speech missing: {SHARED} (see its README)")


def fsdd_file(digit: int, speaker: str = "jackson", take: int = 0) -> Path:
    return FSDD / f"{digit}_{speaker}_{take}.wav"


def write_manifest(path: Path, entries: list[tuple[Path, str]]) -> Path:
    """A NeMo-style manifest of (audio path, text) with durations read from the files."""
    with path.open("w") as f:
        for audio, text in entries:
            info = sf.info(str(audio))
            f.write(json.dumps({"audio_filepath": str(audio), "text": text,
                                "duration": info.frames / info.samplerate}) + "\n")
    return path


def small_real_set() -> list[tuple[Path, str]]:
    """Eight real utterances: four digits (FSDD, 8 kHz) and four command words (16 kHz)."""
    require_shared()
    digits = [(fsdd_file(d, speaker), DIGITS[d])
              for d, speaker in [(1, "jackson"), (4, "lucas"), (7, "nicolas"), (9, "yweweler")]]
    words = [(sorted((COMMANDS / w).glob("*.wav"))[0], w) for w in ("yes", "stop", "left", "go")]
    return digits + words


def noise_clips(start: int, count: int) -> list[Path]:
    """Real background noise (dishes, a cat, a tap, a bike...): Speech Commands' `_silence_`."""
    require_shared()
    return sorted((COMMANDS / "_silence_").glob("*.wav"))[start:start + count]


def train_config(tmp: Path, manifest: Path, *overrides: str):
    """The real training config (conf/train.yaml) with test overrides."""
    register_configs()
    with initialize_config_dir(config_dir=str(CONF_DIR), version_base="1.3"):
        return compose("train", overrides=[
            f"data.train_manifest={manifest}", f"data.dev_manifest={manifest}",
            f"trainer.out_dir={tmp / 'model'}", "trainer.progress=false", "model=tiny",
            *overrides])


TINY_GRAMMAR = """context:
  expressions:
    word: ["$word:word", "say $word:word"]
  slots:
    word: [yes, stop, left, go]
"""


def write_untrained_model(tmp: Path) -> Path:
    """A real (untrained) tiny model directory as training writes it, with a grammar.yaml, and
    its training manifest beside it (tmp/train.jsonl): bad inputs are tried on copies of it."""
    from omegaconf import open_dict

    from asr.checkpoint import build_model, load_model_dir, save_model_dir
    from asr.tokenizer import Tokenizer

    manifest = write_manifest(tmp / "train.jsonl", small_real_set()[:4])
    cfg = train_config(tmp, manifest)
    tokenizer = Tokenizer.train(["one", "four", "yes", "stop", "say", "left", "go"], 20)
    with open_dict(cfg):
        cfg.model.n_vocab, cfg.model.n_input = tokenizer.vocab_size, cfg.features.n_mels
    save_model_dir(tmp / "model", build_model(cfg), tokenizer, cfg)
    (tmp / "model" / "grammar.yaml").write_text(TINY_GRAMMAR)
    load_model_dir(tmp / "model")  # loads as written
    return tmp / "model"


def write_untrained_lm(model_dir: Path, out: Path) -> Path:
    """A tiny (untrained) language model directory for `model_dir`'s tokenizer."""
    import torch

    from asr.checkpoint import load_model_dir
    from asr.lm import LMDimensions, TokenLM, save_lm

    _, tokenizer, _ = load_model_dir(model_dir)
    torch.manual_seed(0)
    lm = TokenLM(LMDimensions(tokenizer.vocab_size, d_model=32, n_head=2, d_ff=64, n_layers=1))
    save_lm(out, lm, tokenizer, {})
    return out


@pytest.fixture(scope="session")
def overfit_model(tmp_path_factory) -> tuple[Path, list[tuple[Path, str]], dict]:
    """A tiny model trained until it has memorised eight real utterances, and that four
    clips of background noise (held apart from those tests use) hold no words."""
    from asr.train import Trainer

    tmp = tmp_path_factory.mktemp("overfit")
    entries = small_real_set()
    manifest = write_manifest(tmp / "train.jsonl", entries)
    with_noise = write_manifest(tmp / "train_noise.jsonl",
                                entries + [(clip, "") for clip in noise_clips(100, 4)])
    cfg = train_config(tmp, with_noise, f"data.dev_manifest={manifest}",
                       "trainer.max_epochs=200", "tokenizer.vocab_size=40",
                       "tokenizer.letters=false", "data.batch_size=8",
                       "scheduler.warmup_steps=20", "optim.lr=3e-3",
                       "features.freq_masks=0", "features.time_masks=0")
    state = Trainer(cfg).fit()
    return tmp / "model", entries, {"history": state.history, "manifest": manifest}

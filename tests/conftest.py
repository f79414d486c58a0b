"""Shared fixtures, tiny models trained on real recordings (what tests share besides fixtures
is in tests/helpers.py), and the tiers of the suite, marked from what each test does
(`pytest_collection_modifyitems`):

- `train`: it trains a model (or uses a fixture that does);
- `subprocess`: it runs a program in a process of its own;
- `slow`: either of those, or a module whose every test costs seconds;
- `bench`: it smoke-runs a benchmark (`benchmarks/`) at its smallest, so they keep working.

`pytest -m "not slow"` is the fast tier, for the edit-test loop; the whole suite (what CI runs)
is `bash tools/test.sh`.
"""

import atexit
import inspect
import os
import shutil
import tempfile
from pathlib import Path

import pytest
import torch

from helpers import (
    noise_clips,
    small_real_set,
    train_config,
    write_manifest,
)

# The tests' synthesised speech goes to a cache of their own, empty at the start of the session,
# so that what a test says was synthesised or taken from the cache holds on any machine.
os.environ["ASR_TTS_CACHE"] = tempfile.mkdtemp(prefix="asr-tts-cache-")
atexit.register(shutil.rmtree, os.environ["ASR_TTS_CACHE"], True)


# Fixtures that train a model, and modules each of whose tests loads or synthesises for seconds.
TRAINED = {"overfit_model", "tiny_model", "command_model", "trained", "fsdd_out", "commands_out",
           "cathy_out"}
SLOW_MODULES = {"test_base", "test_base_model", "test_base_text", "test_bench", "test_bench_peers",
                "test_kokoro", "test_demo", "test_export", "test_gpu_check", "test_wheel",
                "test_fuzz", "test_fuzz_model_dirs", "test_shards", "test_techniques",
                "test_voice_commands", "robustness.test_corpus"}


BENCH_MODULES = {"test_bench", "test_bench_peers", "test_gpu_check"}


def pytest_addoption(parser: pytest.Parser) -> None:
    parser.addoption("--whole-corpus", action="store_true",
                     help="run every case of the bad-input corpus (tests/robustness/), not only "
                          "the suite's")


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
        if item.module.__name__ in BENCH_MODULES:
            item.add_marker(pytest.mark.bench)


@pytest.fixture(autouse=True)
def _torch_threads():
    """Each test starts with the process's torch thread count: a benchmark that pins it (to
    measure on equal terms) must not change the numbers of the tests after it."""
    threads = torch.get_num_threads()
    yield
    torch.set_num_threads(threads)


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

"""Shared fixtures, tiny models trained on real recordings (what tests share besides fixtures
is in tests/helpers.py), and the tiers of the suite.

Every test module declares its tier, `pytestmark = pytest.mark.tier("fast")` or `"slow"`
(a module whose every test costs seconds), and what it needs (`pytest.mark.data`: the real
speech of ../shared/data; `pytest.mark.bench`: it smoke-runs a benchmark of `benchmarks/` at its
smallest). A test marks itself `train` (it trains a model) or `subprocess` (it runs a program in
a process of its own); one that uses a fixture of TRAINED is marked `train` here. Marked
`slow` (`pytest_collection_modifyitems`): every test of a slow module, and every `train` or
`subprocess` test. `tests/test_layout.py` checks that each module declares its tier.

`pytest -m "not slow"` is the fast tier, for the edit-test loop; the whole suite (what CI runs)
is `bash tools/test.sh`.
"""

import atexit
import os
import shutil
import tempfile
from pathlib import Path

import pytest
import torch

from helpers import (
    SHARED,
    noise_clips,
    small_real_set,
    train_config,
    write_manifest,
)

# The tests' synthesised speech goes to a cache of their own, empty at the start of the session,
# so that what a test says was synthesised or taken from the cache holds on any machine.
os.environ["ASR_TTS_CACHE"] = tempfile.mkdtemp(prefix="asr-tts-cache-")
atexit.register(shutil.rmtree, os.environ["ASR_TTS_CACHE"], True)


# Fixtures that train a model: a test that uses one is marked `train`.
TRAINED = {"overfit_model", "tiny_model", "command_model", "trained", "fsdd_out", "commands_out",
           "cathy_out"}
TIERS = ("fast", "slow")


def pytest_addoption(parser: pytest.Parser) -> None:
    parser.addoption("--whole-corpus", action="store_true",
                     help="run every case of the bad-input corpus (tests/robustness/), not only "
                          "the suite's")


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    for item in items:
        if TRAINED & set(getattr(item, "fixturenames", ())):
            item.add_marker(pytest.mark.train)
        tier = item.get_closest_marker("tier")
        slow = tier is None or tier.args != ("fast",)  # an undeclared module stays out of the fast tier
        if slow or item.get_closest_marker("train") or item.get_closest_marker("subprocess"):
            item.add_marker(pytest.mark.slow)
        if item.get_closest_marker("data") and not SHARED.is_dir():
            item.add_marker(pytest.mark.skip(reason=f"real speech missing: {SHARED} (see its README)"))


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

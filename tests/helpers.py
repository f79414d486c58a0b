"""What tests share: where the real recordings are, and small real things made from them (a
manifest, a training config, an untrained model directory and language model). Tests and the
bad-input corpus (tests/robustness/) import it; tests/conftest.py holds the fixtures.
"""

import json
import tracemalloc
from collections.abc import Callable
from pathlib import Path
from typing import TypeVar

import pytest
import soundfile as sf
from hydra import compose, initialize_config_dir

from asr import CONF_DIR
from asr.config import register_configs

ROOT = Path(__file__).resolve().parents[1]
SHARED = ROOT.parent / "shared" / "data"
FSDD = SHARED / "fsdd" / "recordings"
COMMANDS = SHARED / "speech_commands"
T = TypeVar("T")
DIGITS = "zero one two three four five six seven eight nine".split()


def require_shared() -> None:
    """Skip the test where the real speech is absent (a checkout without ../shared/data)."""
    if not FSDD.is_dir():
        pytest.skip(f"real speech missing: {SHARED} (see its README)")


def peak_memory(call: Callable[[], T]) -> tuple[T, int]:
    """What `call` returns, and the peak in bytes of the Python memory it held (tracemalloc):
    tests bound that, or a count, where a clock would measure the machine instead of the code."""
    tracemalloc.start()
    try:
        result = call()
        return result, tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()


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

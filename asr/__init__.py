"""asr: a readable Speech-Transformer speech recognizer.

Data flows one way: audio (`asr.audio`, `asr.stream`) -> features (`asr.features`) -> model
(`asr.model`) -> decoding (`asr.decoding`) -> text (`asr.text`, `asr.tokenizer`).
`asr.Transcriber` puts them together: `Transcriber.from_pretrained(dir).transcribe(path).text`.
The voice assistant (`asr.assistant`: grammar, intents, actions, demo) is an app built on this
toolkit; no other module of `asr` imports it.
"""

import os
from pathlib import Path

__version__ = "0.1.0"

_HERE = Path(__file__).resolve().parent
# Hydra's config folder (the top-level `conf/` of the source tree, one group per part of asr/):
# shipped inside the package as `asr/conf` by a wheel; in a checkout (an editable install, or
# `python -m asr.train` from the source tree) it is the one next to the code being run.
CONF_DIR = _HERE / "conf" if (_HERE / "conf").is_dir() else _HERE.parent / "conf"

# Idle OpenMP threads sleep instead of spinning, so a core another program holds does not stall
# torch at every operator (asr.threads). OpenMP reads it once, when torch loads: set it first.
WAIT_POLICY = "PASSIVE"
os.environ.setdefault("OMP_WAIT_POLICY", WAIT_POLICY)

__all__ = ["Transcriber", "Transcript", "Segment", "Word"]


def __getattr__(name: str):
    """`from asr import Transcriber` without importing torch for `import asr` alone."""
    if name in __all__:
        from asr import transcriber
        return getattr(transcriber, name)
    raise AttributeError(f"module 'asr' has no attribute {name!r}")

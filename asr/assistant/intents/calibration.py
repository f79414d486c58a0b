"""The grammar search's stored threshold: which grammar file a model reads, and the
`min_confidence` calibrated for it (DIR/intents.json, written by `asr-intents calibrate`)."""

import hashlib
import json
from pathlib import Path

from asr.checkpoint import CALIBRATION_FILE, GRAMMAR_FILE, ModelDirError, save_text
from asr.grammar import GrammarError
from asr.models import model_path, package_problem
from asr.untrusted import UntrustedInputError, first_line, read_text

from .parser import DEFAULT_MIN_CONFIDENCE


def grammar_file(model_dir: str | Path, grammar: str | Path | None = None) -> Path:
    """The grammar file given, else the model directory's grammar.yaml."""
    model_dir = model_path(model_dir)
    if grammar is not None and not str(grammar).strip():
        raise GrammarError("the grammar is an empty file name (leave it out for the model's own)")
    path = Path(grammar) if grammar else model_dir / GRAMMAR_FILE
    if not model_dir.is_dir():
        raise ModelDirError(f"{model_dir}: not a model directory")
    if not grammar and not path.is_file():
        raise GrammarError(f"{model_dir}: no {GRAMMAR_FILE} in the model directory; name a "
                           "grammar file (--grammar FILE, or grammar=FILE in the demo)")
    return path


def default_min_confidence(model_dir: str | Path, search: str,
                           grammar: str | Path | None = None) -> float:
    """The grammar search's calibrated threshold for this grammar (`calibrated_confidence`);
    0 for the free search, which refuses by similarity."""
    return calibrated_confidence(model_dir, grammar) if search == "grammar" else 0.0


def grammar_digest(grammar: str | Path) -> str:
    """What a calibration is tied to: the grammar file's bytes (its SHA-256, shortened), or
    the name of a grammar that is no file (Home Assistant's "ha:en")."""
    path = Path(grammar)
    return hashlib.sha256(path.read_bytes() if path.is_file() else str(grammar).encode()
                          ).hexdigest()[:16]


def calibrated_confidence(model_dir: str | Path, grammar: str | Path | None = None) -> float:
    """The grammar search's `min_confidence` calibrated for this model (DIR/intents.json) and
    this grammar file (None: the model's own), else DEFAULT_MIN_CONFIDENCE: a threshold found
    with one grammar says nothing of another. The file is untrusted: a bad one is a one-line
    error."""
    path = model_path(model_dir) / CALIBRATION_FILE
    if not path.is_file():
        return DEFAULT_MIN_CONFIDENCE
    try:
        saved = json.loads(read_text(path, 1 << 16, "the calibration"))
        value, digest = saved.get("min_confidence"), saved.get("grammar_sha256")
    except (UntrustedInputError, json.JSONDecodeError, AttributeError, RecursionError) as err:
        raise ModelDirError(f"{path}: not a calibration file ({first_line(err)})") from None
    if isinstance(value, bool) or not isinstance(value, int | float) or not 0 <= value <= 1:
        raise ModelDirError(f"{path}: min_confidence must be a number in [0, 1], got {value!r}")
    if digest is not None and grammar_digest(grammar_file(model_dir, grammar)) != digest:
        return DEFAULT_MIN_CONFIDENCE
    return float(value)


def save_calibration(model_dir: str | Path, grammar: str | Path | None, min_confidence: float,
                     into_package: bool = False, **facts: object) -> Path:
    """Write DIR/intents.json: the threshold, the grammar file it holds for and its digest,
    and `facts` (how it was chosen). Returns the file written. A model directory inside the
    installed package is refused (a ModelDirError) unless `into_package` (the shipping recipe,
    which writes the package's model)."""
    path = model_path(model_dir) / CALIBRATION_FILE
    problem = None if into_package else package_problem(path, "a calibration")
    if problem is not None:
        raise ModelDirError(f"{path} {problem}")
    chosen = grammar_file(model_dir, grammar)
    saved = {"min_confidence": min_confidence, "grammar": str(chosen),
             "grammar_sha256": grammar_digest(chosen), **facts}
    save_text(json.dumps(saved, indent=1) + "\n", path)
    return path

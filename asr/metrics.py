"""Word and character error rates with jiwer, on normalised text on both sides."""

from dataclasses import asdict, dataclass

import jiwer

from asr.text import normalize_text


@dataclass
class ErrorCounts:
    """Edit operations of a hypothesis against its reference (words or characters)."""

    substitutions: int
    deletions: int
    insertions: int
    reference_length: int

    @property
    def errors(self) -> int:
        return self.substitutions + self.deletions + self.insertions

    def as_dict(self) -> dict:
        return asdict(self)


def word_errors(reference: str, hypothesis: str) -> ErrorCounts:
    """Word-level edit counts; empty texts are allowed on either side."""
    return _counts(normalize_text(reference).split(), normalize_text(hypothesis).split())


def char_errors(reference: str, hypothesis: str) -> ErrorCounts:
    """Character-level edit counts over the normalised text, spaces included."""
    return _counts(list(normalize_text(reference)), list(normalize_text(hypothesis)))


def _counts(ref: list[str], hyp: list[str]) -> ErrorCounts:
    if not ref or not hyp:  # jiwer refuses empty sequences; the answer is plain counting
        return ErrorCounts(0, len(ref), len(hyp), len(ref))
    out = jiwer.process_words(" ".join(_encode(ref)), " ".join(_encode(hyp)))
    return ErrorCounts(out.substitutions, out.deletions, out.insertions, len(ref))


def _encode(tokens: list[str]) -> list[str]:
    """Make each token a space-free word so characters (spaces included) align like words."""
    return [t if t != " " else "<sp>" for t in tokens]


def error_rate(pairs: list[tuple[str, str]], unit: str = "word") -> float:
    """Corpus-level rate: total edits over total reference length, over (ref, hyp) pairs."""
    count = word_errors if unit == "word" else char_errors
    totals = [count(ref, hyp) for ref, hyp in pairs]
    length = sum(t.reference_length for t in totals)
    errors = sum(t.errors for t in totals)
    return errors / length if length else float(errors > 0)

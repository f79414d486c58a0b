"""Transcript -> Intent: the intent types and the parser of one grammar (the package
docstring says how the two searches decide)."""

import json
import math
from dataclasses import dataclass, field

from rapidfuzz.distance import Levenshtein

from asr.decoding import Hypothesis
from asr.grammar import Grammar
from asr.text import normalize_text
from asr.untrusted import check_fields, check_ranges

from .numbers import numbers_differ

SEARCHES = ("grammar", "free")
DEFAULT_THRESHOLD = 0.85  # free search: lowest similarity to a grammar sentence that counts
DEFAULT_MIN_CONFIDENCE = 0.3  # grammar search, uncalibrated: lowest exp(-garbage ratio) x agreement


@dataclass(frozen=True)
class Alternative:
    """One reading of the grammar search's n-best sentences and the probability the search
    gives it among them."""

    intent: str
    slots: dict[str, str]
    probability: float


@dataclass(frozen=True)
class Intent:
    """What an utterance asks for: the intent and slots, or None when it is refused."""

    name: str | None
    slots: dict[str, str] = field(default_factory=dict)
    confidence: float = 0.0  # grammar: exp(-garbage ratio) x agreement; free: similarity x acoustic
    text: str = ""  # the transcript, normalised (grammar search: the sentence it wrote)
    command: str = ""  # the grammar sentence it came closest to
    similarity: float = 0.0  # of the transcript to that sentence (1: it is one)
    acoustic: float | None = None  # the confidence's acoustic part (None: text only)
    alternatives: tuple[Alternative, ...] = ()  # grammar search: n-best readings, likeliest first
    slot_times: dict[str, tuple[float, float]] = field(default_factory=dict)  # seconds, from audio
    # What was said as a search free of the grammar wrote it, normalised: the free search's
    # transcript, the grammar search's free path (None without one: no CTC head, text typed).
    heard: str | None = None

    @property
    def understood(self) -> bool:
        return self.name is not None

    def describe(self) -> str:
        """`show_files kind=photos`: the intent and slots on one line."""
        slots = " ".join(f"{key}={value}" for key, value in self.slots.items())
        return " ".join(part for part in (self.name or "(none)", slots) if part)

    def is_right(self, expected: str | None, slots: dict[str, str]) -> bool:
        """Intent and every slot value as expected; a non-command (None) is right when refused."""
        if expected is None:
            return not self.understood
        return self.name == expected and self.slots == slots


@dataclass(frozen=True)
class IntentParser:
    """Transcript (and the search's `Hypothesis` of it) -> Intent, for one grammar."""

    grammar: Grammar
    search: str = "grammar"  # how the transcript was found (see the package docstring)
    threshold: float = DEFAULT_THRESHOLD  # free search: lowest similarity that counts
    min_confidence: float = DEFAULT_MIN_CONFIDENCE  # lowest (acoustic) confidence that counts

    def __post_init__(self) -> None:
        check_fields(self, "intents")
        check_ranges(self, "intents", threshold=(0, 1), min_confidence=(0, 1))
        if self.search not in SEARCHES:
            raise ValueError(f"intents.search must be one of {SEARCHES}, got {self.search!r}")
        if self.search == "free":
            self.grammar.check_matchable()  # refused now, not at the first utterance
        self.grammar.warn_shared_sentences()

    def parse(self, text: str, found: Hypothesis | None = None,
              nbest: list[tuple[str, float]] | None = None, free: str | None = None) -> Intent:
        """The intent of `text`; `found` (None: the text alone, as typed) carries the audio's
        scores, `nbest` the grammar search's sentences with their scores, best first, `free`
        the free transcript (what the model wrote without the grammar)."""
        if self.search == "free":
            return self._match(normalize_text(text), None if found is None else found.confidence)
        return self._read(normalize_text(text), found, nbest or [], free)

    def _read(self, sentence: str, found: Hypothesis | None, nbest: list[tuple[str, float]],
              free: str | None) -> Intent:
        heard = None if free is None else normalize_text(free)
        reading = self.grammar.parse(sentence)
        if reading is None:
            return Intent(None, text=sentence, heard=heard)
        ratio = 0.0 if found is None or found.garbage_ratio is None else found.garbage_ratio
        confidence = math.exp(-ratio) * agreement(sentence, free)
        if numbers_differ(sentence, heard):  # a slot's number is not the one heard: never it
            confidence = 0.0
        refused = confidence < self.min_confidence or confidence == 0.0
        return Intent(name=None if refused else reading.intent,
                      slots={} if refused else reading.values,
                      confidence=confidence, text=sentence, command=sentence, similarity=1.0,
                      acoustic=None if found is None else confidence,
                      alternatives=self._alternatives(nbest), heard=heard)

    def _alternatives(self, nbest: list[tuple[str, float]]) -> tuple[Alternative, ...]:
        """The n-best sentences' readings, each once, with the probability the search gives it
        among them (a softmax over their scores)."""
        if not nbest:
            return ()
        top = max(score for _, score in nbest)
        weights = [math.exp(score - top) for _, score in nbest]
        total = sum(weights)
        found: dict[str, tuple[str, dict[str, str], float]] = {}
        for (text, _), weight in zip(nbest, weights, strict=True):
            meanings = self.grammar.readings(text)  # a sentence two intents share: both
            for reading in meanings:
                key = json.dumps([reading.intent, reading.values], sort_keys=True)
                _, _, probability = found.get(key, (None, None, 0.0))
                found[key] = (reading.intent, reading.values,
                              probability + weight / total / len(meanings))
        readings = (Alternative(intent, slots, p) for intent, slots, p in found.values())
        return tuple(sorted(readings, key=lambda r: -r.probability))

    def _match(self, heard: str, acoustic: float | None) -> Intent:
        match = self.grammar.match(heard)
        if match is None:
            return Intent(None, text=heard, acoustic=acoustic, heard=heard)
        confidence = match.similarity * (1.0 if acoustic is None else acoustic)
        refused = match.similarity < self.threshold or (
            acoustic is not None and acoustic < self.min_confidence)
        return Intent(name=None if refused else match.intent,
                      slots={} if refused else match.slots, confidence=confidence, text=heard,
                      command=match.sentence, similarity=match.similarity, acoustic=acoustic,
                      heard=heard)


def agreement(sentence: str, free: str | None) -> float:
    """How far the free transcript agrees with the grammar sentence, in [0, 1]: 1 - their
    character edit distance / the longer one's length (1 without one). A search inside a
    grammar always finds a sentence; what the model writes free of it says whether that
    sentence was said. Where the model hears little (as on a long sentence over a telephone
    line) a short grammar sentence fits the frames cheaply, and only what it heard tells.
    The free transcript is the model's whole search (attention, CTC and its language model),
    not the CTC head's best path alone: that path writes other speech's sounds as near-words
    ("bip") which the grammar's nearest sentence ("up") still half agrees with, where the
    search writes words. Characters, not words: a one-word command heard with one letter off
    still mostly agrees."""
    if free is None:
        return 1.0
    return Levenshtein.normalized_similarity(sentence, normalize_text(free))

"""Audio -> Intent: a model's grammar search (or free transcript) read by an IntentParser."""

from dataclasses import replace
from pathlib import Path

from asr.audio import load_audio
from asr.decoding import Hypothesis
from asr.grammar import Grammar
from asr.transcriber import Transcriber

from .calibration import default_min_confidence, grammar_file
from .parser import DEFAULT_THRESHOLD, Intent, IntentParser


def free_text(transcriber: Transcriber, found: Hypothesis | None) -> str | None:
    """The free transcript's text: what the model wrote without the grammar, on the same
    audio (`DecodingTask.hypotheses`), which the grammar search's sentence is checked against."""
    if found is None or found.free_tokens is None:
        return None
    return transcriber.tokenizer.decode(found.free_tokens)


def nbest_texts(transcriber: Transcriber, found: Hypothesis | None) -> list[tuple[str, float]]:
    """The grammar search's n-best sentences as texts, each with its log-probability per
    token (EOS included) times the best one's length: the search ranks by the per-token
    score, and a total would favour short sentences over the one it chose."""
    if found is None or not found.nbest:
        return []
    tokens = len(found.nbest[0][0]) + 1
    return [(transcriber.tokenizer.decode(ids), score / (len(ids) + 1) * tokens)
            for ids, score in found.nbest]


class IntentRecognizer:
    """A model and a grammar: audio in, Intent out.

        recognizer = IntentRecognizer.from_pretrained("exp/voice_commands")
        recognizer.recognize(["command.wav"])[0].describe()   # "timer amount=five unit=minutes"
    """

    def __init__(self, transcriber: Transcriber, parser: IntentParser) -> None:
        self.transcriber, self.parser = transcriber, parser

    @classmethod
    def from_pretrained(cls, model_dir: str | Path, grammar: str | Path | None = None,
                        device: str = "cpu", search: str = "grammar",
                        threshold: float = DEFAULT_THRESHOLD,
                        min_confidence: float | None = None,
                        home: str | Path | None = None) -> "IntentRecognizer":
        """`min_confidence` None: `default_min_confidence`; `home`: the names of Home
        Assistant's sentences (`asr.grammar.hassil`), with `grammar="ha:en"`."""
        loaded = Grammar.load(grammar_file(model_dir, grammar), home)
        transcriber = Transcriber.from_pretrained(
            model_dir, device=device, grammar=loaded if search == "grammar" else None)
        if min_confidence is None:
            min_confidence = default_min_confidence(model_dir, search, grammar)
        return cls(transcriber, IntentParser(loaded, search, threshold, min_confidence))

    def recognize(self, audio: list) -> list[Intent]:
        """Each input (a path, or a waveform at the model's rate) is one utterance; with the
        grammar search and a CTC head, each slot understood also gets its time span."""
        rate = self.transcriber.sample_rate
        waves = [load_audio(a, rate) if isinstance(a, str | Path) else a for a in audio]
        align = self.parser.search == "grammar" and self.transcriber.network.has_ctc
        return [self._timed(self.parser.parse(text, found, nbest_texts(self.transcriber, found),
                                              free_text(self.transcriber, found)), found)
                for text, found in self.transcriber.transcribe_scored(waves, align)]

    def _timed(self, intent: Intent, found: Hypothesis) -> Intent:
        """The intent with each slot's span in seconds into the utterance: from the first
        frame of its first word to the frame where the word after it starts (or the end of
        the last word), by CTC forced alignment of the sentence found."""
        reading = self.parser.grammar.parse(intent.text) if intent.understood else None
        words = found.words if found is not None else None
        if reading is None or not words or len(words) != len(intent.text.split()):
            return intent
        step = self.transcriber.network.frame_seconds
        origin = self.transcriber.options.lead_in_ms / 1000
        edges = [w.start for w in words] + [words[-1].end]
        times = {span.name: (round(edges[span.start] * step - origin, 3),
                             round(edges[span.end] * step - origin, 3))
                 for span in reading.slots}
        return replace(intent, slot_times=times)

"""Speech -> intent: which command of a grammar an utterance means, and how surely.

    asr-intents --model exp/voice_commands command.wav ...        # intent and slots
    asr-intents --model DIR --json a.wav b.flac                  # one JSON per file
    asr-intents evaluate --model DIR --manifest commands.jsonl   # acceptance rate
    asr-intents calibrate --model DIR --manifest dev.jsonl       # the threshold

(`python -m asr.assistant.intents` is the same program, from a checkout.) The parts:
`parser` (the Intent types and the parser of one grammar), `recognizer` (audio -> Intent),
`calibration` (the grammar file and threshold a model directory holds), `scoring` (acceptance
and choosing the threshold on a manifest), `cli` (the command).

The grammar (`asr.grammar`: a Rhino context file, by default the model directory's
`grammar.yaml`) is searched in one of two ways (`search`):

- `grammar` (the default), as Rhino, Vosk or pocketsphinx with a grammar do: the decoder's
  beam search writes only the grammar's sentences (`decode.grammar`), and the intent and every
  slot are read off the winning sentence's path (`Grammar.parse`). Whether the utterance is a
  command at all is a likelihood ratio: the same audio scored against the CTC head's best
  free path, which may say anything (`asr.decoding.garbage_ratio`, per frame), and the
  agreement of the sentence with the free transcript, what the model writes on the same audio
  without the grammar (`agreement`); `confidence` is exp(-ratio) x agreement, and an
  utterance is refused below `min_confidence`. That threshold is
  calibrated on dev when the model is trained (`calibrate`, stored in the model directory's
  `intents.json`); a model without it uses DEFAULT_MIN_CONFIDENCE. The n-best sentences give
  the other readings with their probabilities (`Intent.alternatives`), so an application can
  ask "did you mean ...?" when two are close.
- `free`: the model transcribes freely and the transcript is matched to the nearest grammar
  sentence by word edit distance (`Grammar.match`); it counts when its similarity reaches
  `threshold` and the transcript's acoustic confidence (`asr.decoding.teacher_forced`)
  reaches `min_confidence`.

Slot values always come from the grammar, as it writes them, never from the transcript.

`evaluate` prints the command acceptance rate (Picovoice's metric) with a breakdown per
intent; `calibrate` picks the grammar search's `min_confidence` on a dev manifest and writes it
to DIR/intents.json (`scoring` says how).
"""

from .calibration import (
    calibrated_confidence,
    default_min_confidence,
    grammar_digest,
    grammar_file,
    save_calibration,
)
from .cli import main
from .parser import (
    DEFAULT_MIN_CONFIDENCE,
    DEFAULT_THRESHOLD,
    SEARCHES,
    Alternative,
    Intent,
    IntentParser,
    agreement,
)
from .recognizer import IntentRecognizer, free_text, nbest_texts
from .scoring import (
    acceptance,
    at_confidence,
    calibrate,
    calibrate_model,
    evaluate,
    read_commands,
    recognize_manifest,
)

__all__ = ["DEFAULT_MIN_CONFIDENCE", "DEFAULT_THRESHOLD", "SEARCHES", "Alternative", "Intent",
           "IntentParser", "IntentRecognizer", "acceptance", "agreement", "at_confidence",
           "calibrate", "calibrate_model", "calibrated_confidence", "default_min_confidence", "evaluate",
           "free_text", "grammar_digest", "grammar_file", "main", "nbest_texts", "read_commands",
           "recognize_manifest", "save_calibration"]

"""Cases: bad calls to the Python API (Transcriber, load_audio, the configs), and unusual but
valid inputs whose result must match the plain one (array layouts, int16 PCM, a bad file among
good ones)."""

import importlib
import os
from collections.abc import Callable

from helpers import COMMANDS
from robustness.case import ACTIONS, INTENTS, Work, case


def _transcriber(w: Work, **options):
    from asr.transcriber import Transcriber
    return Transcriber.from_pretrained(w.model, device="cpu", **options)


def _speech():
    import soundfile as sf
    return sf.read(str(COMMANDS / "yes" / sorted(os.listdir(COMMANDS / "yes"))[0]),
                   dtype="float32")[0]


def _same_as_mono(layout: Callable) -> Callable[[Work], bool]:
    def run(w: Work) -> bool:
        t = _transcriber(w, vad=None)
        mono = _speech()
        return t.transcribe(layout(mono)).text == t.transcribe(mono).text
    return run


case("api", "transcribe a (1, samples) array (torchaudio's layout)", "ok")(
    _same_as_mono(lambda x: x[None, :]))
case("api", "transcribe a (2, samples) tensor (torchaudio's stereo)", "ok")(
    _same_as_mono(lambda x: __import__("torch").from_numpy(x).expand(2, -1).clone()))
case("api", "transcribe a (samples, 2) array (soundfile's stereo)", "ok")(
    _same_as_mono(lambda x: __import__("numpy").stack([x, x], axis=1)))
case("api", "transcribe int16 PCM (scipy's WAV reader)", "ok")(
    _same_as_mono(lambda x: (x * 32768).round().astype("int16")))
for name, value in [("a 3-D array", lambda: __import__("numpy").zeros((2, 2, 2))),
                    ("a 2x2 array", lambda: __import__("numpy").zeros((2, 2))),
                    ("NaN samples", lambda: __import__("numpy").full(16000, float("nan"))),
                    ("an object", lambda: object()),
                    ("a dict", lambda: {"samples": [0.0]}),
                    ("python ints", lambda: [0, 1, 2] * 5000),
                    ("complex samples", lambda: __import__("numpy").zeros(16000, complex)),
                    ("an empty array", lambda: __import__("numpy").zeros(0))]:
    case("api", f"transcribe {name}")(lambda w, value=value: _transcriber(w).transcribe(value()))
case("api", "transcribe 400 s without a VAD (the long-audio cap)")(
    lambda w: _transcriber(w, vad=None).transcribe(__import__("numpy").zeros(400 * 16000, "f4")))
case("api", "transcribe_waves of 400 s")(
    lambda w: _transcriber(w).transcribe_waves([__import__("torch").zeros(400 * 16000)]))
case("api", "transcribe_scored of a NaN wave")(
    lambda w: _transcriber(w).transcribe_scored([__import__("torch").full((16000,), float("nan"))]))
case("api", "transcribe sample_rate=0")(
    lambda w: _transcriber(w).transcribe(_speech(), sample_rate=0))
case("api", "transcribe sample_rate=16000.5")(
    lambda w: _transcriber(w).transcribe(_speech(), sample_rate=16000.5))
case("api", "transcribe on_error='ignore'")(
    lambda w: _transcriber(w).transcribe([str(w.clip)], on_error="ignore"))
case("api", "from_pretrained(beam_size=0)")(lambda w: _transcriber(w, beam_size=0))
case("api", "from_pretrained(beam_size='3')")(lambda w: _transcriber(w, beam_size="3"))
case("api", "from_pretrained(batch_size=0)")(lambda w: _transcriber(w, batch_size=0))
case("api", "from_pretrained(device='cuda:7')")(
    lambda w: __import__("asr.transcriber").transcriber.Transcriber.from_pretrained(
        w.model, device="cuda:7"))
case("api", "from_pretrained(colour='red')")(lambda w: _transcriber(w, colour="red"))
case("api", "load_audio(clip, 0)")(
    lambda w: __import__("asr.audio").audio.load_audio(w.clip, 0))
case("api", "IntentRecognizer.recognize a 400 s array")(
    lambda w: importlib.import_module(INTENTS).IntentRecognizer.from_pretrained(
        w.model).recognize([__import__("numpy").zeros(400 * 16000, "f4")]))
case("api", "VADConfig(start_frames=100)")(
    lambda w: __import__("asr.vad").vad.VADConfig(start_frames=100))
case("api", "ActionsConfig(page_size=0)")(
    lambda w: importlib.import_module(ACTIONS).ActionsConfig(page_size=0))


def _keeps_the_good_ones(w: Work) -> bool:
    from asr.audio import AudioError
    results = _transcriber(w).transcribe([str(w.clip), str(w.folder / "missing.wav"),
                                          str(w.clip)], on_error="return")
    return isinstance(results[1], AudioError) and results[0].text == results[2].text


case("api", "transcribe([good, missing, good], on_error='return')", "ok")(_keeps_the_good_ones)

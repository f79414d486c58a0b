"""Cases: what the Python API is handed. Tensors of every make (requiring grad, views, other
byte orders, meta, sparse, nested) must be read for their samples or refused in one line;
samples far outside [-1, 1] (integer PCM passed as floats) must never transcribe silently to
garbage: an array is scaled back with a warning, a float file refused; arguments of the wrong
type (vad="yes", a flag "no") must be refused at the door, before the model is loaded."""

import os
import warnings
from collections.abc import Callable

from helpers import COMMANDS
from robustness.case import Work, case


def _transcriber(w: Work, **options):
    from asr.transcriber import Transcriber
    return Transcriber.from_pretrained(w.model, device="cpu", vad=None, **options)


def _speech():
    import soundfile as sf
    return sf.read(str(COMMANDS / "yes" / sorted(os.listdir(COMMANDS / "yes"))[0]),
                   dtype="float32")[0]


def _as_plain(make: Callable) -> Callable[[Work], bool]:
    """The input `make` builds from the speech must transcribe as the plain array does."""
    def run(w: Work) -> bool:
        t = _transcriber(w)
        speech = _speech()
        return t.transcribe(make(speech)).text == t.transcribe(speech).text
    return run


def _torch():
    import torch
    return torch


def _np():
    import numpy
    return numpy


case("api", "transcribe a tensor that requires grad", "ok")(
    _as_plain(lambda x: _torch().from_numpy(x).requires_grad_()))
case("api", "transcribe a tensor computed from one that requires grad", "ok")(
    _as_plain(lambda x: _torch().from_numpy(x).requires_grad_() * 1.0))
case("api", "transcribe a reversed view of a reversed array", "ok")(
    _as_plain(lambda x: x[::-1].copy()[::-1]))
case("api", "transcribe every other row of a (samples, 2) array", "ok")(
    _as_plain(lambda x: _np().stack([x, x, x, x], axis=1)[:, ::2]))
case("api", "transcribe big-endian float32 samples", "ok")(_as_plain(lambda x: x.astype(">f4")))


def _big_endian_pcm(w: Work) -> bool:
    t, pcm = _transcriber(w), (_speech() * 32768).round()
    return t.transcribe(pcm.astype(">i2")).text == t.transcribe(pcm.astype("<i2")).text


case("api", "transcribe big-endian int16 PCM", "ok")(_big_endian_pcm)
case("api", "transcribe a float16 tensor", "ok")(
    lambda w: isinstance(_transcriber(w).transcribe(_torch().from_numpy(_speech()).half()).text, str))


def _both_ways(w: Work) -> bool:
    """transcribe_waves and transcribe_scored take a tensor that requires grad too."""
    t = _transcriber(w)
    wave = _torch().from_numpy(_speech()).requires_grad_()
    return t.transcribe_waves([wave])[0] == t.transcribe_scored([wave])[0][0] \
        == t.transcribe(_speech()).text


case("api", "transcribe_waves and transcribe_scored of a tensor that requires grad", "ok")(
    _both_ways)

for name, value in [("a meta tensor", lambda: _torch().empty(16000, device="meta")),
                    ("a sparse tensor", lambda: _torch().zeros(16000).to_sparse()),
                    ("a nested tensor", lambda: _nested()),
                    ("a bool array", lambda: _np().zeros(16000, bool)),
                    ("a datetime array", lambda: _np().zeros(16000, "M8[s]")),
                    ("a structured array", lambda: _np().zeros(16000, [("a", "f4")])),
                    ("an array of strings", lambda: _np().array(["0.1"] * 16000)),
                    ("a quantized tensor", lambda: _torch().quantize_per_tensor(
                        _torch().zeros(16000), 0.1, 0, _torch().qint8)),
                    ("uint16 samples", lambda: _np().zeros(16000, _np().uint16)),
                    ("int64 samples", lambda: _np().zeros(16000, _np().int64))]:
    case("api", f"transcribe {name}")(lambda w, value=value: _transcriber(w).transcribe(value()))


def _nested():
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # torch's note that nested tensors are a prototype
        return _torch().nested.nested_tensor([_torch().zeros(16000)])


def _loud(make: Callable, expected: str, same: bool) -> Callable[[Work], bool]:
    """Loud samples must warn (`expected` in the message) and, when `same`, transcribe as
    the speech itself does."""
    def run(w: Work) -> bool:
        t = _transcriber(w)
        speech = _speech()
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            text = t.transcribe(make(speech)).text
        said = [str(c.message) for c in caught if issubclass(c.category, UserWarning)]
        return len(said) == 1 and expected in said[0] \
            and (not same or text == t.transcribe(speech).text)
    return run


case("api", "transcribe int16 PCM values passed as float32", "ok")(
    _loud(lambda x: (x * 32768).round().astype("f4"), "taken as 16-bit PCM", True))
case("api", "transcribe int32 PCM values passed as float64", "ok")(
    _loud(lambda x: (x * 2147483648).round().astype("f8"), "taken as 32-bit PCM", True))
case("api", "transcribe floats up to 1e6, not whole numbers", "ok")(
    _loud(lambda x: x * 1e6 + 0.5, "scaled to a peak of 1", False))
case("api", "transcribe floats up to 1e30", "ok")(
    _loud(lambda x: x * 1e30, "scaled to a peak of 1", False))


def _overs(w: Work) -> bool:
    """A peak of 1.9, overs a float recording may have, is taken as it is: no warning."""
    speech = _speech()
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        return isinstance(_transcriber(w).transcribe(speech / abs(speech).max() * 1.9).text, str)


case("api", "transcribe floats peaking at 1.9 (overs, taken as they are)", "ok")(_overs)


def _float_file(w: Work, scale: float):
    import soundfile as sf
    path = w.folder / "floats.wav"
    sf.write(path, _speech() * scale, 16000, subtype="FLOAT")
    return path


case("api", "transcribe a float WAV of int16 values")(
    lambda w: _transcriber(w).transcribe(_float_file(w, 32768.0)))
case("api", "transcribe a float WAV of samples near 1e30")(
    lambda w: _transcriber(w).transcribe(_float_file(w, 1e30)))
case("api", "load_audio of a float WAV of int16 values")(
    lambda w: __import__("asr.audio").audio.load_audio(_float_file(w, 32768.0), 16000))


def _from_pretrained(**arguments) -> Callable[[Work], object]:
    """Refused before the model is loaded: the directory given does not exist."""
    def run(w: Work):
        from asr.transcriber import Transcriber
        return Transcriber.from_pretrained(w.folder / "not loaded", **arguments)
    return run


for name, arguments in [("vad='yes'", {"vad": "yes"}), ("vad=True", {"vad": True}),
                        ("vad={'aggressiveness': 3}", {"vad": {"aggressiveness": 3}}),
                        ("batch_size=2.0", {"batch_size": 2.0}),
                        ("batch_size=True", {"batch_size": True}),
                        ("backend=['onnx']", {"backend": ["onnx"]}),
                        ("backend=None", {"backend": None}),
                        ("device=0", {"device": 0})]:
    case("api", f"from_pretrained({name})")(_from_pretrained(**arguments))
case("api", "transcribe(word_timestamps='no')")(
    lambda w: _transcriber(w).transcribe(_speech(), word_timestamps="no"))
case("api", "transcribe(show_progress='yes')")(
    lambda w: _transcriber(w).transcribe(_speech(), show_progress="yes"))
case("api", "Transcriber(options={'beam_size': 2})")(
    lambda w: (lambda t: type(t)(t.model, t.tokenizer, options={"beam_size": 2}))(_transcriber(w)))
case("api", "Transcriber(vad='default')")(
    lambda w: (lambda t: type(t)(t.model, t.tokenizer, vad="default"))(_transcriber(w)))

"""Bad inputs, tried as an attacker and a careless user would: a count of what went wrong.

    python tools/fuzz_report.py [--timeout 10] [--only SUBSTRING]

Builds a tiny untrained model directory (and a language model, a grammar, a 1 s clip of real
speech), then runs each case below against a fresh copy of them: a spoiled model directory
(config.yaml, weights, tokenizer, language model), bad command-line arguments to every CLI,
bad calls to the Python API, unusual but valid inputs whose result must still be right, and
training directories that must not be overwritten. Every CLI runs in-process through its
`main(argv)`, in a worker process that is killed and replaced when a case runs over the
timeout (a hang). Each case ends as one of:

    ok          the one-line error expected (exit 1 or 2), or the right result
    traceback   an exception escaped (or "Traceback" was printed)
    hang        over the timeout
    silent      no error where one was due, or a wrong result
    messy       an error, but not on exactly one line (or with another exit status)

Prints a line per case that is not ok, then the counts.
"""

import argparse
import contextlib
import io
import json
import os
import select
import shutil
import subprocess
import sys
import tempfile
import time
import traceback
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path[:0] = [str(ROOT), str(ROOT / "tests")]

from conftest import COMMANDS, write_untrained_lm, write_untrained_model  # noqa: E402

BOMB = "\nlol0: &a0 [x, x, x, x, x, x, x, x, x]\n" + "".join(
    f"lol{i}: &a{i} [*a{i - 1}, *a{i - 1}, *a{i - 1}, *a{i - 1}, *a{i - 1}, *a{i - 1}]\n"
    for i in range(1, 12))


@dataclass
class Work:
    """One case's fresh copies of the shared inputs, in its own folder."""

    shared: Path
    folder: Path

    @property
    def model(self) -> Path:
        return self._copy("model")

    @property
    def lm(self) -> Path:
        return self._copy("lm")

    def _copy(self, name: str) -> Path:
        """The case's own copy (made once: a case may delete it)."""
        target = self.folder / name
        if not (self.folder / f".{name}.copied").exists():
            shutil.copytree(self.shared / name, target)
            (self.folder / f".{name}.copied").touch()
        return target

    @property
    def clip(self) -> Path:
        return self.shared / "clip.wav"

    def file(self, name: str, data: bytes | str = b"") -> Path:
        path = self.folder / name
        path.write_bytes(data.encode() if isinstance(data, str) else data)
        return path

    def fifo(self, name: str = "fifo") -> Path:
        path = self.folder / name
        os.mkfifo(path)
        return path


@dataclass
class Case:
    kind: str
    name: str
    run: Callable[[Work], object]  # a Cli, or an API call returning its result
    expect: str = "error"  # "error", or "ok": the run's own check must pass
    limit: float | None = None  # seconds (default: --timeout)


@dataclass
class Cli:
    main: str  # "module:function"
    argv: list[str]
    check: Callable[[int, str, str], bool] | None = None  # (status, stdout, stderr) -> right?
    stdin: bytes = b""


CASES: list[Case] = []


def case(kind: str, name: str, expect: str = "error", limit: float | None = None):
    def register(make: Callable[[Work], object]):
        CASES.append(Case(kind, name, make, expect, limit))
        return make
    return register


def transcribe(w: Work, *extra: str, model: Path | None = None) -> Cli:
    return Cli("asr.transcribe:main", ["--model", str(model or w.model), *extra, str(w.clip)])


# ---------------------------------------------------------------------------- config.yaml


def spoil_config(kind: str, name: str, edit: Callable[[str], str]) -> None:
    def make(w: Work) -> Cli:
        config = w.model / "config.yaml"
        config.write_text(edit(config.read_text()))
        return transcribe(w)
    case(kind, name)(make)


def set_key(path: str, value: str) -> Callable[[str], str]:
    """Replace (or add) `section.key: value` in the YAML text."""
    def edit(text: str) -> str:
        import yaml
        data = yaml.safe_load(text)
        node, *_ = path.split(".")
        keys = path.split(".")
        target = data
        for key in keys[:-1]:
            if not isinstance(target.get(key), dict):
                target[key] = {}
            target = target[key]
        target[keys[-1]] = yaml.safe_load(value)
        return yaml.safe_dump(data)
    return edit


spoil_config("config", "billion laughs appended", lambda t: t + BOMB)
spoil_config("config", "one harmless alias", lambda t: t + "x: &x 1\ny: *x\n")
spoil_config("config", "nested 200 deep", lambda t: t + "deep: " + "[" * 200 + "]" * 200 + "\n")
spoil_config("config", "2 MB of comments", lambda t: t + "#" * (2 << 20) + "\n")
spoil_config("config", "empty", lambda t: "")
spoil_config("config", "a list", lambda t: "- 1\n- 2\n")
spoil_config("config", "a scalar", lambda t: "hello\n")
spoil_config("config", "python tag", lambda t: "x: !!python/object/apply:os.system ['true']\n" + t)
spoil_config("config", "interpolation of an env var", set_key("decode.lm", "'${oc.env:HOME}'"))
spoil_config("config", "interpolation loop", lambda t: t + "a: ${b}\nb: ${a}\n")
spoil_config("config", "_target_ os.system", set_key("optim._target_", "os.system"))
spoil_config("config", "tab-broken YAML", lambda t: t + "\tbad: [\n")
for key, value in [("decode", "5"), ("decode", "[1, 2]"), ("decode.unknown_key", "1"),
                   ("decode.beam_size", "0"), ("decode.beam_size", "-1"),
                   ("decode.beam_size", "1000000"), ("decode.beam_size", "five"),
                   ("decode.beam_size", "2.5"), ("decode.beam_size", "true"),
                   ("decode.max_len_ratio", "0"), ("decode.max_len_ratio", "-1"),
                   ("decode.max_len_ratio", "1.0e9"), ("decode.max_len_ratio", ".nan"),
                   ("decode.max_len_ratio", ".inf"), ("decode.length_penalty", ".nan"),
                   ("decode.ctc_weight", "1.5"), ("decode.pre_beam_ratio", "1.0e9"),
                   ("decode.max_repeats", "-1"), ("decode.encoder_batch", "0"),
                   ("decode.lead_in_ms", "1.0e12"), ("decode.lead_in_ms", ".inf"),
                   ("decode.lead_in_ms", "-5"), ("decode.lm_weight", "1.0e300"),
                   ("decode.words", "5"), ("decode.words", "[]"), ("decode.words", "['']"),
                   ("decode.mode", "foo"), ("decode.kv_cache", "maybe"),
                   ("decode.lm", "/nonexistent"), ("decode.lm", "/dev/zero"),
                   ("model", "null"), ("model", "5"), ("model.d_model", "-1"),
                   ("model.d_model", "1000000000000"), ("model.n_head", "0"),
                   ("model.n_head", "3"), ("model.n_encoder_layers", "10000000"),
                   ("model.n_vocab", "0"), ("model.dropout", ".nan"), ("model.subsampling", "x"),
                   ("model.unknown", "1"), ("model.d_model", "32"), ("model.stack", "0"),
                   ("features.sample_rate", "0"), ("features.sample_rate", "1000000000"),
                   ("features.n_fft", "0"), ("features.n_fft", "1000000000"),
                   ("features.hop_ms", "0"), ("features.win_ms", "1.0e9"),
                   ("features.n_mels", "10000000"), ("features.kind", "bad"),
                   ("features.log_floor", "0"), ("features.unknown", "1")]:
    spoil_config("config", f"{key}: {value}", set_key(key, value))


# ---------------------------------------------------------------------------- weights


def spoil_weights(name: str, write: Callable[[Path], None]) -> None:
    def make(w: Work) -> Cli:
        write(w.model / "model.pt")
        return transcribe(w)
    case("weights", name)(make)


def _state(path: Path) -> dict:
    import torch
    return torch.load(path, weights_only=True)


def _save(path: Path, obj: object) -> None:
    import torch
    torch.save(obj, path)


def _edit_state(edit: Callable[[dict], object]) -> Callable[[Path], None]:
    """Edit the saved state dict in place, or replace it with the dict `edit` returns."""
    def write(path: Path) -> None:
        state = _state(path)
        result = edit(state)
        _save(path, result if isinstance(result, dict) else state)
    return write


def _replace(path: Path, make: Callable[[Path], None]) -> None:
    path.unlink()
    make(path)


class Payload:
    def __reduce__(self):
        return os.system, ("touch /tmp/fuzz_report_pwned",)


spoil_weights("empty file", lambda p: p.write_bytes(b""))
spoil_weights("cut to 100 bytes", lambda p: p.write_bytes(p.read_bytes()[:100]))
spoil_weights("random bytes", lambda p: p.write_bytes(os.urandom(4096)))
spoil_weights("a list", lambda p: _save(p, [1, 2, 3]))
spoil_weights("a bare tensor", lambda p: _save(p, __import__("torch").zeros(3)))
spoil_weights("strings for tensors", lambda p: _save(p, {"a": "b"}))
spoil_weights("a tensor missing", _edit_state(lambda s: s.pop(sorted(s)[-1])))
spoil_weights("an extra tensor", _edit_state(lambda s: s.update(extra=__import__("torch").zeros(1))))
spoil_weights("a wrong shape", _edit_state(
    lambda s: s.update({"ctc.bias": __import__("torch").zeros(7)})))
spoil_weights("NaN weights", _edit_state(lambda s: [v.fill_(float("nan")) for v in s.values()
                                                     if v.is_floating_point()]))
spoil_weights("one infinite weight", _edit_state(
    lambda s: s["ctc.bias"].__setitem__(0, float("inf"))))
spoil_weights("integer weights", _edit_state(
    lambda s: {k: v.long() if v.is_floating_point() else v for k, v in s.items()}))
spoil_weights("pickled os.system", lambda p: _save(p, {"model": Payload()}))
spoil_weights("a sparse 9 GB file", lambda p: os.truncate(p, 9 << 30))
spoil_weights("a directory", lambda p: (p.unlink(), p.mkdir()))
spoil_weights("a FIFO", lambda p: (p.unlink(), os.mkfifo(p)))
spoil_weights("a link to /dev/zero", lambda p: (p.unlink(), p.symlink_to("/dev/zero")))


# ---------------------------------------------------------------------------- tokenizer


def spoil_tokenizer(name: str, write: Callable[[Path], None]) -> None:
    def make(w: Work) -> Cli:
        write(w.model / "tokenizer.model")
        return transcribe(w)
    case("tokenizer", name)(make)


def _other_tokenizer(vocab: int, **ids: int) -> Callable[[Path], None]:
    def write(path: Path) -> None:
        import io as _io

        import sentencepiece as spm
        proto = _io.BytesIO()
        spm.SentencePieceTrainer.train(
            sentence_iterator=iter(["one two three four five six seven eight nine ten"] * 20),
            model_writer=proto, vocab_size=vocab, hard_vocab_limit=False, minloglevel=2, **ids)
        path.write_bytes(proto.getvalue())
    return write


spoil_tokenizer("empty", lambda p: p.write_bytes(b""))
spoil_tokenizer("random bytes", lambda p: p.write_bytes(os.urandom(2048)))
spoil_tokenizer("cut in half", lambda p: p.write_bytes(p.read_bytes()[: len(p.read_bytes()) // 2]))
spoil_tokenizer("another vocabulary size", _other_tokenizer(30, pad_id=0, unk_id=1, bos_id=2,
                                                            eos_id=3))
spoil_tokenizer("sentencepiece's own special ids", _other_tokenizer(20))
spoil_tokenizer("a directory", lambda p: (p.unlink(), p.mkdir()))
spoil_tokenizer("a FIFO", lambda p: (p.unlink(), os.mkfifo(p)))
spoil_tokenizer("100 MB", lambda p: os.truncate(p, 100 << 20))


# ---------------------------------------------------------------------------- language model


def spoil_lm(name: str, write: Callable[[Path], None] | None, *extra: str) -> None:
    def make(w: Work) -> Cli:
        if write is not None:
            write(w.lm)
        return transcribe(w, "--lm", str(w.lm), *extra)
    case("lm", name)(make)


def _lm_saved(edit: Callable[[dict], None]) -> Callable[[Path], None]:
    def write(lm: Path) -> None:
        saved = _state(lm / "lm.pt")
        edit(saved)
        _save(lm / "lm.pt", saved)
    return write


spoil_lm("no such directory", lambda lm: shutil.rmtree(lm))
spoil_lm("no lm.pt", lambda lm: (lm / "lm.pt").unlink())
spoil_lm("empty lm.pt", lambda lm: (lm / "lm.pt").write_bytes(b""))
spoil_lm("lm.pt is a list", lambda lm: _save(lm / "lm.pt", [1]))
spoil_lm("no dims", _lm_saved(lambda s: s.pop("dims")))
spoil_lm("dims not a mapping", _lm_saved(lambda s: s.update(dims=5)))
spoil_lm("dims with an unknown key", _lm_saved(lambda s: s["dims"].update(colour=1)))
spoil_lm("dims.n_vocab of another tokenizer", _lm_saved(lambda s: s["dims"].update(n_vocab=99)))
spoil_lm("dims.d_model -1", _lm_saved(lambda s: s["dims"].update(d_model=-1)))
spoil_lm("dims.n_layers 10 million", _lm_saved(lambda s: s["dims"].update(n_layers=10**7)))
spoil_lm("dims.d_model 10**6 (a huge allocation)", _lm_saved(lambda s: s["dims"].update(
    d_model=10**6, n_head=1)))
spoil_lm("a tensor missing", _lm_saved(lambda s: s["state_dict"].pop(sorted(s["state_dict"])[0])))
spoil_lm("a wrong shape", _lm_saved(lambda s: s["state_dict"].update(
    {sorted(s["state_dict"])[0]: __import__("torch").zeros(3)})))
spoil_lm("NaN weights", _lm_saved(lambda s: [v.fill_(float("nan")) for v in
                                            s["state_dict"].values()]))
spoil_lm("another tokenizer", lambda lm: (lm / "tokenizer.model").write_bytes(b"other"))
spoil_lm("pickled os.system", lambda lm: _save(lm / "lm.pt", {"dims": Payload()}))
spoil_lm("with --mode ctc_greedy", None, "--mode", "ctc_greedy")
spoil_lm("tokenizer a FIFO", lambda lm: ((lm / "tokenizer.model").unlink(),
                                         os.mkfifo(lm / "tokenizer.model")))


# ---------------------------------------------------------------------------- CLI arguments


for option, value in [("--batch-size", "0"), ("--batch-size", "-1"), ("--batch-size", "abc"),
                      ("--batch-size", "100000000"), ("--beam-size", "0"),
                      ("--beam-size", "1000000"), ("--ctc-weight", "1"), ("--ctc-weight", "nan"),
                      ("--lead-in-ms", "inf"), ("--lead-in-ms", "1e12"), ("--lead-in-ms", "nan"),
                      ("--lead-in-ms", "-5"), ("--lm-weight", "nan"), ("--lm-weight", "-1"),
                      ("--device", "foo"), ("--device", "cuda:9"), ("--device", "meta"),
                      ("--device", "cpu:abc"), ("--mode", "bad"), ("--words", "/dev/zero"),
                      ("--words", "/nonexistent"), ("--no-such-option", "1")]:
    case("cli", f"asr-transcribe {option} {value}")(
        lambda w, option=option, value=value: transcribe(w, option, value))

case("cli", "asr-transcribe --words FIFO")(lambda w: transcribe(w, "--words", str(w.fifo())))
case("cli", "asr-transcribe --words a directory")(lambda w: transcribe(w, "--words", str(w.folder)))
case("cli", "asr-transcribe --words empty")(lambda w: transcribe(w, "--words", str(w.file("e"))))
case("cli", "asr-transcribe --words binary")(
    lambda w: transcribe(w, "--words", str(w.file("b", b"\xff\xfe\x00"))))
case("cli", "asr-transcribe --model missing")(
    lambda w: transcribe(w, model=w.folder / "missing"))
case("cli", "asr-transcribe --model a file")(lambda w: transcribe(w, model=w.clip))
case("cli", "asr-transcribe --model an empty folder")(lambda w: transcribe(w, model=w.folder))
case("cli", "asr-transcribe no files")(
    lambda w: Cli("asr.transcribe:main", ["--model", str(w.model)]))
case("cli", "asr-transcribe a missing file")(
    lambda w: Cli("asr.transcribe:main", ["--model", str(w.model), str(w.folder / "no.wav")]))
case("cli", "asr-transcribe /dev/zero as audio")(
    lambda w: Cli("asr.transcribe:main", ["--model", str(w.model), "/dev/zero"]))
case("cli", "asr-transcribe a FIFO as audio")(
    lambda w: Cli("asr.transcribe:main", ["--model", str(w.model), str(w.fifo("a.wav"))]))
case("cli", "asr-transcribe a missing file named with a newline and an escape")(
    lambda w: Cli("asr.transcribe:main", ["--model", str(w.model),
                                          str(w.folder / "a\nb\x1b[31m.wav")]))


def _one_record_per_file(names: list[str], fields: int = 2):
    def check(status: int, out: str, err: str) -> bool:
        rows = [line.split("\t") for line in out.splitlines()]
        return status == 0 and not err and len(rows) == len(names) \
            and all(len(row) == fields for row in rows) \
            and [row[0] for row in rows] == [
                n.replace("\\", "\\\\").replace("\t", "\\t").replace("\n", "\\n") for n in names]
    return check


def _odd_names(w: Work) -> Cli:
    names = [str(w.folder / "tab\there.wav"), str(w.folder / "new\nline.wav"),
             str(w.folder / "back\\slash.wav")]
    for name in names:
        shutil.copy(w.clip, name)
    return Cli("asr.transcribe:main", ["--model", str(w.model), *names],
               _one_record_per_file(names))


case("output", "file names with a tab, a newline, a backslash", "ok")(_odd_names)


def _bad_in_the_middle(w: Work, spoil: Callable[[Path], Path]) -> Cli:
    bad = spoil(w.folder)
    good = [str(w.clip), str(w.clip)]

    def check(status: int, out: str, err: str) -> bool:
        rows = [line.split("\t")[0] for line in out.splitlines()]
        return status == 1 and rows == good and len(err.splitlines()) == 1 \
            and err.startswith("error: ") and "Traceback" not in err
    return Cli("asr.transcribe:main", ["--model", str(w.model), good[0], str(bad), good[1]], check)


def _nan_after_a_minute(folder: Path) -> Path:
    """70 s of float WAV that goes NaN after the first decoded block (2^20 samples)."""
    import numpy as np
    import soundfile as sf
    samples = np.zeros(70 * 16000, np.float32)
    samples[(1 << 20) + 5] = np.nan
    sf.write(folder / "late_nan.wav", samples, 16000, subtype="FLOAT")
    return folder / "late_nan.wav"


def _cut_flac(folder: Path) -> Path:
    import numpy as np
    import soundfile as sf
    rng = np.random.default_rng(0)  # faint noise: the VAD finds no speech to decode in it
    sf.write(folder / "whole.flac", rng.uniform(-1e-3, 1e-3, 70 * 16000).astype(np.float32),
             16000)
    data = (folder / "whole.flac").read_bytes()
    (folder / "cut.flac").write_bytes(data[: len(data) * 2 // 3])
    return folder / "cut.flac"


case("partial", "NaN samples a minute into the 2nd of 3 files", "ok", limit=30)(
    lambda w: _bad_in_the_middle(w, _nan_after_a_minute))
case("partial", "a FLAC cut short, 2nd of 3 files", "ok", limit=30)(
    lambda w: _bad_in_the_middle(w, _cut_flac))


# evaluate, intents, demo


def _manifest(w: Work, lines: list[str]) -> Path:
    return w.file("m.jsonl", "".join(line + "\n" for line in lines))


def _evaluate(w: Work, *extra: str, manifest: Path | str | None = None) -> Cli:
    row = json.dumps({"audio_filepath": str(w.clip), "text": "yes", "duration": 1.0})
    return Cli("asr.evaluate:main", ["--model", str(w.model), "--manifest",
                                     str(manifest or _manifest(w, [row])), *extra])


case("cli", "asr-evaluate --manifest /dev/zero")(lambda w: _evaluate(w, manifest="/dev/zero"))
case("cli", "asr-evaluate --manifest missing")(lambda w: _evaluate(w, manifest=w.folder / "x"))
case("cli", "asr-evaluate --json into a directory")(
    lambda w: _evaluate(w, "--json", str(w.folder)))
case("cli", "asr-evaluate --batch-size 0")(lambda w: _evaluate(w, "--batch-size", "0"))
case("cli", "asr-evaluate a bad manifest line")(
    lambda w: _evaluate(w, manifest=_manifest(w, ['{"audio_filepath": 5}'])))


def _intents(w: Work, *extra: str) -> Cli:
    return Cli("asr.assistant.intents:main", ["--model", str(w.model), *extra, str(w.clip)])


for option, value in [("--threshold", "2"), ("--threshold", "nan"), ("--min-confidence", "-1"),
                      ("--grammar", "/dev/zero"), ("--device", "foo")]:
    case("cli", f"asr.assistant.intents {option} {value}")(
        lambda w, option=option, value=value: _intents(w, option, value))
case("cli", "asr.assistant.intents --grammar FIFO")(lambda w: _intents(w, "--grammar", str(w.fifo())))
case("cli", "asr.assistant.intents --grammar with a billion laughs")(
    lambda w: _intents(w, "--grammar", str(w.file("g.yaml", BOMB + "context: *a11\n"))))
case("cli", "asr.assistant.intents no grammar in the model directory")(
    lambda w: ((w.model / "grammar.yaml").unlink(), _intents(w))[1])
case("cli", "asr.assistant.intents evaluate --manifest /dev/zero")(
    lambda w: Cli("asr.assistant.intents:main", ["evaluate", "--model", str(w.model), "--manifest",
                                       "/dev/zero"]))
case("cli", "asr.assistant.intents evaluate --json into a directory")(
    lambda w: Cli("asr.assistant.intents:main", ["evaluate", "--model", str(w.model), "--manifest", str(
        _manifest(w, [json.dumps({"audio_filepath": str(w.clip), "intent": None})])),
        "--json", str(w.folder)]))


def _intents_odd_name(w: Work) -> Cli:
    name = str(w.folder / "a\tb.wav")
    shutil.copy(w.clip, name)
    return Cli("asr.assistant.intents:main", ["--model", str(w.model), name], _one_record_per_file([name], 4))


case("output", "asr.assistant.intents a file name with a tab", "ok")(_intents_odd_name)


def _demo(w: Work, *overrides: str, source: str | None = None) -> Cli:
    return Cli("asr.assistant.demo:main", ["--input", source or str(w.clip), f"model_dir={w.model}",
                                 f"actions.home={w.folder}", *overrides])


for override in ["vad.aggressiveness=9", "block_ms=0", "block_ms=-30", "sample_rate=0",
                 "sample_rate=12345", "intents.threshold=5", "actions.page_size=0",
                 "actions.confirm_seconds=nan", "device=foo", "grammar=/dev/zero",
                 "+actions.foo=1", "model_dir=123", "vad.start_frames=100",
                 "actions.max_scanned=0", "vad.max_utterance_s=1e9", "actions.enabled=[shell]",
                 "vad.frame_ms=15", "intents.min_confidence=abc"]:
    case("demo", f"asr-demo {override}")(lambda w, override=override: _demo(w, override))
case("demo", "asr-demo --input /dev/zero")(lambda w: _demo(w, source="/dev/zero"))
case("demo", "asr-demo model_dir with a billion laughs")(
    lambda w: ((w.model / "config.yaml").write_text((w.model / "config.yaml").read_text() + BOMB),
               _demo(w))[1])


def _listing_huge_home(w: Work) -> object:
    """'show me my documents' in a home of 60,000 files answers at once (a partial listing)."""
    from asr.assistant.actions import ActionsConfig, Assistant
    home = w.folder / "home"
    for d in range(100):
        folder = home / f"d{d}"
        folder.mkdir(parents=True)
        for f in range(600):
            (folder / f"{f}.txt").touch()
    started = time.perf_counter()
    answer = Assistant(ActionsConfig(home=str(home))).act("show_files", {"kind": "documents"})
    return "among the first" in answer and time.perf_counter() - started < 5


case("api", "a listing of a home of 60,000 files", "ok", limit=120)(_listing_huge_home)


# ---------------------------------------------------------------------------- Python API


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
    lambda w: __import__("asr.assistant.intents").assistant.intents.IntentRecognizer.from_pretrained(
        w.model).recognize([__import__("numpy").zeros(400 * 16000, "f4")]))
case("api", "VADConfig(start_frames=100)")(
    lambda w: __import__("asr.vad").vad.VADConfig(start_frames=100))
case("api", "ActionsConfig(page_size=0)")(
    lambda w: __import__("asr.assistant.actions").assistant.actions.ActionsConfig(page_size=0))


def _keeps_the_good_ones(w: Work) -> bool:
    from asr.audio import AudioError
    results = _transcriber(w).transcribe([str(w.clip), str(w.folder / "missing.wav"),
                                          str(w.clip)], on_error="return")
    return isinstance(results[1], AudioError) and results[0].text == results[2].text


case("api", "transcribe([good, missing, good], on_error='return')", "ok")(_keeps_the_good_ones)


# ---------------------------------------------------------------------------- training


def _trainer(w: Work, parent: Path, *overrides: str):
    """One step of training into parent/model (w.model when parent is w.folder)."""
    from asr.train import Trainer
    from conftest import train_config
    return Trainer(train_config(parent, w.shared / "train.jsonl", "trainer.max_steps=1",
                                "trainer.max_epochs=1", *overrides))


case("train", "resume=true over a trained model without checkpoint.pt", limit=60)(
    lambda w: (w.model, _trainer(w, w.folder, "trainer.resume=true").fit()))
case("train", "a trained model, neither resume nor overwrite", limit=60)(
    lambda w: (w.model, _trainer(w, w.folder).fit()))
case("train", "resume=true and overwrite=true over a run", limit=60)(
    lambda w: (w.model, _trainer(w, w.folder, "trainer.resume=true",
                                 "trainer.overwrite=true").fit()))
case("train", "init_from a model with a billion laughs", limit=60)(
    lambda w: ((w.model / "config.yaml").write_text(
        (w.model / "config.yaml").read_text() + BOMB),
        _trainer(w, w.folder / "new", f"trainer.init_from={w.model}").fit())[1])
case("train", "a checkpoint.pt of the wrong structure", limit=60)(
    lambda w: (_save(w.model / "checkpoint.pt", {"model": {}}),
               _trainer(w, w.folder, "trainer.resume=true").fit())[1])


def _second_run(w: Work) -> None:
    import fcntl
    w.model.joinpath("train.lock").touch()
    with open(w.model / "train.lock") as held:
        fcntl.flock(held, fcntl.LOCK_EX)
        _trainer(w, w.folder, "trainer.overwrite=true").fit()


case("train", "a second run in a directory another run holds", limit=60)(_second_run)


def _overwrite_cleans(w: Work) -> bool:
    import torch
    out = w.model
    _save(out / "checkpoint.pt", {"stale": torch.zeros(1)})
    (out / ".notes.tmp").write_text("someone else's")
    (out / ".model.pt.abcd1234.tmp").write_text("a write a kill cut short")
    _trainer(w, w.folder, "trainer.overwrite=true").fit()
    return (out / ".notes.tmp").exists() and not (out / ".model.pt.abcd1234.tmp").exists() \
        and "state" in torch.load(out / "checkpoint.pt", weights_only=True)


case("train", "overwrite=true replaces the old state, leaves others' files", "ok", limit=120)(
    _overwrite_cleans)


# ---------------------------------------------------------------------------- running


@dataclass
class Outcome:
    verdict: str
    detail: str
    seconds: float


def run_case(index: int, shared: Path, scratch: Path) -> Outcome:
    """Run one case in this process and judge it."""
    from asr.assistant.grammar import GrammarError
    from asr.audio import AudioError
    from asr.checkpoint import ModelDirError

    c = CASES[index]
    folder = Path(tempfile.mkdtemp(dir=scratch))
    work = Work(shared, folder)
    started = time.perf_counter()
    out, err = io.StringIO(), io.StringIO()
    try:
        with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
            spec = c.run(work)
            if isinstance(spec, Cli):
                module, function = spec.main.split(":")
                main = getattr(__import__(module, fromlist=[function]), function)
                try:
                    status = main(spec.argv)
                except SystemExit as stop:
                    status = stop.code if isinstance(stop.code, int) else 1
                    if isinstance(stop.code, str):
                        print(stop.code, file=sys.stderr)
    except (AudioError, ModelDirError, GrammarError, ValueError, RuntimeError) as error:
        if c.kind not in ("api", "train") or (isinstance(error, RuntimeError)
                                              and type(error).__name__ != "TrainingError"):
            return Outcome("traceback", _last_line(traceback.format_exc()), _since(started))
        message = str(error)
        verdict = "ok" if c.expect == "error" and message and "\n" not in message else (
            "messy" if c.expect == "error" else "silent")
        return Outcome(verdict, message[:160], _since(started))
    except BaseException:  # noqa: BLE001 - the point: anything else escaped
        return Outcome("traceback", _last_line(traceback.format_exc()), _since(started))
    finally:
        shutil.rmtree(folder, ignore_errors=True)
    seconds = _since(started)
    if not isinstance(spec, Cli):  # an API call that returned
        right = spec is True if c.expect == "ok" else False
        return Outcome("ok" if right else "silent", f"returned {str(spec)[:120]!r}", seconds)
    stdout, stderr = out.getvalue(), err.getvalue()
    if "Traceback" in stderr:
        return Outcome("traceback", _last_line(stderr), seconds)
    if spec.check is not None:
        right = spec.check(status, stdout, stderr)
        return Outcome("ok" if right else "silent", f"exit {status}: {stderr.strip()[:160]!r} "
                       f"{stdout.strip()[:160]!r}", seconds)
    lines = stderr.splitlines()
    if status == 0:
        return Outcome("silent", f"exit 0, printed {stdout.strip()[:120]!r}", seconds)
    if status in (1, 2) and len(lines) == 1:
        return Outcome("ok", lines[0][:200], seconds)
    return Outcome("messy", f"exit {status}, {len(lines)} stderr lines: {stderr[:200]!r}", seconds)


def _since(started: float) -> float:
    return round(time.perf_counter() - started, 2)


def _last_line(text: str) -> str:
    lines = [line for line in text.strip().splitlines() if line.strip()]
    return lines[-1][:200] if lines else ""


def worker(shared: Path, scratch: Path) -> None:
    """Run the cases whose numbers arrive on stdin; one JSON outcome per line on stdout."""
    import importlib

    import torch

    for module in ("asr.assistant.demo", "asr.assistant.intents", "asr.evaluate", "asr.train",
                   "asr.transcribe"):
        importlib.import_module(module)  # before "ready": a case's time is its own
    torch.set_num_threads(1)
    report = sys.stdout
    report.write("ready\n")
    report.flush()
    for line in sys.stdin:
        outcome = run_case(int(line), shared, scratch)
        report.write(json.dumps(outcome.__dict__) + "\n")
        report.flush()


def prepare(shared: Path) -> None:
    model = write_untrained_model(shared)
    write_untrained_lm(model, shared / "lm")
    shutil.copy(sorted((COMMANDS / "yes").glob("*.wav"))[0], shared / "clip.wav")


class Worker:
    """A worker process; replaced when a case hangs."""

    def __init__(self, shared: Path, scratch: Path) -> None:
        self.args = [sys.executable, __file__, "--worker", str(shared), str(scratch)]
        self.process = subprocess.Popen(self.args, stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                                        stderr=subprocess.DEVNULL, text=True, cwd=ROOT)
        assert self.process.stdout.readline() == "ready\n", "the worker did not start"

    def run(self, index: int, timeout: float) -> Outcome | None:
        self.process.stdin.write(f"{index}\n")
        self.process.stdin.flush()
        ready, _, _ = select.select([self.process.stdout], [], [], timeout)
        if not ready:
            self.process.kill()
            self.process.wait()
            return None
        line = self.process.stdout.readline()
        if not line:  # the worker died (e.g. killed for memory)
            self.process.wait()
            return Outcome("traceback", f"worker died with status {self.process.returncode}",
                           timeout)
        return Outcome(**json.loads(line))

    def close(self) -> None:
        self.process.stdin.close()
        self.process.wait()


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--timeout", type=float, default=10.0, help="seconds a case may take")
    parser.add_argument("--only", default="", help="run the cases whose name contains this")
    parser.add_argument("--verbose", action="store_true", help="print every case's outcome")
    parser.add_argument("--worker", nargs=2, help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.worker:
        worker(Path(args.worker[0]), Path(args.worker[1]))
        return 0
    with tempfile.TemporaryDirectory() as tmp:
        shared, scratch = Path(tmp) / "shared", Path(tmp) / "scratch"
        shared.mkdir()
        scratch.mkdir()
        prepare(shared)
        chosen = [i for i, c in enumerate(CASES) if args.only in f"{c.kind} {c.name}"]
        kinds = Counter(CASES[i].kind for i in chosen)
        print(f"{len(chosen)} cases ({', '.join(f'{n} {k}' for k, n in kinds.items())})")
        pool, counts = Worker(shared, scratch), Counter()
        for index in chosen:
            c = CASES[index]
            timeout = c.limit or args.timeout
            outcome = pool.run(index, timeout + 5)
            if outcome is None:
                outcome = Outcome("hang", f"still running after {timeout + 5:.0f} s", timeout)
                pool = Worker(shared, scratch)
            elif outcome.verdict == "ok" and outcome.seconds > timeout:
                outcome = Outcome("hang", f"took {outcome.seconds:.1f} s", outcome.seconds)
            if outcome.verdict == "traceback" and "worker died" in outcome.detail:
                pool = Worker(shared, scratch)
            counts[outcome.verdict] += 1
            if outcome.verdict != "ok" or args.verbose:
                print(f"{outcome.verdict:9s} [{c.kind}] {c.name} ({outcome.seconds:.1f} s): "
                      f"{outcome.detail}", flush=True)
        pool.close()
    slowest = "all within the timeout" if not counts["hang"] else f"{counts['hang']} over it"
    print(f"{len(chosen)} bad inputs: {counts['ok']} ok, {counts['traceback']} tracebacks, "
          f"{counts['hang']} hangs, {counts['silent']} silently wrong, {counts['messy']} messy "
          f"({slowest})")
    return 0 if counts["ok"] == len(chosen) else 1


if __name__ == "__main__":
    sys.exit(main())

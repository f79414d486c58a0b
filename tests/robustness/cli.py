"""Cases: bad command-line arguments to asr-transcribe and asr-evaluate, odd file names in the
output, and a bad file among good ones (the good ones' results must still come out)."""

import json
import shutil
from collections.abc import Callable
from pathlib import Path

from robustness.case import EVALUATE, TRANSCRIBE, Cli, Work, case, transcribe

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
    lambda w: Cli(f"{TRANSCRIBE}:main", ["--model", str(w.model)]))
case("cli", "asr-transcribe a missing file")(
    lambda w: Cli(f"{TRANSCRIBE}:main", ["--model", str(w.model), str(w.folder / "no.wav")]))
case("cli", "asr-transcribe /dev/zero as audio")(
    lambda w: Cli(f"{TRANSCRIBE}:main", ["--model", str(w.model), "/dev/zero"]))
case("cli", "asr-transcribe a FIFO as audio")(
    lambda w: Cli(f"{TRANSCRIBE}:main", ["--model", str(w.model), str(w.fifo("a.wav"))]))
case("cli", "asr-transcribe a missing file named with a newline and an escape")(
    lambda w: Cli(f"{TRANSCRIBE}:main", ["--model", str(w.model),
                                          str(w.folder / "a\nb\x1b[31m.wav")]))


def one_record_per_file(names: list[str], fields: int = 2) -> Callable[[int, str, str], bool]:
    """A check: exit 0, nothing on stderr, one line of `fields` tab-separated fields per file, in
    order, each starting with the file name escaped (backslash, tab, newline)."""
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
    return Cli(f"{TRANSCRIBE}:main", ["--model", str(w.model), *names],
               one_record_per_file(names))


case("output", "file names with a tab, a newline, a backslash", "ok")(_odd_names)


def _bad_in_the_middle(w: Work, spoil: Callable[[Path], Path]) -> Cli:
    bad = spoil(w.folder)
    good = [str(w.clip), str(w.clip)]

    def check(status: int, out: str, err: str) -> bool:
        rows = [line.split("\t")[0] for line in out.splitlines()]
        return status == 1 and rows == good and len(err.splitlines()) == 1 \
            and err.startswith("error: ") and "Traceback" not in err
    return Cli(f"{TRANSCRIBE}:main", ["--model", str(w.model), good[0], str(bad), good[1]], check)


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



def _manifest(w: Work, lines: list[str]) -> Path:
    return w.file("m.jsonl", "".join(line + "\n" for line in lines))


def manifest_of_clip(w: Work, **fields: object) -> Path:
    """A one-line manifest of the case's clip, with `fields` after its path."""
    return _manifest(w, [json.dumps({"audio_filepath": str(w.clip), **fields})])


def _evaluate(w: Work, *extra: str, manifest: Path | str | None = None) -> Cli:
    manifest = manifest or manifest_of_clip(w, text="yes", duration=1.0)
    return Cli(f"{EVALUATE}:main", ["--model", str(w.model), "--manifest", str(manifest), *extra])


case("cli", "asr-evaluate --manifest /dev/zero")(lambda w: _evaluate(w, manifest="/dev/zero"))
case("cli", "asr-evaluate --manifest missing")(lambda w: _evaluate(w, manifest=w.folder / "x"))
case("cli", "asr-evaluate --json into a directory")(
    lambda w: _evaluate(w, "--json", str(w.folder)))
case("cli", "asr-evaluate --batch-size 0")(lambda w: _evaluate(w, "--batch-size", "0"))
case("cli", "asr-evaluate a bad manifest line")(
    lambda w: _evaluate(w, manifest=_manifest(w, ['{"audio_filepath": 5}'])))


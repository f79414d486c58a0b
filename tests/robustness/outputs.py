"""Cases: what asr-transcribe and asr-evaluate write. An output file must never replace an
input (an audio file named x.tsv, the same file through a link to its folder or a hard link),
nor a FIFO, device or folder in its place; files get the permissions open() gives (0666 less
the umask); subtitle text cannot forge a cue's timing line; a reader that goes away (`| head
-1`) ends the command quietly; stdin is copied only while it can be audio, and bounded;
--threads and --vad/--no-vad are checked like every option."""

import io
import os
import shutil
import stat
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path

from robustness.case import EVALUATE, TRANSCRIBE, Cli, Work, case, run_cli, transcribe
from robustness.cli import manifest_of_clip

ROOT = Path(__file__).resolve().parents[2]


def _writing(w: Work, inputs: list[Path], *extra: str) -> Cli:
    return Cli(f"{TRANSCRIBE}:main", ["--model", str(w.model), *extra, *map(str, inputs)])


def _input_kept(w: Work, name: str, make_cli: Callable[[Work, Path], Cli]) -> bool:
    """An audio file `name` in folder d/: the command must refuse (one usage line, exit 2) and
    leave the file as it was."""
    (w.folder / "d").mkdir()
    audio = Path(shutil.copy(w.clip, w.folder / "d" / name))
    data = audio.read_bytes()
    status, _, err = run_cli(make_cli(w, audio))
    return status == 2 and len(err.splitlines()) == 1 and "replace it" in err \
        and audio.read_bytes() == data


case("output", "audio named x.tsv, --output-dir its folder", "ok")(
    lambda w: _input_kept(w, "x.tsv", lambda w, a: _writing(w, [a], "--output-dir", str(a.parent))))
case("output", "audio named x.srt, --output-format srt --output-dir its folder", "ok")(
    lambda w: _input_kept(w, "x.srt", lambda w, a: _writing(
        w, [a], "--output-format", "srt", "--output-dir", str(a.parent))))
case("output", "audio named x.json, --output-dir a link to its folder", "ok")(
    lambda w: _input_kept(w, "x.json", lambda w, a: _writing(
        w, [a], "--output-dir", str((w.folder / "link").symlink_to(a.parent) or w.folder / "link"))))
case("output", "audio named x.txt, --output-dir its folder spelt with ..", "ok")(
    lambda w: _input_kept(w, "x.txt", lambda w, a: _writing(
        w, [a], "--output-dir", str(a.parent / ".." / "d"))))


def _hard_link(w: Work, a: Path) -> Cli:
    """The input a.wav is also out/a.txt: writing a.txt would replace a name of the input."""
    (w.folder / "out").mkdir()
    os.link(a, w.folder / "out" / "a.txt")
    return _writing(w, [a], "--output-format", "txt", "--output-dir", str(w.folder / "out"))


case("output", "an output that is a hard link to the input", "ok")(
    lambda w: _input_kept(w, "a.wav", _hard_link))


def _kept(w: Work, victim: Path, spec: Cli) -> bool:
    """`spec` must be a usage error (one line, exit 2) that leaves `victim` as it was."""
    data = victim.read_bytes()
    status, _, err = run_cli(spec)
    return status == 2 and len(err.splitlines()) == 1 and "replace it" in err \
        and victim.read_bytes() == data


def _evaluate_json(w: Work, report: Callable[[Work, Path], Path]) -> bool:
    manifest = manifest_of_clip(w, text="yes", duration=1.0)
    target = report(w, manifest)
    return _kept(w, target, Cli(f"{EVALUATE}:main", ["--model", str(w.model), "--manifest",
                                                     str(manifest), "--json", str(target)]))


case("output", "asr-evaluate --json onto its manifest", "ok")(
    lambda w: _evaluate_json(w, lambda w, m: m))
case("output", "asr-evaluate --json onto its manifest through a link to its folder", "ok")(
    lambda w: _evaluate_json(w, lambda w, m: ((w.folder / "l").symlink_to(w.folder), w.folder / "l"
                                              / m.name)[1]))
case("output", "asr-evaluate --json onto the model's config.yaml", "ok")(
    lambda w: _evaluate_json(w, lambda w, m: w.model / "config.yaml"))
case("output", "asr-evaluate --json onto the model's weights", "ok")(
    lambda w: _evaluate_json(w, lambda w, m: w.model / "model.pt"))


def _metrics_wav(w: Work) -> bool:
    """An audio file named metrics.wav, transcribed into the model directory."""
    (w.model / "metrics.json").write_text("{}")
    audio = shutil.copy(w.clip, w.folder / "metrics.wav")
    return _kept(w, w.model / "metrics.json", _writing(w, [Path(audio)], "--output-dir",
                                                       str(w.model)))


case("output", "audio named metrics.wav, --output-dir the model directory", "ok")(_metrics_wav)


def _in_the_way(make: Callable[[Path], object]) -> Callable[[Work], bool]:
    """Something that is not a regular file where out/clip.txt goes: one error line, exit 1,
    and it is still there."""
    def run(w: Work) -> bool:
        (w.folder / "out").mkdir()
        target = w.folder / "out" / f"{w.clip.stem}.txt"
        make(target)
        kind = stat.S_IFMT(os.lstat(target).st_mode)
        status, _, err = run_cli(_writing(w, [w.clip], "--output-format", "txt", "--output-dir",
                                          str(target.parent)))
        return status == 1 and len(err.splitlines()) == 1 and "not a regular file" in err \
            and stat.S_IFMT(os.lstat(target).st_mode) == kind
    return run


case("output", "a FIFO where an output file goes", "ok")(_in_the_way(os.mkfifo))
case("output", "a folder where an output file goes", "ok")(_in_the_way(Path.mkdir))
case("output", "a link to /dev/null where an output file goes", "ok")(
    _in_the_way(lambda p: p.symlink_to("/dev/null")))
case("output", "--output-dir /dev/null")(
    lambda w: _writing(w, [w.clip], "--output-format", "txt", "--output-dir", "/dev/null"))
case("output", "--output-dir inside a regular file")(
    lambda w: _writing(w, [w.clip], "--output-dir", str(w.file("f", "x") / "out")))
case("cli", "asr-evaluate --json /dev/null")(
    lambda w: Cli(f"{EVALUATE}:main", ["--model", str(w.model), "--manifest",
                                       str(manifest_of_clip(w, text="yes", duration=1.0)),
                                       "--json", "/dev/null"]))


def _modes(w: Work) -> bool:
    """0666 less the umask for a new file; a replaced file keeps its own mode."""
    from asr.transcribe import main
    old = os.umask(0o027)
    try:
        argv = ["--model", str(w.model), "--output-dir", str(w.folder / "out"), str(w.clip)]
        main(argv)
        written = sorted((w.folder / "out").iterdir())
        new = {stat.S_IMODE(p.stat().st_mode) for p in written}
        written[0].chmod(0o604)
        main(argv)
        return new == {0o640} and stat.S_IMODE(written[0].stat().st_mode) == 0o604 \
            and len(written) == 5
    finally:
        os.umask(old)


case("output", "files written under umask 027, one of them replaced", "ok")(_modes)


def _quiet_pipe(w: Work) -> bool:
    """`asr-transcribe ... | head -1`: the first line, then nothing on stderr, status 141."""
    argv = [sys.executable, "-c", "import sys; from asr.transcribe import main; "
            "sys.exit(main(sys.argv[1:]))", "--model", str(w.model), *[str(w.clip)] * 200]
    head = subprocess.Popen(["head", "-1"], stdin=subprocess.PIPE, stdout=subprocess.PIPE)
    run = subprocess.run(argv, stdout=head.stdin, stderr=subprocess.PIPE, cwd=ROOT, timeout=110,
                         env={**os.environ, "PYTHONPATH": str(ROOT)})
    head.stdin.close()
    first = head.stdout.read().decode()
    head.wait()
    return run.returncode == 141 and run.stderr == b"" and first.startswith(f"{w.clip}\t")


case("output", "asr-transcribe | head -1", "ok", limit=120)(_quiet_pipe)


def _subtitle_arrows(w: Work) -> bool:
    """Dashes before '>' in a transcript never make a cue's '-->' in srt or vtt text."""
    from asr.formats import render
    from asr.transcriber import Segment, Transcript
    texts = ["--->", "a ----> b", "<!--->", "x-->y-->z", "-" * 50 + ">"]
    t = Transcript(" ".join(texts), [Segment(i, i + 1.0, text, 0.0, 0.0, 1.0)
                                     for i, text in enumerate(texts)])
    return all(render(t, fmt, "a.wav").count("-->") == len(texts) for fmt in ("srt", "vtt"))


case("output", "segments of dashes and arrows in srt and vtt", "ok")(_subtitle_arrows)

for option, value in [("--threads", "0"), ("--threads", "-1"), ("--threads", "many"),
                      ("--threads", "100000"), ("--vad=no", None), ("--no-vad=1", None)]:
    case("cli", f"asr-transcribe {option} {value or ''}".strip())(
        lambda w, option=option, value=value: transcribe(w, option, *([value] if value else [])))
case("cli", "asr-evaluate --threads 0")(
    lambda w: Cli(f"{EVALUATE}:main", ["--model", str(w.model), "--manifest",
                                       str(manifest_of_clip(w, text="yes", duration=1.0)),
                                       "--threads", "0"]))


def _long(w: Work) -> Path:
    import numpy as np
    import soundfile as sf
    sf.write(w.folder / "long.wav", np.zeros(301 * 16000, np.float32), 16000)
    return w.folder / "long.wav"


case("cli", "asr-transcribe --no-vad of a 301 s file")(
    lambda w: _writing(w, [_long(w)], "--no-vad"))


def _no_vad_whole(w: Work) -> Cli:
    """--no-vad: one segment per file, from 0 to its end."""
    import soundfile as sf
    spec = _writing(w, [w.clip], "--no-vad", "--timestamps")
    end = f"{sf.info(w.clip).duration:.2f}"
    spec.check = lambda status, out, err: status == 0 and not err \
        and [line.split("\t")[1:3] for line in out.splitlines()] in ([["0.00", end]], [[]])
    return spec


case("output", "asr-transcribe --no-vad --timestamps", "ok")(_no_vad_whole)


class _Stdin(io.RawIOBase):
    """`head`, then `size` bytes of `fill`, counting what was read."""

    def __init__(self, size: int, head: bytes = b"", fill: bytes = b"\0") -> None:
        self.end, self.head, self.fill, self.taken = len(head) + size, head, fill, 0

    def readable(self) -> bool:
        return True

    def readinto(self, buffer) -> int:
        n = min(len(buffer), self.end - self.taken)
        from_head = self.head[self.taken:self.taken + n]
        rest = n - len(from_head)
        buffer[:n] = from_head + (self.fill * (rest // len(self.fill) + 1))[:rest]
        self.taken += n
        return n


def _from_stdin(make: Callable[[Work], _Stdin], said: str, cap: int | None = None,
                ) -> Callable[[Work], bool]:
    """`asr-transcribe -` of what `make` gives: one error line containing `said`, exit 1,
    having read at most 2 MiB more than the cap (`cap` replaces MAX_STDIN_BYTES)."""
    def run(w: Work) -> bool:
        import asr.transcribe as transcribe
        stdin, saved = make(w), (sys.stdin, transcribe.MAX_STDIN_BYTES)
        sys.stdin = io.TextIOWrapper(io.BufferedReader(stdin))
        transcribe.MAX_STDIN_BYTES = cap or saved[1]
        try:
            status, _, err = run_cli(Cli(f"{TRANSCRIBE}:main", ["--model", str(w.model), "-"]))
        finally:
            sys.stdin, transcribe.MAX_STDIN_BYTES = saved
        return status == 1 and len(err.splitlines()) == 1 and said in err \
            and stdin.taken <= (cap or 0) + (2 << 20)
    return run


case("output", "a terabyte of zeros on stdin", "ok")(
    _from_stdin(lambda w: _Stdin(1 << 40), "-: not readable as audio"))
case("output", "a terabyte of text on stdin", "ok")(
    _from_stdin(lambda w: _Stdin(1 << 40, fill=b"not audio\n"), "-: not readable as audio"))
case("output", "random bytes on stdin", "ok")(
    _from_stdin(lambda w: _Stdin(0, head=os.urandom(3 << 20)), "-: not readable as audio"))
case("output", "nothing on stdin", "ok")(_from_stdin(lambda w: _Stdin(0), "-: empty file"))
case("output", "a WAV header, then zeros without end, on stdin", "ok")(
    _from_stdin(lambda w: _Stdin(1 << 40, head=w.clip.read_bytes()[:44]), "-: more than ",
                cap=4 << 20))

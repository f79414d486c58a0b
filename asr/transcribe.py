r"""Transcribe audio files: `python -m asr.transcribe --model DIR FILE [FILE ...]`.

Prints `FILE<TAB>text` per file; `--timestamps` prints `FILE<TAB>start<TAB>end<TAB>text` per
utterance instead, `--word-timestamps` the same per word; `--json` prints one JSON object per
file (with `segments` under either). File names are written with backslashes doubled and
tabs, newlines and other control characters escaped (`\t`, `\n`, `\x1b`), so every line keeps
its columns. `--output-format` (and
`--output-dir`) write files as whisper does instead: DIR/NAME.txt, .srt, .vtt, .tsv, .json
for each input NAME.ext, nothing on stdout. Inputs are any format soundfile reads (WAV, FLAC,
OGG, MP3, ...), of any rate and length; `-` reads one from stdin, and a pipe named
(`/dev/stdin`, `<(cat x.wav)`) is read as stdin is. Files of any length are
streamed and cut into utterances by the VAD. A file that cannot be read gets one error line on
stderr, at the start or halfway through; the others are still transcribed, and the exit
status is 1. `--backend onnx` runs the model's exported graphs (`python -m asr.export`) in
onnxruntime. `--no-vad` decodes each file whole instead of cutting it (up to 300 s a file);
`--threads N` sets the CPU threads of either backend. An output file never replaces an input:
naming one (`D/x.tsv` with `--output-dir D --output-format tsv`) is a usage error. On a
terminal, a progress bar on stderr counts the seconds of audio transcribed; when the reader of
stdout goes away (`| head -1`), the command ends quietly.
"""

import argparse
import json
import os
import stat
import sys
import tempfile
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import soundfile
import torch

from asr.audio import AudioError
from asr.checkpoint import ModelDirError, save_text
from asr.cli import ArgumentParser, int_in, print_error, quiet_pipe, tsv_field
from asr.formats import FORMATS, record, render
from asr.models import DEFAULT as DEFAULT_MODEL
from asr.models import model_path, package_problem
from asr.outputs import STDIN, input_keys, model_files, replaced
from asr.progress import print_line
from asr.search import MODES
from asr.stream import check_audio_file
from asr.transcriber import (
    BACKENDS,
    DEFAULT_VAD,
    MAX_BATCH,
    MAX_THREADS,
    Transcriber,
    Transcript,
)
from asr.untrusted import UntrustedInputError, read_text

PROG = "asr-transcribe"  # the name usage errors begin with
MAX_WORDS_BYTES = 1 << 20  # a word list (a task's vocabulary)
STDIN_HEAD_BYTES = 1 << 20  # enough for any header soundfile reads (FLAC, Ogg, MP3 included)
MAX_STDIN_BYTES = 8 << 30  # hours of audio in any format; a file is streamed without a bound



@quiet_pipe
def main(argv: list[str] | None = None) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
    formats = checked_formats(parser, args)
    set_threads(args)
    try:
        transcriber = Transcriber.from_pretrained(args.model, args.device,
                                                  vad=DEFAULT_VAD if args.vad else None,
                                                  batch_size=args.batch_size,
                                                  backend=args.backend, threads=args.threads,
                                                  **decoding_overrides(args))
        if args.word_timestamps and not transcriber.network.has_ctc:
            raise ValueError(f"{args.model}: --word-timestamps needs a model with a CTC head")
    except (ModelDirError, ValueError) as err:
        print_error(err)
        return 1
    try:
        with stream_copies(args.files) as paths:
            failed = transcribe_files(transcriber, args, paths, formats)
    except AudioError as err:  # a stream itself, past its bound (the files' own are printed)
        print_error(err)
        return 1
    return 1 if failed else 0


def build_parser() -> ArgumentParser:
    parser = ArgumentParser(prog=PROG, description=__doc__.splitlines()[0])
    parser.add_argument("files", nargs="+", help="audio files in any format soundfile reads, "
                                                 "any rate and length; - reads one from stdin")
    parser.add_argument("--model", type=model_path, default=DEFAULT_MODEL,
                        help="a model directory written by training, or a shipped model's name "
                             "(default: %(default)s)")
    parser.add_argument("--json", action="store_true", help="one JSON object per file")
    parser.add_argument("--timestamps", action="store_true",
                        help="print each utterance with its start and end (seconds)")
    parser.add_argument("--word-timestamps", action="store_true",
                        help="time every word (CTC forced alignment): a line per word, and "
                             "words in the json, srt and vtt files")
    parser.add_argument("--output-format", choices=(*FORMATS, "all"),
                        help="write a file of this format per input instead of printing "
                             "(default with --output-dir: all)")
    parser.add_argument("--output-dir", help="where --output-format files go (default: .)")
    parser.add_argument("--highlight-words", action="store_true",
                        help="srt/vtt: a cue per word, underlined (needs --word-timestamps)")
    parser.add_argument("--vad", action=argparse.BooleanOptionalAction, default=True,
                        help="cut each file into utterances where the voice activity detector "
                             "hears speech (default); --no-vad decodes each file whole, as one "
                             "utterance of at most 300 s")
    add_decoding_arguments(parser)
    return parser


def checked_formats(parser: ArgumentParser, args: argparse.Namespace) -> list[str]:
    """The output formats to write; a usage error (exit 2) for options that do not fit."""
    if args.highlight_words and not args.word_timestamps:
        parser.error("--highlight-words needs --word-timestamps")
    if args.files.count(STDIN) > 1:
        parser.error("- (stdin) can be given once")
    formats = output_formats(args.output_format, args.output_dir)
    if formats and package_problem(args.output_dir or "."):
        parser.error(f"--output-dir {args.output_dir or '.'} "
                     f"{package_problem(args.output_dir or '.', 'transcripts')}")
    if formats:
        clash = first_clash(args.files)
        if clash:
            parser.error(f"{clash[0]} and {clash[1]} would both write "
                         f"{output_stem(clash[0])}.* in the output folder")
        replaced = replaced_input(args.files, Path(args.output_dir or "."), formats,
                                  model_files(Path(args.model)))
        if replaced:
            parser.error(f"{replaced[1]} is the input {replaced[0]}: its output would replace "
                         "it; pick another --output-dir")
    return formats


def transcribe_files(transcriber: Transcriber, args: argparse.Namespace, paths: dict[str, str],
                     formats: list[str]) -> int:
    """Print or write each file's transcript, an error line for each that cannot be read;
    returns how many failed."""
    names, failed = [], 0
    for name in args.files:
        try:
            check_audio_file(paths[name])
            names.append(name)
        except AudioError as err:
            print_error(f"{name}: {err.problem}")
            failed += 1
    results = transcriber.transcribe_each([paths[n] for n in names],
                                          word_timestamps=args.word_timestamps,
                                          show_progress=True)
    for name, result in zip(names, results, strict=True):
        if isinstance(result, AudioError):  # went bad after its first block
            print_error(f"{name}: {result.problem}")
            failed += 1
        elif formats:
            failed += not write_outputs(name, result, formats, Path(args.output_dir or "."),
                                        args.highlight_words)
        else:
            print_line(format_result(name, result, args.json, args.timestamps,
                                     args.word_timestamps))
    return failed


def output_formats(output_format: str | None, output_dir: str | None) -> list[str]:
    """The formats to write; none (print to stdout) unless a format or a folder is named."""
    if output_format is None and output_dir is None:
        return []
    return list(FORMATS) if output_format in (None, "all") else [output_format]


def output_stem(name: str) -> str:
    """An input's output files are named after it: a.wav -> a.srt; stdin -> stdin.srt."""
    return "stdin" if name == STDIN else Path(name).stem


def first_clash(names: list[str]) -> tuple[str, str] | None:
    """Two inputs whose output files would have the same names, if any."""
    seen: dict[str, str] = {}
    for name in names:
        stem = output_stem(name)
        if stem in seen:
            return seen[stem], name
        seen[stem] = name
    return None


def replaced_input(names: list[str], folder: Path, formats: list[str], others: list[str] = (),
                   ) -> tuple[str, Path] | None:
    """An input (or one of `others`: files read besides them) that one of the output files
    would replace, with that file, if any."""
    inputs = input_keys([*names, *others])
    for name in names:
        for fmt in formats:
            path = folder / f"{output_stem(name)}.{fmt}"
            found = replaced(path, inputs)
            if found is not None:
                return found, path
    return None


def write_outputs(name: str, result: Transcript, formats: list[str], folder: Path,
                  highlight_words: bool) -> bool:
    """Write one input's files (each atomically); False, after an error line, if one fails."""
    for fmt in formats:
        path = folder / f"{output_stem(name)}.{fmt}"
        try:
            save_text(render(result, fmt, name, highlight_words), path)
        except OSError as err:
            print_error(f"{path}: cannot write ({err.strerror or err})")
            return False
    return True


@contextmanager
def stream_copies(names: list[str]) -> Iterator[dict[str, str]]:
    """Each name -> the path to read it from: stdin (`-`) and each FIFO or character device
    named (`/dev/stdin` on a pipe, `<(cat x.wav)`) copied to a temporary file (soundfile needs
    to seek; such a file's size says nothing), removed afterwards; other names as they are.

    A copy is bounded: once its first STDIN_HEAD_BYTES are in, the rest is read only if
    soundfile takes them for the start of an audio file (else the transcription reports
    that the head is no audio: `cat /dev/zero |` costs a megabyte, not the disk), and at
    most MAX_STDIN_BYTES in all (an AudioError past that)."""
    streams = list(dict.fromkeys(name for name in names if _is_stream(name)))
    if not streams:
        yield {name: name for name in names}
        return
    with tempfile.TemporaryDirectory(prefix="asr-stdin-") as folder:
        copies = {}
        for number, name in enumerate(streams):
            copies[name] = str(Path(folder) / f"stream{number}")
            _copy_stream(name, Path(copies[name]))
        yield {name: copies.get(name, name) for name in names}


def _is_stream(name: str) -> bool:
    """Whether `name` is read as a stream: stdin, a FIFO or a character device."""
    if name == STDIN:
        return True
    try:
        mode = os.stat(name).st_mode
    except (OSError, ValueError):  # reported when the file is checked
        return False
    return stat.S_ISFIFO(mode) or stat.S_ISCHR(mode)


def _copy_stream(name: str, path: Path) -> None:
    """`name`'s bytes into `path`, bounded (`stream_copies`)."""
    try:
        source = sys.stdin.buffer if name == STDIN else open(name, "rb")  # noqa: SIM115
    except OSError as err:
        raise AudioError(name, f"cannot open ({err.strerror or err})") from None
    try:
        with path.open("wb") as out:
            out.write(source.read(STDIN_HEAD_BYTES))
            out.flush()
            if _audio_header(path):
                _copy_bounded(name, source, out)
    except OSError as err:
        raise AudioError(name, f"cannot read ({err.strerror or err})") from None
    finally:
        if source is not sys.stdin.buffer:
            source.close()


def _audio_header(path: Path) -> bool:
    """Whether soundfile can open `path` (its header, read from a file's first bytes)."""
    try:
        soundfile.info(str(path))
    except (soundfile.LibsndfileError, RuntimeError, TypeError, ValueError, OSError):
        return False
    return True


def _copy_bounded(name: str, source, out) -> None:
    copied = out.tell()
    while block := source.read(1 << 20):
        copied += len(block)
        if copied > MAX_STDIN_BYTES:
            where = "on stdin" if name == STDIN else "from the stream"
            raise AudioError(name, f"more than {MAX_STDIN_BYTES / (1 << 30):g} GiB {where}; "
                                   "refused (save it to a file and transcribe that)")
        out.write(block)


def add_decoding_arguments(parser: argparse.ArgumentParser) -> None:
    """Options shared with `asr.evaluate`: they override the model's saved `decode` config."""
    parser.add_argument("--beam-size", type=int, help="1 = greedy")
    parser.add_argument("--ctc-weight", type=float, help="joint CTC/attention weight (0..1)")
    parser.add_argument("--mode", choices=MODES, help="ctc_greedy: CTC head only, fastest")
    parser.add_argument("--words", help="a text file of the only words that may be written "
                                        "(a task's vocabulary, e.g. the ten digits)")
    parser.add_argument("--grammar", help="a grammar file (Rhino context YAML): write only its "
                                          "sentences (a command grammar, as Vosk's)")
    parser.add_argument("--lm", help="language model directory (python -m asr.train_lm) to fuse")
    parser.add_argument("--lm-weight", type=float, help="log P_att + W log P_lm (default 1.0)")
    parser.add_argument("--lead-in-ms", type=float,
                        help="silence put before each utterance, for clips cut tight to the speech")
    parser.add_argument("--batch-size", type=int_in(1, MAX_BATCH), default=16,
                        help="utterances decoded at once")
    parser.add_argument("--device", default="auto", help="auto, cpu, cuda or cuda:N")
    parser.add_argument("--backend", choices=BACKENDS, default="torch",
                        help="onnx: the graphs python -m asr.export wrote, in onnxruntime")
    parser.add_argument("--threads", type=int_in(1, MAX_THREADS),
                        help="CPU threads of either backend (default: one for one utterance, "
                             "one per idle core for a batch: asr/threads.py)")


def set_threads(args: argparse.Namespace) -> None:
    """`--threads`: torch's thread count for all its work (decoding takes it as a fixed count,
    either backend)."""
    if args.threads:
        torch.set_num_threads(args.threads)


def decoding_overrides(args: argparse.Namespace) -> dict:
    pairs = {"beam_size": args.beam_size, "ctc_weight": args.ctc_weight, "mode": args.mode,
             "words": read_words(args.words) if args.words else None, "lm": args.lm,
             "lm_weight": args.lm_weight, "lead_in_ms": args.lead_in_ms,
             "grammar": args.grammar}
    return {key: value for key, value in pairs.items() if value is not None}


def read_words(path: str) -> list[str]:
    """The words of a word-list file (whitespace-separated, any number per line)."""
    try:
        words = read_text(path, MAX_WORDS_BYTES, "the word list").split()
    except UntrustedInputError as err:
        raise ValueError(str(err)) from None
    if not words:
        raise ValueError(f"{path}: the word list is empty")
    return words


def format_result(name: str, result: Transcript, as_json: bool, timestamps: bool,
                  word_timestamps: bool = False) -> str:
    if as_json:
        return json.dumps(record(name, result, segments=timestamps or word_timestamps))
    field = tsv_field(name)
    if word_timestamps:
        return "\n".join(f"{field}\t{w.start:.2f}\t{w.end:.2f}\t{w.word}"
                         for s in result.segments for w in s.words or [])
    if timestamps:
        return "\n".join(f"{field}\t{s.start:.2f}\t{s.end:.2f}\t{s.text}" for s in result.segments)
    return f"{field}\t{result.text}"


if __name__ == "__main__":
    sys.exit(main())

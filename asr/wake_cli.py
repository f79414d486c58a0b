"""asr-wake: the wake phrases heard in a file or stream, one line each (asr/wake.py).

    asr-wake --wake computer room.wav
    asr-wake --wake computer --wake "hey jarvis" --sensitivity 0.6 recording.flac
    arecord -q -f S16_LE -r 16000 -c 1 | asr-wake --wake computer -

Each detection is one tab-separated line: the time (seconds into the audio, the end of the
phrase), the phrase and its score (nats against the free path; 0 is a perfect match). A file of
any format and length is streamed; `-` reads stdin as it comes, in bounded memory: a WAV stream
(16-bit PCM, any rate and channels) or, without a RIFF header, raw 16-bit little-endian mono PCM
at 16 kHz.
"""

import io
import sys
import wave
from collections.abc import Iterator
from typing import BinaryIO

import numpy as np
import soxr

from asr.audio import AudioError
from asr.checkpoint import ModelDirError
from asr.cli import ArgumentParser, float_in, print_error, quiet_pipe, tsv_field
from asr.models import DEFAULT
from asr.stream import check_audio_file
from asr.wake import DEFAULT_SENSITIVITY, WakeWordDetector

PROG = "asr-wake"
STDIN = "-"
BLOCK = 16000  # samples read from stdin at a time


def stdin_blocks(stream: BinaryIO, sample_rate: int) -> Iterator[np.ndarray]:
    """Float blocks at `sample_rate` from a WAV stream or raw 16-bit mono PCM, as they come."""
    reader = stream if hasattr(stream, "peek") else io.BufferedReader(stream)
    if reader.peek(4)[:4] != b"RIFF":
        yield from _raw(reader)
        return
    try:
        audio = wave.open(reader, "rb")
    except (wave.Error, EOFError) as err:
        raise AudioError("<stdin>", f"not a WAV stream ({err})") from None
    if audio.getsampwidth() != 2:
        raise AudioError("<stdin>", f"a WAV stream must hold 16-bit PCM, got "
                                    f"{8 * audio.getsampwidth()}-bit")
    channels, rate = audio.getnchannels(), audio.getframerate()
    resampler = None if rate == sample_rate else soxr.ResampleStream(rate, sample_rate, 1,
                                                                      dtype="float32")
    while data := audio.readframes(BLOCK):
        block = np.frombuffer(data[:len(data) // (2 * channels) * 2 * channels], "<i2")
        block = block.reshape(-1, channels).mean(1).astype(np.float32) / 32768
        yield block if resampler is None else resampler.resample_chunk(block)
    if resampler is not None:
        yield resampler.resample_chunk(np.zeros(0, np.float32), last=True)


def _raw(reader: BinaryIO) -> Iterator[np.ndarray]:
    while data := reader.read(2 * BLOCK):
        yield np.frombuffer(data[:len(data) // 2 * 2], "<i2").astype(np.float32) / 32768


def build_parser() -> ArgumentParser:
    parser = ArgumentParser(prog=PROG, description=__doc__.splitlines()[0])
    parser.add_argument("input", help="an audio file (any format soundfile reads), or - for "
                                      "stdin (WAV, or raw 16-bit mono PCM at 16 kHz)")
    parser.add_argument("--wake", action="append", required=True, metavar="PHRASE",
                        help="a phrase to listen for, as text (repeat for several; "
                             "'a|b' gives it two spellings)")
    parser.add_argument("--sensitivity", type=float_in(0, 1), default=DEFAULT_SENSITIVITY,
                        help="0..1: higher hears more, with more false alarms (default 0.5)")
    parser.add_argument("--model", default=DEFAULT,
                        help="a model directory, or a shipped model's name (default base)")
    parser.add_argument("--device", default="cpu", help="auto | cpu | cuda")
    return parser


@quiet_pipe
def main(argv: list[str] | None = None, stdin: BinaryIO | None = None) -> int:
    args = build_parser().parse_args(argv)
    try:
        if args.input != STDIN:
            check_audio_file(args.input)  # a bad file fails before the model loads
        detector = WakeWordDetector(args.wake, args.sensitivity, args.model, device=args.device)
        source = stdin_blocks(stdin or sys.stdin.buffer, detector.sample_rate) \
            if args.input == STDIN else args.input
        for found in detector.detect(source):
            print(f"{found.time:.2f}\t{tsv_field(found.phrase)}\t{found.score:.2f}", flush=True)
    except (AudioError, ModelDirError, ValueError) as err:
        print_error(err)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())

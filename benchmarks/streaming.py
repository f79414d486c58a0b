"""Streaming recognition's cost: a stream (partials and finals) against offline decoding.

    python -m benchmarks.streaming --threads 1 --sentences 20 --words 20 --rounds 3

On real clips (cathy's read sentences, Speech Commands words), each file is decoded offline
(`Transcriber.transcribe`) and through a stream fed in blocks of `--block-ms` as a microphone
delivers them (`Transcriber.stream`), alternating round by round. Printed: the CPU real-time
factor of each (wall time over audio seconds, median over rounds), the stream's cost over
offline's, the partials decoded per second of speech and the interval between them in audio
seconds (median and longest, the utterance's start counting as the first), the partial's
greatest lag behind the audio, and how many files' finals equal offline decoding (text and
times).
"""

import statistics
from pathlib import Path

import numpy as np

from asr.stream import stream_file
from asr.transcriber import Transcriber
from benchmarks.harness import (
    alternate,
    base_parser,
    cathy,
    markdown_table,
    median,
    report,
    sample,
    set_threads,
    speech_commands,
)


def waves(transcriber: Transcriber, files: list[Path]) -> list[np.ndarray]:
    """Each file at the model's rate, read as offline transcription reads it."""
    return [np.concatenate(list(stream_file(f, transcriber.sample_rate))) for f in files]


def streamed(transcriber: Transcriber, wave: np.ndarray, block: int) -> dict:
    """One stream over `wave`: its finals' segments and its partials' timing."""
    stream = transcriber.stream()
    finals, ends, lags, starts = [], [], [], []
    for start in range(0, len(wave), block):
        if stream.accept(wave[start:start + block]):
            while (final := stream.final()) is not None:
                finals.append(final.segments[0])
        if stream.in_speech:
            if stream.partials.start not in starts:
                starts.append(stream.partials.start)
                ends.append([stream.partials.start])
            if stream.partial_end != ends[-1][-1]:
                ends[-1].append(stream.partial_end)
            lags.append(stream.seconds - stream.partial_end)
    stream.finish()
    while (final := stream.final()) is not None:
        finals.append(final.segments[0])
    intervals = [b - a for times in ends for a, b in zip(times, times[1:], strict=False)]
    return {"finals": finals, "intervals": intervals, "lags": lags,
            "partials": sum(len(times) - 1 for times in ends)}


def main(argv: list[str] | None = None) -> None:
    parser = base_parser(__doc__.splitlines()[0])
    parser.add_argument("--model", default="base", help="a model directory or shipped name")
    parser.add_argument("--sentences", type=int, default=20, help="cathy's sentences")
    parser.add_argument("--words", type=int, default=20, help="Speech Commands words")
    parser.add_argument("--block-ms", type=int, default=30, help="samples per accept")
    args = parser.parse_args(argv)
    set_threads(args.threads)
    files = [f for f, _ in sample(cathy(args.data), args.sentences, args.seed)] + \
        [f for f, _ in sample(speech_commands(args.data), args.words, args.seed)]
    transcriber = Transcriber.from_pretrained(args.model, device="cpu", batch_size=1)
    audio = waves(transcriber, files)
    seconds = sum(len(w) for w in audio) / transcriber.sample_rate
    block = transcriber.sample_rate * args.block_ms // 1000
    offline = [transcriber.transcribe(f).segments for f in files]
    runs = [streamed(transcriber, w, block) for w in audio]
    times = alternate({"offline": lambda: [transcriber.transcribe(w) for w in audio],
                       "stream": lambda: [streamed(transcriber, w, block) for w in audio]},
                      args.rounds, warmup=0)
    rtf = {name: median(t) / seconds for name, t in times.items()}
    intervals = [i for run in runs for i in run["intervals"]]
    speech = sum(s.end - s.start for run in runs for s in run["finals"])
    figures = {"files": len(files), "audio_seconds": round(seconds, 2), "rtf": rtf,
               "stream_over_offline": rtf["stream"] / rtf["offline"],
               "partials_per_speech_second": sum(r["partials"] for r in runs) / max(speech, 1e-9),
               "interval_median": statistics.median(intervals) if intervals else None,
               "interval_max": max(intervals, default=None),
               "lag_max": max((lag for r in runs for lag in r["lags"]), default=None),
               "finals_equal_offline": sum(r["finals"] == o for r, o in
                                           zip(runs, offline, strict=True))}
    rows = [["offline (transcribe)", f"{rtf['offline']:.4f}", "1.00x", "", "", ""],
            [f"stream, {args.block_ms} ms blocks", f"{rtf['stream']:.4f}",
             f"{figures['stream_over_offline']:.2f}x",
             f"{figures['partials_per_speech_second']:.2f}",
             _seconds(figures["interval_median"], figures["interval_max"]),
             f"{figures['finals_equal_offline']}/{len(files)}"]]
    print(f"{len(files)} files, {seconds:.1f} s of audio, {args.rounds} rounds; the partial's "
          f"greatest lag behind the audio: {_seconds(figures['lag_max'])}\n")
    table = markdown_table(["decoding", "RTF", "cost", "partials per s of speech",
                            "interval between partials (median / max)",
                            "finals = offline"], rows)
    report("Streaming recognition vs offline", table, figures, args.json)


def _seconds(*values: float | None) -> str:
    return " / ".join("-" if v is None else f"{v:.2f} s" for v in values)


if __name__ == "__main__":
    main()

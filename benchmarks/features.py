"""Front end: asr.features (torchaudio) vs librosa, per clip, same parameters, values compared.

    python -m benchmarks.features --threads 2 --rounds 7 --json bench_features.json

Both compute the log-mel filterbank (and MFCC) of conf/features/fbank.yaml (25 ms Hann window,
10 ms hop, 512-point FFT, 80 Slaney mel bands, no centre padding) on the same real clips held in
memory at 16 kHz, one clip per call as an on-line recogniser would. Rounds alternate the two;
the median round's time per clip is reported, with the largest difference between the values.
"""

import sys
from functools import partial

import librosa
import numpy as np
import torch

from asr.audio import load_audio
from asr.features import FeatureConfig, FrontEnd
from benchmarks.harness import (
    alternate,
    base_parser,
    cathy,
    fsdd,
    markdown_table,
    median,
    report,
    require_data,
    sample,
    set_threads,
    speech_commands,
)


def ours(front: FrontEnd, waves: list[torch.Tensor]) -> list[np.ndarray]:
    with torch.no_grad():
        return [front.raw(w[None], torch.tensor([len(w)]))[0][0].numpy() for w in waves]


def reference(cfg: FeatureConfig, waves: list[np.ndarray]) -> list[np.ndarray]:
    """librosa's log-mel (or MFCC as torchaudio computes it: dB with an 80 dB floor, DCT)."""
    out = []
    for wave in waves:
        mel = librosa.feature.melspectrogram(
            y=wave, sr=cfg.sample_rate, n_fft=cfg.n_fft, hop_length=cfg.hop_length,
            win_length=cfg.win_length, center=False, power=2.0, n_mels=cfg.n_mels)
        if cfg.kind == "fbank":
            out.append(np.log(mel + 1e-6).T)
        else:
            db = librosa.power_to_db(mel, ref=1.0, amin=1e-10, top_db=80.0)
            out.append(librosa.feature.mfcc(S=db, n_mfcc=cfg.n_mfcc).T)
    return out


def main(argv: list[str] | None = None) -> None:
    parser = base_parser(__doc__.splitlines()[0])
    parser.add_argument("--clips", type=int, default=20, help="clips per corpus")
    args = parser.parse_args(argv)
    set_threads(args.threads)
    require_data(args.data)
    files = [f for corpus in (fsdd, speech_commands, cathy)
             for f, _ in sample(corpus(args.data), args.clips, args.seed)]
    rows, results = [], {}
    for kind in ("fbank", "mfcc"):
        cfg = FeatureConfig(kind=kind, freq_masks=0, time_masks=0)
        waves = [load_audio(f, cfg.sample_rate) for f in files]
        arrays = [w.numpy() for w in waves]
        front = FrontEnd(cfg).eval()
        times = alternate({"asr.features (torchaudio)": partial(ours, front, waves),
                           "librosa": partial(reference, cfg, arrays)}, args.rounds)
        diff = max(float(np.abs(a - b).max())
                   for a, b in zip(ours(front, waves), reference(cfg, arrays), strict=True))
        audio = sum(len(w) for w in waves) / cfg.sample_rate
        base = median(times["librosa"])
        for name, seconds in times.items():
            t = median(seconds)
            rows.append([kind, name, f"{1000 * t / len(files):.2f}", f"{audio / t:.0f}",
                         f"{base / t:.2f}x", f"{diff:.2e}"])
        results[kind] = {"clips": len(files), "audio_seconds": audio, "max_abs_difference": diff,
                         "round_seconds": times}
    table = markdown_table(["features", "implementation", "ms per clip", "audio s/s",
                            "speed vs librosa", "max |difference|"], rows)
    report(f"Front end vs librosa ({args.threads} thread(s), {len(files)} clips, median of "
           f"{args.rounds} rounds)", table, results, args.json)


if __name__ == "__main__":
    sys.exit(main())

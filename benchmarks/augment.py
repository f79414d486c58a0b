"""Augmentation: what each part of asr.augment costs per second of audio, and what a training
config's draws cost together.

    python -m benchmarks.augment --threads 1 --rounds 5 --json bench_augment.json
    python -m benchmarks.augment --threads 1 --config exp/base/config.yaml

Every part is applied to every clip (real people: FSDD digits, Speech Commands words, cathy's
sentences, held in memory at 16 kHz), one clip per call as the training loader does, in rounds
that alternate the parts; the median round is reported. The room convolution is timed twice,
as `reverberate` does it (FFT at a length with no prime factor above 5) and with torchaudio's
`fftconvolve` (FFT at exactly the output's length), on the same clips and rooms, with the
largest difference between the two. With `--config` (a model directory's config.yaml, as
training ran it), the parts' costs weighted by how often its `data.augment` draws them give its
cost per audio second, part by part: the training process pays it on top of the step
(`data.num_workers=0`).
"""

import sys
from functools import partial
from pathlib import Path
from tempfile import TemporaryDirectory

import torch
import torchaudio.functional as AF
from omegaconf import OmegaConf

from asr.audio import load_audio
from asr.augment import (
    AugmentConfig,
    add_noise,
    band_limit,
    convolve,
    reverberate,
    speed_perturb,
    telephone,
)
from asr.data import read_manifest
from asr.rooms import write_rooms
from benchmarks import harness

RATE = 16000


def each(part, waves: list[torch.Tensor]) -> list[torch.Tensor]:
    return [part(i, wave) for i, wave in enumerate(waves)]


def parts(rooms: list[torch.Tensor], noise: torch.Tensor) -> dict:
    """name -> (clip index, wave) -> augmented wave; clip i gets room i mod len(rooms)."""
    def room(i: int, wave: torch.Tensor, how) -> torch.Tensor:
        rir = rooms[i % len(rooms)]
        peak = int(rir.abs().argmax())
        return how(wave, rir)[peak:peak + len(wave)]

    return {
        "speed x0.9": lambda i, w: speed_perturb(w, RATE, 0.9),
        "speed x1.1": lambda i, w: speed_perturb(w, RATE, 1.1),
        "room (reverberate)": lambda i, w: reverberate(w, rooms[i % len(rooms)]),
        "room convolution, fast FFT length (asr.augment.convolve)": partial(room, how=convolve),
        "room convolution, torchaudio fftconvolve": partial(room, how=AF.fftconvolve),
        "noise at 10 dB": lambda i, w: add_noise(w, noise[:len(w)], 10.0),
        "narrowband (8 kHz)": lambda i, w: band_limit(w, RATE, 8000),
        **{f"telephone ({codec})": partial(lambda i, w, c: telephone(w, RATE, c), c=codec)
           for codec in ("ULAW", "ALAW", "GSM610")},
    }


def config_cost(config_path: Path, ms_per_second: dict[str, float]) -> tuple[list, dict]:
    """Rows of (part, share drawn, ms per audio second) for the config's data.augment."""
    cfg = OmegaConf.load(config_path)
    augment = AugmentConfig.from_dict(OmegaConf.to_container(cfg.data.augment, resolve=False))
    speed = augment.speed
    draws = {
        "speed": (speed.enabled, sum(f != 1.0 for f in speed.factors) / len(speed.factors),
                  (ms_per_second["speed x0.9"] + ms_per_second["speed x1.1"]) / 2),
        "room": (augment.reverb.enabled, augment.reverb.prob, ms_per_second["room (reverberate)"]),
        "noise": (augment.noise.enabled, augment.noise.prob, ms_per_second["noise at 10 dB"]),
        "narrowband": (augment.narrowband.enabled, augment.narrowband.prob,
                       ms_per_second["narrowband (8 kHz)"]),
        "telephone": (augment.telephone.enabled, augment.telephone.prob,
                      sum(ms_per_second[f"telephone ({c})"] for c in augment.telephone.codecs)
                      / len(augment.telephone.codecs)),
    }
    rows, total = [], 0.0
    for name, (enabled, share, cost) in draws.items():
        if enabled:
            rows.append([name, f"{share:.2f}", f"{share * cost:.2f}"])
            total += share * cost
    rows.append(["**all drawn parts**", "", f"**{total:.2f}**"])
    return rows, {"config": str(config_path), "ms_per_audio_second": total}


def main(argv: list[str] | None = None) -> None:
    parser = harness.base_parser(__doc__.splitlines()[0])
    parser.add_argument("--clips", type=int, default=20, help="clips per corpus")
    parser.add_argument("--rooms", type=int, default=8, help="simulated rooms (asr.rooms)")
    parser.add_argument("--config", type=Path, help="a config whose data.augment to cost")
    args = parser.parse_args(argv)
    harness.set_threads(args.threads)
    harness.require_data(args.data)
    files = [f for corpus in (harness.fsdd, harness.speech_commands, harness.cathy)
             for f, _ in harness.sample(corpus(args.data), args.clips, args.seed)]
    waves = [load_audio(f, RATE) for f in files]
    with TemporaryDirectory() as tmp:
        manifest = write_rooms(Path(tmp), count=args.rooms, seed=args.seed)
        rooms = [load_audio(u.audio_filepath, RATE) for u in read_manifest(manifest)]
    noise = torch.randn(max(len(w) for w in waves), generator=torch.Generator().manual_seed(0))
    contenders = parts(rooms, noise)
    calls = {name: partial(each, part, waves) for name, part in contenders.items()}
    times = harness.alternate(calls, args.rounds)
    audio = sum(len(w) for w in waves) / RATE
    ms_per_second = {name: 1000 * harness.median(seconds) / audio
                     for name, seconds in times.items()}
    fast, plain = (each(contenders[name], waves) for name in (
        "room convolution, fast FFT length (asr.augment.convolve)",
        "room convolution, torchaudio fftconvolve"))
    difference = max(float((a - b).abs().max()) for a, b in zip(fast, plain, strict=True))
    rows = [[name, f"{ms:.2f}", f"{1000 / ms:.0f}"] for name, ms in ms_per_second.items()]
    table = harness.markdown_table(
        ["part (applied to every clip)", "ms per audio second", "audio s/s"], rows)
    table += f"\n\nroom convolutions: largest |difference| {difference:.2e}"
    results = {"clips": len(files), "audio_seconds": audio, "rooms": len(rooms),
               "ms_per_audio_second": ms_per_second, "round_seconds": times,
               "convolution_max_abs_difference": difference}
    if args.config is not None:
        rows, results["drawn"] = config_cost(args.config, ms_per_second)
        table += f"\n\n{args.config}'s draws:\n\n" + harness.markdown_table(
            ["part", "share of utterances", "ms per audio second"], rows)
    harness.report(f"Augmentation per part ({args.threads} thread(s), {len(files)} clips, "
                   f"{audio:.0f} s of audio, median of {args.rounds} rounds)", table, results,
                   args.json)


if __name__ == "__main__":
    sys.exit(main())

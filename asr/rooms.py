"""Room impulse responses, simulated: rooms to reverberate training speech in (`asr.augment`).

    python -m asr.rooms --out data/rirs [--count 200] [--rt60 0.2 0.9] [--seed 0]

Each response is a shoebox room of random size and reverberation time, with a talker and a
microphone at random places in it, simulated by pyroomacoustics: walls absorbing as Sabine's
formula needs for the drawn RT60, the first reflections by image sources (up to ISM_ORDER
bounces) and the tail by ray tracing, with air absorption: the pure image-source method is
much slower for long reverberation and its tails overshoot the target more (BENCHMARKS.md).
Writes OUT/rir_NNNN.wav (float, at
`--sample-rate`) and OUT/rirs.jsonl, a manifest for `data.augment.reverb.manifest`, whose lines
also carry each room's size, target and measured RT60 and talker-microphone distance.
Measured responses (e.g. a corpus of real rooms) go in a manifest of the same form.
"""

import argparse
import json
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import soundfile as sf

from asr.checkpoint import atomic_write, save_text
from asr.progress import progress

ISM_ORDER = 3  # reflections simulated as image sources; ray tracing does the rest


@dataclass
class Room:
    """What one simulated response stands for."""

    size: tuple[float, float, float]  # metres: length, width, height
    rt60: float  # seconds for the sound to decay by 60 dB
    talker: tuple[float, float, float]
    microphone: tuple[float, float, float]

    @property
    def distance(self) -> float:
        return float(np.linalg.norm(np.subtract(self.talker, self.microphone)))


def draw_room(rng: np.random.Generator, rt60: tuple[float, float]) -> Room:
    """A room 3-10 m x 3-8 m x 2.5-4 m, a talker and a microphone at least 0.5 m from every
    wall and 0.3-3 m apart."""
    size = (rng.uniform(3, 10), rng.uniform(3, 8), rng.uniform(2.5, 4))
    while True:
        talker, microphone = (tuple(rng.uniform(0.5, side - 0.5) for side in size)
                              for _ in range(2))
        room = Room(size, rng.uniform(*rt60), talker, microphone)
        if 0.3 <= room.distance <= 3.0:
            return room


def simulate(room: Room, sample_rate: int) -> np.ndarray:
    """The room's impulse response from talker to microphone (pyroomacoustics)."""
    import pyroomacoustics as pra

    absorption, _ = pra.inverse_sabine(room.rt60, room.size)
    shoebox = pra.ShoeBox(room.size, fs=sample_rate, materials=pra.Material(absorption),
                          max_order=ISM_ORDER, ray_tracing=True, air_absorption=True)
    shoebox.set_ray_tracing(receiver_radius=0.5, n_rays=5000, energy_thres=1e-5)
    shoebox.add_source(room.talker)
    shoebox.add_microphone(room.microphone)
    shoebox.compute_rir()
    rir = np.asarray(shoebox.rir[0][0], dtype=np.float32)
    # peak 1: a response's scale is free (reverberation keeps the input's power), and audio
    # files outside [-1, 1] are refused as integer PCM stored as floats
    return rir / max(float(np.abs(rir).max()), 1e-12)


def measured_rt60(rir: np.ndarray, sample_rate: int) -> float:
    """The response's reverberation time by Schroeder's backward integration."""
    import pyroomacoustics as pra

    return float(pra.experimental.measure_rt60(rir, fs=sample_rate))


def write_rooms(out: Path, count: int, sample_rate: int = 16000,
                rt60: tuple[float, float] = (0.2, 0.9), seed: int = 0) -> Path:
    """Simulate `count` rooms into OUT (module docstring); the manifest's path."""
    rng = np.random.default_rng(seed)
    out.mkdir(parents=True, exist_ok=True)
    lines = []
    for index in progress(range(count), "simulating rooms", unit="room"):
        room = draw_room(rng, rt60)
        try:
            rir = simulate(room, sample_rate)
        except ValueError as err:  # Sabine's formula cannot reach so short an RT60 there
            raise SystemExit(f"error: --rt60 {rt60[0]} {rt60[1]}: {err}") from None
        path = out / f"rir_{index:04d}.wav"
        atomic_write(path, lambda f, r=rir: sf.write(f, r, sample_rate, format="WAV",
                                                     subtype="FLOAT"))
        lines.append(json.dumps({"audio_filepath": path.name, "text": "",
                                 "duration": round(len(rir) / sample_rate, 4),
                                 "rt60": round(room.rt60, 3),
                                 "rt60_measured": round(measured_rt60(rir, sample_rate), 3),
                                 "room": [round(x, 2) for x in room.size],
                                 "distance": round(room.distance, 2)}) + "\n")
    manifest = out / "rirs.jsonl"
    save_text("".join(lines), manifest)
    return manifest


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", type=Path, required=True)
    parser.add_argument("--count", type=int, default=200)
    parser.add_argument("--sample-rate", type=int, default=16000)
    parser.add_argument("--rt60", type=float, nargs=2, default=(0.2, 0.9), metavar=("LOW", "HIGH"))
    parser.add_argument("--seed", type=int, default=0)
    args = parser.parse_args(argv)
    if args.count < 1 or not 0.05 < args.rt60[0] <= args.rt60[1]:
        parser.error("--count must be >= 1 and --rt60 LOW HIGH with 0.05 < LOW <= HIGH")
    manifest = write_rooms(args.out, args.count, args.sample_rate, tuple(args.rt60), args.seed)
    print(f"{manifest}: {args.count} room impulse responses")


if __name__ == "__main__":
    main()

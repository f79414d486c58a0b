"""What every benchmark in benchmarks/ shares: threads, alternating timing, real utterances, output.

Benchmarks print figures, they never fail on speed. Each comparison runs in one process with a
fixed thread count and alternates its contenders round by round, so a neighbour's load on a
shared machine falls on all of them alike; the figures reported are medians over rounds.
"""

import argparse
import json
import os
import platform
import random
import statistics
import time
from collections.abc import Callable
from datetime import date
from pathlib import Path

import soundfile as sf
import torch

from asr.checkpoint import save_text

ROOT = Path(__file__).resolve().parents[1]
SHARED = ROOT.parent / "shared" / "data"
DIGITS = "zero one two three four five six seven eight nine".split()
COMMAND_WORDS = "yes no up down left right on off stop go".split()


def base_parser(description: str) -> argparse.ArgumentParser:
    """Options every benchmark takes: threads, rounds, where the data is, where JSON goes."""
    parser = argparse.ArgumentParser(description=description)
    parser.add_argument("--threads", type=int, default=2, help="torch CPU threads (fixed)")
    parser.add_argument("--rounds", type=int, default=5, help="alternating rounds (median)")
    parser.add_argument("--data", type=Path, default=SHARED, help="the shared real speech")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--json", type=Path, help="also write the results here")
    return parser


def set_threads(threads: int) -> None:
    """Pin torch's threads so every contender runs on the same cores."""
    torch.set_num_threads(threads)


def machine() -> dict:
    """What the figures were measured on."""
    cpu = platform.processor() or "unknown"
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                cpu = line.split(":", 1)[1].strip()
                break
    except OSError:
        pass
    return {"cpu": cpu, "nproc": os.cpu_count(), "torch": torch.__version__,
            "threads": torch.get_num_threads(), "date": date.today().isoformat(),
            "load_avg_1min": os.getloadavg()[0]}


def alternate(contenders: dict[str, Callable[[], object]], rounds: int,
              warmup: int = 1) -> dict[str, list[float]]:
    """Seconds per call of each contender, round-robin; the starting contender rotates."""
    names = list(contenders)
    for _ in range(warmup):
        for name in names:
            contenders[name]()
    times: dict[str, list[float]] = {name: [] for name in names}
    for r in range(rounds):
        for name in names[r % len(names):] + names[:r % len(names)]:
            started = time.perf_counter()
            contenders[name]()
            times[name].append(time.perf_counter() - started)
    return times


def median(values: list[float]) -> float:
    return statistics.median(values)


def matmul_peak(size: int) -> tuple[Callable[[], object], float]:
    """A dense fp32 matmul of two size x size matrices, and its FLOPs."""
    a, b = torch.randn(size, size), torch.randn(size, size)
    out = torch.empty(size, size)
    return (lambda: torch.mm(a, b, out=out)), 2.0 * size**3


def markdown_table(headers: list[str], rows: list[list]) -> str:
    def cell(value) -> str:
        if isinstance(value, float):
            return f"{value:.4g}"
        return str(value)

    lines = ["| " + " | ".join(headers) + " |", "|" + "---|" * len(headers)]
    lines += ["| " + " | ".join(cell(v) for v in row) + " |" for row in rows]
    return "\n".join(lines)


def report(title: str, table: str, results: dict, json_path: Path | None) -> None:
    """Print the table (and the machine) and write the JSON atomically if asked."""
    info = machine()
    print(f"## {title}\n")
    print(f"{info['cpu']}, {info['nproc']} CPUs, torch {info['torch']}, {info['threads']} "
          f"thread(s), load average {info['load_avg_1min']:.1f}, {info['date']}\n")
    print(table)
    if json_path is not None:
        save_text(json.dumps({"benchmark": title, "machine": info, **results}, indent=2) + "\n",
                  json_path)
        print(f"\nwrote {json_path}")


def require_data(root: Path) -> None:
    if not (root / "fsdd" / "recordings").is_dir():
        raise SystemExit(f"error: {root}: real speech not found (pass --data DIR)")


def speaker_of(path: Path) -> str:
    """FSDD `{digit}_{speaker}_{take}.wav`; Speech Commands `[word_]{speaker}_nohash_{n}.wav`."""
    if "_nohash_" in path.name:
        return path.name.split("_nohash_")[0].split("_")[-1]
    return path.stem.split("_")[1]


def fsdd(root: Path) -> list[tuple[Path, str]]:
    """FSDD digits as (path, word)."""
    files = sorted((root / "fsdd" / "recordings").glob("*.wav"))
    return [(f, DIGITS[int(f.name.split("_")[0])]) for f in files]


def speech_commands(root: Path, words: list[str] = COMMAND_WORDS) -> list[tuple[Path, str]]:
    """Speech Commands recordings of `words`, from their own folders or `_unknown_`."""
    base = root / "speech_commands"
    items = []
    for word in words:
        files = sorted((base / word).glob("*.wav")) or sorted(
            (base / "_unknown_").glob(f"{word}_*.wav"))
        items += [(f, word) for f in files]
    return items


def cathy(root: Path) -> list[tuple[Path, str]]:
    """Read sentences (FLAC + .txt) of one speaker."""
    files = sorted((root / "cathy" / "data").glob("*.flac"))
    return [(f, f.with_suffix(".txt").read_text(encoding="utf-8").strip()) for f in files]


def sample(items: list, count: int | None, seed: int) -> list:
    if count is None or count >= len(items):
        return list(items)
    return random.Random(seed).sample(items, count)


def duration(path: Path) -> float:
    info = sf.info(str(path))
    return info.frames / info.samplerate


def write_manifest(path: Path, items: list[tuple[Path, str]]) -> Path:
    """A NeMo-style manifest (absolute paths), written atomically."""
    lines = [json.dumps({"audio_filepath": str(f.resolve()), "text": text,
                         "duration": duration(f)}) for f, text in items]
    save_text("\n".join(lines) + "\n", path)
    return path

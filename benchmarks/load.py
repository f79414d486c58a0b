"""Decoding on a busy machine: RTF at batch 1 idle and beside CPU hogs, for each thread policy.

    python -m benchmarks.load                       # 16 commands + 4 sentences, both backends
    python -m benchmarks.load --clips 6 --sentences 2 --backends torch --loads idle,all
    python -m benchmarks.load --json load.json

A user's machine is never idle (asr/threads.py). This benchmark starts its own load: busy
processes (`while True: pass`), one per core ("all"), or one in all ("one"), beside no load
("idle"), and stops them when it ends, also on an error or Ctrl-C. Under each load, on the same
clips decoded one at a time with beam 5 (the shipped base model), every contender runs in a
process of its own, since OpenMP reads its wait policy once, when torch loads:

- `policy`: what asr does by default (asr.threads: one thread for one utterance, idle threads
  sleep; onnxruntime without spinning);
- `1 thread`: `--threads 1`;
- `old`: one thread per core with OpenMP's and onnxruntime's own waiting (they spin), the
  default before the policy.

Contenders alternate round by round under each load. It prints the RTF (wall time of the
decoding calls over audio seconds, each utterance as the demo decodes it), its slowdown against
the same contender idle, and the demo's median latency from the end of speech to the action over
a stream of commands (`benchmarks.intents.latency`), under the policy.
"""

import argparse
import json
import os
import signal
import subprocess
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
SHARED = ROOT.parent / "shared" / "data"
CONTENDERS = ("policy", "1 thread", "old")
LOADS = {"idle": 0, "one": 1, "all": None}  # busy processes: None is one per core
HOG = "while True: pass"


def start_hogs(count: int) -> list[subprocess.Popen]:
    return [subprocess.Popen([sys.executable, "-c", HOG]) for _ in range(count)]


def stop_hogs(hogs: list[subprocess.Popen]) -> None:
    for hog in hogs:
        hog.kill()
    for hog in hogs:
        hog.wait()


def hog_count(load: str) -> int:
    count = LOADS[load]
    return len(os.sched_getaffinity(0)) if count is None else count


def worker_env(contender: str) -> dict:
    """The contender's environment: `old` without asr's wait policy (OpenMP's own)."""
    env = {k: v for k, v in os.environ.items() if k != "OMP_WAIT_POLICY"}
    if contender == "old":
        env["ASR_BENCH_OLD_WAIT"] = "1"
    env["PYTHONPATH"] = os.pathsep.join(filter(None, [str(ROOT), env.get("PYTHONPATH")]))
    return env


def run_worker(contender: str, backend: str, clips: Path, onnx_dir: Path | None,
               demo: int) -> dict:
    """One contender's figures, from a process of its own."""
    command = [sys.executable, "-m", "benchmarks.load", "--worker", contender,
               "--backend", backend, "--clip-list", str(clips), "--demo", str(demo)]
    if onnx_dir is not None:
        command += ["--onnx-dir", str(onnx_dir)]
    done = subprocess.run(command, env=worker_env(contender), capture_output=True, text=True,
                          cwd=ROOT, timeout=1800)
    if done.returncode != 0:
        raise RuntimeError(f"worker {contender}/{backend} failed: "
                           f"{(done.stderr.strip().splitlines() or ['?'])[-1]}")
    return json.loads(done.stdout.strip().splitlines()[-1])


def worker(args: argparse.Namespace) -> None:
    """Decode the clips one at a time as `args.worker` says; print one JSON line."""
    import asr  # noqa: F401  (sets the wait policy, which `old` takes back before torch loads)
    if os.environ.get("ASR_BENCH_OLD_WAIT"):
        os.environ.pop("OMP_WAIT_POLICY", None)
    import time

    from asr import Transcriber
    from asr.audio import load_audio
    from asr.onnx_backend import OnnxNetwork
    from asr.threads import usable_cpus
    cores = usable_cpus()
    threads = {"policy": None, "1 thread": 1, "old": cores}[args.worker]
    source = args.onnx_dir if args.backend == "onnx" else "base"
    transcriber = Transcriber.from_pretrained(source, "cpu", None, 1, args.backend, threads,
                                              beam_size=5)
    if args.backend == "onnx" and args.worker == "old":  # onnxruntime's own spinning
        network, tokenizer, _ = OnnxNetwork.load(args.onnx_dir, cores, spin=True)
        transcriber = Transcriber(network, tokenizer, transcriber.options, None, 1, None, cores)
    files = json.loads(Path(args.clip_list).read_text())
    waves = [load_audio(f, transcriber.sample_rate) for f in files]
    transcriber.transcribe_waves(waves[:1])  # warm-up
    spent = 0.0
    for wave in waves:
        start = time.perf_counter()
        transcriber.transcribe_waves([wave])
        spent += time.perf_counter() - start
    audio = sum(len(w) for w in waves) / transcriber.sample_rate
    result = {"rtf": spent / audio, "audio_s": audio}
    if args.demo and args.backend == "torch":
        result["demo_latency_s"] = demo_latency(files, args.demo)
    print(json.dumps(result))


def demo_latency(files: list[str], count: int) -> float | None:
    """The demo's median end of speech -> action over `count` of the command clips."""
    from asr.assistant.intents import IntentRecognizer
    from benchmarks.intents import latency
    recognizer = IntentRecognizer.from_pretrained("base")
    commands = [{"audio_filepath": f} for f in files if "speech_commands" in f]
    return latency(recognizer, commands, count, 0)["median_latency_s"]


def clip_list(root: Path, clips: int, sentences: int, out: Path) -> Path:
    """Command words of Speech Commands and cathy's read sentences, as a JSON list."""
    words = sorted((root / "speech_commands").glob("[a-z]*/*.wav"))
    step = max(1, len(words) // max(clips, 1))
    read = sorted((root / "cathy" / "data").glob("*.flac"))
    picked = [str(p) for p in words[::step][:clips] + read[:sentences]]
    if len(picked) < clips + sentences:
        sys.exit(f"benchmarks.load: {root}: too few clips (speech_commands/, cathy/data/)")
    out.write_text(json.dumps(picked))
    return out


def export_onnx(folder: Path) -> Path:
    out = folder / "onnx"
    from asr.models import model_path
    subprocess.run([sys.executable, "-m", "asr.export", "--model", str(model_path("base")),
                    "--format", "onnx", "--out", str(out)], check=True, capture_output=True,
                   cwd=ROOT)
    return out


def measure(args: argparse.Namespace, folder: Path) -> dict:
    clips = clip_list(args.data, args.clips, args.sentences, folder / "clips.json")
    onnx_dir = export_onnx(folder) if "onnx" in args.backends else None
    results: dict = {}
    for load in args.loads:
        hogs = start_hogs(hog_count(load))
        try:
            for round_ in range(args.rounds):
                for backend in args.backends:
                    for contender in CONTENDERS:
                        demo = args.demo if contender == "policy" and round_ == 0 else 0
                        got = run_worker(contender, backend, clips,
                                         onnx_dir if backend == "onnx" else None, demo)
                        key = f"{backend}/{contender}/{load}"
                        results.setdefault(key, []).append(got)
        finally:
            stop_hogs(hogs)
    return results


def summary(results: dict, args: argparse.Namespace) -> list[dict]:
    rows = []
    for backend in args.backends:
        for contender in CONTENDERS:
            idle = median([r["rtf"] for r in results.get(f"{backend}/{contender}/idle", [])])
            for load in args.loads:
                runs = results[f"{backend}/{contender}/{load}"]
                rtf = median([r["rtf"] for r in runs])
                demo = [r["demo_latency_s"] for r in runs if r.get("demo_latency_s") is not None]
                rows.append({"backend": backend, "contender": contender, "load": load,
                             "busy_processes": hog_count(load), "rtf": rtf,
                             "slowdown": rtf / idle if idle else None,
                             "demo_latency_s": median(demo) if demo else None})
    return rows


def median(values: list[float]) -> float | None:
    ordered = sorted(values)
    return ordered[len(ordered) // 2] if ordered else None


def print_rows(rows: list[dict]) -> None:
    print("| backend | contender | load (busy processes) | RTF | x idle | demo latency s |")
    print("|---|---|---|---|---|---|")
    for r in rows:
        slow = f"{r['slowdown']:.2f}" if r["slowdown"] is not None else "-"
        demo = f"{r['demo_latency_s']:.3f}" if r["demo_latency_s"] is not None else "-"
        print(f"| {r['backend']} | {r['contender']} | {r['load']} ({r['busy_processes']}) | "
              f"{r['rtf']:.4f} | {slow} | {demo} |")


def parse(argv: list[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--clips", type=int, default=16, help="command words")
    parser.add_argument("--sentences", type=int, default=4, help="cathy's read sentences")
    parser.add_argument("--rounds", type=int, default=2)
    parser.add_argument("--loads", default="idle,one,all")
    parser.add_argument("--backends", default="torch,onnx")
    parser.add_argument("--demo", type=int, default=10, help="commands in the demo's stream")
    parser.add_argument("--data", type=Path, default=SHARED)
    parser.add_argument("--json", type=Path)
    parser.add_argument("--worker", choices=CONTENDERS, help=argparse.SUPPRESS)
    parser.add_argument("--backend", default="torch", help=argparse.SUPPRESS)
    parser.add_argument("--clip-list", help=argparse.SUPPRESS)
    parser.add_argument("--onnx-dir", type=Path, help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    args.loads = args.loads.split(",")
    args.backends = args.backends.split(",")
    if not set(args.loads) <= set(LOADS) or not set(args.backends) <= {"torch", "onnx"}:
        parser.error(f"--loads from {','.join(LOADS)}; --backends from torch,onnx")
    if "idle" not in args.loads:  # the slowdown's reference, measured after the loads given
        args.loads.append("idle")
    return args


def main(argv: list[str] | None = None) -> None:
    args = parse(argv)
    if args.worker:
        worker(args)
        return
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(1))  # the hogs stop in `finally`
    with tempfile.TemporaryDirectory(prefix="asr-load-") as folder:
        rows = summary(measure(args, Path(folder)), args)
    print_rows(rows)
    if args.json:
        args.json.write_text(json.dumps({"rows": rows}, indent=1))


if __name__ == "__main__":
    main()

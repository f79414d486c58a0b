"""Wake words on Picovoice's protocol, built from the real speech we hold.

    python -m benchmarks.wakeword --threads 1 --hours 1 --json exp/wakeword.json
    python -m benchmarks.wakeword --split dev --hours 1 --calibrate asr/models/base

Keywords: WUW Corpus II's five wake words (Operator, ThinkEngine, Onword, Wildfire, Voyager),
said alone and inside free sentences by real people on telephone lines, of the speakers the
base recipe holds out for --split (recipes/common/corpora.py's `session_splits`: the base model
never heard them), each clip with 0.3 s before and 1 s after it. Background: --hours of
speech that holds no keyword, present DUTY of the time and silence otherwise: those speakers'
sentences with the keyword cut out, cathy's held-out prompts, Speech Commands' words and
espeak-ng voices reading cathy's prompts, each at one level, drawn again in a new order (and
new noise) when the pool is spent. Noise: Speech Commands' background clips (white and pink
noise, dishes, a tap, an exercise bike), mixed into every part SNR_DB below the speech.

Prints per keyword: the miss rate at the strictest false-alarm rate the hours resolve (1 per
10 h needs 10 h: with fewer, no false alarm at all in --hours), the false alarms per hour and
the miss rate at the default sensitivity, and the detector's real-time factor on --threads
(seconds of CPU per second of audio). The curve is read from one loose run: each window's best
span of each keyword, grouped into events as the detector groups them.

Peers on the same audio, when installed (each skipped with a note otherwise): pocketsphinx's
keyphrase spotting (dictionary words only: Operator, Wildfire, Voyager) at its default
threshold; microWakeWord's built-in models (pymicro-wakeword in its own venv, --micro-venv) on
their phrases "alexa" and "hey jarvis", said by espeak-ng voices (no real people say them
here), with ours on the same phrases and audio.

--calibrate DIR (with --split dev) writes DIR/wake.json: the margin at the default sensitivity,
the one at which the median keyword has CALIBRATION_FA_PER_HOUR false alarms on the dev
background.
"""

import json
import math
import random
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import numpy as np
import soundfile as sf
import soxr
import torch

from asr.alignment import align_text
from asr.checkpoint import save_text
from asr.text import normalize_transcription
from asr.wake import DEFAULT_SENSITIVITY, WAKE_FILE, WakeWordDetector, calibrated_margin
from benchmarks.harness import base_parser, machine, set_threads
from recipes.common import corpora, hash_split

RATE = 16000
SNR_DB = 10.0
DUTY = 0.2  # share of the background that is speech
LEVEL = 0.05  # RMS every speech part is brought to
LEAD_S, TAIL_S = 0.3, 1.0  # silence around each keyword clip
LOOSE_MARGIN = 20.0  # nats: the margin the curve is read from
CALIBRATION_FA_PER_HOUR = 0.1  # false alarms per hour per keyword the dev margin aims at
CUT_PAD_S = 0.25
STEM = 5  # letters a near-miss word shares with its sentence's keyword
HOMOPHONES = {"onward", "onwards"}  # said as "onword": no spotter could tell them apart
MICRO_PHRASES = {"alexa": "alexa", "hey_jarvis": "hey jarvis"}
SPOKEN = {"alexa": ["alexa", "alexa what time is it", "alexa turn on the lights"],
          "hey_jarvis": ["hey jarvis", "hey jarvis what is the weather", "hey jarvis play music"]}
ESPEAK_VOICES = ["en-us", "en-us+m3", "en-us+f2", "en-gb", "en-us+m7", "en-us+f4"]


def wuw_split(data: Path, split: str) -> list[dict]:
    root = data / "wuw"
    entries = corpora.entries(root)
    splits = corpora.session_splits(entries)
    return [dict(e, path=root / e["filePath"]) for e in entries
            if splits[e["sessionNumber"]] == split]


def read_wuw(entry: dict) -> np.ndarray:
    samples, _ = sf.read(str(entry["path"]), dtype="float32", **corpora.WUW_FORMAT)
    return soxr.resample(samples, 8000, RATE).astype(np.float32)


def leveled(wave: np.ndarray) -> np.ndarray:
    rms = float(np.sqrt(np.mean(wave ** 2)))
    return wave * (LEVEL / rms) if rms > 0 else wave


class Noise:
    """An endless stream of the background clips in random order, at SNR_DB below LEVEL."""

    def __init__(self, data: Path, rng: random.Random) -> None:
        folder = data / "speech_commands" / "_silence_"
        self.clips = [leveled(sf.read(str(p), dtype="float32")[0])
                      for p in sorted(folder.glob("*.wav"))]
        if not self.clips:
            sys.exit(f"error: {folder}: no background-noise clips")
        self.rng, self.left = rng, np.zeros(0, np.float32)
        self.gain = 10 ** (-SNR_DB / 20)

    def take(self, n: int) -> np.ndarray:
        while len(self.left) < n:
            self.left = np.concatenate([self.left, self.rng.choice(self.clips)])
        out, self.left = self.left[:n], self.left[n:]
        return out * self.gain


def keyword_clips(entries: list[dict], noise: Noise) -> list[tuple]:
    """(keyword, noisy clip, keyword start, end, said alone) for every utterance that says its
    keyword."""
    clips = []
    for entry in entries:
        keyword = corpora.keyword(entry)
        if keyword not in normalize_transcription(entry["transcription"]).split():
            continue
        speech = leveled(read_wuw(entry))
        wave = np.concatenate([np.zeros(round(LEAD_S * RATE), np.float32), speech,
                               np.zeros(round(TAIL_S * RATE), np.float32)])
        clips.append((keyword, wave + noise.take(len(wave)), entry["startTime"] + LEAD_S,
                      entry["endTime"] + LEAD_S, not corpora.is_sentence(entry)))
    return clips


def background_pool(data: Path, split: str, entries: list[dict], espeak: int,
                    detector: WakeWordDetector) -> list[np.ndarray]:
    """Speech without a keyword: sentences with theirs cut out, cathy, Speech Commands, espeak-ng."""
    pool = []
    for entry in filter(corpora.is_sentence, entries):
        pool += keyword_cut(entry, detector)
    prompts = []
    for audio, prompt, text in corpora.arctic_utterances(data / "cathy"):
        held = hash_split(prompt, corpora.CATHY_DEV_PERCENT, corpora.CATHY_TEST_PERCENT,
                          corpora.SALT)
        if held == split:
            pool.append(sf.read(str(audio), dtype="float32")[0])
        prompts.append(text)
    words = sorted((data / "speech_commands").glob("[!_]*/*.wav"))
    words += sorted((data / "speech_commands" / "_unknown_").glob("*.wav"))
    pool += [sf.read(str(p), dtype="float32")[0] for p in random.Random(0).sample(words, 600)]
    for i, text in enumerate(random.Random(1).sample(prompts, espeak)):
        pool.append(espeak_ng(text, ESPEAK_VOICES[i % len(ESPEAK_VOICES)]))
    return [leveled(w) for w in pool if len(w)]


def keyword_cut(entry: dict, detector: WakeWordDetector) -> list[np.ndarray]:
    """A WUW sentence's parts before and after its keyword, found by forced alignment of its
    transcript (the corpus's keyword times are often wrong inside sentences), CUT_PAD_S more
    cut on each side (CTC's spans are short). None for a sentence that holds its keyword's
    homophone ("onward"), a word of its stem ("voyaging": the sentences play on their
    keyword, as no room's talk does) or no single keyword."""
    words = normalize_transcription(entry["transcription"]).split()
    keyword = next((w for w in words if w in corpora.KEYWORDS), None)
    if keyword is None or sum(w in corpora.KEYWORDS for w in words) != 1 \
            or any(w != keyword and w[:STEM] == keyword[:STEM] for w in words) \
            or HOMOPHONES & set(words):
        return []
    wave = read_wuw(entry)
    transcriber = detector.transcriber
    timed = align_text(transcriber.network, transcriber.tokenizer, torch.from_numpy(wave),
                       " ".join(words))
    at = [w for w in timed if w.word in corpora.KEYWORDS]
    if len(at) != 1:
        return []
    cut = (round((at[0].start - CUT_PAD_S) * RATE), round((at[0].end + CUT_PAD_S) * RATE))
    return [part for part in (wave[:max(0, cut[0])], wave[cut[1]:]) if len(part) > RATE // 2]


def espeak_ng(text: str, voice: str) -> np.ndarray:
    """Speech synthesised by espeak-ng (22.05 kHz WAV on stdout) at RATE."""
    wav = subprocess.run(["espeak-ng", "-v", voice, "--stdout", text], capture_output=True,
                         check=True).stdout
    import io
    samples, rate = sf.read(io.BytesIO(wav), dtype="float32")
    return soxr.resample(samples, rate, RATE).astype(np.float32)


def background(pool: list[np.ndarray], hours: float, noise: Noise, rng: random.Random
               ) -> Iterator[np.ndarray]:
    """Blocks of the background stream: a speech part, then silence, DUTY speech in all."""
    left, order = round(hours * 3600 * RATE), []
    while left > 0:
        if not order:
            order = rng.sample(pool, len(pool))
        speech = order.pop()
        gap = round(len(speech) * (1 - DUTY) / DUTY * rng.uniform(0.5, 1.5))
        part = np.concatenate([speech, np.zeros(gap, np.float32)])[:left]
        left -= len(part)
        yield part + noise.take(len(part))


# ---------------------------------------------------------------------------- ours


def clip_scores(detector: WakeWordDetector, clips, margin: float
                ) -> tuple[dict[str, list[float]], list[float]]:
    """Per keyword, each clip's best score of it (anywhere in the clip: the corpus's times of
    a keyword inside a sentence are often wrong); and for keywords said alone (whose times
    hold), the stream seconds from the keyword's end to its detection at `margin`."""
    found: dict[str, list[float]] = {}
    delays = []
    for keyword, wave, _, end, alone in clips:
        row = detector.phrases.index(keyword)
        windows = [w for w in detector.scan(wave, RATE) if w is not None]
        found.setdefault(keyword, []).append(max((float(w.scores[row]) for w in windows),
                                                 default=-math.inf))
        heard = [w.time for w in windows if w.scores[row] >= -margin]
        if alone and heard:
            delays.append(heard[0] - end)
    return found, delays


def background_events(detector: WakeWordDetector, blocks: Iterator[np.ndarray]
                      ) -> tuple[dict[str, list[float]], float, float]:
    """Per phrase, the score of every event the loose detector would report (each phrase on
    its own: an event's span starts `refractory_s` past the last one's end); the seconds of
    audio and of CPU the detector took (the stream's own making left out)."""
    events: dict[str, list[float]] = {p: [] for p in detector.phrases}
    last_end = np.full(len(detector.phrases), -math.inf)
    made = Timed(blocks)
    started = time.process_time()
    for window in detector.scan(made):
        if window is None:
            continue
        fresh = (window.starts >= last_end + detector.config.refractory_s) & \
            (window.scores >= -detector.margin)
        for row in np.flatnonzero(fresh):
            events[detector.phrases[row]].append(float(window.scores[row]))
            last_end[row] = window.ends[row]
    return events, detector.seconds, time.process_time() - started - made.seconds


class Timed:
    """An iterator's items, with the CPU seconds spent making them."""

    def __init__(self, items: Iterator[np.ndarray]) -> None:
        self.items, self.seconds = items, 0.0

    def __iter__(self) -> Iterator[np.ndarray]:
        while True:
            started = time.process_time()
            item = next(self.items, None)
            self.seconds += time.process_time() - started
            if item is None:
                return
            yield item


def resident_mb() -> float:
    """This process's resident memory, MB (Linux)."""
    for line in Path("/proc/self/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) / 1024
    return math.nan


def figures(clips: list[float], false: list[float], hours: float, margin: float) -> dict:
    """Miss rate at the strictest false-alarm rate `hours` resolve, and at `margin`."""
    allowed = math.floor(hours / 10)  # false alarms allowed at 1 per 10 hours
    ranked = sorted(false, reverse=True)
    floor = ranked[allowed] if len(ranked) > allowed else -math.inf
    return {"clips": len(clips), "false_alarms_allowed": allowed, "scores": clips,
            "miss_at_target": sum(s <= floor for s in clips) / len(clips),
            "miss_at_default": sum(s < -margin for s in clips) / len(clips),
            "fa_per_hour_at_default": sum(s >= -margin for s in false) / hours,
            "closest_background": ranked[0] if ranked else None,
            "background_scores": ranked[:50]}


# ---------------------------------------------------------------------------- peers


def pocketsphinx_run(words: list[str], streams: dict[str, Iterator[np.ndarray]]) -> dict | None:
    """pocketsphinx keyphrase spotting of `words` at its default threshold: detection times
    (seconds) per word in each stream."""
    try:
        from pocketsphinx import Decoder, set_loglevel
    except ImportError:
        print("note: pocketsphinx is not installed: its row is skipped")
        return None
    set_loglevel("FATAL")
    kws = Path(f"/tmp/wakeword-kws-{id(words)}.txt")
    kws.write_text("".join(f"{w} /1e-20/\n" for w in words))
    decoder = Decoder(samprate=RATE, kws=str(kws))
    found = {}
    for name, blocks in streams.items():
        heard, times, cpu = 0, [], time.process_time()
        decoder.start_utt()
        for block in blocks:
            pcm = (np.clip(block, -1, 1) * 32767).astype(np.int16)
            for at in range(0, len(pcm), RATE // 10):
                decoder.process_raw(pcm[at:at + RATE // 10].tobytes(), False, False)
                heard += len(pcm[at:at + RATE // 10])
                if decoder.hyp() is not None:
                    times.append((heard / RATE, decoder.hyp().hypstr.strip()))
                    decoder.end_utt()
                    decoder.start_utt()
        decoder.end_utt()
        found[name] = {"detections": times, "seconds": heard / RATE,
                       "cpu": time.process_time() - cpu}
    kws.unlink()
    return found


MICRO_DRIVER = """
import sys
from pymicro_wakeword import MicroWakeWord, MicroWakeWordFeatures, Model
models = {m: MicroWakeWord.from_builtin(Model(m)) for m in sys.argv[1:]}
features = {m: MicroWakeWordFeatures() for m in models}
heard = 0
while chunk := sys.stdin.buffer.read(3200):
    heard += len(chunk) // 2
    for m, model in models.items():
        for f in features[m].process_streaming(chunk):
            if model.process_streaming(f):
                print(f"{heard / 16000:.3f}\\t{m}", flush=True)
"""


def micro_run(venv: Path, streams: dict[str, Iterator[np.ndarray]]) -> dict | None:
    """microWakeWord's built-in models in their own venv: detection times per stream."""
    python = venv / "bin" / "python"
    if not python.is_file() or subprocess.run([python, "-c", "import pymicro_wakeword"],
                                              capture_output=True).returncode:
        print(f"note: pymicro-wakeword is not installed in {venv}: its rows are skipped "
              f"(python -m venv {venv} && {python} -m pip install pymicro-wakeword==2.5.0)")
        return None
    found = {}
    for name, blocks in streams.items():
        proc = subprocess.Popen([python, "-c", MICRO_DRIVER, *MICRO_PHRASES], stdin=subprocess.PIPE,
                                stdout=subprocess.PIPE, text=False)
        heard = 0
        for block in blocks:
            proc.stdin.write((np.clip(block, -1, 1) * 32767).astype("<i2").tobytes())
            heard += len(block)
        proc.stdin.close()
        lines = proc.stdout.read().decode().split("\n")
        proc.wait()
        found[name] = {"detections": [(float(t), m) for t, m in
                                      (line.split("\t") for line in lines if line)],
                       "seconds": heard / RATE}
    return found


# ---------------------------------------------------------------------------- the run


def synthetic_clips(noise: Noise) -> list[tuple]:
    """microWakeWord's phrases said by espeak-ng voices, alone and before a command."""
    clips = []
    for name, sentences in SPOKEN.items():
        for voice in ESPEAK_VOICES:
            for text in sentences:
                speech = leveled(espeak_ng(text, voice))
                wave = np.concatenate([np.zeros(round(LEAD_S * RATE), np.float32), speech,
                                       np.zeros(round(TAIL_S * RATE), np.float32)])
                clips.append((MICRO_PHRASES[name], wave + noise.take(len(wave)), LEAD_S,
                              LEAD_S + len(speech) / RATE, False))
    return clips


def peer_figures(run: dict, clips: list, hours: float, word_of) -> dict:
    """Misses per keyword (a clip without a detection of its word) and false alarms per hour."""
    offsets = np.cumsum([0] + [len(clip[1]) / RATE for clip in clips])
    hit = [False] * len(clips)
    for t, word in run["clips"]["detections"]:
        i = int(np.searchsorted(offsets, t, side="right")) - 1
        if 0 <= i < len(clips) and word_of(word) == clips[i][0]:
            hit[i] = True
    rows = {}
    for keyword in sorted({c[0] for c in clips}):
        mine = [h for h, c in zip(hit, clips, strict=True) if c[0] == keyword]
        false = sum(word_of(w) == keyword for _, w in run["background"]["detections"])
        rows[keyword] = {"clips": len(mine), "miss_at_default": 1 - sum(mine) / len(mine),
                         "fa_per_hour_at_default": false / hours}
    if "cpu" in run["background"]:
        rows["rtf"] = run["background"]["cpu"] / run["background"]["seconds"]
    return rows


def run(args) -> dict:
    noise = Noise(args.data, random.Random(args.seed + 1))
    entries = wuw_split(args.data, args.split)
    clips = keyword_clips(entries, noise)
    if args.limit:
        clips = random.Random(args.seed).sample(clips, min(args.limit, len(clips)))
    synthetic = synthetic_clips(noise) if not args.no_synthetic else []

    def stream() -> Iterator[np.ndarray]:
        return background(pool, args.hours, Noise(args.data, random.Random(args.seed + 2)),
                          random.Random(args.seed + 3))

    phrases = list(corpora.KEYWORDS) + ([*MICRO_PHRASES.values()] if synthetic else [])
    default = calibrated_margin(args.model)
    detector = WakeWordDetector(phrases, sensitivity=DEFAULT_SENSITIVITY, model=args.model,
                                margin=LOOSE_MARGIN)
    pool = background_pool(args.data, args.split, entries, args.espeak, detector)
    scores, delays = clip_scores(detector, clips + synthetic, default)
    rss = resident_mb()
    events, seconds, cpu = background_events(detector, stream())
    hours = seconds / 3600
    ours = {k: figures(scores[k], events[k], hours, default) for k in scores}
    results = {"machine": machine(), "split": args.split, "hours": hours, "snr_db": SNR_DB,
               "duty": DUTY, "margin_at_default": default, "rtf": cpu / seconds,
               "rss_mb_before_after": [rss, resident_mb()],
               "wake_delay_s": {"median": float(np.median(delays)) if delays else None,
                                "p90": float(np.percentile(delays, 90)) if delays else None,
                                "clips": len(delays)},
               "ours": ours, "peers": {}}
    if not args.no_peers:
        results["peers"] = peers(args, clips, synthetic, stream, hours)
    return results


def peers(args, clips, synthetic, stream, hours: float) -> dict:
    """pocketsphinx and microWakeWord on the same clips and background."""
    found = {}
    words = [w for w in corpora.KEYWORDS if w in ("operator", "wildfire", "voyager")]
    kept = [c for c in clips if c[0] in words]
    sphinx = pocketsphinx_run(words, {"clips": (c[1] for c in kept), "background": stream()})
    if sphinx is not None and kept:
        found["pocketsphinx"] = peer_figures(sphinx, kept, hours, lambda w: w)
    if synthetic:
        micro = micro_run(args.micro_venv, {"clips": (c[1] for c in synthetic),
                                            "background": stream()})
        if micro is not None:
            found["microWakeWord"] = peer_figures(micro, synthetic, hours,
                                                  lambda m: MICRO_PHRASES[m])
    return found


def calibrate(results: dict, directory: Path) -> Path:
    """DIR/wake.json: the margin at the default sensitivity from the dev run, the one at
    which the median keyword has CALIBRATION_FA_PER_HOUR false alarms on the dev background."""
    allowed = math.floor(CALIBRATION_FA_PER_HOUR * results["hours"])
    edges = sorted(row["background_scores"][allowed] if len(row["background_scores"]) > allowed
                   else -LOOSE_MARGIN for k, row in results["ours"].items() if k in corpora.KEYWORDS)
    margin = max(0.05, -edges[len(edges) // 2])
    path = directory / WAKE_FILE
    saved = {"margin": round(margin, 3), "sensitivity": DEFAULT_SENSITIVITY,
             "how": f"python -m benchmarks.wakeword --split dev --hours {results['hours']:.2f} "
                    f"--calibrate {directory}: the margin at which the median of WUW Corpus II's "
                    f"five keywords has {CALIBRATION_FA_PER_HOUR:g} false alarm per hour on the "
                    "dev background (dev speakers' keywords)",
             "dev": {k: {"miss": sum(s < -margin for s in row["scores"]) / len(row["scores"]),
                         "false_alarms_per_hour": sum(s >= -margin for s in row["background_scores"])
                         / results["hours"]}
                     for k, row in results["ours"].items() if k in corpora.KEYWORDS}}
    save_text(json.dumps(saved, indent=1) + "\n", path)
    return path


def print_report(results: dict) -> None:
    print(f"wake words, {results['split']} speakers: {results['hours']:.2f} h of background "
          f"({results['duty']:.0%} speech), noise at {results['snr_db']:g} dB; margin at the "
          f"default sensitivity {results['margin_at_default']:.2f} nats; RTF "
          f"{results['rtf']:.3f} on {results['machine']['threads']} thread(s); memory "
          f"{results['rss_mb_before_after'][0]:.0f} -> {results['rss_mb_before_after'][1]:.0f} MB "
          f"over the background; keyword end to detection (said alone): median "
          f"{_number(results['wake_delay_s']['median']):.2f} s, p90 "
          f"{_number(results['wake_delay_s']['p90']):.2f} s")
    allowed = next(iter(results["ours"].values()))["false_alarms_allowed"]
    print(f"{'keyword':<12} {'clips':>5} {'miss@' + str(allowed) + 'FA':>9} {'miss@def':>9} "
          f"{'FA/h@def':>9} {'closest':>8}  system")
    for keyword, row in results["ours"].items():
        print(f"{keyword:<12} {row['clips']:>5} {row['miss_at_target']:>9.1%} "
              f"{row['miss_at_default']:>9.1%} {row['fa_per_hour_at_default']:>9.2f} "
              f"{_number(row['closest_background']):>8.2f}  ours")
    for name, rows in results["peers"].items():
        for keyword, row in rows.items():
            if keyword == "rtf":
                continue
            print(f"{keyword:<12} {row['clips']:>5} {'':>9} {row['miss_at_default']:>9.1%} "
                  f"{row['fa_per_hour_at_default']:>9.2f} {'':>8}  {name}"
                  + (f" (RTF {rows['rtf']:.3f})" if "rtf" in rows else ""))


def _number(value: float | None) -> float:
    return math.nan if value is None else value


def main(argv: list[str] | None = None) -> None:
    parser = base_parser(__doc__.splitlines()[0])
    parser.add_argument("--model", default="base")
    parser.add_argument("--split", choices=("dev", "test"), default="test")
    parser.add_argument("--hours", type=float, default=1.0, help="hours of background")
    parser.add_argument("--limit", type=int, default=0, help="keyword clips at most (0: all)")
    parser.add_argument("--espeak", type=int, default=40, help="espeak-ng sentences in the pool")
    parser.add_argument("--no-peers", action="store_true")
    parser.add_argument("--no-synthetic", action="store_true",
                        help="leave out the espeak-ng clips of microWakeWord's phrases")
    parser.add_argument("--micro-venv", type=Path, default=Path("/work/venvs/microwakeword"))
    parser.add_argument("--calibrate", type=Path, metavar="DIR",
                        help="write DIR/wake.json from this run (--split dev)")
    args = parser.parse_args(argv)
    if args.calibrate is not None and args.split != "dev":
        parser.error("--calibrate takes the dev speakers: --split dev")
    if not 0 < args.hours <= 1000:
        parser.error("--hours must be in (0, 1000]")
    if not (args.data / "wuw" / "data.json").is_file():
        sys.exit(f"error: {args.data / 'wuw'}: WUW Corpus II is missing (see {args.data}/README.md)")
    set_threads(args.threads)
    results = run(args)
    print_report(results)
    if args.calibrate is not None:
        print(f"wrote {calibrate(results, args.calibrate)}")
    if args.json:
        args.json.write_text(json.dumps(results, indent=1) + "\n")


if __name__ == "__main__":
    main()

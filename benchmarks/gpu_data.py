"""What benchmarks/gpu_check.py runs on: its sizes (full on a GPU, toy on a CPU) and its real clips.

The clips are command words and digits to train on, other takes of the words held out (dev set
and decoding), and read sentences (the benchmark's long utterances), chosen from the shared
corpora (`shared_clips`); tools/pack_gpu.py copies them as FLAC into a folder with clips.json,
which `load_clips` reads on a machine without ../shared. Standard library only (soundfile to
read durations), so packing needs no torch.
"""

import json
from dataclasses import dataclass
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
SHARED = ROOT.parent / "shared" / "data"
CARRY_DATA = ROOT / "gpu_carry" / "data"
CLIPS = "clips.json"  # what tools/pack_gpu.py writes beside the clips it copied
COMMAND_WORDS = "yes no up down left right on off stop go".split()
DIGITS = "zero one two three four five six seven eight nine".split()
SPEAKERS = ("jackson", "lucas", "nicolas", "yweweler")  # FSDD's


@dataclass(frozen=True)
class Sizes:
    """How much each step does: full on a GPU, toy on a CPU."""

    words_train: int  # Speech Commands clips per command word to train on
    words_test: int  # held-out clips per command word (dev set and decoding)
    digit_takes: int  # FSDD takes per digit and speaker to train on
    sentences: int  # cathy's read sentences (the benchmark's long utterances)
    steps: int  # optimiser steps of each training run
    compiled_steps: int  # of each compiled run, whose Inductor compiling takes minutes
    resume_steps: int  # more steps after resuming
    log_every: int
    batch_size: int
    ddp_steps: int
    bench_batches: int
    bench_batch_size: int  # utterances per benchmark batch at most
    bench_seconds: float  # padded audio per benchmark batch at most
    bench_rounds: int
    peak_size: int  # matmul side for the peak
    loss_ratio: float  # last curve point below this times the first


FULL = Sizes(words_train=24, words_test=2, digit_takes=3, sentences=100, steps=300,
             compiled_steps=100, resume_steps=30, log_every=10, batch_size=16, ddp_steps=30,
             bench_batches=8, bench_batch_size=512, bench_seconds=400.0, bench_rounds=5,
             peak_size=8192, loss_ratio=0.8)
TOY = Sizes(words_train=3, words_test=1, digit_takes=1, sentences=6, steps=8, compiled_steps=8,
            resume_steps=2, log_every=2, batch_size=8, ddp_steps=2, bench_batches=2,
            bench_batch_size=8, bench_seconds=12.0, bench_rounds=1, peak_size=256,
            loss_ratio=1.0)


# The toy benchmark's model: s2t_s's layout (conv2d front end, 12 + 6 layers) made narrow and


@dataclass(frozen=True)
class Clip:
    """One recording: its file, its words, and what it is for (train | test | sentence)."""

    path: Path
    text: str
    split: str



def shared_clips(root: Path, sizes: Sizes = FULL) -> list[Clip]:
    """Real clips from the shared corpora: command words and digits to train on, other takes
    of the words held out, and read sentences for the benchmark."""
    if not (root / "fsdd" / "recordings").is_dir():
        raise SystemExit(f"error: {root}: no audio (pass --data: a pack_gpu.py folder or "
                         "../shared/data)")
    clips = []
    for word in COMMAND_WORDS:
        files = sorted((root / "speech_commands" / word).glob("*.wav"))
        cut = sizes.words_train
        clips += [Clip(f, word, "train") for f in files[:cut]]
        clips += [Clip(f, word, "test") for f in files[cut:cut + sizes.words_test]]
    recordings = root / "fsdd" / "recordings"
    for digit, word in enumerate(DIGITS):
        clips += [Clip(recordings / f"{digit}_{speaker}_{take}.wav", word, "train")
                  for take in range(sizes.digit_takes) for speaker in SPEAKERS]
    sentences = sorted((root / "cathy" / "data").glob("*.flac"))[:sizes.sentences]
    clips += [Clip(f, f.with_suffix(".txt").read_text(encoding="utf-8").strip(), "sentence")
              for f in sentences]
    return clips


def load_clips(data: Path, sizes: Sizes) -> list[Clip]:
    """The clips of a pack_gpu.py folder (the first ones of each word, as many as `sizes`
    says), or else of the shared corpora."""
    index = data / CLIPS
    if not index.is_file():
        return shared_clips(data, sizes)
    clips, taken = [], {}
    for entry in json.loads(index.read_text()):
        split, text = entry["split"], entry["text"]
        group = (split, text if split != "sentence" else "")
        if taken.get(group, 0) < clip_limit(sizes, split, text):
            clips.append(Clip(data / entry["file"], text, split))
            taken[group] = taken.get(group, 0) + 1
    return clips


def clip_limit(sizes: Sizes, split: str, text: str) -> int:
    """How many clips of `split` `sizes` takes of one word (of all sentences)."""
    if split == "sentence":
        return sizes.sentences
    if split == "test":
        return sizes.words_test
    return sizes.words_train if text in COMMAND_WORDS else sizes.digit_takes * len(SPEAKERS)


def write_manifest(path: Path, clips: list[Clip]) -> Path:
    """A NeMo-style manifest of `clips` (absolute paths, durations read from the files)."""
    import soundfile as sf

    lines = []
    for clip in clips:
        info = sf.info(str(clip.path))
        lines.append(json.dumps({"audio_filepath": str(clip.path.resolve()), "text": clip.text,
                                 "duration": info.frames / info.samplerate}))
    path.write_text("\n".join(lines) + "\n")
    return path

"""One-command GPU check: training in every precision, DDP, decoding, and a timed race.

    PYTHONPATH=. python tools/gpu_check.py --out DIR      # $OUT when --out is not given

Each step records pass, fail or skip with its reason in DIR/gpu_check.json (rewritten after
every step, so a run cut short keeps what it did) and logs to DIR/gpu_check.log; a failed step
does not stop the next, and the exit status is 1 if any failed. The steps:

1. environment: torch, CUDA, the GPU, the packages.
2. train_{fp32,bf16,fp16}: the default model (conf/train.yaml, `model=small`) trains a few
   hundred steps on real words and digits: the loss falls, no step is skipped (fp16: a few, as
   its loss scale settles), and the checkpoint resumes to more steps.
3. decode_cpu_vs_device: the fp32 model's greedy (attention and CTC) hypotheses for held-out
   clips are the same on the GPU (TF32 off) as on the CPU.
4. ddp_torchrun: `torchrun --nproc_per_node=1 -m asr.train trainer=ddp` trains a few steps;
   ddp_collectives: one torchrun rank joins a process group (NCCL on the GPU), wraps the model in
   DistributedDataParallel, takes steps and all-reduces (one rank: asr.train forms no group).
5. bench_s2t_s: training steps of `model=s2t_s` (~30M parameters) in bf16 on large
   duration-bucketed batches against SpeechBrain's TransformerASR of the same sizes on the same
   batches, alternating round by round, with the bf16 matmul peak timed in the same rounds:
   audio seconds per second, counted FLOPs, and MFU (achieved / measured peak).
6. train_*_compiled: step 2 again with `trainer.compile=true`, last (slow to start).

Without CUDA (or with --toy) the same steps run on the CPU at toy sizes (model=tiny, a few
steps), where autocast is off: the three precisions compute in fp32 (fp16 still runs its loss
scaler) and one compiled run (fp32) stands for all three, compiled by Dynamo and AOTAutograd
without Inductor's code generation. `--budget` seconds bound the whole run: a step not started
by then is skipped, one still running then is stopped and fails, each with that reason. The
audio comes from `--data`: a folder made by tools/pack_gpu.py (clips.json and its clips) or the
shared corpora (../shared/data). The runs' model directories go to a temporary folder (or
`--work DIR`), never to --out, whose files a lent GPU machine sends back.
"""

import argparse
import functools
import gc
import json
import logging
import math
import os
import platform
import random
import signal
import subprocess
import sys
import tempfile
import time
import traceback
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import asdict, dataclass
from pathlib import Path

import torch

ROOT = Path(__file__).resolve().parents[1]
TOOLS = Path(__file__).resolve().parent
SHARED = ROOT.parent / "shared" / "data"
CARRY_DATA = ROOT / "gpu_carry" / "data"
CLIPS = "clips.json"  # what tools/pack_gpu.py writes beside the clips it copied
COMMAND_WORDS = "yes no up down left right on off stop go".split()
DIGITS = "zero one two three four five six seven eight nine".split()
SPEAKERS = ("jackson", "lucas", "nicolas", "yweweler")  # FSDD's
PRECISIONS = ("fp32", "bf16", "fp16")
log = logging.getLogger("gpu_check")


@dataclass(frozen=True)
class Sizes:
    """How much each step does: full on a GPU, toy on a CPU."""

    words_train: int  # Speech Commands clips per command word to train on
    words_test: int  # held-out clips per command word (dev set and decoding)
    digit_takes: int  # FSDD takes per digit and speaker to train on
    sentences: int  # cathy's read sentences (the benchmark's long utterances)
    steps: int  # optimiser steps of each training run
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
             resume_steps=30, log_every=10, batch_size=16, ddp_steps=30, bench_batches=8,
             bench_batch_size=512, bench_seconds=400.0, bench_rounds=5, peak_size=8192,
             loss_ratio=0.8)
TOY = Sizes(words_train=3, words_test=1, digit_takes=1, sentences=6, steps=8, resume_steps=2,
            log_every=2, batch_size=8, ddp_steps=2, bench_batches=2, bench_batch_size=8,
            bench_seconds=12.0, bench_rounds=1, peak_size=256, loss_ratio=1.0)


# The toy benchmark's model: s2t_s's layout (conv2d front end, 12 + 6 layers) made narrow and
# shallow, so that the CPU runs its steps in seconds.
TOY_BENCH_MODEL = ["model.d_model=64", "model.d_ff=128", "model.n_encoder_layers=2",
                   "model.n_decoder_layers=1", "model.conv_channels=16"]


@dataclass(frozen=True)
class Clip:
    """One recording: its file, its words, and what it is for (train | test | sentence)."""

    path: Path
    text: str
    split: str


class CheckFailed(Exception):
    """A step's check did not hold: why, and what was measured."""

    def __init__(self, reason: str, details: dict | None = None) -> None:
        super().__init__(reason)
        self.reason, self.details = reason, details or {}


# --- the audio -------------------------------------------------------------------------------

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


# --- the run: steps, results, budget ---------------------------------------------------------

class Check:
    """The steps of one run, their results, and where they are written."""

    def __init__(self, out: Path, data: Path, toy: bool, budget: float, work: Path) -> None:
        self.out, self.toy, self.budget, self.work = out, toy, budget, work
        self.sizes = TOY if toy else FULL
        self.device = torch.device("cuda" if torch.cuda.is_available() and not toy else "cpu")
        self.work.mkdir(parents=True, exist_ok=True)
        self.clips = load_clips(data, self.sizes)
        self.train = write_manifest(self.work / "train.jsonl", self.split("train"))
        self.test = write_manifest(self.work / "test.jsonl", self.split("test"))
        self.models: dict[str, Path] = {}  # precision -> a trained model directory
        self.started = time.monotonic()
        self.results: list[dict] = []
        self.info = {"toy": toy, "device": str(self.device), "data": str(data), "work": str(work),
                     "budget_s": budget, "clips": {s: len(self.split(s)) for s in
                                                   ("train", "test", "sentence")},
                     "sizes": asdict(self.sizes)}

    def split(self, name: str) -> list[Clip]:
        return [c for c in self.clips if c.split == name]

    def run(self, name: str, step: Callable[[], dict]) -> None:
        """Run one step and record it: pass, fail (with the reason) or skip (out of time)."""
        elapsed = time.monotonic() - self.started
        if self.budget and elapsed > self.budget:
            self.record(name, "skip", f"time budget: {elapsed:.0f} s of {self.budget:.0f} s "
                                      "spent before it started", {}, 0.0)
            return
        log.info(f"== {name}")
        started = time.monotonic()
        status, reason, details = "pass", "", {}
        try:
            with deadline(self.budget - elapsed if self.budget else 0.0):
                details = step()
        except CheckFailed as failed:
            status, reason, details = "fail", failed.reason, failed.details
        except (Exception, SystemExit) as err:  # a step's crash is its failure, not the run's
            status, reason = "fail", f"{type(err).__name__}: {first_line(err)}"
            log.error(traceback.format_exc())
        self.record(name, status, reason, details, time.monotonic() - started)
        release_memory()

    def record(self, name: str, status: str, reason: str, details: dict, seconds: float) -> None:
        self.results.append({"name": name, "status": status, "reason": reason,
                             "seconds": round(seconds, 2), "details": details})
        log.info(f"{name}: {status.upper()}{' - ' + reason if reason else ''} ({seconds:.1f} s)")
        self.write()

    def write(self) -> None:
        counts = {s: sum(r["status"] == s for r in self.results) for s in ("pass", "fail", "skip")}
        summary = {**self.info, "elapsed_s": round(time.monotonic() - self.started, 1),
                   **counts, "steps": self.results}
        path = self.out / "gpu_check.json"
        tmp = path.with_suffix(".tmp")
        tmp.write_text(json.dumps(summary, indent=2, default=str) + "\n")
        tmp.replace(path)

    @property
    def failed(self) -> bool:
        return any(r["status"] == "fail" for r in self.results)


class OutOfTime(Exception):
    """A step still running when the run's time budget ran out."""


@contextmanager
def deadline(seconds: float) -> Iterator[None]:
    """Raise OutOfTime in the step if it runs past `seconds` (0: no limit), so that one slow
    step (a compile) cannot take the time of the report."""
    if seconds <= 0:
        yield
        return

    def stop(signum, frame) -> None:
        raise OutOfTime(f"still running when the time budget ran out ({seconds:.0f} s left "
                        "at its start)")

    previous = signal.signal(signal.SIGALRM, stop)
    signal.setitimer(signal.ITIMER_REAL, max(seconds, 1.0))
    try:
        yield
    finally:
        signal.setitimer(signal.ITIMER_REAL, 0)
        signal.signal(signal.SIGALRM, previous)


def first_line(err: BaseException) -> str:
    lines = str(err).strip().splitlines()
    return lines[0] if lines else repr(err)


def release_memory() -> None:
    gc.collect()
    if torch.cuda.is_available():
        torch.cuda.empty_cache()


# --- step 1: the environment ------------------------------------------------------------------

def environment(check: Check) -> dict:
    """What the run is on (always passes: the record of the machine)."""
    from importlib.metadata import PackageNotFoundError, version

    packages = {}
    for name in ("torchaudio", "hydra-core", "omegaconf", "sentencepiece", "numpy", "jiwer",
                 "soundfile", "soxr", "webrtcvad-wheels", "speechbrain", "triton"):
        try:
            packages[name] = version(name)
        except PackageNotFoundError:
            packages[name] = None
    info = {"python": platform.python_version(), "torch": torch.__version__,
            "cuda": torch.version.cuda, "cuda_available": torch.cuda.is_available(),
            "cpus": os.cpu_count(), "packages": packages, **check.info}
    if torch.cuda.is_available():
        props = torch.cuda.get_device_properties(0)
        info.update(gpu=props.name, capability=f"{props.major}.{props.minor}",
                    gpu_memory_gib=round(props.total_memory / 2**30, 1),
                    bf16_supported=torch.cuda.is_bf16_supported(),
                    nccl=".".join(map(str, torch.cuda.nccl.version())))
    return info


# --- steps 2 and 6: training in each precision, compiled or not, and resuming ----------------

def compose_train(overrides: list[str]):
    """conf/train.yaml with `overrides`, as `python -m asr.train` composes it."""
    from hydra import compose, initialize_config_dir

    from asr import CONF_DIR
    from asr.config import register_configs

    register_configs()
    with initialize_config_dir(config_dir=str(CONF_DIR), version_base="1.3"):
        return compose("train", overrides=overrides)


def train_overrides(check: Check, out: Path, precision: str, compiled: bool) -> list[str]:
    """The default model and config, on the check's data, for a short run."""
    sizes = check.sizes
    overrides = [f"data.train_manifest={check.train}", f"data.dev_manifest={check.test}",
                 f"trainer.out_dir={out}", "trainer.progress=false", "trainer.max_epochs=100000",
                 f"trainer.precision={precision}", f"trainer.compile={str(compiled).lower()}",
                 f"trainer.log_every={sizes.log_every}", "trainer.save_every_minutes=null",
                 f"trainer.device={check.device.type}", f"data.batch_size={sizes.batch_size}",
                 "tokenizer.vocab_size=64", f"scheduler.warmup_steps={max(sizes.steps // 4, 2)}"]
    if check.toy:
        overrides += ["model=tiny", "trainer.cmvn_utterances=16"]
    return overrides


def fit(overrides: list[str], compile_backend: str):
    """Train with `overrides`, `trainer.compile` with `compile_backend`: the Trainer, trained."""
    from asr.train import Trainer

    with compile_with(compile_backend):
        trainer = Trainer(compose_train(overrides))
        trainer.fit()
    return trainer


@contextmanager
def compile_with(backend: str) -> Iterator[None]:
    """torch.compile with `backend` while training builds its model: "inductor" (torch's
    default) as is; "aot_eager" on the CPU toy, where Dynamo and AOTAutograd trace the model as
    on the GPU and only Inductor's code generation (minutes of C++ compiling) is left out."""
    if backend == "inductor":
        yield
        return
    original = torch.compile
    torch.compile = functools.partial(original, backend=backend)
    try:
        yield
    finally:
        torch.compile = original


def train_step(check: Check, precision: str, compiled: bool) -> dict:
    """Train `sizes.steps` steps, check the loss curve, then resume to more steps."""
    name = f"{precision}_compiled" if compiled else precision
    out = check.work / f"train_{name}"
    overrides = train_overrides(check, out, precision, compiled)
    steps, more = check.sizes.steps, check.sizes.resume_steps
    backend = "aot_eager" if check.toy else "inductor"
    trainer = fit([*overrides, f"trainer.max_steps={steps}"], backend)
    details = curve_details(trainer.state, precision, check.sizes.loss_ratio)
    if compiled:
        details["compile_backend"] = backend
    first_run_loss = details["last_loss"]
    del trainer
    release_memory()  # its loader workers, its CUDA memory
    resumed = fit([*overrides, f"trainer.max_steps={steps + more}", "trainer.resume=true"],
                  backend)
    state = resumed.state
    after = [p["train_loss"] for p in state.loss_curve if p["step"] > steps]
    details["resume"] = {"step": state.step, "expected": steps + more, "losses_after": after}
    if state.step != steps + more:
        raise CheckFailed(f"resumed run ended at step {state.step}, not {steps + more}", details)
    if not after or not all(math.isfinite(x) for x in after) or after[-1] > 1.5 * first_run_loss:
        raise CheckFailed(f"resumed losses {after} are not near the loss before ({first_run_loss})",
                          details)
    if not compiled:
        check.models.setdefault(precision, out)
    return details


def curve_details(state, precision: str, ratio: float) -> dict:
    """The run's loss curve, speed and skipped steps; CheckFailed unless the loss fell."""
    curve = [p["train_loss"] for p in state.loss_curve]
    finite = [x for x in curve if math.isfinite(x)]
    bad = sum(e.get("bad_steps", 0) for e in state.history)
    allowed = max(3, state.step // 20) if precision == "fp16" else 0  # the loss scale settling
    details = {"steps": state.step, "loss_curve": curve, "bad_steps": bad,
               "first_loss": finite[0] if finite else None,
               "last_loss": finite[-1] if finite else None,
               "train_seconds": round(state.train_seconds, 2),
               "steps_per_s": round(state.step / max(state.train_seconds, 1e-9), 2),
               "audio_sec_per_sec": round(state.audio_seconds / max(state.train_seconds, 1e-9), 1),
               "dev_wer": [e.get("dev_wer") for e in state.history]}
    if bad > allowed:
        raise CheckFailed(f"{bad} steps skipped for non-finite loss or gradients (at most "
                          f"{allowed} allowed)", details)
    if len(finite) < 2 or not math.isfinite(curve[-1]):
        raise CheckFailed(f"loss curve not finite: {curve}", details)
    if not finite[-1] < ratio * finite[0]:
        raise CheckFailed(f"loss did not fall: {finite[0]:.3f} -> {finite[-1]:.3f} (needs < "
                          f"{ratio} x)", details)
    return details


# --- step 3: decoding on the device against the CPU ---------------------------------------------

def decode_step(check: Check) -> dict:
    """Greedy hypotheses of the held-out clips on the CPU and on the device, TF32 off."""
    model = next((check.models[p] for p in PRECISIONS if p in check.models), None)
    if model is None:
        raise CheckFailed("no trained model to decode (every train_* step failed)")
    files = [c.path for c in check.split("test")]
    texts = [c.text for c in check.split("test")]
    details = {"model": str(model), "device": str(check.device), "files": len(files)}
    if check.device.type == "cpu":
        details["note"] = "no CUDA: the CPU against itself (the same code path, toy run)"
    mismatches = 0
    with no_tf32():
        for mode in ("attention", "ctc_greedy"):
            hyps = {device: transcribe(model, device, mode, files)
                    for device in ("cpu", check.device.type)}
            on_device = hyps[check.device.type]
            same = [a == b for a, b in zip(hyps["cpu"], on_device, strict=True)]
            mismatches += same.count(False)
            details[mode] = {"same": sum(same), "references": texts, "cpu": hyps["cpu"],
                             check.device.type: on_device, "correct_on_device":
                             sum(h == r for h, r in zip(on_device, texts, strict=True))}
    if mismatches:
        raise CheckFailed(f"{mismatches} hypotheses differ between the CPU and {check.device}",
                          details)
    return details


def transcribe(model: Path, device: str, mode: str, files: list[Path]) -> list[str]:
    """Greedy hypotheses of whole files (no VAD) in `mode` (attention | ctc_greedy)."""
    from asr.transcriber import Transcriber

    t = Transcriber.from_pretrained(model, device=device, vad=None, mode=mode, beam_size=1)
    return t.transcribe_waves([t.load(f) for f in files])


@contextmanager
def no_tf32() -> Iterator[None]:
    """Full fp32 matmuls and convolutions on the GPU (training turns TF32 on), then as before."""
    saved = torch.backends.cuda.matmul.allow_tf32, torch.backends.cudnn.allow_tf32
    torch.backends.cuda.matmul.allow_tf32 = torch.backends.cudnn.allow_tf32 = False
    try:
        yield
    finally:
        torch.backends.cuda.matmul.allow_tf32, torch.backends.cudnn.allow_tf32 = saved


# --- step 4: torchrun and the collectives ------------------------------------------------------

def torchrun(args: list[str], timeout: float) -> subprocess.CompletedProcess:
    """`torchrun --standalone --nproc_per_node=1 ARGS` from the repository root."""
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(
        [str(ROOT), *filter(None, [os.environ.get("PYTHONPATH")])])}
    command = [sys.executable, "-m", "torch.distributed.run", "--standalone",
               "--nproc_per_node=1", *args]
    log.info(" ".join(command))
    with subprocess.Popen(command, cwd=ROOT, env=env, stdout=subprocess.PIPE,
                          stderr=subprocess.PIPE, text=True, start_new_session=True) as process:
        try:
            stdout, stderr = process.communicate(timeout=timeout)
        except BaseException:  # a timeout, or the step's deadline: torchrun and its ranks go
            os.killpg(process.pid, signal.SIGKILL)
            process.communicate()
            raise
    log.info(stdout[-4000:] + stderr[-4000:])
    return subprocess.CompletedProcess(command, process.returncode, stdout, stderr)


def ddp_train_step(check: Check) -> dict:
    """`asr.train trainer=ddp` under torchrun for a few steps; its checkpoint holds them."""
    from asr.checkpoint import CHECKPOINT, load_torch

    out = check.work / "ddp"
    overrides = [o for o in train_overrides(check, out, "bf16", False)
                 if not o.startswith("trainer.device")]  # torchrun: the GPU, LOCAL_RANK's
    # loader workers here only: in the runs in this process, collecting a finished run's
    # persistent workers stopped mid-epoch takes torch about 5 s each
    overrides.append(f"data.num_workers={0 if check.toy else 4}")
    steps = check.sizes.ddp_steps
    run = torchrun(["-m", "asr.train", "trainer=ddp", *overrides, f"trainer.max_steps={steps}"],
                   timeout=300)
    details = {"returncode": run.returncode, "tail": (run.stdout + run.stderr)[-1500:]}
    if run.returncode != 0:
        raise CheckFailed(f"torchrun -m asr.train trainer=ddp exited {run.returncode}", details)
    state = load_torch(out / CHECKPOINT)["state"]
    details["step"] = state["step"]
    if state["step"] != steps:
        raise CheckFailed(f"the checkpoint holds step {state['step']}, not {steps}", details)
    return details


def ddp_collectives_step(check: Check) -> dict:
    """One torchrun rank: a process group, DDP training steps and an all-reduce (`--ddp-probe`)."""
    result = check.work / "ddp_probe.json"
    run = torchrun([str(Path(__file__).resolve()), "--ddp-probe", str(result),
                    *(["--toy"] if check.toy else [])], timeout=300)
    details = {"returncode": run.returncode, "tail": (run.stdout + run.stderr)[-1500:]}
    if run.returncode != 0 or not result.is_file():
        raise CheckFailed(f"the DDP probe exited {run.returncode}", details)
    details.update(json.loads(result.read_text()))
    return details


def ddp_probe(result: Path, toy: bool) -> None:
    """Run as a torchrun rank: join the group, train a small model in DDP, all-reduce."""
    import torch.distributed as dist
    from torch.nn.parallel import DistributedDataParallel

    from asr.distributed import all_reduce_sum
    from asr.features import FeatureConfig
    from asr.model import ModelDimensions, SpeechTransformer
    from asr.training.options import autocast
    from asr.training.step import clip_gradients

    device = torch.device("cuda", int(os.environ["LOCAL_RANK"])) \
        if torch.cuda.is_available() and not toy else torch.device("cpu")
    backend = "nccl" if device.type == "cuda" else "gloo"
    dist.init_process_group(backend, device_id=device if device.type == "cuda" else None)
    torch.manual_seed(0)
    model = SpeechTransformer(ModelDimensions(n_vocab=32, n_input=80, d_model=64, n_head=2,
                                              d_ff=128, n_encoder_layers=2, n_decoder_layers=1),
                              FeatureConfig()).to(device)
    ddp = DistributedDataParallel(model, device_ids=[device.index] if device.index is not None
                                  else None, broadcast_buffers=False)
    optimizer = torch.optim.Adam(model.parameters(), lr=1e-3)
    wave = torch.randn(4, 16000, device=device) * 0.1
    lengths = torch.tensor([16000, 14000, 12000, 9000], device=device)
    tokens = torch.randint(4, 32, (4, 6), device=device)
    losses = []
    for _ in range(5):
        with autocast(device, "bf16"):
            loss = ddp(wave, lengths, tokens)["loss"]
        optimizer.zero_grad(set_to_none=True)
        loss.backward()
        clip_gradients(model.parameters(), 5.0)
        optimizer.step()
        losses.append(loss.item())
    summed = all_reduce_sum([1.0, float(dist.get_rank())], device)
    report = {"backend": dist.get_backend(), "world_size": dist.get_world_size(),
              "device": str(device), "losses": losses, "all_reduce": summed}
    dist.destroy_process_group()
    if not all(math.isfinite(x) for x in losses) or losses[-1] >= losses[0]:
        raise SystemExit(f"DDP losses did not fall: {losses}")
    result.write_text(json.dumps(report, indent=2) + "\n")


# --- step 5: the timed race against SpeechBrain, and MFU -----------------------------------------

OURS, OURS_STACKED, SPEECHBRAIN = ("ours (s2t_s)", "ours (s2t_s sizes, stacking front end)",
                                   "SpeechBrain TransformerASR")


def bench_step(check: Check) -> dict:
    """Ours (`model=s2t_s`) against SpeechBrain's TransformerASR, bf16, large batches."""
    from asr.model import ModelDimensions
    from asr.tokenizer import Tokenizer
    from bench_common import alternate, median
    from bench_training import default_config

    model_cfg, features, train_cfg = default_config(
        ["model=s2t_s", *(TOY_BENCH_MODEL if check.toy else [])])
    pool = check.split("train") + check.split("sentence")
    tokenizer = Tokenizer.train([c.text for c in pool], train_cfg["tokenizer"]["vocab_size"])
    batches, audio = bench_batches(check, pool, tokenizer, features.sample_rate)
    dims = ModelDimensions(**{**model_cfg, "n_vocab": tokenizer.vocab_size})
    contenders, notes = bench_contenders(check, dims, features, batches)
    steppers = {name: DeviceStepper(m, batches, train_cfg, check.device)
                for name, m in contenders.items()}
    peak_call, peak_flops, peak_dtype = matmul_peak(check.device, check.sizes.peak_size)
    flops = {name: round_flops(s) for name, s in steppers.items()}
    times = alternate({**steppers, "matmul": peak_call}, check.sizes.bench_rounds)
    peak = peak_flops / median(times["matmul"])
    details = {"notes": notes, "batches": len(batches), "audio_s_per_round": round(audio, 1),
               "utterances_per_batch": [len(b["lengths"]) for b in batches],
               "precision": "bf16" if check.device.type == "cuda" else "fp32 (CPU)",
               "peak": {"dtype": peak_dtype, "size": check.sizes.peak_size,
                        "tflop_per_s": round(peak / 1e12, 3)},
               "models": {name: bench_row(s, times[name], flops[name], audio, peak)
                          for name, s in steppers.items()}}
    models = details["models"]
    if SPEECHBRAIN in models:  # the same sizes, front end and batches: the Transformers race
        details["ours_speedup_vs_speechbrain"] = round(
            models[OURS_STACKED]["audio_s_per_s"] / models[SPEECHBRAIN]["audio_s_per_s"], 2)
    if not all(math.isfinite(x) for m in models.values() for x in m["losses"]):
        raise CheckFailed("a benchmark loss is not finite", details)
    return details


def bench_row(stepper: "DeviceStepper", seconds: list[float], flops: int, audio: float,
              peak: float) -> dict:
    """One contender's figures: median round time, throughput, FLOPs and MFU."""
    from bench_common import median

    t, n = median(seconds), len(stepper.batches)
    return {"parameters": sum(p.numel() for p in stepper.model.parameters()),
            "round_seconds": [round(x, 4) for x in seconds], "steps_per_s": round(n / t, 2),
            "audio_s_per_s": round(audio / t, 1),
            "tflop_per_step": round(flops / n / 1e12, 4),
            "achieved_tflop_per_s": round(flops / t / 1e12, 3), "mfu": round(flops / t / peak, 4),
            "losses": [round(x, 3) for x in stepper.losses]}


def bench_batches(check: Check, pool: list[Clip], tokenizer, sample_rate: int
                  ) -> tuple[list[dict], float]:
    """Duration-bucketed batches of the pool (repeated to fill them), on the device, and the
    seconds of audio in one round of them."""
    import soundfile as sf
    from torch.nn.utils.rnn import pad_sequence

    from asr.audio import load_audio
    from asr.data import DurationBatchSampler
    from asr.tokenizer import PAD_ID

    sizes = check.sizes
    waves = [load_audio(c.path, sample_rate) for c in pool]
    tokens = [torch.tensor(tokenizer.encode(c.text)) for c in pool]
    durations = [sf.info(str(c.path)).duration for c in pool]
    repeats = max(1, math.ceil(sizes.bench_batches * sizes.bench_seconds / sum(durations)))
    sampler = DurationBatchSampler(durations * repeats, sizes.bench_batch_size,
                                   sizes.bench_seconds, shuffle=True, seed=0)
    chosen = sorted(sampler, key=len, reverse=True)[:sizes.bench_batches]  # the full ones
    random.Random(0).shuffle(chosen)
    batches = []
    for batch in chosen:
        items = [i % len(pool) for i in batch]
        batches.append({
            "wave": pad_sequence([waves[i] for i in items], batch_first=True),
            "lengths": torch.tensor([len(waves[i]) for i in items]),
            "tokens": pad_sequence([tokens[i] for i in items], batch_first=True,
                                   padding_value=PAD_ID)})
    audio = sum(b["lengths"].sum().item() for b in batches) / sample_rate
    return [{k: v.to(check.device) for k, v in b.items()} for b in batches], audio


def bench_contenders(check: Check, dims, features, batches: list[dict]
                     ) -> tuple[dict[str, torch.nn.Module], list[str]]:
    """Ours as configured; ours and SpeechBrain's (when importable) with the same frame
    stacking front end, so that only the Transformer differs; CMVN from the first batch."""
    from dataclasses import replace

    from asr.model import SpeechTransformer
    from bench_training import PeerModel

    stacked = replace(dims, subsampling="stack")
    builders = {OURS: lambda: SpeechTransformer(dims, features),
                OURS_STACKED: lambda: SpeechTransformer(stacked, features)}
    notes = [f"{OURS}: {dims.subsampling} subsampling as configured; {OURS_STACKED} and "
             f"{SPEECHBRAIN}: frames stacked by {dims.stack} and projected (equal sizes)"]
    try:
        import speechbrain.lobes.models.transformer.TransformerASR  # noqa: F401
        builders[SPEECHBRAIN] = lambda: PeerModel(stacked, features, "speechbrain")
    except ImportError as err:
        if not check.toy:
            raise CheckFailed(f"speechbrain is not importable: {err}") from None
        notes.append(f"SpeechBrain skipped: not importable ({err})")
    first = batches[0]
    models = {}
    for name, build in builders.items():
        torch.manual_seed(0)
        model = build()
        model.frontend.set_cmvn([(first["wave"].cpu(), first["lengths"].cpu())])
        models[name] = model.to(check.device).train()
    return models, notes


class DeviceStepper:
    """forward (bf16 autocast on CUDA) + backward + clip + Adam over the batches, synchronised
    at the end of each round so wall-clock time is the device's."""

    def __init__(self, model: torch.nn.Module, batches: list[dict], train_cfg: dict,
                 device: torch.device) -> None:
        from asr.training.step import clip_gradients

        self.model, self.batches, self.device = model, batches, device
        optim = {k: v for k, v in train_cfg["optim"].items() if k not in ("_target_", "fused")}
        self.optimizer = torch.optim.Adam(model.parameters(), fused=True, **optim)
        self.clip, self.grad_clip = clip_gradients, train_cfg["trainer"]["grad_clip"]
        self.losses: list[float] = []

    def forward_backward(self, batch: dict) -> torch.Tensor:
        from asr.training.options import autocast

        with autocast(self.device, "bf16"):
            loss = self.model(batch["wave"], batch["lengths"], batch["tokens"])["loss"]
        loss.backward()
        return loss

    def __call__(self) -> None:
        total = 0.0
        for batch in self.batches:
            self.optimizer.zero_grad(set_to_none=True)
            total = total + self.forward_backward(batch).detach()
            self.clip(self.model.parameters(), self.grad_clip)
            self.optimizer.step()
        self.losses.append(float(total) / len(self.batches))  # synchronises the device


def round_flops(stepper: DeviceStepper) -> int:
    """Forward + backward FLOPs of one round (matmuls and attention, as counted by torch)."""
    from bench_efficiency import CPU_SDPA
    from torch.utils.flop_counter import FlopCounterMode

    with FlopCounterMode(display=False, custom_mapping=CPU_SDPA) as counter:
        for batch in stepper.batches:
            stepper.forward_backward(batch)
    stepper.model.zero_grad(set_to_none=True)
    return counter.get_total_flops()


def matmul_peak(device: torch.device, size: int) -> tuple[Callable[[], None], float, str]:
    """Ten dense matmuls of two size x size matrices (bf16 on CUDA, fp32 on the CPU), their
    FLOPs and dtype: the peak that MFU divides by."""
    dtype = torch.bfloat16 if device.type == "cuda" else torch.float32
    a = torch.randn(size, size, device=device, dtype=dtype)
    b = torch.randn(size, size, device=device, dtype=dtype)
    out = torch.empty(size, size, device=device, dtype=dtype)

    def call() -> None:
        for _ in range(10):
            torch.mm(a, b, out=out)
        if device.type == "cuda":
            torch.cuda.synchronize()

    return call, 10 * 2.0 * size**3, str(dtype).removeprefix("torch.")


# --- the command -------------------------------------------------------------------------------

def steps(check: Check) -> list[tuple[str, Callable[[], dict]]]:
    """Every step in order: the ones that matter most first, the compiled runs last."""
    plan = [("environment", lambda: environment(check))]
    plan += [(f"train_{p}", lambda p=p: train_step(check, p, False)) for p in PRECISIONS]
    plan += [("decode_cpu_vs_device", lambda: decode_step(check)),
             ("ddp_torchrun", lambda: ddp_train_step(check)),
             ("ddp_collectives", lambda: ddp_collectives_step(check)),
             ("bench_s2t_s", lambda: bench_step(check))]
    compiled = ("bf16", "fp32", "fp16") if check.device.type == "cuda" else ("fp32",)
    plan += [(f"train_{p}_compiled", lambda p=p: train_step(check, p, True)) for p in compiled]
    return plan


def parse_args(argv: list[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", type=Path, default=os.environ.get("OUT"),
                        help="where gpu_check.json and gpu_check.log go (default: $OUT)")
    parser.add_argument("--data", type=Path,
                        default=CARRY_DATA if (CARRY_DATA / CLIPS).is_file() else SHARED,
                        help="a tools/pack_gpu.py data folder, or ../shared/data")
    parser.add_argument("--toy", action="store_true",
                        help="toy sizes on the CPU (automatic without CUDA)")
    parser.add_argument("--budget", type=float, default=None,
                        help="seconds for the whole run (default 450 on a GPU, none for --toy)")
    parser.add_argument("--only", nargs="+", metavar="STEP", help="run only these steps")
    parser.add_argument("--work", type=Path, help="keep the runs' model directories here "
                        "(default: a temporary folder, deleted at the end; not --out, whose "
                        "files a GPU machine sends back)")
    parser.add_argument("--ddp-probe", type=Path, help=argparse.SUPPRESS)  # a torchrun rank
    args = parser.parse_args(argv)
    if args.out is None and args.ddp_probe is None:
        parser.error("--out DIR (or $OUT) is required")
    args.toy = args.toy or not torch.cuda.is_available()
    if args.budget is None:
        args.budget = 0.0 if args.toy else 450.0
    return args


def start_log(out: Path) -> None:
    out.mkdir(parents=True, exist_ok=True)
    handlers = [logging.StreamHandler(sys.stdout), logging.FileHandler(out / "gpu_check.log")]
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(name)s: %(message)s",
                        handlers=handlers, force=True)


def main(argv: list[str] | None = None) -> int:
    if str(TOOLS) not in sys.path:  # the benchmark helpers beside this file
        sys.path.insert(0, str(TOOLS))
    args = parse_args(argv)
    if args.ddp_probe is not None:
        ddp_probe(args.ddp_probe, args.toy)
        return 0
    start_log(args.out)
    with tempfile.TemporaryDirectory(prefix="gpu_check_") as temporary:
        check = Check(args.out, args.data, args.toy, args.budget, args.work or Path(temporary))
        log.info(f"gpu_check on {check.device} ({'toy' if args.toy else 'full'} sizes), "
                 f"{check.info['clips']} clips, out {args.out}")
        for name, step in steps(check):
            if args.only is None or name in args.only:
                check.run(name, step)
        check.write()
    counts = {s: sum(r["status"] == s for r in check.results) for s in ("pass", "fail", "skip")}
    log.info(f"done in {time.monotonic() - check.started:.0f} s: {counts['pass']} passed, "
             f"{counts['fail']} failed, {counts['skip']} skipped; {args.out / 'gpu_check.json'}")
    return 1 if check.failed else 0


if __name__ == "__main__":
    sys.exit(main())

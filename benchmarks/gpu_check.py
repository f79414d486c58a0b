"""One-command GPU check: training in every precision, DDP, decoding, and a timed race.

    python -m benchmarks.gpu_check --out DIR      # $OUT when --out is not given

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
6. train_*_compiled: step 2 again with `trainer.compile=true` on four duration buckets
   (`data.buckets=4`: static shapes) in `trainer.compile_mode=reduce-overhead` (CUDA graphs),
   last (slow to start), bf16 first; then bench_s2t_s_compiled: ours eager against ours
   under `torch.compile` on the race's batches (what fusing the launch-bound step's kernels
   gains), then fp32 and fp16.

Without CUDA (or with --toy) the same steps run on the CPU at toy sizes (model=tiny, a few
steps), where autocast is off: the three precisions compute in fp32 (fp16 still runs its loss
scaler) and one compiled run (fp32) stands for all three, compiled by Dynamo and AOTAutograd
without Inductor's code generation (the compiled race: by Dynamo alone). On CUDA the compile
turns Inductor's loop reindexing off (`asr.training.options.inductor_options`), whose code
generation failed on the training step, and a torch without that switch is refused up front
(`check_compile`): the step passes when it trains or refuses in one line at once. `--budget`
seconds bound the whole run: each step runs as a process of its own, killed with everything
it started when the budget ends (it fails, with that reason), and a step not started by then
is skipped, so the check ends within the budget whatever a step does. The audio comes from
`--data`: a folder made by tools/pack_gpu.py (clips.json and its clips) or the shared corpora
(../shared/data). The runs' model directories go to a temporary folder (or `--work DIR`),
never to --out, whose files a borrowed GPU machine sends back.
"""

import argparse
import json
import logging
import math
import os
import platform
import signal
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path

import torch

from asr.training.options import TrainingError
from benchmarks.gpu_data import CARRY_DATA, CLIPS, ROOT, SHARED
from benchmarks.gpu_run import RESULT_ENV, Check, CheckFailed, first_line, outcome, release_memory

PRECISIONS = ("fp32", "bf16", "fp16")
MODELS = "models.json"  # in --work: the trained model of each precision, for the later steps
log = logging.getLogger("gpu_check")


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


def train_overrides(check: Check, out: Path, precision: str, compiled: bool,
                    steps: int) -> list[str]:
    """The default model and config, on the check's data, for a run of `steps`."""
    sizes = check.sizes
    overrides = [f"data.train_manifest={check.train}", f"data.dev_manifest={check.test}",
                 f"trainer.out_dir={out}", "trainer.progress=false", "trainer.max_epochs=100000",
                 f"trainer.precision={precision}", f"trainer.compile={str(compiled).lower()}",
                 f"trainer.log_every={sizes.log_every}", "trainer.save_every_minutes=null",
                 f"trainer.device={check.device.type}", f"data.batch_size={sizes.batch_size}",
                 "tokenizer.vocab_size=64", f"scheduler.warmup_steps={max(steps // 4, 2)}"]
    if compiled:  # static shapes: a graph per bucket, on CUDA run as CUDA graphs
        overrides += ["data.buckets=4"]
        overrides += [] if check.toy else ["trainer.compile_mode=reduce-overhead"]
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

    def compile_by(model: torch.nn.Module, **options: object) -> torch.nn.Module:
        options.pop("options", None)  # Inductor's settings, nothing to the other backends
        return original(model, backend=backend, **options)

    torch.compile = compile_by
    try:
        yield
    finally:
        torch.compile = original


def train_step(check: Check, precision: str, compiled: bool) -> dict:
    """Train `sizes.steps` steps (`sizes.compiled_steps` compiled), check the loss curve, then
    resume to more steps."""
    name = f"{precision}_compiled" if compiled else precision
    out = check.work / f"train_{name}"
    steps = check.sizes.compiled_steps if compiled else check.sizes.steps
    more = check.sizes.resume_steps
    overrides = train_overrides(check, out, precision, compiled, steps)
    backend = "aot_eager" if check.toy else "inductor"
    started = time.monotonic()
    try:
        trainer = fit([*overrides, f"trainer.max_steps={steps}"], backend)
    except TrainingError as err:  # compiled training refused up front (CUDA): one line, at once
        if not compiled:
            raise
        return {"refused": first_line(err), "refused_after_s": round(time.monotonic() - started, 2)}
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
    steps = check.sizes.ddp_steps
    overrides = [o for o in train_overrides(check, out, "bf16", False, steps)
                 if not o.startswith("trainer.device")]  # torchrun: the GPU, LOCAL_RANK's
    # loader workers here only: in the runs in this process, collecting a finished run's
    # persistent workers stopped mid-epoch takes torch about 5 s each
    overrides.append(f"data.num_workers={0 if check.toy else 4}")
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
    run = torchrun(["-m", "benchmarks.gpu_check", "--ddp-probe", str(result),
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
        with autocast(device, "auto"):  # bf16 on CUDA, fp32 on the CPU
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

def bench_step(check: Check) -> dict:
    """Ours (`model=s2t_s`) against SpeechBrain's TransformerASR, bf16, large batches
    (benchmarks/gpu.py); SpeechBrain may be missing only from a toy run."""
    from benchmarks.gpu import SPEECHBRAIN, race

    details = race(check.device, check.sizes, check.split("train") + check.split("sentence"),
                   check.toy)
    models = details["models"]
    if SPEECHBRAIN not in models and not check.toy:
        raise CheckFailed(f"no SpeechBrain to race: {details['notes'][-1]}", details)
    if not all(math.isfinite(x) for m in models.values() for x in m["losses"]):
        raise CheckFailed("a benchmark loss is not finite", details)
    return details


def bench_compiled_step(check: Check) -> dict:
    """Ours eager against ours under `torch.compile` on the race's batches (Inductor on the
    GPU, Dynamo alone on the CPU toy): what fusing the launch-bound step's kernels gains."""
    from benchmarks.gpu import OURS_COMPILED, race_compiled

    details = race_compiled(check.device, check.sizes,
                            check.split("train") + check.split("sentence"), check.toy,
                            "eager" if check.toy else "inductor")
    losses = details["models"][OURS_COMPILED]["losses"]
    if not all(math.isfinite(x) for x in losses):
        raise CheckFailed(f"a compiled benchmark loss is not finite: {losses}", details)
    return details


# --- the command -------------------------------------------------------------------------------

def steps(check: Check) -> list[tuple[str, Callable[[], dict]]]:
    """Every step in order: the ones that matter most first, the compiled runs last."""
    plan = [("environment", lambda: environment(check))]
    plan += [(f"train_{p}", lambda p=p: train_step(check, p, False)) for p in PRECISIONS]
    plan += [("decode_cpu_vs_device", lambda: decode_step(check)),
             ("ddp_torchrun", lambda: ddp_train_step(check)),
             ("ddp_collectives", lambda: ddp_collectives_step(check)),
             ("bench_s2t_s", lambda: bench_step(check))]
    first, *rest = ("bf16", "fp32", "fp16") if check.device.type == "cuda" else ("fp32",)

    def compiled(precision: str) -> tuple[str, Callable[[], dict]]:
        return f"train_{precision}_compiled", lambda: train_step(check, precision, True)

    plan += [compiled(first), ("bench_s2t_s_compiled", lambda: bench_compiled_step(check))]
    return plan + [compiled(p) for p in rest]


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
    parser.add_argument("--one-step", help=argparse.SUPPRESS)  # one step, as its own process
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
    args = parse_args(argv)
    if args.ddp_probe is not None:
        ddp_probe(args.ddp_probe, args.toy)
        return 0
    start_log(args.out)
    if args.one_step is not None:
        return one_step(args)
    with tempfile.TemporaryDirectory(prefix="gpu_check_") as temporary:
        work = args.work or Path(temporary)
        check = Check(args.out, args.data, args.toy, args.budget, work)
        log.info(f"gpu_check on {check.device} ({'toy' if args.toy else 'full'} sizes), "
                 f"{check.info['clips']} clips, out {args.out}")
        for name, _ in steps(check):
            if args.only is None or name in args.only:
                check.run_process(name, step_command(args, name, work))
        check.write()
    counts = {s: sum(r["status"] == s for r in check.results) for s in ("pass", "fail", "skip")}
    log.info(f"done in {time.monotonic() - check.started:.0f} s: {counts['pass']} passed, "
             f"{counts['fail']} failed, {counts['skip']} skipped; {args.out / 'gpu_check.json'}")
    return 1 if check.failed else 0


def step_command(args: argparse.Namespace, name: str, work: Path) -> list[str]:
    """The command that runs one step in a process of its own (`one_step`)."""
    return [sys.executable, "-m", "benchmarks.gpu_check", "--one-step", name,
            "--out", str(args.out), "--data", str(args.data), "--work", str(work),
            *(["--toy"] if args.toy else [])]


def one_step(args: argparse.Namespace) -> int:
    """A step run as its own process: its result to $GPU_CHECK_RESULT, and the models it
    trained to --work's MODELS for the steps after it (decoding uses the fp32 model)."""
    check = Check(args.out, args.data, args.toy, 0.0, args.work)
    models = args.work / MODELS
    if models.is_file():
        check.models = {k: Path(v) for k, v in json.loads(models.read_text()).items()}
    step = dict(steps(check)).get(args.one_step)
    if step is None:
        raise SystemExit(f"error: no step {args.one_step!r}")
    status, reason, details = outcome(step)
    models.write_text(json.dumps({k: str(v) for k, v in check.models.items()}))
    Path(os.environ[RESULT_ENV]).write_text(json.dumps(
        {"status": status, "reason": reason, "details": details}, default=str))
    return 0


if __name__ == "__main__":
    sys.exit(main())

"""Cases: training directories that would stop a run after it has written something, or hang
it. A FIFO, folder or link named train.lock, a file (or device, or dangling link) as
trainer.out_dir or above it, a logger that is not installed: each refused with one line before
anything is written. A full disk at a later checkpoint: one line, and the state saved before
intact, to resume from. asr-train-lm's options and text files are checked as every CLI's."""

import errno
import os
import sys
from pathlib import Path

from robustness.case import Cli, Work, case
from robustness.train import _trainer

TRAINING = 60  # seconds: building a Trainer learns a tokenizer and CMVN statistics


def _into(w: Work, out: Path | str, *overrides: str):
    """One step of training into `out`."""
    return _trainer(w, w.folder, f"trainer.out_dir={out}", *overrides).fit()


def _lock(make) -> object:
    def run(w: Work):
        (w.folder / "run").mkdir()
        make(w.folder / "run" / "train.lock")
        return _into(w, w.folder / "run")
    return run


case("train", "a FIFO named train.lock", limit=TRAINING)(_lock(os.mkfifo))
case("train", "a folder named train.lock", limit=TRAINING)(_lock(Path.mkdir))
case("train", "train.lock a link to /dev/null", limit=TRAINING)(
    _lock(lambda p: p.symlink_to("/dev/null")))
case("train", "train.lock a dangling link", limit=TRAINING)(
    _lock(lambda p: p.symlink_to(p.parent / "nowhere")))
case("train", "trainer.out_dir a regular file", limit=TRAINING)(
    lambda w: _into(w, w.file("run", "notes")))
case("train", "trainer.out_dir inside a regular file", limit=TRAINING)(
    lambda w: _into(w, w.file("run", "notes") / "deeper" / "model"))
case("train", "trainer.out_dir /dev/null", limit=TRAINING)(lambda w: _into(w, "/dev/null"))
case("train", "trainer.out_dir a dangling link", limit=TRAINING)(
    lambda w: _into(w, (w.folder / "run").symlink_to(w.folder / "gone") or w.folder / "run"))


def _without_tensorboard(w: Work):
    """logger=tensorboard where tensorboard cannot be imported: refused, nothing written."""
    saved = sys.modules.get("torch.utils.tensorboard")
    sys.modules["torch.utils.tensorboard"] = None  # the import fails
    try:
        return _into(w, w.folder / "run", "trainer.logger=tensorboard")
    finally:
        if saved is None:
            sys.modules.pop("torch.utils.tensorboard", None)
        else:
            sys.modules["torch.utils.tensorboard"] = saved


case("train", "trainer.logger=tensorboard without tensorboard", limit=TRAINING)(
    _without_tensorboard)


def _then_csv(w: Work) -> bool:
    """After the refusal, the folder is untouched and a run with logger=csv starts."""
    from asr.training.options import TrainingError
    try:
        _without_tensorboard(w)
    except TrainingError:
        pass
    untouched = not (w.folder / "run").exists()
    _into(w, w.folder / "run", "trainer.logger=csv")
    return untouched and (w.folder / "run" / "curves.csv").is_file()


case("train", "logger=csv after logger=tensorboard was refused", "ok", limit=2 * TRAINING)(_then_csv)


def _disk_full(w: Work, *overrides: str):
    """Every checkpoint save after the first finds the disk full (ENOSPC)."""
    import asr.training.state as state
    from asr.checkpoint import atomic_write

    real, saves = state.save_torch, []

    def save_or_fill(obj, path):
        if saves:
            atomic_write(path, lambda f: (_ for _ in ()).throw(
                OSError(errno.ENOSPC, os.strerror(errno.ENOSPC))))
        real(obj, path)
        saves.append(path)

    state.save_torch = save_or_fill
    try:
        return _into(w, w.folder / "run", "trainer.save_every_steps=1", *overrides)
    finally:
        state.save_torch = real


case("train", "a full disk at the second checkpoint save", limit=TRAINING)(_disk_full)


def _resumes_after_disk_full(w: Work) -> bool:
    """The run the full disk stopped leaves its first state whole, and resumes from it."""
    from asr.checkpoint import load_torch
    from asr.training.options import TrainingError
    try:
        _disk_full(w)
    except TrainingError as err:
        said = str(err)
    kept = load_torch(w.folder / "run" / "checkpoint.pt")["state"]["step"] == 0
    leftovers = [p for p in (w.folder / "run").iterdir() if p.name.endswith(".tmp")]
    state = _into(w, w.folder / "run", "trainer.resume=true")
    return "intact" in said and kept and not leftovers and state.step == 1


case("train", "resume after a full disk stopped a run", "ok", limit=2 * TRAINING)(
    _resumes_after_disk_full)


def _train_lm(w: Work, *extra: str, text: str | None = None) -> Cli:
    """asr-train-lm on a few sentences, with `extra` options."""
    sentences = str(w.file("text.txt", "one four\nyes stop\nfour one yes\n"))
    return Cli("asr.train_lm:main", ["--model", str(w.model), "--text", text or sentences,
                                     "--dev", sentences, "--out", str(w.folder / "lm"),
                                     "--steps", "2", "--warmup-steps", "1", *extra])


for option, value in [("--device", "foo"), ("--device", "cuda:9"), ("--heads", "3"),
                      ("--d-model", "0"), ("--lr", "nan"), ("--lr", "-1"), ("--dropout", "1"),
                      ("--eval-every", "0"), ("--threads", "-1"), ("--batch-tokens", "0"),
                      ("--max-tokens", "2"), ("--steps", "abc"), ("--warmup-steps", "5")]:
    case("cli", f"asr-train-lm {option} {value}", limit=TRAINING)(
        lambda w, option=option, value=value: _train_lm(w, option, value))
case("cli", "asr-train-lm --text a FIFO", limit=TRAINING)(
    lambda w: _train_lm(w, text=str(w.fifo())))
case("cli", "asr-train-lm --text /dev/zero", limit=TRAINING)(
    lambda w: _train_lm(w, text="/dev/zero"))
case("cli", "asr-train-lm --text not UTF-8", limit=TRAINING)(
    lambda w: _train_lm(w, text=str(w.file("bad.txt", b"\xff\xfe\xfa"))))
case("cli", "asr-train-lm --out a regular file", limit=TRAINING)(
    lambda w: Cli("asr.train_lm:main", [*_train_lm(w).argv[:6], "--out", str(w.file("lm")),
                                        "--steps", "2", "--warmup-steps", "1"]))


def _linked_folders(w: Work) -> bool:
    """overwrite=true where epochs/ and averaged/ are links to folders of one's own: the links
    go, the folders and their files stay."""
    mine = w.folder / "mine"
    mine.mkdir()
    (mine / "thesis.tex").write_text("years of work")
    for name in ("epochs", "averaged"):
        (w.model / name).symlink_to(mine, target_is_directory=True)
    _trainer(w, w.folder, "trainer.overwrite=true").fit()
    return (mine / "thesis.tex").read_text() == "years of work" \
        and not (w.model / "averaged").is_symlink()


case("train", "overwrite=true where epochs/ and averaged/ link to a folder of one's own", "ok",
     limit=TRAINING)(_linked_folders)


def _closed_log(w: Work) -> bool:
    """`asr-train ... | head -1`: the first line, nothing on stderr, status 141."""
    import subprocess
    root = Path(__file__).resolve().parents[2]
    argv = [sys.executable, "-m", "asr.train", f"data.train_manifest={w.shared / 'train.jsonl'}",
            f"data.dev_manifest={w.shared / 'train.jsonl'}", f"trainer.out_dir={w.folder / 'run'}",
            "model=tiny", "trainer.max_epochs=3", "trainer.progress=false"]
    head = subprocess.Popen(["head", "-1"], stdin=subprocess.PIPE, stdout=subprocess.PIPE)
    run = subprocess.run(argv, stdout=head.stdin, stderr=subprocess.PIPE, cwd=root, timeout=110)
    head.stdin.close()
    first = head.stdout.read().decode()
    head.wait()
    return run.returncode == 141 and run.stderr == b"" and first.startswith("model: ")


case("train", "asr-train | head -1", "ok", limit=120)(_closed_log)

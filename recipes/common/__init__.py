"""What the real-speech recipes share: speaker/prompt splits, downloads, manifest writing.

Splits are by *who* speaks (or *what* is read), never by file, so the held-out word error
rate measures a speaker or a sentence the model never heard. Two ways to assign a group:

- `hash_split`: Speech Commands' own rule (its README's `which_set`): the SHA-1 of the group
  name picks a stable percentile, so adding recordings never moves a speaker between splits.
  A `salt` makes it a different draw: the official test set *is* the speakers whose unsalted
  hash lies in one band (10-20%), so re-splitting it needs another hash;
- `named_split`: explicit lists, for corpora with a handful of speakers (FSDD has four).
"""

import argparse
import hashlib
import json
import math
import os
import shutil
import tarfile
import tempfile
import urllib.request
import zipfile
from collections.abc import Callable, Iterable, Mapping
from pathlib import Path

from asr.checkpoint import save_text
from asr.data import ManifestError, iter_manifest
from asr.progress import progress

SPLITS = ("train", "dev", "test")
REHEARSAL = "rehearsal"  # the kind (and speaker) of lines taken in from other corpora
_MAX_PER_CLASS = 2**27 - 1  # Speech Commands' MAX_NUM_WAVS_PER_CLASS


def hash_split(group: str, dev_percent: float, test_percent: float, salt: str = "") -> str:
    """"train", "dev" or "test" for a speaker/prompt id, as Speech Commands assigns speakers."""
    digest = int(hashlib.sha1((salt + group).encode("utf-8")).hexdigest(), 16)
    percent = (digest % (_MAX_PER_CLASS + 1)) * (100.0 / _MAX_PER_CLASS)
    if percent < dev_percent:
        return "dev"
    if percent < dev_percent + test_percent:
        return "test"
    return "train"


def named_split(group: str, dev: Iterable[str], test: Iterable[str]) -> str:
    """"dev" or "test" for the groups listed there, "train" for all others."""
    dev, test = set(dev), set(test)
    if dev & test:
        raise ValueError(f"groups both in dev and test: {', '.join(sorted(dev & test))}")
    return "dev" if group in dev else "test" if group in test else "train"


def manifest_line(audio: Path, text: str, duration: float, **extra) -> dict:
    """One NeMo manifest entry; extra keys (speaker, prompt, ...) ride along for analysis."""
    return {"audio_filepath": str(audio), "text": text, "duration": round(duration, 4), **extra}


def rehearsal(manifests: Iterable[Path], keep: Callable[[str], bool] = bool) -> list[dict]:
    """The utterances of other corpora's `manifests` whose text `keep` accepts (default: any
    non-empty text), as training lines of kind REHEARSAL with absolute audio paths: a model
    fine-tuned on a small real corpus keeps hearing what it started from. A manifest listed
    twice is heard twice an epoch."""
    lines = []
    for manifest in manifests:
        try:
            lines += [manifest_line(Path(u.audio_filepath).resolve(), u.text, u.duration,
                                    speaker=REHEARSAL, kind=REHEARSAL, sources=[str(manifest)])
                      for u in iter_manifest(Path(manifest)) if keep(u.text)]
        except ManifestError as err:
            raise SystemExit(f"error: --rehearse {err}") from None
    return lines


def write_manifests(out: Path, entries: Mapping[str, list[dict]],
                    names: Iterable[str] = SPLITS) -> dict[str, Path]:
    """OUT/{split}.jsonl for each split, each written atomically; their paths."""
    paths = {}
    for split in names:
        lines = "".join(json.dumps(entry, ensure_ascii=False) + "\n"
                        for entry in entries.get(split, []))
        paths[split] = out / f"{split}.jsonl"
        save_text(lines, paths[split])
    return paths


def download(url: str, dest: Path, marker: str, sha256: str | None = None) -> Path:
    """Fetch an archive (zip or tar.gz) from `url` and unpack it into `dest`, once.

    Skipped when `dest/marker` exists (a previous complete run). The archive is streamed to a
    temporary file (LibriSpeech's are 6-30 GB: never held in memory) under a progress bar of
    its size, hashed on the way; when the recipe knows the archive's published `sha256`, a
    different one stops before anything is unpacked. It is unpacked into a temporary folder
    beside `dest` and renamed into place, so an interrupted download never leaves a
    half-filled corpus that a later run would take for complete.
    """
    if (dest / marker).exists():
        return dest
    dest.parent.mkdir(parents=True, exist_ok=True)
    staging = Path(tempfile.mkdtemp(dir=dest.parent, prefix=f".{dest.name}."))
    try:
        archive = staging / "archive"
        try:
            with urllib.request.urlopen(url, timeout=60) as response, archive.open("wb") as f:  # noqa: S310 (fixed URLs)
                size = response.headers.get("Content-Length")
                print(f"downloading {url} -> {dest}"
                      + (f" ({int(size) / 1e6:.1f} MB)" if size else ""), flush=True)
                digest = _fetch(response, f, int(size) if size else None, url.rsplit("/", 1)[-1])
        except OSError as err:
            raise SystemExit(f"error: cannot download {url} ({err}); pass a local copy with "
                             "--root") from None
        if sha256 is not None and digest != sha256:
            raise SystemExit(f"error: {url}: sha256 {digest} is not the published {sha256} (a "
                             "corrupt or changed download); nothing was unpacked")
        print(f"sha256 {digest}: " + ("as published" if sha256 else "no published checksum "
                                      "to compare with"))
        _unpack(archive, url, staging / "unpacked")
        found = sorted((staging / "unpacked").rglob(marker))
        if not found:
            raise SystemExit(f"error: {url}: archive holds no {marker!r}")
        # GitHub archives wrap everything in one `repo-branch/` folder: use the marker's parent.
        source = found[0].parent
        if dest.exists():
            shutil.rmtree(dest)
        source.rename(dest)
    finally:
        shutil.rmtree(staging, ignore_errors=True)
    return dest


def _fetch(response, out, size: int | None, name: str) -> str:
    """Copy a response to `out` a megabyte at a time; the SHA-256 of what came."""
    digest = hashlib.sha256()
    with progress(total=size, desc=name, unit="B", unit_scale=True, unit_divisor=1024) as bar:
        while block := response.read(1 << 20):
            out.write(block)
            digest.update(block)
            bar.update(len(block))
    return digest.hexdigest()


def _unpack(archive: Path, url: str, into: Path) -> None:
    """Extract a zip or tar(.gz) archive file, refusing paths that leave `into`."""
    if zipfile.is_zipfile(archive):
        with zipfile.ZipFile(archive) as opened:
            for name in opened.namelist():
                _check_member(name, into, url)
            opened.extractall(into)
        return
    try:
        with tarfile.open(archive) as opened:
            opened.extractall(into, filter="data")
    except tarfile.TarError as err:
        raise SystemExit(f"error: {url}: not a zip or tar archive ({err})") from None


def _check_member(name: str, into: Path, url: str) -> None:
    target = (into / name).resolve()
    if not target.is_relative_to(into.resolve()):
        raise SystemExit(f"error: {url}: archive member {name!r} escapes the target folder")



def percent_split_cli(argv: list[str] | None, description: str, default_out: str,
                      prepare: Callable[..., dict[str, Path]],
                      summary: Callable[[Mapping[str, Path]], str], dev_percent: float,
                      test_percent: float, rehearse: bool = False) -> None:
    """The command line of a recipe split by hash percentages: --root, --out, the shares,
    and `--rehearse` where the recipe's `prepare` takes other corpora into train.

    Writes OUT/settings.json with the options used, so a corpus says how it was made.
    """
    parser = argparse.ArgumentParser(description=description)
    parser.add_argument("--root", type=Path, help="local copy (default: download it)")
    parser.add_argument("--out", type=Path, default=Path(default_out))
    parser.add_argument("--dev-percent", type=float, default=dev_percent)
    parser.add_argument("--test-percent", type=float, default=test_percent)
    if rehearse:
        parser.add_argument("--rehearse", type=Path, nargs="+", default=[],
                            help="manifests of other corpora whose utterances join train")
    args = parser.parse_args(argv)
    extra = {"rehearse": args.rehearse} if rehearse else {}
    paths = prepare(args.root, args.out, dev_percent=args.dev_percent,
                    test_percent=args.test_percent, **extra)
    save_text(json.dumps(vars(args), default=str, indent=1) + "\n", args.out / "settings.json")
    print(summary(paths))


def bounded(low: float, high: float, kind: type = int, what: str = "") -> Callable[[str], float]:
    """An argparse type: a finite number of `kind` in [low, high] (`what` names the unit)."""
    def parse(value: str) -> float:
        try:
            number = kind(value)
        except ValueError:
            raise argparse.ArgumentTypeError(f"not a number: {value!r}") from None
        if not (math.isfinite(number) and low <= number <= high):
            unit = f" {what}" if what else ""
            raise argparse.ArgumentTypeError(f"must be from {low:g} to {high:g}{unit}, got {value}")
        return number
    return parse


# Worker processes beyond a few per CPU only add memory; audio rates outside telephone to studio.
positive = bounded(1, 1 << 20)
jobs = bounded(1, 4 * (os.cpu_count() or 1), what="(4 per CPU)")
sample_rate = bounded(8000, 96000, what="Hz")
positive_hours = bounded(1e-4, 10000, float, "hours")


def add_synthesis_options(parser: argparse.ArgumentParser, real_root: Path | None) -> None:
    """The options every synthetic corpus's prepare takes: --seed, --jobs, --sample-rate and
    --real-root (the people that join it; `real_root` is ../shared/data when present)."""
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--jobs", type=jobs, default=len(os.sched_getaffinity(0)),
                        help="worker processes (default: the CPUs this process may use, "
                             "%(default)s)")
    parser.add_argument("--sample-rate", type=sample_rate, default=16000)
    parser.add_argument("--real-root", type=Path, default=real_root,
                        help="folder laid out like ../shared/data, whose people join the corpus "
                             "(default: it, when present); 'none' for synthetic speech only")

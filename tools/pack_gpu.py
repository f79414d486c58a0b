"""Pack what a GPU machine needs for benchmarks/gpu_check.py into gpu_carry/, and print the command.

    .venv/bin/python -m tools.pack_gpu [--out gpu_carry] [--data ../shared/data]

The GPU machines this project borrows have no network and a Python with torch and torchaudio
(2.11, CUDA), sentencepiece, numpy, scipy, tqdm, pyyaml, onnx and onnxruntime; one gets a copy
of the working tree (../shared stays behind) plus the ignored folders copied beside it, 64 MiB
in all.
The folder written here (git-ignored) holds:

- wheels/ and requirements.txt: the rest of what asr, its tests' tools and the SpeechBrain
  comparison import (`CARRIED`), pinned to the versions installed in this environment (the
  tested ones), for CPython 3.10 to 3.13 on x86_64 Linux, since the GPU machine's Python version
  is not known beforehand (gpu_check's `environment` step records it);
- data/: the clips gpu_check trains, decodes and times on (benchmarks/gpu_data.py `shared_clips`),
  from ../shared/data, as FLAC, listed with their text in data/clips.json.

It prints the folder's size and the one command to run there: the wheels installed into a
folder of their own with pip (or, without pip, unpacked by `--unpack DIR`, which needs only the
standard library), then gpu_check with its results in $OUT.
"""

import argparse
import json
import re
import shutil
import subprocess
import sys
import zipfile
from importlib.metadata import version
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
SHARED = ROOT.parent / "shared" / "data"
CARRY = ROOT / "gpu_carry"
PYTHONS = ("3.10", "3.11", "3.12", "3.13")
PLATFORMS = ("manylinux2014_x86_64", "manylinux_2_17_x86_64", "manylinux_2_27_x86_64",
             "manylinux_2_28_x86_64")
# What the GPU machine lacks, with what it needs in turn (its torch brings filelock,
# typing-extensions, sympy, networkx, jinja2, fsspec; pyyaml and packaging may be there too).
CARRIED = [
    "hydra-core", "omegaconf", "antlr4-python3-runtime",  # the configs
    "sentencepiece",  # the machine's 0.2.2 aborts on a required letter absent from the text
    "jiwer", "click", "rapidfuzz",  # WER
    "soundfile", "cffi", "pycparser",  # audio files
    "soxr", "webrtcvad-wheels",  # resampling, voice activity
    # the comparison: importing TransformerASR needs no more (huggingface_hub, requests: lazily)
    "speechbrain", "hyperpyyaml", "ruamel.yaml", "ruamel.yaml.clib", "joblib", "packaging",
]
DEVICE_SITE = "/tmp/asr_site"  # where the device command installs the wheels


def pins(names: list[str]) -> list[str]:
    """`name==version` of each package as installed here; those not installed are left out."""
    from importlib.metadata import PackageNotFoundError

    found = []
    for name in names:
        try:
            found.append(f"{name}=={version(name)}")
        except PackageNotFoundError:
            print(f"pack_gpu: {name} is not installed here: not carried", file=sys.stderr)
    return found


def pip(*args: str) -> bool:
    """Whether `pip ARGS` succeeded (its output is not shown: the caller says what failed)."""
    run = subprocess.run([sys.executable, "-m", "pip", "--disable-pip-version-check", *args],
                         capture_output=True, text=True)
    return run.returncode == 0


def download(requirement: str, dest: Path, python: str) -> bool:
    """The wheel of `requirement` for CPython `python` on x86_64 Linux (pure or binary)."""
    platforms = [arg for p in PLATFORMS for arg in ("--platform", p)]
    abi = "cp" + python.replace(".", "")
    return pip("download", "--no-deps", "--only-binary=:all:", "--python-version", python,
               "--implementation", "cp", "--abi", abi, *platforms, "-d", str(dest), requirement)


def pack_wheels(dest: Path, names: list[str] = CARRIED) -> list[str]:
    """The wheels of every package `names` lists into `dest`; the pinned requirements.

    A package with no wheel on the index (a source release: antlr4-python3-runtime 4.9.3) is
    built into one here; it must be pure Python."""
    dest.mkdir(parents=True, exist_ok=True)
    requirements = pins(names)
    here = f"{sys.version_info.major}.{sys.version_info.minor}"
    for requirement in requirements:
        got = [download(requirement, dest, python) for python in PYTHONS]
        if not any(got):
            if not pip("wheel", "--no-deps", "-w", str(dest), requirement):
                raise SystemExit(f"error: no wheel of {requirement}, and none could be built")
            print(f"pack_gpu: {requirement}: built its wheel here (the index has none)")
            continue
        if not got[PYTHONS.index(here)]:
            raise SystemExit(f"error: no wheel of {requirement} for this Python ({here})")
        missing = [p for p, ok in zip(PYTHONS, got, strict=True) if not ok]
        if missing:
            print(f"pack_gpu: {requirement}: no wheel for Python {', '.join(missing)}",
                  file=sys.stderr)
    return requirements


def pack_data(dest: Path, shared: Path) -> int:
    """gpu_check's clips from the shared corpora as FLAC in `dest`, with clips.json."""
    import soundfile as sf

    from benchmarks.gpu_data import CLIPS, shared_clips

    entries = []
    for i, clip in enumerate(shared_clips(shared)):
        name = f"{clip.split}/{i:04d}_{clip.path.stem}.flac"
        target = dest / name
        target.parent.mkdir(parents=True, exist_ok=True)
        if clip.path.suffix == ".flac":
            shutil.copyfile(clip.path, target)
        else:
            samples, rate = sf.read(str(clip.path), dtype="int16")
            sf.write(str(target), samples, rate, format="FLAC", subtype="PCM_16")
        entries.append({"file": name, "text": clip.text, "split": clip.split,
                        "source": str(clip.path.relative_to(shared))})
    (dest / CLIPS).write_text(json.dumps(entries, indent=1) + "\n")
    return len(entries)


def folder_bytes(path: Path) -> int:
    return sum(f.stat().st_size for f in path.rglob("*") if f.is_file())


def device_setup(rel: Path, wheels: bool = True) -> str:
    """The start of a command for the GPU machine: $PY, $S (DEVICE_SITE) and, with `wheels`,
    the wheels carried in `rel` (relative to the tree) installed into $S (pip, or without pip
    `--unpack`)."""
    setup = f"PY=$(command -v python3 || command -v python); S={DEVICE_SITE}; "
    if wheels:
        setup += (f"($PY -m pip install -q --no-index --no-deps --target $S --find-links "
                  f"{rel}/wheels -r {rel}/requirements.txt || $PY -m tools.pack_gpu --unpack $S "
                  f"--out {rel}) && ")
    return setup


def device_command(carry: Path) -> str:
    """The one command for the GPU machine (run from the repository root there)."""
    return (device_setup(carry.relative_to(ROOT)) + "PYTHONPATH=.:$S $PY -m benchmarks.gpu_check --out $OUT "
            f"--data {carry.relative_to(ROOT)}/data")


# --- on the GPU machine, without pip -----------------------------------------------------------

WHEEL = re.compile(r"^(?P<name>[^-]+)-(?P<version>[^-]+)(-\d[^-]*)?-(?P<py>[^-]+)-(?P<abi>[^-]+)"
                   r"-(?P<plat>[^-]+)\.whl$")


def fits(wheel: str, minor: int = sys.version_info.minor) -> bool:
    """Whether a wheel's tags suit CPython 3.`minor` (this one) on x86_64 Linux with glibc."""
    tags = WHEEL.match(wheel)
    if tags is None:
        return False
    pythons = tags["py"].split(".")
    if tags["plat"] != "any" and not ("linux" in tags["plat"] and "x86_64" in tags["plat"]):
        return False
    if tags["abi"] == "abi3":
        return any(p.startswith("cp3") and int(p[3:]) <= minor for p in pythons)
    return f"cp3{minor}" in pythons or "py3" in pythons or "py2.py3" in tags["py"]


def unpack(wheels: Path, requirements: Path, target: Path) -> None:
    """Unpack each required wheel that suits this Python into `target` (what `pip install
    --target` does for these packages, which need no build and no scripts)."""
    target.mkdir(parents=True, exist_ok=True)
    for line in requirements.read_text().split():
        name, _, wanted = line.partition("==")
        stem = re.sub(r"[-_.]+", "_", name).lower()
        matches = [w.name for w in wheels.glob("*.whl") if fits(w.name)
                   and WHEEL.match(w.name)["name"].lower() == stem
                   and WHEEL.match(w.name)["version"] == wanted]
        if not matches:
            raise SystemExit(f"error: no wheel of {line} for Python {sys.version.split()[0]}")
        with zipfile.ZipFile(wheels / sorted(matches)[-1]) as wheel:
            wheel.extractall(target)
    print(f"unpacked {len(requirements.read_text().split())} packages into {target}")


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", type=Path, default=CARRY, help="the folder to write")
    parser.add_argument("--data", type=Path, default=SHARED, help="the shared corpora")
    parser.add_argument("--unpack", type=Path, metavar="DIR",
                        help="(on the GPU machine) unpack the carried wheels into DIR")
    args = parser.parse_args(argv)
    out = args.out.resolve()
    if args.unpack:
        unpack(out / "wheels", out / "requirements.txt", args.unpack)
        return
    if out.exists():
        shutil.rmtree(out)
    requirements = pack_wheels(out / "wheels")
    (out / "requirements.txt").write_text("\n".join(requirements) + "\n")
    clips = pack_data(out / "data", args.data)
    size = folder_bytes(out)
    print(f"{out}: {size / 2**20:.1f} MiB ({folder_bytes(out / 'wheels') / 2**20:.1f} MiB of "
          f"{len(list((out / 'wheels').glob('*.whl')))} wheels, {clips} clips)")
    if size > 48 * 2**20:
        print("warning: over 48 MiB: the working tree and this folder share 64 MiB",
              file=sys.stderr)
    print(f"on the GPU machine, with {out.relative_to(ROOT)}/ copied beside the working tree:")
    print(device_command(out))


if __name__ == "__main__":
    main()

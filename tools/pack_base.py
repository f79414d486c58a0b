"""Pack the base model's training for one call on a GPU machine into gpu_base/, and print it.

    .venv/bin/python -m tools.pack_base [--corpus data/base_all] [--rirs data/rirs]
        [--start asr/models/base] [--minutes 8] [--out gpu_base]

The GPU machine gets the working tree and the ignored folders a run carries, 64 MiB in all
(the tree takes about 12), and no network (tools/pack_gpu.py says what it has). So the corpus
travels compressed: every training and dev utterance and every noise clip as Opus (about 13
kbit/s at COMPRESSION: 5.4 hours in about 32 MiB), the room impulse responses as FLAC (they are
not speech; a lossy codec would smear them). The folder holds:

- corpus/: train.jsonl, dev.jsonl and noise.jsonl, their audio beside them, paths relative;
- rirs/: rirs.jsonl and its responses;
- start/ (with --start): the model directory training starts from (trainer.init_from), its
  weights in fp32: the shipped model, or the model an earlier call wrote to $OUT;
- wheels/ and requirements.txt: what the machine lacks for training (`CARRIED`, no
  SpeechBrain), as tools/pack_gpu.py packs them (`--no-wheels` leaves them out).

It prints the size and the one command: the wheels installed into a folder of their own, then
`asr.train` with the experiment (`--experiment`, base_conv by default) in bf16 on the GPU for
`--minutes`, its model directory in $OUT/base. The next call continues from it: pack again with
`--start` pointing at the fetched $OUT/base.
"""

import argparse
import json
import shutil
import sys
from pathlib import Path

import soundfile as sf
import torch

from asr.audio import AudioError, read_audio, resample
from asr.checkpoint import CONFIG, TOKENIZER, WEIGHTS, ModelDirError, load_model_dir, save_torch
from asr.data import ManifestError, audio_path
from tools.pack_gpu import CARRIED, ROOT, device_setup, folder_bytes, pack_wheels

OUT = ROOT / "gpu_base"
COMPRESSION = 0.98  # libsndfile's Opus compression level: about 13 kbit/s of speech at 16 kHz
OPUS_RATES = (8000, 12000, 16000, 24000, 48000)  # what Opus encodes; other rates go to 16 kHz
FORMATS = {"opus": {"format": "OGG", "subtype": "OPUS", "compression_level": COMPRESSION},
           "flac": {"format": "FLAC"}}
BUDGET = 48 << 20  # of the 64 MiB a call carries, what is left beside the working tree
TRAINING_PACKAGES = [name for name in CARRIED if name not in {
    "speechbrain", "hyperpyyaml", "ruamel.yaml", "ruamel.yaml.clib", "joblib", "packaging"}]


def pack_manifest(manifest: Path, dest: Path, name: str, codec: str) -> float:
    """Every utterance of `manifest` encoded into dest/name/ (`codec`: opus or flac), listed
    in dest/name.jsonl with paths relative to it and every other field kept; its seconds."""
    (dest / name).mkdir(parents=True, exist_ok=True)
    seconds, lines = 0.0, []
    rows = [json.loads(line) for line in manifest.read_text().splitlines() if line.strip()]
    for index, row in enumerate(rows):
        samples, rate = read_audio(audio_path(row.get("audio_filepath"), manifest.parent))
        if codec == "opus" and rate not in OPUS_RATES:
            samples, rate = resample(torch.from_numpy(samples), rate, 16000).numpy(), 16000
        audio = f"{name}/{index:06d}.{codec}"
        sf.write(str(dest / audio), samples, rate, **FORMATS[codec])
        row.update(audio_filepath=audio, duration=round(len(samples) / rate, 4))
        lines.append(json.dumps(row))
        seconds += len(samples) / rate
    (dest / f"{name}.jsonl").write_text("\n".join(lines) + "\n")
    return seconds


def pack_start(model_dir: Path, dest: Path) -> None:
    """The model directory training starts from, its weights in fp32 (a shipped model's are
    fp16: init_from takes either, but training should not round them again)."""
    model, _, _ = load_model_dir(model_dir)
    dest.mkdir(parents=True)
    save_torch(model.state_dict(), dest / WEIGHTS)
    for name in (CONFIG, TOKENIZER):
        shutil.copyfile(model_dir / name, dest / name)


def device_command(out: Path, experiment: str, minutes: float, start: bool) -> str:
    """The one command for the GPU machine (from the repository root there)."""
    rel = out.relative_to(ROOT)
    init = f" trainer.init_from={rel}/start" if start else ""
    return (device_setup(rel, wheels=(out / "requirements.txt").is_file())
            + f"PYTHONPATH=.:$S $PY -m asr.train experiment={experiment} data.root={rel}/corpus "
            f"data.augment.reverb.manifest={rel}/rirs/rirs.jsonl trainer.out_dir=$OUT/base "
            f"trainer.device=cuda trainer.precision=bf16 trainer.max_minutes={minutes:g}{init}")


def pack(args: argparse.Namespace) -> Path:
    out = args.out.resolve()
    if out.exists():
        shutil.rmtree(out)
    out.mkdir(parents=True)
    corpus = out / "corpus"
    seconds = {name: pack_manifest(args.corpus / f"{name}.jsonl", corpus, name, "opus")
               for name in ("train", "dev", "noise")}
    pack_manifest(args.rirs / "rirs.jsonl", out / "rirs", "rirs", "flac")
    if args.start:
        pack_start(args.start, out / "start")
    if args.wheels:
        (out / "requirements.txt").write_text(
            "\n".join(pack_wheels(out / "wheels", TRAINING_PACKAGES)) + "\n")
    size = folder_bytes(out)
    print(f"{out}: {size / 2**20:.1f} MiB ({seconds['train'] / 3600:.2f} h to train on, "
          f"{folder_bytes(corpus) / 2**20:.1f} MiB of it as Opus)")
    if size > BUDGET:
        print(f"warning: over {BUDGET >> 20} MiB: the working tree and this folder share 64 MiB",
              file=sys.stderr)
    print(f"on the GPU machine, with {out.relative_to(ROOT)}/ copied beside the working tree:")
    print(device_command(out, args.experiment, args.minutes, bool(args.start)))
    return out


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--corpus", type=Path, default=ROOT / "data" / "base_all",
                        help="a prepared base corpus (train, dev and noise manifests)")
    parser.add_argument("--rirs", type=Path, default=ROOT / "data" / "rirs",
                        help="room impulse responses (python -m asr.rooms)")
    parser.add_argument("--start", type=Path, help="a model directory to start from")
    parser.add_argument("--experiment", default="base_conv", help="the experiment to train")
    parser.add_argument("--minutes", type=float, default=8.0, help="trainer.max_minutes there")
    parser.add_argument("--out", type=Path, default=OUT, help="the folder to write")
    parser.add_argument("--no-wheels", dest="wheels", action="store_false",
                        help="leave the wheels out (a machine that has the packages)")
    args = parser.parse_args(argv)
    try:
        pack(args)
    except (AudioError, ManifestError, ModelDirError, OSError) as err:
        print(f"error: {err}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())

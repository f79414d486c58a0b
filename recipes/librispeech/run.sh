#!/usr/bin/env bash
# LibriSpeech 960 h: prepare, train with DDP on the GPUs, average, score the four eval splits.
#   NGPU=8 ROOT=/data/LibriSpeech bash recipes/librispeech/run.sh [model=s2t_m optim.lr=1e-3] [overrides]
# Without ROOT the corpus (about 60 GB) is downloaded from openslr first. Untested end to end:
# this project has no GPU (see README.md for the estimate of what it costs).
set -euo pipefail
cd "$(dirname "$0")/../.."
# shellcheck source-path=SCRIPTDIR/../..
source recipes/common/args.sh  # ROOT=, NGPU=, MODEL_DIR=, PYTHON= as arguments or in the environment
overrides=()
recipe_args "ROOT NGPU MODEL_DIR PYTHON" "$@"
set -- "${overrides[@]}"
py=${PYTHON:-.venv/bin/python}
root=()  # --root ROOT: a local copy instead of the download
if [ -n "${ROOT:-}" ]; then root=(--root "$ROOT"); fi
ngpu=${NGPU:-1}
data=data/librispeech
model=${MODEL_DIR:-exp/librispeech}

"$py" -m recipes.librispeech.prepare "${root[@]}" --out "$data"
# conf/experiment/librispeech.yaml: fairseq's s2t schedule, 8 x 400 s of padded audio per update
# (8 GPUs, or accumulation on fewer).
"$py" -m torch.distributed.run --standalone --nproc_per_node="$ngpu" -m asr.train \
  experiment=librispeech data.root="$data" trainer.out_dir="$model" \
  trainer.accumulate_grad_batches="$((8 / ngpu))" "$@"
for split in dev_clean dev_other test_clean test_other; do
  "$py" -m asr.evaluate --model "$model/averaged" --manifest "$data/$split.jsonl" \
    --json "$model/averaged/${split}_results.json"
done

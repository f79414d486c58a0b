#!/usr/bin/env bash
# Prepare WUW Corpus II, train, score both tasks on the held-out speakers (see README.md here).
#   ROOT=../shared/data/wuw bash recipes/wuw/run.sh [hydra overrides for training]
# Without ROOT the corpus is downloaded first; MODEL=exp/NAME trains and scores there instead
# of exp/wuw. INIT=exp/voice_commands fine-tunes that model (conf/experiment/wuw_finetune.yaml)
# instead of training from scratch (conf/experiment/wuw.yaml). ROOMS=1 also simulates 200
# rooms into data/rirs for `data.augment.reverb` (pass data.augment.reverb.enabled=true).
set -euo pipefail
cd "$(dirname "$0")/../.."
# shellcheck source-path=SCRIPTDIR/../..
source recipes/common/args.sh  # ROOT=, INIT=, MODEL=, ROOMS=, PYTHON= as arguments or in the environment
overrides=()
recipe_args "ROOT INIT MODEL ROOMS PYTHON" "$@"
set -- "${overrides[@]}"
py=${PYTHON:-.venv/bin/python}
init=()  # trainer.init_from=INIT: fine-tune that model
if [ -n "${INIT:-}" ]; then init=("trainer.init_from=$INIT"); fi
root=()  # --root ROOT: a local copy instead of the download
if [ -n "${ROOT:-}" ]; then root=(--root "$ROOT"); fi
data=data/wuw
model=${MODEL:-exp/wuw}

"$py" -m recipes.wuw.prepare "${root[@]}" --out "$data"
if [ "${ROOMS:-0}" = 1 ] && [ ! -f data/rirs/rirs.jsonl ]; then
  "$py" -m asr.rooms --out data/rirs --count 200
fi
# conf/experiment/wuw.yaml: cathy's settings (a small corpus of sentences), not tuned here.
experiment=wuw${INIT:+_finetune}
"$py" -m asr.train experiment="$experiment" data.root="$data" trainer.out_dir="$model" \
  "${init[@]}" "$@"
# (a) transcription of the free sentences; (b) the wake word in them, with its time
"$py" -m asr.evaluate --model "$model/averaged" --manifest "$data/test_sentences.jsonl" \
  --json "$model/test_results.json"
"$py" -m recipes.wuw.spot --model "$model/averaged" --manifest "$data/test_sentences.jsonl" \
  --json "$model/spot_results.json"

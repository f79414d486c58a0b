#!/usr/bin/env bash
# The base model: one general English acoustic model that any grammar searches in, shipped in the
# package as asr/models/base (Transcriber.from_pretrained("base")).
#
#   bash recipes/base/run.sh                      # prepare, train (or continue), score, ship
#   bash recipes/base/run.sh HOURS=0.05 MINUTES=2 model=tiny   # a toy run
#   bash recipes/base/run.sh trainer.num_threads=1            # other arguments: Hydra overrides
#
# Training continues exp/base when it holds a run (trainer.resume=true); a fresh exp/base starts
# from the shipped weights (trainer.init_from=base) when the package has them, so hours of
# training add up across sessions (asr/models/base/TRAINING.json counts them). INIT=none starts
# from scratch. SHIP=0 leaves the shipped model as it is. EXPERIMENT=base_conv trains the conv2d
# front end with 128 pieces (recipes/base/RESULTS.md, third round), from scratch (INIT=none) or
# from a model of its own kind (INIT=DIR).
set -euo pipefail
cd "$(dirname "$0")/../.."
hours=3 minutes="" init=base ship=1 experiment=base
overrides=()
for arg in "$@"; do
  case $arg in
    HOURS=*) hours=${arg#HOURS=} ;;
    MINUTES=*) minutes=${arg#MINUTES=} ;;
    INIT=*) init=${arg#INIT=} ;;
    SHIP=*) ship=${arg#SHIP=} ;;
    EXPERIMENT=*) experiment=${arg#EXPERIMENT=} ;;
    *) overrides+=("$arg") ;;
  esac
done
bash tools/setup.sh
[ "${KOKORO:-1}" = 0 ] || bash tools/setup_kokoro.sh
py=.venv/bin/python
data=${DATA:-data/base}
model=${MODEL:-exp/base}

[ -f data/rirs/rirs.jsonl ] || "$py" -m asr.rooms --out data/rirs
"$py" -m recipes.base.prepare --out "$data" --hours "$hours"
start=()
if [ ! -f "$model/checkpoint.pt" ] && [ "$init" != none ] && [ -f asr/models/base/model.pt ]; then
  start=("trainer.init_from=$init")
fi
if [ -n "$minutes" ]; then start+=("trainer.max_minutes=$minutes"); fi
"$py" -m asr.train experiment="$experiment" data.root="$data" trainer.out_dir="$model" \
  trainer.resume=true "${start[@]}" "${overrides[@]}"
for manifest in test test_words test_read test_phone; do
  if [ -s "$data/$manifest.jsonl" ]; then
    echo "$manifest:"
    "$py" -m asr.evaluate --model "$model" --manifest "$data/$manifest.jsonl" \
      --json "$model/${manifest}_results.json"
  fi
done
if [ "$ship" = 1 ]; then
  "$py" -m recipes.base.ship --model "$model" --corpus "$data"
fi

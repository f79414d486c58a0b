#!/usr/bin/env bash
# Ablation of the training techniques: one Hydra multirun over scheduler x norm x pos on the
# voice-command corpus, fixed seed and steps, then a table and a plot of the loss curves.
#
#   bash recipes/ablation/run.sh [DATA_DIR] [OUT_DIR] [extra hydra overrides...]
#
# DATA_DIR defaults to data/voice_commands (python -m recipes.voice_commands.prepare --out ...),
# OUT_DIR to exp/ablation. 12 runs of 300 steps of model=small, one CPU thread each: about
# 25 minutes on 2 shared cores. Writes OUT_DIR/results.md and OUT_DIR/loss_curves.png.
set -euo pipefail
cd "$(dirname "$0")/../.."
# shellcheck source-path=SCRIPTDIR/../..
source recipes/common/args.sh  # PYTHON= as arguments or in the environment
overrides=()
recipe_args "PYTHON" "$@"
set -- "${overrides[@]}"
DATA=${1:-data/voice_commands}
OUT=${2:-exp/ablation}
shift $(( $# < 2 ? $# : 2 ))
PY=${PYTHON:-.venv/bin/python}
export OMP_NUM_THREADS=1

"$PY" -m recipes.ablation.subset "$DATA/dev.jsonl" "$OUT/dev_subset.jsonl" --count 100
"$PY" -m asr.train -m --config-dir recipes/ablation/conf experiment=ablation \
    scheduler=warmup100,none model.norm=pre,post,tfixup model.pos=sinusoidal,rope \
    data.root="$DATA" data.dev_manifest="$OUT/dev_subset.jsonl" "trainer.out_dir=$OUT/runs/\${hydra:job.num}" \
    "hydra.sweep.dir=$OUT/hydra" "$@"
"$PY" -m recipes.ablation.report "$OUT"

#!/usr/bin/env bash
# The base model: one general English acoustic model that any grammar searches in, shipped in the
# package as asr/models/base (Transcriber.from_pretrained("base")). A session's round:
#
#   bash recipes/base/run.sh                  # prepare, train on, score, keep as the latest round
#   bash recipes/base/run.sh MINUTES=100      # the training's time budget
#   bash recipes/base/run.sh SEEDS=0,1        # train on two corpora of other sentences and voices
#   bash recipes/base/run.sh ALONE=0          # without the corpus of one-word commands said alone
#   bash recipes/base/run.sh HOURS=0.05 MINUTES=2 model=tiny INIT=none LATEST=0   # a toy run
#   bash recipes/base/run.sh trainer.num_threads=1            # other arguments: Hydra overrides
#
# Training resumes exp/base when it holds a run that has not yet become the latest round; a
# fresh exp/base (or one whose round is the latest already, moved aside) trains on from the newest
# round's weights, ASR_BASE_LATEST (default ~/.cache/asr/base/latest: outside the repository,
# since models do not belong in it, and outside exp/, which a fresh checkout lacks), or, on a
# machine without it, from the packaged model (asr/models/base) when that is of the conv2d
# kind, with experiment=base_conv_more; INIT=none starts from scratch (experiment=base_conv),
# INIT=DIR from another model directory of the conv2d kind. The result is scored on every target
# (recipes/base/score.sh) and written to ASR_BASE_LATEST (LATEST=0: not); SHIP=1 also makes it
# the packaged model, which the base-model issue allows once per issue. SEEDS=0,1,... prepares
# one corpus per seed (data/base, data/base_s1, ...; the synthesis cache keeps what a seed made
# before) and trains on them merged (data/base_all): more sentences and voices than one corpus.
# Beside them, data/base_alone says Speech Commands' words and the digits each alone, in
# ALONE hours (default: a quarter of HOURS; 0: none): people say commands alone, and the broad
# text says them mostly inside sentences.
set -euo pipefail
cd "$(dirname "$0")/../.."
hours=1.5 minutes="" seeds=0 alone="" init=latest ship=0 latest=1 experiment=""
overrides=()
for arg in "$@"; do
  case $arg in
    HOURS=*) hours=${arg#HOURS=} ;;
    MINUTES=*) minutes=${arg#MINUTES=} ;;
    SEEDS=*) seeds=${arg#SEEDS=} ;;
    ALONE=*) alone=${arg#ALONE=} ;;
    INIT=*) init=${arg#INIT=} ;;
    SHIP=*) ship=${arg#SHIP=} ;;
    LATEST=*) latest=${arg#LATEST=} ;;
    EXPERIMENT=*) experiment=${arg#EXPERIMENT=} ;;
    *) overrides+=("$arg") ;;
  esac
done
bash tools/setup.sh
[ "${KOKORO:-1}" = 0 ] || bash tools/setup_kokoro.sh
py=.venv/bin/python
data=${DATA:-data/base}
model=${MODEL:-exp/base}
newest=${ASR_BASE_LATEST:-$HOME/.cache/asr/base/latest}

[ -f data/rirs/rirs.jsonl ] || "$py" -m asr.rooms --out data/rirs
corpora=()
for seed in ${seeds//,/ }; do
  corpus=$data
  [ "$seed" = 0 ] || corpus=${data}_s$seed
  "$py" -m recipes.base.prepare --out "$corpus" --hours "$hours" --seed "$seed"
  corpora+=("$corpus")
done
[ -n "$alone" ] || alone=$(awk "BEGIN { print $hours / 4 }")
if ! [[ $alone =~ ^[0-9]*\.?[0-9]+$ ]]; then
  echo "error: ALONE=$alone: not a number of hours" >&2
  exit 2
fi
if awk "BEGIN { exit !($alone > 0) }"; then
  "$py" -m recipes.base.prepare --out "${data}_alone" --text alone --hours "$alone"
  corpora+=("${data}_alone")
fi
data=${corpora[0]}
if [ ${#corpora[@]} -gt 1 ]; then
  data=${corpora[0]}_all
  "$py" -m recipes.base.merge "${corpora[@]}" --out "$data"
fi
# A run whose result is the latest round already has ended: a new round trains in a fresh
# folder (the ended one is kept beside it), not in a resumed run with no time left.
if [ "$latest" = 1 ] && [ -f "$model/checkpoint.pt" ] \
    && "$py" -m recipes.base.ship --kept-from "$model" --out "$newest"; then
  ended=$model.$(date +%Y%m%d-%H%M%S)
  mv "$model" "$ended"
  echo "$model: its round is the latest round ($newest) already; moved to $ended, a new round starts"
fi
start=()
if [ "$init" = latest ]; then
  init=$newest
  if [ ! -f "$newest/model.pt" ]; then
    # A machine without the latest round (a fresh one) trains on from the packaged round, the
    # one that outlives machines, when it is of this recipe's conv2d kind.
    init=none
    packaged=asr/models/base
    if "$py" -m asr.training.pretrained "$packaged" | grep -x 'model.subsampling=conv2d' \
        >/dev/null; then
      init=$packaged
    fi
  fi
fi
if [ ! -f "$model/checkpoint.pt" ] && [ "$init" != none ]; then
  start=("trainer.init_from=$init")
fi
if [ -z "$experiment" ]; then
  experiment=base_conv_more
  [ "$init" = none ] && experiment=base_conv
fi
if [ -n "$minutes" ]; then start+=("trainer.max_minutes=$minutes"); fi
"$py" -m asr.train experiment="$experiment" data.root="$data" trainer.out_dir="$model" \
  trainer.resume=true trainer.average_checkpoints=4 "${start[@]}" "${overrides[@]}"
weights=$model
[ -f "$model/averaged/model.pt" ] && weights=$model/averaged
bash recipes/base/score.sh "$weights" "$data" "$model/candidate"

keep() {  # OUT [--into-package]: the scored candidate's shipped form there
  "$py" -m recipes.base.ship --model "$weights" --corpus "$data" --out "$@" \
    --calibration "$model/candidate" \
    --continue-with "bash recipes/base/run.sh  # trains on from $newest"
}
if [ "$latest" = 1 ]; then keep "$newest"; fi
if [ "$ship" = 1 ]; then keep asr/models/base --into-package; fi

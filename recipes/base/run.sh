#!/usr/bin/env bash
# The base model: one general English acoustic model that any grammar searches in, shipped in the
# package as asr/models/base (Transcriber.from_pretrained("base")). A session's round:
#
#   bash recipes/base/run.sh                  # prepare, train on, score, keep as the latest round
#   bash recipes/base/run.sh MINUTES=100      # the training's time budget
#   bash recipes/base/run.sh SEEDS=0,1        # train on two corpora of other sentences and voices
#   bash recipes/base/run.sh ALONE=0          # without the corpus of one-word commands said alone
#   bash recipes/base/run.sh HOURS=0.05 MINUTES=2 model=tiny INIT=none LATEST=0   # a toy run
#   bash recipes/base/run.sh INIT=latest      # on from the latest round kept on this machine
#   bash recipes/base/run.sh STAGE=3          # stages 3.. only (here: score what exp/base holds)
#   bash recipes/base/run.sh trainer.num_threads=1            # other arguments: Hydra overrides
#
# Stages (STAGE=N, STOP_STAGE=M: recipes/common/args.sh): 0 setup, 1 the corpora, 2 training,
# 3 scoring, 4 keeping the round. Training resumes exp/base when it holds a run that has not
# yet become the latest round (a run whose round is the latest already is moved aside); a new
# run trains on from INIT (FROM= is the same argument), with experiment=base_conv_more: the
# packaged model (INIT=base, the default) when it is of the conv2d kind, INIT=latest the newest
# round kept on this machine, ASR_BASE_LATEST (default ~/.cache/asr/base/latest: outside the
# repository, since models do not belong in it, and outside exp/, which a fresh checkout lacks),
# INIT=DIR another model directory of the conv2d kind; INIT=none starts from scratch
# (experiment=base_conv). It prints which, before training. The result is scored on every target
# (recipes/base/score.sh) and written to ASR_BASE_LATEST (LATEST=0: not); SHIP=1 also makes it
# the packaged model, which the base-model issue allows once per issue. SEEDS=0,1,... prepares
# one corpus per seed (data/base, data/base_s1, ...; the synthesis cache keeps what a seed made
# before) and trains on them merged (data/base_all): more sentences and voices than one corpus.
# Beside them, data/base_alone says Speech Commands' words and the digits each alone, in
# ALONE hours (default: a quarter of HOURS; 0: none): people say commands alone, and the broad
# text says them mostly inside sentences.
set -euo pipefail
cd "$(dirname "$0")/../.."
# shellcheck source-path=SCRIPTDIR/../..
source recipes/common/args.sh
HOURS=1.5 MINUTES="" SEEDS=0 ALONE="" INIT=base FROM="" SHIP=0 LATEST=1 EXPERIMENT=""
overrides=()
recipe_args "HOURS MINUTES SEEDS ALONE INIT FROM SHIP LATEST EXPERIMENT" "$@"
[ -z "$FROM" ] || INIT=$FROM
py=.venv/bin/python
corpus0=${DATA:-data/base}  # seed 0's corpus; seed N's is ${corpus0}_sN
model=${MODEL:-exp/base}
newest=${ASR_BASE_LATEST:-$HOME/.cache/asr/base/latest}
if stage 0 "setup"; then
  bash tools/setup.sh
  [ "${KOKORO:-1}" = 0 ] || bash tools/setup_kokoro.sh
  [ -f data/rirs/rirs.jsonl ] || "$py" -m asr.rooms --out data/rirs
fi

corpora=()
for seed in ${SEEDS//,/ }; do
  corpus=$corpus0
  [ "$seed" = 0 ] || corpus=${corpus0}_s$seed
  corpora+=("$corpus")
done
[ -n "$ALONE" ] || ALONE=$(awk "BEGIN { print $HOURS / 4 }")
if ! [[ $ALONE =~ ^[0-9]*\.?[0-9]+$ ]]; then
  echo "error: ALONE=$ALONE: not a number of hours" >&2
  exit 2
fi
awk "BEGIN { exit !($ALONE > 0) }" && corpora+=("${corpus0}_alone")
data=${corpora[0]}
[ ${#corpora[@]} -gt 1 ] && data=${corpora[0]}_all
if stage 1 "the corpora: ${corpora[*]} -> $data"; then
  for seed in ${SEEDS//,/ }; do
    corpus=$corpus0
    [ "$seed" = 0 ] || corpus=${corpus0}_s$seed
    "$py" -m recipes.base.prepare --out "$corpus" --hours "$HOURS" --seed "$seed"
  done
  if [[ " ${corpora[*]} " == *" ${corpus0}_alone "* ]]; then
    "$py" -m recipes.base.prepare --out "${corpus0}_alone" --text alone --hours "$ALONE"
  fi
  if [ ${#corpora[@]} -gt 1 ]; then "$py" -m recipes.base.merge "${corpora[@]}" --out "$data"; fi
fi

if stage 2 "training in $model"; then
  # A run whose result is the latest round already has ended: a new round trains in a fresh
  # folder (the ended one is kept beside it), not in a resumed run with no time left.
  if [ "$LATEST" = 1 ] && [ -f "$model/checkpoint.pt" ] \
      && "$py" -m recipes.base.ship --kept-from "$model" --out "$newest"; then
    ended=$model.$(date +%Y%m%d-%H%M%S)
    mv "$model" "$ended"
    echo "$model: its round is the latest round ($newest) already; moved to $ended, a new round starts"
  fi
  if [ "$INIT" = latest ] && [ ! -f "$newest/model.pt" ]; then
    echo "no latest round on this machine ($newest): the packaged model instead"
    INIT=base
  fi
  [ "$INIT" = latest ] && INIT=$newest
  if [ "$INIT" = base ]; then
    # the packaged round, the one that outlives machines, when it is of this recipe's conv2d kind
    INIT=asr/models/base
    if ! "$py" -m asr.training.pretrained "$INIT" | grep -x 'model.subsampling=conv2d' >/dev/null; then
      echo "$INIT: not of the conv2d kind; training from scratch"
      INIT=none
    fi
  fi
  start=()
  if [ -f "$model/checkpoint.pt" ]; then
    echo "continues the run in $model (its checkpoint.pt)"
  elif [ "$INIT" = none ]; then
    echo "starts from scratch"
  else
    echo "starts from $INIT"
    start=("trainer.init_from=$INIT")
  fi
  if [ -z "$EXPERIMENT" ]; then
    EXPERIMENT=base_conv_more
    [ "$INIT" = none ] && EXPERIMENT=base_conv
  fi
  if [ -n "$MINUTES" ]; then start+=("trainer.max_minutes=$MINUTES"); fi
  "$py" -m asr.train experiment="$EXPERIMENT" data.root="$data" trainer.out_dir="$model" \
    trainer.resume=true trainer.average_checkpoints=4 "${start[@]}" "${overrides[@]}"
fi
weights=$model
[ -f "$model/averaged/model.pt" ] && weights=$model/averaged
if stage 3 "scoring $weights"; then
  bash recipes/base/score.sh "$weights" "$data" "$model/candidate"
fi

keep() {  # OUT [--into-package]: the scored candidate's shipped form there
  "$py" -m recipes.base.ship --model "$weights" --corpus "$data" --out "$@" \
    --calibration "$model/candidate" \
    --continue-with "bash recipes/base/run.sh INIT=latest  # trains on from $newest"
}
if stage 4 "keeping the round (LATEST=$LATEST, SHIP=$SHIP)"; then
  if [ "$LATEST" = 1 ]; then keep "$newest"; fi
  if [ "$SHIP" = 1 ]; then keep asr/models/base --into-package; fi
fi

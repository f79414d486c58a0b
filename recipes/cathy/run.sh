#!/usr/bin/env bash
# Prepare the corpus, train, score on the held-out split (see README.md in this folder).
#   ROOT=../shared/data/cathy bash recipes/cathy/run.sh [hydra overrides for training]
# Without ROOT the corpus is downloaded first. The settings are conf/experiment/cathy.yaml,
# the README's results run (90 epochs: about 95 minutes with one thread on a shared 2-core
# CPU). LM=1 then builds the language model's text from Debian packages (apt-get install
# diatheke sword-text-web fortunes), trains the LM on it and the training prompts, and scores
# again with shallow fusion.
set -euo pipefail
cd "$(dirname "$0")/../.."
# shellcheck source-path=SCRIPTDIR/../..
source recipes/common/args.sh  # ROOT=, LM=, LM_WEIGHT=, PYTHON= as arguments or in the environment
overrides=()
recipe_args "ROOT LM LM_WEIGHT PYTHON" "$@"
set -- "${overrides[@]}"
py=${PYTHON:-.venv/bin/python}
root=()  # --root ROOT: a local copy instead of the download
if [ -n "${ROOT:-}" ]; then root=(--root "$ROOT"); fi
data=data/cathy
model=exp/cathy

"$py" -m recipes.cathy.prepare "${root[@]}" --out "$data"
"$py" -m asr.train experiment=cathy data.root="$data" trainer.out_dir="$model" "$@"
"$py" -m asr.evaluate --model "$model/averaged" --manifest "$data/test.jsonl" --json "$model/test_results.json"

[ "${LM:-0}" = 1 ] || exit 0
"$py" -m recipes.cathy.lm_text --out "$data/lm" --exclude "$data/dev.jsonl" --exclude "$data/test.jsonl"
# the training prompts, read three times: in-domain text weighs more than the Bible's
"$py" -m asr.train_lm --model "$model" --text "$data/lm/bible.txt" --text "$data/lm/fortunes.txt" \
  --text "$data/train.jsonl" --text "$data/train.jsonl" --text "$data/train.jsonl" \
  --dev "$data/dev.jsonl" --out "$model/lm" --steps 2000 --warmup-steps 100 --lr 2e-3 \
  --eval-every 200 --d-model 192 --layers 3 --d-ff 768 --overwrite
"$py" -m asr.evaluate --model "$model/averaged" --manifest "$data/test.jsonl" --lm "$model/lm" \
  --lm-weight "${LM_WEIGHT:-1.25}" --beam-size 20 --json "$model/test_results_lm.json"

#!/usr/bin/env bash
# Prepare the corpus, train, score on the held-out split (see README.md in this folder).
#   ROOT=../shared/data/cathy bash recipes/cathy/run.sh [hydra overrides for training]
# Without ROOT the corpus is downloaded first. The defaults are the README's results run
# (90 epochs: about 85 minutes with one thread on a shared 2-core CPU).
set -euo pipefail
cd "$(dirname "$0")/../.."
py=${PYTHON:-.venv/bin/python}
data=data/cathy
model=exp/cathy

$py -m recipes.cathy.prepare ${ROOT:+--root "$ROOT"} --out "$data"
$py -m asr.train data=cathy data.root="$data" trainer.out_dir="$model" model=small model.stack=4 \
  model.dropout=0.1 model.ctc_weight=0.5 optim.lr=2e-3 tokenizer.vocab_size=64 \
  features=fbank_specaugment data.batch_size=8 scheduler=cosine scheduler.warmup_steps=500 \
  scheduler.final=0.02 data.augment.speed.enabled=true trainer.max_epochs=90 \
  trainer.keep_checkpoints=10 trainer.average_checkpoints=10 "$@"
$py -m asr.evaluate --model "$model/averaged" --manifest "$data/test.jsonl" --json "$model/test_results.json"

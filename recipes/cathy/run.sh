#!/usr/bin/env bash
# Prepare the corpus, train, score on the held-out split (see README.md in this folder).
#   ROOT=../shared/data/cathy bash recipes/cathy/run.sh [hydra overrides for training]
# Without ROOT the corpus is downloaded first. The defaults are the README's results run
# (measured before model=small switched to rotary positions, so model.pos=sinusoidal is pinned).
set -euo pipefail
cd "$(dirname "$0")/../.."
py=${PYTHON:-.venv/bin/python}
data=data/cathy
model=exp/cathy

$py -m recipes.cathy.prepare ${ROOT:+--root "$ROOT"} --out "$data"
$py -m asr.train data=cathy data.root="$data" trainer.out_dir="$model" model=small model.pos=sinusoidal model.stack=4 optim.lr=2e-3 tokenizer.vocab_size=256 data.batch_size=8 scheduler.warmup_steps=300 \
  trainer.max_epochs=4 data.augment.speed.enabled=true "$@"
$py -m asr.evaluate --model "$model" --manifest "$data/test.jsonl" --json "$model/test_results.json"

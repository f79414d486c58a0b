#!/usr/bin/env bash
# LibriSpeech 960 h: prepare, train with DDP on the GPUs, average, score the four eval splits.
#   NGPU=8 ROOT=/data/LibriSpeech bash recipes/librispeech/run.sh [model=s2t_m optim.lr=1e-3] [overrides]
# Without ROOT the corpus (about 60 GB) is downloaded from openslr first. Untested end to end:
# this project has no GPU (see README.md for the estimate of what it costs).
set -euo pipefail
cd "$(dirname "$0")/../.."
py=${PYTHON:-.venv/bin/python}
ngpu=${NGPU:-1}
data=data/librispeech
model=${MODEL_DIR:-exp/librispeech}

$py -m recipes.librispeech.prepare ${ROOT:+--root "$ROOT"} --out "$data"
# fairseq's s2t schedule: 8 x 400 s of padded audio per update (8 GPUs, or accumulation on
# fewer), Adam lr 2e-3, inverse-sqrt after 10k warmup updates, clip 10, 300k updates.
$py -m torch.distributed.run --standalone --nproc_per_node="$ngpu" -m asr.train trainer=ddp \
  data=librispeech data.root="$data" trainer.out_dir="$model" model=s2t_s features=fbank_specaugment \
  tokenizer.vocab_size=5000 optim=adamw optim.lr=2e-3 optim.weight_decay=0 scheduler=inverse_sqrt \
  scheduler.warmup_steps=10000 trainer.grad_clip=10 trainer.max_steps=300000 trainer.max_epochs=1000 \
  trainer.accumulate_grad_batches=$((8 / ngpu)) trainer.precision=bf16 trainer.save_every_steps=2000 \
  trainer.keep_checkpoints=10 trainer.average_checkpoints=10 trainer.average_by=last \
  trainer.resume=true decode.beam_size=10 decode.ctc_weight=0.3 "$@"
for split in dev_clean dev_other test_clean test_other; do
  $py -m asr.evaluate --model "$model/averaged" --manifest "$data/$split.jsonl" \
    --json "$model/averaged/${split}_results.json"
done

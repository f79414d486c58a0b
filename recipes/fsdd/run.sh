#!/usr/bin/env bash
# Prepare the corpus, train, score on the held-out split (see README.md in this folder).
#   ROOT=../shared/data/fsdd bash recipes/fsdd/run.sh [hydra overrides for training]
# Without ROOT the corpus is downloaded first. The defaults are the README's results run;
# INIT=exp/voice_commands_synthetic fine-tunes that model (conv2d front end) instead of
# starting from scratch; SPEECH_COMMANDS=../shared/data/speech_commands adds that corpus's
# real digits when it does.
set -euo pipefail
cd "$(dirname "$0")/../.."
py=${PYTHON:-.venv/bin/python}
data=data/fsdd
model=exp/fsdd

prep=()
if [ -n "${INIT:-}" ]; then  # fine-tune a trained model: its network, CMVN and tokenizer
  # (the conv2d front end that `REAL_ROOT=none bash recipes/voice_commands/run.sh` trains)
  start=(trainer.init_from="$INIT" model.subsampling=conv2d optim.lr=1e-3
         scheduler.warmup_steps=200 trainer.max_epochs=8)
  # ...hearing digits from many synthetic voices beside the three real speakers: its own
  # corpus's digit sentences and 1500 synthetic digit strings (REHEARSE=none: neither)
  if [ "${REHEARSE:-}" != none ]; then
    $py -m recipes.synthetic --vocabulary digits --max-words 7 --out data/fsdd_synthetic \
      --count 1500 --jobs "$(nproc)"
    prep=(--rehearse "${REHEARSE:-data/voice_commands_synthetic/train.jsonl}"
          data/fsdd_synthetic/train.jsonl)
    # ...and real people saying digits: the digit clips of Speech Commands' training speakers
    # (SPEECH_COMMANDS=its root), listed three times so they are heard three times an epoch;
    # prepared apart from its own recipe's data/speech_commands, which may hold synthetic words.
    if [ -n "${SPEECH_COMMANDS:-}" ]; then
      sc=data/fsdd_speech_commands
      $py -m recipes.speech_commands.prepare --root "$SPEECH_COMMANDS" --out $sc
      prep+=($sc/train.jsonl $sc/train.jsonl $sc/train.jsonl)
    fi
    # The synthetic speech is 16 kHz wide-band, FSDD 8 kHz: every training utterance goes
    # through 8 kHz and back (FSDD's own pass unchanged), so none teaches cues above 4 kHz.
    start+=(data.augment.narrowband.enabled=true data.augment.narrowband.prob=1.0)
  fi
else
  start=(model=small model.stack=4 optim.lr=2e-3 tokenizer.vocab_size=32 scheduler.warmup_steps=400
         trainer.max_epochs=15)
fi
$py -m recipes.fsdd.prepare ${ROOT:+--root "$ROOT"} --out "$data" "${prep[@]}"
$py -m asr.train data=fsdd data.root="$data" trainer.out_dir="$model" "${start[@]}" \
  data.augment.speed.enabled=true 'data.augment.speed.factors=[0.8,0.9,1.0,1.1,1.2]' \
  data.augment.gain.enabled=true trainer.keep_checkpoints=5 trainer.average_checkpoints=5 \
  decode.lead_in_ms=300 "$@"  # FSDD clips start right on the digit: 300 ms of silence first (dev's pick)
$py -m asr.evaluate --model "$model/averaged" --manifest "$data/test.jsonl" --json "$model/test_results.json"

#!/usr/bin/env bash
# Prepare the corpus, train, score on the held-out split (see README.md in this folder).
#   ROOT=../shared/data/fsdd bash recipes/fsdd/run.sh [hydra overrides for training]
# Without ROOT the corpus is downloaded first. The settings are conf/experiment/fsdd.yaml (from
# scratch) or, with INIT=exp/voice_commands_synthetic, conf/experiment/fsdd_finetune.yaml
# (fine-tune that model, rehearsing synthetic digits; REHEARSE=none: neither those nor the
# narrow band, conf/experiment/fsdd_finetune_alone.yaml). SPEECH_COMMANDS=../shared/data/speech_commands
# adds that corpus's real digits when it rehearses.
set -euo pipefail
cd "$(dirname "$0")/../.."
# shellcheck source-path=SCRIPTDIR/../..
source recipes/common/args.sh  # ROOT=, INIT=, REHEARSE=, SPEECH_COMMANDS=, PYTHON= as arguments or in the environment
overrides=()
recipe_args "ROOT INIT REHEARSE SPEECH_COMMANDS PYTHON" "$@"
set -- "${overrides[@]}"
py=${PYTHON:-.venv/bin/python}
init=()  # trainer.init_from=INIT: fine-tune that model
if [ -n "${INIT:-}" ]; then init=("trainer.init_from=$INIT"); fi
root=()  # --root ROOT: a local copy instead of the download
if [ -n "${ROOT:-}" ]; then root=(--root "$ROOT"); fi
data=data/fsdd
model=exp/fsdd

prep=() experiment=fsdd
if [ -n "${INIT:-}" ]; then  # fine-tune a trained model: its network, CMVN and tokenizer
  experiment=fsdd_finetune_alone
  # ...hearing digits from many synthetic voices beside the three real speakers: its own
  # corpus's digit sentences and 1500 synthetic digit strings (REHEARSE=none: neither)
  if [ "${REHEARSE:-}" != none ]; then
    experiment=fsdd_finetune
    "$py" -m recipes.common.synthetic --vocabulary digits --max-words 7 --out data/fsdd_synthetic \
      --count 1500 --jobs "$(nproc)"
    prep=(--rehearse "${REHEARSE:-data/voice_commands_synthetic/train.jsonl}"
          data/fsdd_synthetic/train.jsonl)
    # ...and real people saying digits: the digit clips of Speech Commands' training speakers
    # (SPEECH_COMMANDS=its root), listed three times so they are heard three times an epoch;
    # prepared apart from its own recipe's data/speech_commands, which may hold synthetic words.
    if [ -n "${SPEECH_COMMANDS:-}" ]; then
      sc=data/fsdd_speech_commands
      "$py" -m recipes.speech_commands.prepare --root "$SPEECH_COMMANDS" --out "$sc"
      prep+=("$sc/train.jsonl" "$sc/train.jsonl" "$sc/train.jsonl")
    fi
  fi
fi
"$py" -m recipes.fsdd.prepare "${root[@]}" --out "$data" "${prep[@]}"
"$py" -m asr.train experiment="$experiment" data.root="$data" trainer.out_dir="$model" \
  "${init[@]}" "$@"
"$py" -m asr.evaluate --model "$model/averaged" --manifest "$data/test.jsonl" --json "$model/test_results.json"

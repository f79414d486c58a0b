#!/usr/bin/env bash
# Score a base model on every target of recipes/base/RESULTS.md, with no training:
#
#   bash recipes/base/score.sh MODEL CORPUS OUT
#   bash recipes/base/score.sh exp/base_conv/averaged data/base exp/base_conv/candidate
#
# MODEL is a trained model directory, CORPUS the prepared corpus it trained on (its test_words
# and test_read manifests are scored), OUT where its shipped form goes (fp16, checked against
# fp32, with the default grammar; recipes.base.ship), calibrated on the voice-command recipe's
# dev set with every real dev recording (calibration.jsonl). The held-out evaluation sets are
# prepared under data/ when missing. Each score's report is written as JSON into OUT/scores/,
# and a summary is printed at the end.
set -euo pipefail
cd "$(dirname "$0")/../.."
if [ $# -ne 3 ]; then
  echo "usage: bash recipes/base/score.sh MODEL CORPUS OUT" >&2
  exit 2
fi
model=$1 corpus=$2 out=$3
py=.venv/bin/python
coffee=recipes/voice_commands/examples/coffee.yaml
pv_coffee=../shared/data/grammars/picovoice_coffee_maker.yaml

# The held-out sets: people's commands and other speech, and two grammars' synthetic tests.
prepare() {  # OUT [GRAMMAR]
  if [ ! -s "$1/calibration.jsonl" ]; then
    local grammar=() sizes=(--dev 150 --test 300)
    if [ $# -gt 1 ]; then grammar=(--grammar "$2") sizes=(--dev 100 --test 300); fi
    "$py" -m recipes.voice_commands.prepare "${grammar[@]}" --out "$1" --train 1 "${sizes[@]}"
  fi
}
prepare data/eval_commands
prepare data/eval_coffee "$coffee"
prepare data/eval_pv_coffee "$pv_coffee"

"$py" -m recipes.base.ship --model "$model" --corpus "$corpus" --out "$out"
"$py" -m asr.assistant.intents calibrate --model "$out" --manifest data/eval_commands/calibration.jsonl
scores=$out/scores
mkdir -p "$scores"
intents() {  # NAME MANIFEST [ARGUMENTS]
  local name=$1 manifest=$2
  shift 2
  echo "== $name"
  "$py" -m asr.assistant.intents evaluate --model "$out" --manifest "$manifest" "$@" \
    --json "$scores/$name.json"
}
intents commands data/eval_commands/test_real.jsonl
intents other_speech data/eval_commands/test_other.jsonl
intents coffee data/eval_coffee/test.jsonl --grammar "$coffee"
intents pv_coffee data/eval_pv_coffee/test.jsonl --grammar "$pv_coffee"
for name in test_words test_read; do
  echo "== $name"
  "$py" -m asr.evaluate --model "$out" --manifest "$corpus/$name.jsonl" --json "$scores/$name.json"
done
"$py" -m recipes.base.summary "$scores"

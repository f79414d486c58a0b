#!/usr/bin/env bash
# A language model for the base model's free transcripts (shallow fusion), trained on text alone:
#
#   apt-get install diatheke sword-text-web fortunes
#   bash recipes/base/lm.sh DATA=data/base_all          # the corpus run.sh trained on
#   python -m recipes.base.ship --lm exp/base_lm --lm-weight W --corpus data/base_all --into-package
#
# The text is the World English Bible and Debian's fortunes (recipes.cathy.lm_text) without any
# sentence of the corpus's dev and test manifests, and the corpus's training transcripts twice
# (commands, requests, numbers). The LM predicts the base model's BPE pieces, so it is trained
# with its tokenizer (MODEL, default the packaged model; every round trained on from it keeps
# it). Dev then picks the weight among WEIGHTS at BEAM (5, the shipped model's), and the test
# manifests are scored with and without the LM at that weight. Further settings: OUT
# (exp/base_lm), STEPS (2000), THREADS (1).
set -euo pipefail
cd "$(dirname "$0")/../.."
data=data/base model=asr/models/base out=exp/base_lm steps=2000 threads=1 beam=5
weights="0 0.25 0.5 0.75 1.0"
for arg in "$@"; do
  case $arg in
    DATA=*) data=${arg#DATA=} ;;
    MODEL=*) model=${arg#MODEL=} ;;
    OUT=*) out=${arg#OUT=} ;;
    STEPS=*) steps=${arg#STEPS=} ;;
    THREADS=*) threads=${arg#THREADS=} ;;
    WEIGHTS=*) weights=${arg#WEIGHTS=} ;;
    BEAM=*) beam=${arg#BEAM=} ;;
    *) echo "error: $arg: not one of DATA= MODEL= OUT= STEPS= THREADS= WEIGHTS= BEAM=" >&2; exit 2 ;;
  esac
done
py=.venv/bin/python
tests=("$data"/test*.jsonl)
excluded=()
for manifest in "$data/dev.jsonl" "${tests[@]}"; do excluded+=(--exclude "$manifest"); done
"$py" -m recipes.cathy.lm_text --out "$out/text" "${excluded[@]}"
"$py" -m asr.train_lm --model "$model" --text "$out/text/bible.txt" \
  --text "$out/text/fortunes.txt" --text "$data/train.jsonl" --text "$data/train.jsonl" \
  --dev "$data/dev.jsonl" --out "$out" --steps "$steps" --warmup-steps $((steps / 20)) --lr 2e-3 \
  --eval-every 200 --d-model 192 --layers 3 --d-ff 768 --threads "$threads" --overwrite

score() {  # MANIFEST WEIGHT: at BEAM, the LM at WEIGHT (0: none), scores in $out/scores
  "$py" -m asr.evaluate --model "$model" --manifest "$1" --beam-size "$beam" --lm "$out" \
    --lm-weight "$2" --threads "$threads" --json "$out/scores/$(basename "$1" .jsonl)_$2.json"
}
mkdir -p "$out/scores"
read -ra weight_list <<< "$weights"  # WEIGHTS is a space-separated list
for weight in "${weight_list[@]}"; do score "$data/dev.jsonl" "$weight"; done
best=$("$py" -c 'import json, sys
scores = {w: json.load(open(f"{sys.argv[1]}/dev_{w}.json"))["wer"] for w in sys.argv[2:]}
print(min(scores, key=scores.get))' "$out/scores" "${weight_list[@]}")
echo "dev's pick: --lm-weight $best"
for manifest in "${tests[@]}"; do
  score "$manifest" 0
  if awk "BEGIN { exit !($best > 0) }"; then score "$manifest" "$best"; fi
done
if awk "BEGIN { exit !($best > 0) }"; then
  echo "ship it: $py -m recipes.base.ship --lm $out --lm-weight $best --corpus $data --into-package"
else
  echo "on dev the LM does not help at beam $beam: nothing to ship"
fi

#!/usr/bin/env bash
# The main job, on a fresh machine: set up, synthesise a voice-command corpus from a grammar
# (with real people from ../shared/data when it is there), train a model for it on CPU (or
# GPU), score words and intents on unseen sentences, voices and people, transcribe a sample.
#
#   bash recipes/voice_commands/run.sh                        # the default grammar (commands.yaml)
#   bash recipes/voice_commands/run.sh GRAMMAR=coffee.yaml    # your commands: data/coffee, exp/coffee
#   bash recipes/voice_commands/run.sh MINUTES=30             # training's time budget (default 18)
#   bash recipes/voice_commands/run.sh trainer.max_epochs=5   # other arguments: Hydra overrides
#
# Training ends after its 13 epochs or at its budget of minutes, whichever comes first
# (trainer.max_minutes in the experiment; MINUTES=none: no budget); after each epoch it prints
# its speed and when it will end.
# The model directory carries its grammar (grammar.yaml), so `asr-demo model_dir=DIR` and
# `python -m asr.assistant.intents --model DIR` know its intents. Running it again continues the run
# (trainer.resume=true) instead of starting over.
# The settings are conf/experiment/voice_commands.yaml. REAL_ROOT=none: synthetic voices only,
# into data/ and exp/voice_commands_synthetic, with conf/experiment/voice_commands_synthetic.yaml
# (the conv2d front end): a start for fine-tuning on real recordings (recipes/speech_commands,
# recipes/fsdd: INIT=...).
set -euo pipefail
cd "$(dirname "$0")/../.."
start=$(date +%s)
grammar=recipes/voice_commands/commands.yaml
overrides=()
for arg in "$@"; do
  case $arg in
    GRAMMAR=*) grammar=${arg#GRAMMAR=} ;;
    MINUTES=*) MINUTES=${arg#MINUTES=} ;;
    *) overrides+=("$arg") ;;
  esac
done
grammar=${GRAMMAR:-$grammar}
if [ "${MINUTES:-}" = none ]; then MINUTES=null; fi
bash tools/setup.sh
py=.venv/bin/python
name=voice_commands experiment=voice_commands
[ "$grammar" = recipes/voice_commands/commands.yaml ] || name=$(basename "${grammar%.*}")
if [ "${REAL_ROOT:-}" = none ]; then
  name=${name}_synthetic experiment=voice_commands_synthetic
fi
data=data/$name
model=exp/$name

$py -m recipes.voice_commands.prepare --grammar "$grammar" --out "$data" \
  ${REAL_ROOT:+--real-root "$REAL_ROOT"}
$py -m asr.train experiment=$experiment data.root="$data" trainer.out_dir="$model" \
  trainer.resume=true ${MINUTES:+trainer.max_minutes=$MINUTES} "${overrides[@]}"
cp "$data/grammar.yaml" "$model/grammar.yaml"
# the grammar search's rejection threshold, chosen on dev (held-out voices, real non-commands)
$py -m asr.assistant.intents calibrate --model "$model" --manifest "$data/dev.jsonl"
$py -m asr.evaluate --model "$model" --manifest "$data/test.jsonl" \
  --json "$model/test_results.json" | tee "$model/test_wer.txt"
$py -m recipes.common.breakdown "$model/test_results.json" "$data/test.jsonl" engine
if [ -f "$data/test_real.jsonl" ]; then  # people never heard in training (../shared/data)
  $py -m asr.evaluate --model "$model" --manifest "$data/test_real.jsonl" \
    --json "$model/test_real_results.json"
  $py -m recipes.common.breakdown "$model/test_real_results.json" "$data/test_real.jsonl" source
fi
for manifest in test test_real test_other; do  # intents (grammar search): acceptance, false acceptance
  if [ -f "$data/$manifest.jsonl" ]; then
    echo "intents, $manifest:"
    $py -m asr.assistant.intents evaluate --model "$model" --manifest "$data/$manifest.jsonl" \
      --json "$model/${manifest}_intents.json"
  fi
done
echo "sample ($(cat "$data/sample.txt")):"
$py -m asr.assistant.intents --model "$model" "$data/sample.wav"

elapsed=$(( $(date +%s) - start ))
wer=$($py -c "import json; print(f\"{100 * json.load(open('$model/test_results.json'))['wer']:.2f}\")")
echo "main job done in $((elapsed / 60)) min $((elapsed % 60)) s: test WER ${wer}% (unseen sentences and voices)"

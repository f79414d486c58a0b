#!/usr/bin/env bash
# The main job, on a fresh machine: set up, synthesise a voice-command corpus from a grammar
# (with real people from ../shared/data when it is there), fine-tune the shipped base model on
# it (or train a model from scratch), score words and intents on unseen sentences, voices and
# people, transcribe a sample.
#
#   bash recipes/voice_commands/run.sh GRAMMAR=coffee.yaml    # your commands: data/coffee-HASH, exp/coffee-HASH
#   bash recipes/voice_commands/run.sh                        # the default grammar (commands.yaml)
#   bash recipes/voice_commands/run.sh MINUTES=30             # training's time budget
#   bash recipes/voice_commands/run.sh INIT=none GRAMMAR=...  # from scratch, not from the base
#   bash recipes/voice_commands/run.sh INIT=DIR GRAMMAR=...   # or from any model directory
#   bash recipes/voice_commands/run.sh trainer.max_epochs=5   # other arguments: Hydra overrides
#
# Your grammar (GRAMMAR=) fine-tunes the shipped base model (INIT=base, its network and front
# end; conf/experiment/grammar_finetune.yaml: 4 epochs, 5 minutes at most, HOURS=0.6): it
# starts from a model that hears English already (recipes/base/RESULTS.md). The default
# grammar, and INIT=none, train the default voice-command model from scratch
# (conf/experiment/voice_commands.yaml: 13 epochs, 18 minutes at most, 4.1 hours of speech).
# After each epoch training prints its speed and when it will end; the last line says whether
# the model is done, or stopped at its budget before converging and how to continue.
# The model directory carries its grammar (grammar.yaml), so `asr-demo model_dir=DIR` and
# `python -m asr.assistant.intents --model DIR` know its intents. Running it again continues the run
# (trainer.resume=true) instead of starting over.
# REAL_ROOT=none: synthetic voices only, into data/ and exp/voice_commands_synthetic, with
# conf/experiment/voice_commands_synthetic.yaml (the conv2d front end), from scratch: a start for
# fine-tuning on real recordings (recipes/speech_commands, recipes/fsdd: INIT=...).
set -euo pipefail
cd "$(dirname "$0")/../.."
start=$(date +%s)
default=recipes/voice_commands/commands.yaml
# shellcheck source-path=SCRIPTDIR/../..
source recipes/common/args.sh
overrides=()
recipe_args "GRAMMAR MINUTES INIT HOURS REAL_ROOT" "$@"
grammar=${GRAMMAR:-$default}
if [ "${MINUTES:-}" = none ]; then MINUTES=null; fi
name=voice_commands experiment=voice_commands hours=${HOURS:-4.1}
if [ "$grammar" != "$default" ]; then  # your grammar: its own folders, fine-tuned from the base
  name=$(basename "${grammar%.*}") INIT=${INIT:-base}
fi
case $name in  # the corpus and model folders are data/NAME-HASH and exp/NAME-HASH
  '' | .* | *[!A-Za-z0-9_.-]*)
    echo "error: GRAMMAR=$grammar: its file name makes no folder name (data/$name); name the" \
      "file with letters, digits, _ - and ." >&2
    exit 2 ;;
esac
if [ "$grammar" != "$default" ]; then  # two grammars of one file name never share folders
  where=$(realpath -- "$grammar") || exit 2
  name=$name-$(printf '%s' "$where" | sha256sum | cut -c1-8)
fi
bash tools/setup.sh
py=.venv/bin/python
if [ -n "${INIT:-}" ] && [ "$INIT" != none ]; then
  experiment=grammar_finetune hours=${HOURS:-0.6}
fi
if [ "${REAL_ROOT:-}" = none ]; then
  name=${name}_synthetic experiment=voice_commands_synthetic hours=${HOURS:-4.1}
fi
init=()
if [ "$experiment" = grammar_finetune ]; then  # INIT's network and front end, whatever they are
  mapfile -t init < <("$py" -m asr.training.pretrained "$INIT")
  [ ${#init[@]} -gt 0 ] || exit 2
  init+=("trainer.init_from=$INIT")
fi
data=data/$name
model=exp/$name
echo "corpus $data, model $model"

real=()
if [ -n "${REAL_ROOT:-}" ]; then real=(--real-root "$REAL_ROOT"); fi
budget=()
if [ -n "${MINUTES:-}" ]; then budget=("trainer.max_minutes=$MINUTES"); fi
"$py" -m recipes.voice_commands.prepare --grammar "$grammar" --out "$data" --hours "$hours" "${real[@]}"
"$py" -m asr.train experiment="$experiment" data.root="$data" trainer.out_dir="$model" \
  trainer.resume=true "${init[@]}" "${budget[@]}" "${overrides[@]}"
cp "$data/grammar.yaml" "$model/grammar.yaml"
# the grammar search's rejection threshold, chosen on dev with all of its real recordings
# (held-out voices, real non-commands)
"$py" -m asr.assistant.intents calibrate --model "$model" --manifest "$data/calibration.jsonl"
"$py" -m asr.evaluate --model "$model" --manifest "$data/test.jsonl" \
  --json "$model/test_results.json" | tee "$model/test_wer.txt"
"$py" -m recipes.common.breakdown "$model/test_results.json" "$data/test.jsonl" engine
if [ -f "$data/test_real.jsonl" ]; then  # people never heard in training (../shared/data)
  "$py" -m asr.evaluate --model "$model" --manifest "$data/test_real.jsonl" \
    --json "$model/test_real_results.json"
  "$py" -m recipes.common.breakdown "$model/test_real_results.json" "$data/test_real.jsonl" source
fi
for manifest in test test_real test_other; do  # intents (grammar search): acceptance, false acceptance
  if [ -f "$data/$manifest.jsonl" ]; then
    echo "intents, $manifest:"
    "$py" -m asr.assistant.intents evaluate --model "$model" --manifest "$data/$manifest.jsonl" \
      --json "$model/${manifest}_intents.json"
  fi
done
echo "sample ($(cat "$data/sample.txt")):"
"$py" -m asr.assistant.intents --model "$model" "$data/sample.wav"

elapsed=$(( $(date +%s) - start ))
"$py" -m recipes.voice_commands.verdict --model "$model" --seconds "$elapsed" \
  --again "bash recipes/voice_commands/run.sh GRAMMAR=$grammar${INIT:+ INIT=$INIT}"

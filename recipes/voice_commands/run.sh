#!/usr/bin/env bash
# The main job, on a fresh machine: set up, synthesise the voice-command corpus, train the
# default model on CPU (or GPU), score it on unseen sentences and voices, transcribe a sample.
# Extra arguments are Hydra overrides for training, e.g. `trainer.max_epochs=5`.
# Running it again continues the run (trainer.resume=true) instead of starting over.
# REAL_ROOT=none: synthetic voices only, into data/ and exp/voice_commands_synthetic: a start
# for fine-tuning on real recordings (recipes/speech_commands, recipes/fsdd: INIT=...), with the
# conv2d front end (2.2x the training time; on real voices it beat frame stacking, see those READMEs).
set -euo pipefail
cd "$(dirname "$0")/../.."
start=$(date +%s)
bash tools/setup.sh
py=.venv/bin/python
name=voice_commands
overrides=()
if [ "${REAL_ROOT:-}" = none ]; then name=voice_commands_synthetic overrides=(model.subsampling=conv2d); fi
data=data/$name
model=exp/$name

$py -m recipes.voice_commands.prepare --out "$data" ${REAL_ROOT:+--real-root "$REAL_ROOT"}
$py -m asr.train data.root="$data" trainer.out_dir="$model" trainer.resume=true "${overrides[@]}" "$@"
$py -m asr.evaluate --model "$model" --manifest "$data/test.jsonl" \
  --json "$model/test_results.json" | tee "$model/test_wer.txt"
$py -m recipes.breakdown "$model/test_results.json" "$data/test.jsonl" engine
if [ -f "$data/test_real.jsonl" ]; then  # people never heard in training (../shared/data)
  $py -m asr.evaluate --model "$model" --manifest "$data/test_real.jsonl" \
    --json "$model/test_real_results.json"
  $py -m recipes.breakdown "$model/test_real_results.json" "$data/test_real.jsonl" source
fi
echo "sample ($(cat "$data/sample.txt")):"
$py -m asr.transcribe --model "$model" "$data/sample.wav"

elapsed=$(( $(date +%s) - start ))
wer=$($py -c "import json; print(f\"{100 * json.load(open('$model/test_results.json'))['wer']:.2f}\")")
echo "main job done in $((elapsed / 60)) min $((elapsed % 60)) s: test WER ${wer}% (unseen sentences and voices)"

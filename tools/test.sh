#!/usr/bin/env bash
# The test command: set up the environment (and Kokoro's voices) if needed, then run the whole suite.
set -euo pipefail
cd "$(dirname "$0")/.."
bash tools/setup.sh
bash tools/setup_kokoro.sh  # the base recipe's tests speak with Kokoro's voices
exec .venv/bin/python -m pytest -q "$@"

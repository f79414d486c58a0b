#!/usr/bin/env bash
# The test command: set up the environment if needed, then run the whole suite.
set -euo pipefail
cd "$(dirname "$0")/.."
bash tools/setup.sh
exec .venv/bin/python -m pytest -q "$@"

#!/usr/bin/env bash
# The tests of training, decoding, export and resume on torch 2.11 and torchaudio 2.11, the
# oldest torch that pyproject.toml allows (and the lent GPU machine's), in a second virtual
# environment, .venv211 (git-ignored; VENV211=DIR for another place), built here if missing:
#
#   bash tools/test_torch211.sh [pytest args]
#
# torch 2.11 on PyPI is the CUDA 13 build, whose `import torch` loads the CUDA libraries even
# on a machine without a GPU. .venv (tools/setup.sh) has them already, for its CUDA 13 torch:
# .venv211 links them rather than download 3 GB again; without .venv they are installed.
# Everything else is installed at the versions pip picks today, torch left alone (--no-deps).
# Not part of CI (.ci/run): it downloads torch 2.11 (530 MB) into a clean clone each time.
set -euo pipefail
cd "$(dirname "$0")/.."

VENV=${VENV211:-.venv211}
TORCH=(torch==2.11.0 torchaudio==2.11.0)
TESTS=(tests/test_train.py tests/test_decoding.py tests/test_export.py tests/test_model.py
       tests/test_transcriber.py tests/test_precision.py tests/test_train_dirs.py
       tests/test_train_faults.py tests/test_crash.py tests/test_ddp.py tests/test_gpu_check.py)
pip=("$VENV/bin/python" -m pip install --quiet --disable-pip-version-check)

if [ ! -x "$VENV/bin/python" ]; then
  echo "test_torch211: creating $VENV"
  "${PYTHON:-python3}" -m venv "$VENV"
fi
site=$("$VENV/bin/python" -c "import sysconfig; print(sysconfig.get_paths()['purelib'])")

if ! cmp -s pyproject.toml "$VENV/.asr-pyproject"; then
  echo "test_torch211: installing ${TORCH[*]} and asr's other dependencies into $VENV"
  "${pip[@]}" --no-deps "${TORCH[@]}"
  # torch's own pure-Python requirements, and its CUDA libraries (linked from .venv if there)
  "${pip[@]}" filelock "typing-extensions>=4.10" "sympy>=1.13.3" "networkx>=2.5.1" jinja2 \
    "fsspec>=0.8.5" "setuptools<82"
  main_nvidia=$(.venv/bin/python -c "import sysconfig; print(sysconfig.get_paths()['purelib'])" \
    2>/dev/null)/nvidia
  if [ -d "$main_nvidia" ]; then
    ln -sfn "$(realpath "$main_nvidia")" "$site/nvidia"
  else
    "$VENV/bin/python" - <<'EOF' > "$VENV/cuda-requirements.txt"
from importlib.metadata import requires
for req in requires("torch"):
    if req.startswith(("nvidia", "cuda")):
        print(req.split(";")[0])
EOF
    "${pip[@]}" -r "$VENV/cuda-requirements.txt"
  fi
  # asr's dependencies but torch, the tests' (SpeechBrain without its torch requirement)
  "$VENV/bin/python" - <<'EOF' > "$VENV/asr-requirements.txt"
import tomllib
deps = tomllib.load(open("pyproject.toml", "rb"))["project"]["dependencies"]
for dep in deps + ["pytest", "hypothesis", "onnx>=1.16", "onnxruntime>=1.18",
                   "hyperpyyaml", "joblib", "packaging"]:
    if not dep.startswith(("torch", "torchaudio")):
        print(dep)
EOF
  "${pip[@]}" -r "$VENV/asr-requirements.txt"
  "${pip[@]}" --no-deps "speechbrain>=1.1"
  "${pip[@]}" --no-deps -e .
  cp pyproject.toml "$VENV/.asr-pyproject"
fi

"$VENV/bin/python" -c "import torch, torchaudio, asr.train
assert torch.__version__.startswith('2.11'), torch.__version__
print(f'test_torch211: torch {torch.__version__}, torchaudio {torchaudio.__version__}')"
OMP_NUM_THREADS=1 MKL_NUM_THREADS=1 exec "$VENV/bin/python" -m pytest -q -p no:cacheprovider \
  --durations=5 "${TESTS[@]}" "$@"

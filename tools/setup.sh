#!/usr/bin/env bash
# Install what asr needs on a fresh machine: Debian's speech synthesisers (for the embedded
# voice-command corpus) and a virtual environment (.venv) with asr and its dependencies.
# Safe to run again: it only installs what is missing or changed.
set -euo pipefail
cd "$(dirname "$0")/.."

missing=()
command -v espeak-ng >/dev/null || missing+=(espeak-ng)
command -v flite >/dev/null || missing+=(flite)
command -v text2wave >/dev/null || missing+=(festival festvox-kallpc16k)
[ -d /usr/share/festival/voices/english/ked_diphone ] || missing+=(festvox-kdlpc16k)
[ -d /usr/share/festival/voices/us/cmu_us_slt_arctic_hts ] || missing+=(festvox-us-slt-hts)
compgen -G '/usr/lib/*/libportaudio.so.2' >/dev/null || missing+=(libportaudio2)  # asr-demo's microphone
if [ ${#missing[@]} -gt 0 ]; then
  sudo=""
  [ "$(id -u)" -eq 0 ] || sudo="sudo"
  echo "setup: installing ${missing[*]} from Debian"
  $sudo apt-get update -qq
  DEBIAN_FRONTEND=noninteractive $sudo apt-get install -y -qq --no-install-recommends \
    "${missing[@]}" >/dev/null
fi

if [ ! -x .venv/bin/python ]; then
  echo "setup: creating .venv"
  python3 -m venv .venv
fi
# Reinstall only when the declared dependencies change.
if ! cmp -s pyproject.toml .venv/.asr-pyproject; then
  echo "setup: installing asr and its dependencies into .venv (torch is large: a few minutes)"
  # an install under the distribution's former name, asr, would linger beside it: remove it
  if .venv/bin/pip show --quiet asr 2>/dev/null; then .venv/bin/pip uninstall --quiet -y asr; fi
  .venv/bin/pip install --quiet --disable-pip-version-check -e '.[dev]' 2>&1 \
    | grep -v "is ignored: it is neither a file nor a directory" || true
  .venv/bin/python -c "import asr.train, torchaudio" 
  cp pyproject.toml .venv/.asr-pyproject
fi

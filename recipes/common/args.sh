#!/usr/bin/env bash
# The arguments every recipe's run.sh takes, in one style: NAME=value for the recipe's own
# settings (upper case; the same name set in the environment is its default, so
# `INIT=x bash run.sh` and `bash run.sh INIT=x` are one thing), anything else a Hydra override
# for training; and icefall's stages (prepare.sh): STAGE=N / STOP_STAGE=M run stages N..M only.
#
#   source recipes/common/args.sh
#   overrides=()
#   recipe_args "HOURS MINUTES INIT" "$@"   # sets HOURS=... etc.; the rest goes to overrides
#   if stage 1 "prepare the corpus"; then ...; fi

STAGE=${STAGE:-0}
STOP_STAGE=${STOP_STAGE:-100}

recipe_args() {  # NAMES ARGS...: NAME=value of NAMES (or STAGE, STOP_STAGE) set NAME; others
  local names=" $1 STAGE STOP_STAGE " arg name
  shift
  for arg in "$@"; do
    name=${arg%%=*}
    if [[ $arg == *=* && $name =~ ^[A-Z][A-Z0-9_]*$ && $names == *" $name "* ]]; then
      printf -v "$name" '%s' "${arg#*=}"
    else
      overrides+=("$arg")
    fi
  done
  for name in STAGE STOP_STAGE; do
    if ! [[ ${!name} =~ ^[0-9]+$ ]]; then
      echo "error: $name=${!name}: not a stage number" >&2
      exit 2
    fi
  done
}

stage() {  # N WHAT: whether stage N is to run (STAGE <= N <= STOP_STAGE); says so when it is
  if [ "$STAGE" -le "$1" ] && [ "$1" -le "$STOP_STAGE" ]; then
    echo "== stage $1: $2"
    return 0
  fi
  return 1
}

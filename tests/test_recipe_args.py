"""The recipes' one argument style (recipes/common/args.sh): NAME=value of the recipe's names,
from the command line or the environment, Hydra overrides for the rest, and STAGE/STOP_STAGE."""

import os
import subprocess

import pytest

from helpers import ROOT

pytestmark = pytest.mark.tier("fast")  # bash alone, a few milliseconds each

SCRIPT = """source recipes/common/args.sh
HOURS=1.5 INIT=${INIT:-base}
overrides=()
recipe_args "HOURS INIT" "$@"
echo "HOURS=$HOURS INIT=$INIT overrides=${overrides[*]}"
for n in 0 1 2 3; do if stage $n "step $n"; then :; fi; done
"""


def run(*args: str, env: dict | None = None) -> subprocess.CompletedProcess:
    return subprocess.run(["bash", "-c", SCRIPT, "run.sh", *args], cwd=ROOT, capture_output=True,
                          text=True, env={**os.environ, **(env or {})}, timeout=30)


def test_names_set_settings_and_the_rest_are_overrides():
    done = run("HOURS=0.5", "trainer.num_threads=1", "MINUTES=3", "model=tiny")
    assert done.returncode == 0
    assert done.stdout.splitlines()[0] == (
        "HOURS=0.5 INIT=base overrides=trainer.num_threads=1 MINUTES=3 model=tiny")


def test_the_environment_and_the_command_line_are_one_style():
    assert run(env={"INIT": "none"}).stdout.splitlines()[0].startswith("HOURS=1.5 INIT=none")
    assert run("INIT=none").stdout.splitlines()[0].startswith("HOURS=1.5 INIT=none")


def test_stages_run_between_stage_and_stop_stage_and_say_so():
    assert run("STAGE=1", "STOP_STAGE=2").stdout.splitlines()[1:] == [
        "== stage 1: step 1", "== stage 2: step 2"]
    assert run(env={"STAGE": "3"}).stdout.splitlines()[1:] == ["== stage 3: step 3"]
    done = run("STAGE=two")
    assert done.returncode == 2 and done.stderr == "error: STAGE=two: not a stage number\n"


def test_the_base_recipe_past_its_last_stage_does_nothing():
    done = subprocess.run(["bash", "recipes/base/run.sh", "STAGE=5", "SEEDS=14,15"], cwd=ROOT,
                          capture_output=True, text=True, timeout=30)
    assert (done.returncode, done.stdout, done.stderr) == (0, "", "")

"""The main job's last line (recipes.voice_commands.verdict): done only for a model that ran its
epochs and accepts its dev commands; a budget-stopped run says so and how to continue; a model
that accepts almost nothing fails the job."""

import json
from pathlib import Path

import pytest

from recipes.voice_commands import verdict

pytestmark = pytest.mark.tier("fast")

AGAIN = "bash recipes/voice_commands/run.sh GRAMMAR=coffee.yaml"


def model_dir(tmp_path: Path, accepted: float, by_budget: bool, epochs: int = 3) -> Path:
    """What training and `asr-intents calibrate` leave in a model directory."""
    (tmp_path / "metrics.json").write_text(json.dumps({
        "max_epochs": 4, "stopped_by_budget": by_budget,
        "epochs": [{"epoch": n + 1} for n in range(epochs)]}))
    (tmp_path / "intents.json").write_text(json.dumps({
        "min_confidence": 0.4, "dev": {"command_acceptance": accepted, "commands": 120}}))
    (tmp_path / "config.yaml").write_text("trainer:\n  max_minutes: 5\n")
    return tmp_path


def test_a_converged_model_is_done(tmp_path):
    line, status = verdict.verdict(model_dir(tmp_path, 0.975, False, 4), 312, AGAIN)
    assert (line, status) == ("main job done in 5 min 12 s: dev command acceptance 97.5% of 120", 0)


def test_a_budget_stop_says_so_with_the_command_that_continues(tmp_path):
    line, status = verdict.verdict(model_dir(tmp_path, 0.8, True), 330, AGAIN)
    assert status == 0
    assert line == ("main job stopped at its time budget after 5 min 30 s, 3 of 4 epochs: not "
                    "converged (dev command acceptance 80.0% of 120); continue with: "
                    f"{AGAIN} MINUTES=10")


def test_a_budget_stop_in_the_last_epoch_continues_with_more_epochs(tmp_path):
    """The budget cut epoch 4 of 4: resuming with more minutes alone would start at epoch 5 of 4
    and train nothing."""
    line, _ = verdict.verdict(model_dir(tmp_path, 0.959, True, 4), 443, AGAIN)
    assert line == ("main job stopped at its time budget after 7 min 23 s, 4 of 4 epochs: not "
                    "converged (dev command acceptance 95.9% of 120); continue with: "
                    f"{AGAIN} MINUTES=10 trainer.max_epochs=8")


@pytest.mark.parametrize("by_budget", [True, False])
def test_a_model_that_accepts_nothing_is_never_done(tmp_path, by_budget):
    line, status = verdict.verdict(model_dir(tmp_path, 0.0, by_budget), 1500, AGAIN)
    assert status == 1 and "done" not in line
    assert line == ("main job failed after 25 min 0 s: the model is not usable yet (dev command "
                    f"acceptance 0.0% of 120, 3 epochs trained); continue training with: {AGAIN} "
                    "MINUTES=10")


def test_a_missing_calibration_is_one_line(tmp_path, capsys):
    (tmp_path / "metrics.json").write_text("{}")
    with pytest.raises(SystemExit) as stop:
        verdict.main(["--model", str(tmp_path), "--seconds", "1", "--again", AGAIN])
    assert str(stop.value).startswith(f"error: {tmp_path}: cannot read the run's metrics or calibration")

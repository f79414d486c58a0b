"""benchmarks/gpu_check.py, the one-command GPU check, runs every step here on the CPU at toy sizes
(as it does on any machine without CUDA), records each with its reason and keeps going after a
failure; tools/pack_gpu.py's wheel picker (its pip-less install) chooses by the wheel's tags."""

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from helpers import ROOT, SHARED, require_shared

pytestmark = [pytest.mark.tier("slow"), pytest.mark.bench, pytest.mark.data]

STEPS = ["environment", "train_fp32", "train_bf16", "train_fp16", "decode_cpu_vs_device",
         "ddp_torchrun", "ddp_collectives", "bench_s2t_s", "train_fp32_compiled",
         "bench_s2t_s_compiled"]


@pytest.mark.subprocess
def test_every_step_passes_on_the_cpu_at_toy_sizes(tmp_path):
    require_shared()
    env = {**os.environ, "PYTHONPATH": str(ROOT), "OMP_NUM_THREADS": "1"}
    run = subprocess.run([sys.executable, "-m", "benchmarks.gpu_check", "--toy",
                          "--out", str(tmp_path / "out"), "--data", str(SHARED)],
                         capture_output=True, text=True, env=env, cwd=ROOT, timeout=600)
    assert run.returncode == 0, run.stdout[-3000:] + run.stderr[-3000:]
    result = json.loads((tmp_path / "out" / "gpu_check.json").read_text())
    assert sorted(p.name for p in (tmp_path / "out").iterdir()) == ["gpu_check.json",
                                                                   "gpu_check.log"]
    assert result["toy"] and result["device"] == "cpu"
    assert [s["name"] for s in result["steps"]] == STEPS
    assert all(s["status"] == "pass" for s in result["steps"]), result["steps"]
    assert (result["pass"], result["fail"], result["skip"]) == (len(STEPS), 0, 0)
    steps = {s["name"]: s["details"] for s in result["steps"]}
    fp32 = steps["train_fp32"]
    assert fp32["last_loss"] < fp32["first_loss"] and fp32["bad_steps"] == 0
    assert fp32["resume"]["step"] == fp32["resume"]["expected"] > fp32["steps"]
    assert steps["train_fp32_compiled"]["compile_backend"] == "aot_eager"
    assert steps["ddp_collectives"]["backend"] == "gloo"
    bench = steps["bench_s2t_s"]["models"]
    if "SpeechBrain TransformerASR" in bench:  # equal sizes: only the Transformer differs
        assert bench["SpeechBrain TransformerASR"]["parameters"] == \
            bench["ours (s2t_s sizes, stacking front end)"]["parameters"]
    assert all(0 < m["mfu"] and m["achieved_tflop_per_s"] > 0 for m in bench.values())
    breakdown = steps["bench_s2t_s"]["time_breakdown"]["ours (s2t_s)"]
    assert 0 < breakdown["kernel_s"] and breakdown["launches"] > 100
    assert set(breakdown["by_kind_s"]) == {"matmul", "attention", "other"}
    compiled = steps["bench_s2t_s_compiled"]
    assert compiled["backend"] == "eager" and compiled["first_compiled_round_s"] > 0
    eager, fused = compiled["models"].values()  # the same model, the same arithmetic
    assert eager["tflop_per_step"] == fused["tflop_per_step"] > 0
    assert eager["parameters"] == fused["parameters"] and compiled["compiled_speedup"] > 0
    assert "train_fp32: PASS" in (tmp_path / "out" / "gpu_check.log").read_text()


def test_a_failed_step_is_recorded_and_the_next_still_runs(tmp_path):
    import benchmarks.gpu_check as gpu_check

    require_shared()
    check = gpu_check.Check(tmp_path, SHARED, toy=True, budget=0.0, work=tmp_path / "work")

    def broken() -> dict:
        raise RuntimeError("the device fell over\nsecond line")

    check.run("broken", broken)
    check.run("fine", lambda: {"ok": True})
    check.budget = 1e-9  # spent: the next step is skipped, with the reason
    check.run("late", lambda: {})
    steps = json.loads((tmp_path / "gpu_check.json").read_text())["steps"]
    assert [(s["name"], s["status"]) for s in steps] == [
        ("broken", "fail"), ("fine", "pass"), ("late", "skip")]
    assert steps[0]["reason"] == "RuntimeError: the device fell over"
    assert steps[2]["reason"].startswith("time budget")
    assert check.failed


def test_a_step_past_the_budget_is_stopped(tmp_path):
    import benchmarks.gpu_check as gpu_check

    require_shared()
    check = gpu_check.Check(tmp_path, SHARED, toy=True, budget=1.0, work=tmp_path / "work")
    def endless() -> dict:
        while True:
            pass

    check.run("slow", endless)
    step = json.loads((tmp_path / "gpu_check.json").read_text())["steps"][0]
    assert step["status"] == "fail" and "time budget ran out" in step["reason"]


STUBBORN = """
import signal, subprocess, sys
for number in (signal.SIGALRM, signal.SIGTERM, signal.SIGINT):
    signal.signal(number, signal.SIG_IGN)
grandchild = subprocess.Popen([sys.executable, "-c", "while True: pass"])
open(sys.argv[1], "w").write(str(grandchild.pid))
while True:
    pass
"""


def running(pid: int) -> bool:
    try:
        state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
    except (OSError, IndexError):
        return False
    return state not in ("Z", "X")


@pytest.mark.subprocess
def test_a_step_that_ignores_its_deadline_is_killed_and_the_others_kept(tmp_path):
    """Each step of `main` runs as its own process: one that ignores every signal (and
    started another) is killed with all it started when the budget ends; the check's JSON
    keeps the steps before it and skips the ones after."""
    import time

    import benchmarks.gpu_check as gpu_check

    require_shared()
    check = gpu_check.Check(tmp_path, SHARED, toy=True, budget=0.0, work=tmp_path / "work")
    check.run("first", lambda: {"ok": True})
    check.budget = time.monotonic() - check.started + 3.0
    check.run_process("stubborn", [sys.executable, "-c", STUBBORN, str(tmp_path / "pid")])
    check.run_process("after", [sys.executable, "-c", "pass"])
    steps = json.loads((tmp_path / "gpu_check.json").read_text())["steps"]
    assert [(s["name"], s["status"]) for s in steps] == [
        ("first", "pass"), ("stubborn", "fail"), ("after", "skip")]
    assert steps[0]["details"] == {"ok": True}
    assert steps[1]["reason"].startswith("killed when the time budget ran out")
    time.sleep(0.5)
    assert not running(int((tmp_path / "pid").read_text()))


@pytest.mark.subprocess
def test_a_step_process_without_a_result_fails_with_its_exit_status(tmp_path):
    import benchmarks.gpu_check as gpu_check

    require_shared()
    check = gpu_check.Check(tmp_path, SHARED, toy=True, budget=0.0, work=tmp_path / "work")
    check.run_process("crashed", [sys.executable, "-c", "raise SystemExit(3)"])
    step = json.loads((tmp_path / "gpu_check.json").read_text())["steps"][0]
    assert (step["status"], step["reason"]) == (
        "fail", "its process ended (exit 3) without a result")


@pytest.mark.parametrize("wheel, minor, fits", [
    ("rapidfuzz-3.14.6-cp311-cp311-manylinux_2_27_x86_64.manylinux_2_28_x86_64.whl", 11, True),
    ("rapidfuzz-3.14.6-cp312-cp312-manylinux_2_27_x86_64.manylinux_2_28_x86_64.whl", 11, False),
    ("soxr-1.1.0-cp312-abi3-manylinux_2_27_x86_64.manylinux_2_28_x86_64.whl", 13, True),
    ("soxr-1.1.0-cp312-abi3-manylinux_2_27_x86_64.manylinux_2_28_x86_64.whl", 11, False),
    ("soundfile-0.14.0-py2.py3-none-manylinux_2_28_x86_64.whl", 12, True),
    ("hydra_core-1.3.8-py3-none-any.whl", 10, True),
    ("cffi-2.1.1-cp311-cp311-macosx_11_0_arm64.whl", 11, False),
])
def test_the_pipless_install_picks_wheels_by_their_tags(wheel, minor, fits):
    from tools import pack_gpu

    assert pack_gpu.fits(wheel, minor) is fits


def test_the_device_command_installs_the_carried_wheels_then_runs_the_check():
    from tools import pack_gpu

    command = pack_gpu.device_command(pack_gpu.CARRY)
    assert "--find-links gpu_carry/wheels -r gpu_carry/requirements.txt" in command
    assert "-m tools.pack_gpu --unpack" in command  # without pip
    assert command.endswith("-m benchmarks.gpu_check --out $OUT --data gpu_carry/data")
    assert len(command) < 2000  # one line a terminal takes whole
    assert Path(pack_gpu.__file__).parent == ROOT / "tools"

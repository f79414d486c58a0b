"""benchmarks/wyoming.py at toy size: its figures are there and agree with each other."""

import json
import os
import subprocess
import sys

import pytest

from helpers import ROOT, require_shared

pytestmark = [pytest.mark.tier("slow"), pytest.mark.bench, pytest.mark.data]

pytest.importorskip("wyoming")


def test_wyoming_bench_runs_and_loses_no_request(tmp_path):
    require_shared()
    out = tmp_path / "wyoming.json"
    proc = subprocess.run(
        [sys.executable, "-m", "benchmarks.wyoming", "--clips", "1", "--clients", "2",
         "--requests", "2", "--peer-python", str(tmp_path / "none"), "--json", str(out)],
        capture_output=True, text=True, cwd=ROOT, timeout=600,
        env={**os.environ, "PYTHONPATH": str(ROOT)})
    assert proc.returncode == 0, proc.stdout[-2000:] + proc.stderr[-2000:]
    report = json.loads(out.read_text())
    assert set(report["sets"]) == {"commands", "digits", "sentences"}
    for rows in report["sets"].values():
        assert list(rows) == ["asr-wyoming"]
        row = rows["asr-wyoming"]
        assert row["clips"] == 1 and 0 <= row["wer"] <= 1
        assert 0 < row["after_stop_median"] <= row["total_mean"]
    load = report["load"]
    assert load["requests"] == 4 and load["answered"] == 4 and load["lost"] == 0
    assert "load: 2 clients, 4 requests, 4 answered (0 lost" in proc.stdout

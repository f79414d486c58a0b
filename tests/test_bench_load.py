"""benchmarks/load.py at its smallest: its rows, and its busy processes stopped even when it fails."""

import json
import subprocess
import sys
from pathlib import Path

import pytest

from benchmarks.load import HOG
from helpers import ROOT, require_shared

pytestmark = [pytest.mark.tier("slow"), pytest.mark.bench, pytest.mark.data]


def hogs_running() -> int:
    """Processes running the benchmark's busy loop (any benchmark's, on this machine)."""
    count = 0
    for cmdline in Path("/proc").glob("[0-9]*/cmdline"):
        try:
            count += HOG in cmdline.read_bytes().decode(errors="replace")
        except OSError:
            pass
    return count


def run(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "benchmarks.load", *args], cwd=ROOT,
                          capture_output=True, text=True, timeout=600)


def test_load_bench_rows_and_its_hogs_stop(tmp_path):
    require_shared()
    before = hogs_running()
    out = tmp_path / "load.json"
    proc = run("--clips", "2", "--sentences", "1", "--rounds", "1", "--loads", "one",
               "--backends", "torch", "--demo", "0", "--json", str(out))
    assert proc.returncode == 0, proc.stderr[-2000:]
    rows = json.loads(out.read_text())["rows"]
    assert [(r["contender"], r["load"], r["busy_processes"]) for r in rows] == [
        (c, load, n) for c in ("policy", "1 thread", "old") for load, n in (("one", 1), ("idle", 0))]
    assert all(r["rtf"] > 0 and r["backend"] == "torch" for r in rows)
    assert [r["slowdown"] for r in rows if r["load"] == "idle"] == [1.0] * 3
    assert "| torch | policy | one (1) |" in proc.stdout
    assert hogs_running() == before


def test_a_failing_worker_still_stops_the_hogs(tmp_path):
    words = tmp_path / "speech_commands" / "yes"
    words.mkdir(parents=True)
    (words / "a.wav").write_bytes(b"not audio")
    before = hogs_running()
    proc = run("--data", str(tmp_path), "--clips", "1", "--sentences", "0", "--rounds", "1",
               "--loads", "all", "--backends", "torch", "--demo", "0")
    assert proc.returncode != 0
    assert "worker policy/torch failed" in proc.stderr
    assert hogs_running() == before

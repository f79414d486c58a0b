"""The benchmarks tests/test_bench.py does not run (attention, decoding, export, scale) run once
at toy size, and what they print or write has the shape their tables claim: a row per length
or search, every figure present and positive, results that agree with each other.

They never fail on speed: only the output's schema and the counts in it are checked.
"""

import json
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

from helpers import ROOT, require_shared, write_untrained_model

pytestmark = [pytest.mark.tier("slow"), pytest.mark.bench, pytest.mark.data]


def run(name: str, *args: str) -> str:
    """`python -m benchmarks.<name> ARGS` on one thread; returns what it printed."""
    env = {**os.environ, "PYTHONPATH": str(ROOT), "OMP_NUM_THREADS": "1"}
    proc = subprocess.run([sys.executable, "-m", f"benchmarks.{name}", *args], capture_output=True,
                          text=True, env=env, cwd=ROOT, timeout=600)
    assert proc.returncode == 0, proc.stdout[-2000:] + proc.stderr[-2000:]
    return proc.stdout


@pytest.fixture(scope="module")
def model(tmp_path_factory) -> Path:
    """An untrained tiny model directory, its four-utterance manifest at ../train.jsonl."""
    return write_untrained_model(tmp_path_factory.mktemp("bench_schema"))


def test_attention_prints_a_row_of_four_figures_per_length():
    stdout = run("attention", "--lengths", "40", "80", "--repeats", "1")
    rows = [line for line in stdout.splitlines() if re.match(r"^\| \d+ \|", line)]
    assert [row.split("|")[1].strip() for row in rows] == ["40", "80"]
    for row in rows:
        cells = [cell.strip() for cell in row.strip("|").split("|")][1:]
        assert len(cells) == 4 and all(float(cell) >= 0 for cell in cells), row


def test_decoding_prints_every_search_and_the_cache_changes_no_hypothesis(model):
    stdout = run("decoding", "--model", str(model), "--manifest",
                 str(model.parent / "train.jsonl"), "--utterances", "2", "--batch-size", "2")
    assert stdout.splitlines()[0].startswith(f"{model}: 2 utterances,")
    rows = {}
    for line in stdout.splitlines():
        found = re.match(r"^(greedy \+ ctc|greedy|beam 5 \+ ctc|beam 5)\s+(yes|no)\s+(\d+)\s", line)
        if found:
            rows[found.groups()] = [float(x) for x in line[found.end():].split()]
    assert set(rows) == {(search, cache, batch) for search in ("greedy", "greedy + ctc", "beam 5",
                                                               "beam 5 + ctc")
                         for cache in ("yes", "no") for batch in ("1", "2")}
    assert all(len(figures) == 3 and all(f >= 0 for f in figures) for figures in rows.values())
    assert stdout.count("cache changes no hypothesis: True") == 4
    assert re.search(r"^ctc greedy\s+-\s+2\s+[\d.]+\s+[\d.]+$", stdout, re.M)
    assert stdout.count("batched 2 vs one at a time") == 4


def test_export_scores_torch_and_both_graphs_on_the_same_utterances(model, tmp_path):
    out = tmp_path / "export.json"
    run("export", "--model", str(model), "--manifest", str(model.parent / "train.jsonl"),
        "--limit", "2", "--rounds", "1", "--threads", "1", "--beam-size", "1", "--json", str(out))
    result = json.loads(out.read_text())
    assert result["utterances"] == 2 and result["audio_seconds"] > 0
    assert set(result["results"]) == {"torch fp32", "onnx fp32", "onnx int8"}
    for name, row in result["results"].items():
        assert set(row) == {"wer", "rtf", "speedup_vs_torch", "same_as_torch", "seconds"}, name
        assert row["wer"] >= 0 and row["rtf"] > 0 and len(row["seconds"]) == 1
        assert 0 <= row["same_as_torch"] <= 2
    assert result["results"]["torch fp32"]["same_as_torch"] == 2


def test_scale_counts_parameters_flops_and_estimates(tmp_path):
    require_shared()
    out = tmp_path / "scale.json"
    run("scale", "--batch", "1", "--join", "1", "--vocab", "64", "--rounds", "1", "--threads",
        "1", "--json", str(out))
    result = json.loads(out.read_text())
    assert set(result["parameters"]) == {"s2t_s", "s2t_m"}
    assert 0 < result["parameters"]["s2t_s"] < result["parameters"]["s2t_m"]
    assert result["batch"]["utterances"] == 1 and result["batch"]["tokens"] > 0
    step = result["s2t_s_step"]
    assert step["flops"] > 0 and step["cpu_seconds"] > 0 and step["wall_seconds"] > 0
    assert result["flops_per_audio_second"] == pytest.approx(
        step["flops"] / result["batch"]["audio_seconds"])
    assert len(result["estimate_960h_epoch"]["h100_hours_assumed"]) == 3

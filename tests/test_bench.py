"""Each benchmark in benchmarks/ runs one tiny iteration end to end, so they keep working.

Benchmarks print figures and never fail on speed: these tests check that they run, that their
JSON holds what their tables claim (equal sizes, shares that add up, values that agree), and
that the inference split never tests on a training speaker. Peer rows (SpeechBrain,
pocketsphinx) are checked when the peer is installed and skipped by the benchmark otherwise.
"""

import importlib.util
import json
import os
import subprocess
import sys
from pathlib import Path

import jiwer
import pytest

from helpers import ROOT, require_shared

pytestmark = [pytest.mark.tier("slow"), pytest.mark.bench, pytest.mark.data]

HAVE = {name: importlib.util.find_spec(name) is not None for name in ("speechbrain", "pocketsphinx")}


def bench(tmp_path: Path, script: str, *args: str) -> tuple[str, dict]:
    """Run `python -m benchmarks.<name>` with one thread and one round; returns stdout and its
    JSON."""
    require_shared()
    out = tmp_path / f"{script}.json"
    env = {**os.environ, "PYTHONPATH": str(ROOT), "OMP_NUM_THREADS": "1"}
    proc = subprocess.run(
        [sys.executable, "-m", f"benchmarks.{script}", "--threads", "1", "--rounds", "1",
         "--json", str(out), *args], capture_output=True, text=True, env=env, cwd=ROOT,
        timeout=600)
    assert proc.returncode == 0, proc.stdout[-2000:] + proc.stderr[-2000:]
    return proc.stdout, json.loads(out.read_text())


@pytest.mark.parametrize("front", ["stack", "conv2d"])
def test_training_contenders_have_equal_size(tmp_path, front):
    """A conv2d config races with stacked frames too, so the three stay the same size."""
    stdout, result = bench(tmp_path, "training", "--batches", "1", "--pool", "6",
                           "--peak-size", "256", "model=tiny", f"model.subsampling={front}")
    models = result["models"]
    expected = {"ours (asr.model)", "torch.nn.Transformer"} | (
        {"SpeechBrain TransformerASR"} if HAVE["speechbrain"] else set())
    assert set(models) == expected
    assert len({m["parameters"] for m in models.values()}) == 1
    # Initial losses differ by initialisation (torch.nn.Transformer's starts near 50); ours,
    # with its scaled embeddings, must start at a sane value.
    assert all(m["steps_per_s"] > 0 and 0 < m["mean_loss_per_round"][0] < 100
               for m in models.values())
    assert models["ours (asr.model)"]["mean_loss_per_round"][0] < 20
    assert "| ours (asr.model) |" in stdout
    # our step part by part: every part timed, adding up to the step; augmentation off here
    parts = result["parts_seconds_per_step"]
    assert {"data loading", "front end", "forward", "backward", "gradient clipping",
            "optimizer step"} <= set(parts) and all(v > 0 for v in parts.values())
    assert sum(parts.values()) == pytest.approx(result["step_seconds"])
    assert not result["augmentation"] and "augmentation" not in parts
    assert set(result["adam_seconds_per_step"]) == {"fused", "foreach", "per-parameter loop"}
    assert "1 thread(s)" in result["matmul_gflops"]
    assert all(v > 0 for v in result["matmul_gflops"].values())
    assert "| front end (features) |" in stdout and "| fused |" in stdout


def test_compiled_bench_takes_the_same_steps_on_static_shapes(tmp_path):
    """benchmarks.compiled at toy size, traced without Inductor's code generation: one batch
    per bucket at its static shape, both steps from the same weights to the same losses."""
    stdout, result = bench(tmp_path, "compiled", "--buckets", "2", "--batch-size", "3",
                           "--pool", "8", "--backend", "aot_eager", "model=tiny")
    shapes = result["shapes"]
    assert len(shapes) == 2 and [s[0] for s in shapes] == [3, 3]
    assert shapes[0][1] < shapes[1][1] and all(s[2] % 16 == 0 for s in shapes)
    eager, compiled = (result["models"][name]["losses"] for name in
                       ("eager", "compiled (encoder and decoder)"))
    assert len(eager) == len(compiled) == 2 and eager == pytest.approx(compiled, rel=1e-3)
    assert result["compiled_speedup"] > 0 and "compiled / eager: " in stdout


def test_launches_counts_every_contenders_ops_per_step(tmp_path):
    """The GPU race's host-bound proxy: s2t_s's depth at d_model 16 in CPU bf16 autocast.
    Ours runs one GEMM per linear layer: 92 with a bias (12 encoder layers x 4, 6 decoder
    layers x 7, the input projection and the CTC head), the attention projections packed."""
    stdout, result = bench(tmp_path, "launches", "--steps", "1")
    models = result["models"]
    assert "12+6 layers" in result["shape"] and "d_model 16" in result["shape"]
    ours = [m for name, m in models.items() if name.startswith("ours")]
    assert len(ours) == 2 and all(m["ops"]["addmm"] == 92 for m in ours)
    assert all(0 < m["kernels_per_step"] < m["ops_per_step"] and m["step_ms"] > 0
               for m in models.values())
    if HAVE["speechbrain"]:
        sb = models["SpeechBrain TransformerASR"]
        assert all(m["kernels_per_step"] < sb["kernels_per_step"] for m in ours)
        assert "| SpeechBrain TransformerASR |" in stdout


def test_efficiency_shares_add_up(tmp_path):
    _, result = bench(tmp_path, "efficiency", "--batches", "1", "--pool", "6",
                      "--peak-size", "256", "model=tiny")
    assert result["useful_flops_per_step"] <= result["flops_per_step"]
    assert 0 <= result["padding_flop_share"] < 1
    assert 0 < result["efficiency"] and result["peak_flops_per_s"] > 0
    phases = result["phases_seconds_per_round"]
    assert all(v >= 0 for v in phases.values()) and phases["backward"] > 0


def test_bucketing_never_pads_more_than_random_batches(tmp_path):
    _, result = bench(tmp_path, "data", "--pool", "3", "model=tiny")
    batchings = result["batchings"]
    buckets = batchings["duration buckets (DurationBatchSampler)"]
    assert buckets["padding_waste"] <= batchings["random batches"]["padding_waste"]
    assert all(b["audio_s_per_s"] > 0 for b in batchings.values())


def test_front_end_equals_librosa(tmp_path):
    _, result = bench(tmp_path, "features", "--clips", "1")
    assert result["fbank"]["clips"] == 3
    assert result["fbank"]["max_abs_difference"] < 1e-2
    assert result["mfcc"]["max_abs_difference"] < 1e-2


def test_augmentation_costs_every_part_and_the_configs_draws(tmp_path):
    """Every part timed; both room convolutions agree; the config's cost is its draws' sum."""
    config = tmp_path / "config.yaml"
    config.write_text("data:\n  augment:\n    noise: {enabled: true, prob: 0.5}\n"
                      "    telephone: {enabled: true, prob: 0.25, codecs: [ULAW]}\n")
    _, result = bench(tmp_path, "augment", "--clips", "1", "--rooms", "1", "--config", str(config))
    costs = result["ms_per_audio_second"]
    assert len(costs) == 10 and all(ms > 0 for ms in costs.values())
    assert result["convolution_max_abs_difference"] < 1e-4
    expected = 0.5 * costs["noise at 10 dB"] + 0.25 * costs["telephone (ULAW)"]
    assert result["drawn"]["ms_per_audio_second"] == pytest.approx(expected)


@pytest.mark.subprocess
def test_inference_split_and_scores(tmp_path, overfit_model):
    from asr.data import read_manifest
    from benchmarks.harness import speaker_of

    require_shared()
    model_dir, _, _ = overfit_model
    out = tmp_path / "manifests"
    subprocess.run([sys.executable, "-m", "benchmarks.inference", "prepare",
                    "--out", str(out)], check=True, capture_output=True, cwd=ROOT,
                   env={**os.environ, "PYTHONPATH": str(ROOT)})
    speakers = {name: {speaker_of(Path(u.audio_filepath))
                       for u in read_manifest(out / f"{name}.jsonl")}
                for name in ("train", "dev", "test_digits", "test_words")}
    for test in ("test_digits", "test_words"):
        assert speakers[test] and not speakers[test] & (speakers["train"] | speakers["dev"])
    # WUW's free sentences: the recipe's held-out speakers, scored without task-word rows
    wuw_sentences = out / "wuw" / "test_sentences.jsonl"
    assert len(wuw_sentences.read_text().splitlines()) == 155
    _, result = bench(tmp_path, "inference", "run", "--model", f"tiny={model_dir}",
                      "--task", f"words={out / 'test_words.jsonl'}",
                      "--task", f"wuw={wuw_sentences}", "--limit", "1")
    pocketsphinx = {"pocketsphinx (default LM)"} if HAVE["pocketsphinx"] else set()
    expected = {"words": {"tiny greedy", "tiny beam 5", "tiny beam 5, task words"} | pocketsphinx
                | ({"pocketsphinx (JSGF grammar)"} if HAVE["pocketsphinx"] else set()),
                "wuw": {"tiny greedy", "tiny beam 5"} | pocketsphinx}
    for task, names in expected.items():
        systems = result["tasks"][task]["systems"]
        assert set(systems) == names
        for s in systems.values():  # one utterance: its WER is that of its one example
            (reference, heard), = s["examples"]
            assert s["utterances"] == 1 and s["rtf_total"] > 0
            assert s["wer"] == pytest.approx(jiwer.wer(reference, heard) if heard.strip()
                                             else 1.0)


@pytest.mark.subprocess
def test_missing_data_is_one_line(tmp_path):
    proc = subprocess.run([sys.executable, "-m", "benchmarks.inference", "--data",
                           str(tmp_path), "prepare", "--out", str(tmp_path / "m")],
                          capture_output=True, text=True, timeout=300, cwd=ROOT,
                          env={**os.environ, "PYTHONPATH": str(ROOT)})
    assert proc.returncode != 0
    assert proc.stderr.strip().splitlines() == [
        f"error: {tmp_path}: real speech not found (pass --data DIR)"]


def test_intents_bench_scores_every_search_and_condition(tmp_path):
    """benchmarks/intents.py on a corpus laid out as recipes.voice_commands.prepare writes it
    (people's commands, synthetic ones, other speech and noise), with an untrained model: each
    search scores each condition, and the demo's latency stream runs."""
    from helpers import COMMANDS, noise_clips, write_untrained_model

    require_shared()
    model = write_untrained_model(tmp_path)
    corpus = tmp_path / "corpus"
    corpus.mkdir()

    def row(path: Path, text: str, engine: str, kind: str, command: bool) -> str:
        slots = {"word": text} if command else {}
        return json.dumps({"audio_filepath": str(path), "text": text, "engine": engine,
                           "kind": kind, "intent": "word" if command else None, "slots": slots})

    said = [(path, word) for word in ("yes", "stop") for path in
            sorted((COMMANDS / word).glob("*.wav"))[:2]]
    others = [(sorted((COMMANDS / "_unknown_").glob(f"{w}_*.wav"))[0], w)
              for w in ("bed", "bird", "cat", "dog")]
    (corpus / "test_real.jsonl").write_text(
        "\n".join(row(p, w, "real", "word", True) for p, w in said) + "\n")
    (corpus / "test.jsonl").write_text(
        "\n".join(row(p, w, "espeak-ng", "sentence", True) for p, w in said) + "\n")
    (corpus / "test_other.jsonl").write_text("\n".join(
        [row(p, w, "real", "other", False) for p, w in others]
        + [row(p, "", "real", "noise", False) for p in noise_clips(0, 2)]) + "\n")
    stdout, result = bench(tmp_path, "intents", "--model", str(model), "--corpus",
                           str(corpus), "--limit", "2", "--snr", "6", "--latency-commands", "2",
                           "--min-confidence", "0")
    conditions = {"clean", "kitchen 6 dB", "cafe 6 dB"}
    assert set(result["searches"]) == {"grammar", "grammar at 0", "free"}
    for table in result["searches"].values():
        assert set(table["people"]) == set(table["synthetic voices"]) == conditions
        assert table["people"]["clean"]["commands"] == 2
        assert table["other speech"]["clean"]["non_commands"] == 4
        assert table["people"]["kitchen 6 dB"]["command_acceptance"] in (0.0, 0.5, 1.0)  # of 2
    assert result["searches"]["grammar at 0"]["min_confidence"] == 0
    assert result["latency"]["commands"] == 2 and "search grammar" in stdout


@pytest.mark.subprocess
def test_grammar_bench_times_both_searches(tmp_path):
    """benchmarks/grammar.py: the grammar's size, the search states it remembered and each
    search's RTF and acceptance, on people's words with an untrained model."""
    from helpers import COMMANDS, write_untrained_model

    require_shared()
    model = write_untrained_model(tmp_path)
    grammar = model / "grammar.yaml"
    clips = sorted((COMMANDS / "yes").glob("*.wav"))[:2]
    manifest = tmp_path / "commands.jsonl"
    manifest.write_text("".join(json.dumps({"audio_filepath": str(c), "intent": "word",
                                            "slots": {"word": "yes"}}) + "\n" for c in clips))
    proc = subprocess.run(
        [sys.executable, "-m", "benchmarks.grammar", "--threads", "1", "--rounds", "1",
         "--model", str(model), "--grammar", str(grammar), "--manifest", str(manifest)],
        capture_output=True, text=True, cwd=ROOT, timeout=600,
        env={**os.environ, "PYTHONPATH": str(ROOT), "OMP_NUM_THREADS": "1"})
    assert proc.returncode == 0, proc.stderr[-2000:]
    lines = proc.stdout.splitlines()
    assert lines[1].startswith("after 1 rounds: ") and "search states" in lines[1]
    assert [line.split()[0] for line in lines[-2:]] == ["grammar", "free"]
    assert all(" RTF " in line and "command acceptance" in line for line in lines[-2:])


def test_precision_bench_trains_both_on_the_same_batches(tmp_path):
    from helpers import write_untrained_model

    (tmp_path / "tiny").mkdir()
    model = write_untrained_model(tmp_path / "tiny")
    stdout, result = bench(tmp_path, "precision", "--model", str(model), "--pool", "6",
                           "--held-out", "2", "--blocks", "2", "--batches", "1")
    assert "| fp32 |" in stdout and "| bf16 |" in stdout and "bf16 instructions:" in stdout
    assert result["steps_per_block"] == 1 and set(result["block_loss"]) == {"fp32", "bf16"}
    for name in ("fp32", "bf16"):
        assert len(result["block_seconds"][name]) == len(result["block_loss"][name]) == 2
    seconds = result["block_seconds"]
    ratios = sorted(f / b for f, b in zip(seconds["fp32"], seconds["bf16"], strict=True))
    assert result["paired_speedup"] == pytest.approx(sum(ratios) / 2)
    # the same weights and batches: the first block's losses differ by bf16 rounding only
    fp32, bf16 = (result["block_loss"][name][0] for name in ("fp32", "bf16"))
    assert bf16 == pytest.approx(fp32, rel=0.05)


def test_streaming_bench_times_a_stream_against_offline(tmp_path):
    """benchmarks/streaming.py on one sentence and one word, the shipped model: both RTFs,
    the partials' interval within 0.5 s and the finals equal to offline decoding."""
    require_shared()
    out = tmp_path / "streaming.json"
    proc = subprocess.run(
        [sys.executable, "-m", "benchmarks.streaming", "--threads", "1", "--rounds", "1",
         "--sentences", "1", "--words", "1", "--json", str(out)],
        capture_output=True, text=True, cwd=ROOT, timeout=600,
        env={**os.environ, "PYTHONPATH": str(ROOT)})
    assert proc.returncode == 0, proc.stderr[-2000:]
    result = json.loads(out.read_text())
    assert result["files"] == 2 and set(result["rtf"]) == {"offline", "stream"}
    assert all(value > 0 for value in result["rtf"].values())
    assert result["finals_equal_offline"] == 2
    assert 0 < result["interval_max"] <= 0.5 and result["lag_max"] <= 0.5
    assert "| stream, 30 ms blocks |" in proc.stdout

def test_wakeword_bench_reads_every_keyword_and_its_curve(tmp_path):
    """Five clips and half a minute of background: a row per WUW keyword, rates in range,
    the peers' rows present or skipped with a note."""
    out, report = bench(tmp_path, "wakeword", "--hours", "0.01", "--limit", "5", "--espeak", "2",
                        "--no-synthetic")
    assert abs(report["hours"] - 0.01) < 1e-6 and report["split"] == "test"
    assert sum(row["clips"] for row in report["ours"].values()) == 5
    for row in report["ours"].values():
        assert 0 <= row["miss_at_target"] <= 1 and 0 <= row["miss_at_default"] <= 1
        assert row["fa_per_hour_at_default"] >= 0
    assert 0 < report["rtf"] < 10
    assert ("pocketsphinx" in report["peers"]) == HAVE["pocketsphinx"]
    assert "RTF" in out

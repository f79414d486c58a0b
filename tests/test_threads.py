"""The thread policy (asr/threads.py): one thread for one utterance, the configured count for
batches (at most the idle cores), an explicit count always; idle threads sleep."""

import os
import subprocess
import sys

import pytest
import torch

from asr import Transcriber
from asr.threads import decoding_threads, session_threads, torch_threads

pytestmark = pytest.mark.tier("slow")


@pytest.mark.parametrize("rows, configured, idle, fixed, expected", [
    (1, 2, 2, False, 1),    # one utterance: no barrier to stall
    (1, 8, 8, False, 1),
    (16, 2, 2, False, 2),   # a batch on an idle machine: the configured count
    (16, 8, 3, False, 3),   # at most the idle cores
    (16, 2, 1, False, 1),   # a busy machine: one
    (16, 4, 0, False, 1),   # never none
    (1, 3, 1, True, 3),     # asked for by name: always obeyed
    (16, 1, 8, True, 1),
])
def test_decoding_threads_follow_the_work(rows, configured, idle, fixed, expected):
    assert decoding_threads(rows, configured, idle, fixed) == expected


def test_onnx_sessions_take_one_thread_for_one_utterance_at_a_time():
    assert session_threads(1, None) == 1
    assert session_threads(16, None) == torch.get_num_threads()
    assert session_threads(1, 3) == 3


def test_torch_threads_are_put_back_after_the_block():
    before = torch.get_num_threads()
    with torch_threads(1):
        assert torch.get_num_threads() == 1
    assert torch.get_num_threads() == before
    with pytest.raises(RuntimeError), torch_threads(1):
        raise RuntimeError("a failed decode")
    assert torch.get_num_threads() == before


def test_the_transcriber_decodes_one_utterance_on_one_thread():
    chosen = Transcriber.from_pretrained(device="cpu")
    fixed = Transcriber.from_pretrained(device="cpu", threads=3)
    with chosen._threads(1):
        assert torch.get_num_threads() == 1
    with fixed._threads(1):
        assert torch.get_num_threads() == 3
    with fixed._threads(16):
        assert torch.get_num_threads() == 3


@pytest.mark.parametrize("threads", [0, -1, 1.5, True, "2", 1025])
def test_a_thread_count_out_of_range_is_refused(threads):
    with pytest.raises(ValueError, match=r"^threads must be None or a whole number in \[1, 1024\]"):
        Transcriber.from_pretrained(device="cpu", threads=threads)


@pytest.mark.parametrize("given, expected", [(None, "PASSIVE"), ("ACTIVE", "ACTIVE")])
def test_import_asr_makes_idle_openmp_threads_sleep_unless_told_otherwise(given, expected):
    env = {k: v for k, v in os.environ.items() if k != "OMP_WAIT_POLICY"}
    if given:
        env["OMP_WAIT_POLICY"] = given
    out = subprocess.run([sys.executable, "-c", "import asr, os; print(os.environ['OMP_WAIT_POLICY'])"],
                         env=env, capture_output=True, text=True, check=True).stdout
    assert out.strip() == expected

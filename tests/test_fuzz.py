"""Fuzzing the two readers of untrusted files: whatever the bytes, only their own error escapes.

The audio loader must answer arbitrary bytes and arbitrary (mostly nonsensical) WAV headers
with a tensor of finite samples or an AudioError; the manifest reader must answer arbitrary
lines with utterances or a ManifestError. Anything else (a struct.error, a MemoryError from a
header declaring gigabytes, an OverflowError) would be a traceback for the user.
(The corpus of bad inputs of every other kind is tests/robustness/.)
"""

import json
import struct

import pytest
import torch
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from asr.audio import AudioError, load_audio
from asr.data import ManifestError, read_manifest
from helpers import fsdd_file

pytestmark = [pytest.mark.tier("slow"), pytest.mark.data]

FUZZ = settings(max_examples=100, deadline=None, derandomize=True,
                suppress_health_check=[HealthCheck.function_scoped_fixture])


def check_load(path) -> None:
    try:
        wave = load_audio(path, 16000)
    except AudioError as err:
        assert str(err).startswith(f"{path}: ")
    else:
        assert wave.ndim == 1 and len(wave) > 0 and torch.isfinite(wave).all()


@FUZZ
@given(data=st.binary(max_size=4096), suffix=st.sampled_from([".wav", ".flac", ".WAV", ""]))
def test_arbitrary_bytes(tmp_path, data, suffix):
    path = tmp_path / f"fuzz{suffix}"
    path.write_bytes(data)
    check_load(path)


uint16, uint32 = st.integers(0, 2**16 - 1), st.integers(0, 2**32 - 1)
plausible = st.fixed_dictionaries({  # libsndfile accepts these, so the loader's checks run
    "tag": st.sampled_from([1, 3]), "channels": st.integers(1, 8),
    "bits": st.sampled_from([8, 16, 24, 32, 64]),
    "rate": st.one_of(st.sampled_from([1, 4000, 8000, 16001, 44100, 192000, 400000]), uint32)})
anything = st.fixed_dictionaries({"tag": uint16, "channels": uint16, "bits": uint16,
                                  "rate": uint32})


@FUZZ
@given(fields=st.one_of(plausible, anything), block=st.one_of(st.none(), uint16),
       byte_rate=st.one_of(st.none(), uint32), data_size=st.one_of(st.none(), uint32),
       payload=st.binary(max_size=2048), extra=st.binary(max_size=24))
def test_arbitrary_wav_headers(tmp_path, fields, block, byte_rate, data_size, payload, extra):
    """A RIFF/WAVE file whose fmt fields are anything; consistent values (None) preferred."""
    tag, channels, bits, rate = fields["tag"], fields["channels"], fields["bits"], fields["rate"]
    block = channels * bits // 8 % 2**16 if block is None else block
    byte_rate = rate * block % 2**32 if byte_rate is None else byte_rate
    data_size = len(payload) if data_size is None else data_size
    fmt = struct.pack("<HHIIHH", tag, channels, rate, byte_rate, block, bits) + extra
    body = (b"WAVE" + b"fmt " + struct.pack("<I", len(fmt)) + fmt
            + b"data" + struct.pack("<I", data_size) + payload)
    path = tmp_path / "header.wav"
    path.write_bytes(b"RIFF" + struct.pack("<I", len(body)) + body)
    check_load(path)


json_values = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats() | st.text(max_size=20),
    lambda children: st.lists(children, max_size=4) | st.dictionaries(st.text(max_size=8),
                                                                        children, max_size=4),
    max_leaves=10)
entries = st.fixed_dictionaries({}, optional={
    "audio_filepath": st.one_of(st.just(str(fsdd_file(1))), st.text(max_size=300), json_values),
    "text": st.one_of(st.text(max_size=30), json_values),
    "duration": st.one_of(st.floats(), st.integers(), st.integers(min_value=2**1024),
                          json_values)})
lines = st.one_of(entries.map(lambda e: json.dumps(e).encode()),
                  json_values.map(lambda v: json.dumps(v).encode()),
                  st.integers(1, 20000).map(lambda depth: b"[" * depth + b"]" * depth),
                  st.binary(max_size=200).filter(lambda b: b"\n" not in b))


@FUZZ
@given(manifest=st.lists(lines, max_size=6), on_error=st.sampled_from(["raise", "skip"]))
def test_arbitrary_manifests(tmp_path, manifest, on_error):
    path = tmp_path / "fuzz.jsonl"
    path.write_bytes(b"\n".join(manifest))
    skipped = []
    try:
        utterances = read_manifest(path, on_error, skipped.append)
    except ManifestError as err:
        assert str(err).startswith(f"{path}")
    else:
        assert all(u.duration > 0 and u.text.strip() for u in utterances)
        assert len(utterances) + len(skipped) <= len(manifest)

"""The synthesis cache (recipes/common/synthesis.py, ASR_TTS_CACHE) checks what it serves: each
entry's SHA-256 is stored beside it, and an entry that is cut, emptied, altered, replaced by
other speech or a link is synthesised again (and replaced), never served; a cache that is a
file or cannot be written is one error line."""

import os
import shutil

import numpy as np
import pytest

from recipes.common.synthesis import cache_path, cache_root, draw_parameters, synthesize
from recipes.common.voices import Voice

pytestmark = pytest.mark.tier("slow")

pytestmark = pytest.mark.skipif(shutil.which("espeak-ng") is None, reason="needs espeak-ng")
VOICE = Voice("espeak-ng", "m3", "en-us")


def said(text: str, seed: int = 0) -> tuple[np.ndarray, bool]:
    wave, _, cached = synthesize(VOICE, text, np.random.default_rng(seed))
    return wave, cached


def entry(text: str, seed: int = 0):
    return cache_path(VOICE, text, draw_parameters(VOICE, np.random.default_rng(seed)))


@pytest.mark.parametrize("spoil", ["truncated", "empty", "altered", "other speech", "a link",
                                   "digest altered"])
def test_a_spoilt_entry_is_synthesised_again_and_replaced(tmp_path, monkeypatch, spoil):
    monkeypatch.setenv("ASR_TTS_CACHE", str(tmp_path / "cache"))
    yes, cached = said("yes")
    assert not cached and said("yes")[1]  # served from the cache the second time
    path, other = entry("yes"), tmp_path / "other.flac"
    said("delete all my files")
    shutil.copyfile(entry("delete all my files"), other)
    data = path.read_bytes()
    if spoil == "truncated":
        path.write_bytes(data[:len(data) // 2])
    elif spoil == "empty":
        path.write_bytes(b"")
    elif spoil == "altered":
        path.write_bytes(data[:100] + bytes([data[100] ^ 1]) + data[101:])
    elif spoil == "other speech":
        shutil.copyfile(other, path)
    elif spoil == "a link":
        path.unlink()
        path.symlink_to(other)
    else:
        path.with_name(path.name + ".sha256").write_text("0" * 64 + "\n")
    wave, cached = said("yes")
    assert not cached and np.array_equal(wave, yes)
    assert not path.is_symlink() and path.read_bytes() == data
    assert said("yes")[1] and other.exists()


def test_a_cache_that_is_a_file_or_unwritable_is_one_error(tmp_path, monkeypatch):
    (tmp_path / "file").write_text("x")
    monkeypatch.setenv("ASR_TTS_CACHE", str(tmp_path / "file"))
    with pytest.raises(RuntimeError, match=f"^ASR_TTS_CACHE={tmp_path / 'file'}: "
                                           f"{tmp_path / 'file'} is not a folder; point it at one$"):
        said("yes")
    locked = tmp_path / "locked"
    locked.mkdir(mode=0o500)
    monkeypatch.setenv("ASR_TTS_CACHE", str(locked / "tts"))
    if os.access(locked, os.W_OK):  # root writes anywhere
        assert cache_root() == locked / "tts"
        return
    with pytest.raises(RuntimeError, match=f"cannot write in {locked}"):
        said("yes")

"""The endpointer on real speech: utterance times, block-size independence, silence."""

import numpy as np
import pytest
import soundfile as sf

from asr.vad import Endpointer, VADConfig, split_utterances
from conftest import COMMANDS, require_shared

RATE = 16000


def joined_words(pause: float = 1.2) -> tuple[np.ndarray, list[float]]:
    """Three real one-second recordings of "yes" between pauses; the clips' start times."""
    require_shared()
    parts, starts, t = [], [], 0.0
    for path in sorted((COMMANDS / "yes").glob("*.wav"))[:3]:
        clip, rate = sf.read(path, dtype="float32")
        assert rate == RATE
        parts += [np.zeros(int(pause * RATE), np.float32), clip]
        starts.append(t + pause)
        t += pause + len(clip) / RATE
    parts.append(np.zeros(RATE, np.float32))
    return np.concatenate(parts), starts


def test_finds_each_word_inside_its_clip():
    wave, starts = joined_words()
    found = list(split_utterances([wave], RATE))
    assert len(found) == 3
    for utt, start in zip(found, starts, strict=True):
        # Speech lies within the one-second clip, give or take the padding kept around it
        # and WebRTC's own hangover (it calls a few frames after speech voiced).
        assert start - 0.25 <= utt.start < utt.end <= start + 1.4
        assert utt.samples.size == round((utt.end - utt.start) * RATE)


def test_block_size_does_not_matter():
    wave, _ = joined_words()
    whole = list(split_utterances([wave], RATE))
    pieces = list(split_utterances(np.array_split(wave, 137), RATE))
    assert [(u.start, u.end) for u in whole] == [(u.start, u.end) for u in pieces]
    assert all(np.array_equal(a.samples, b.samples) for a, b in zip(whole, pieces, strict=True))


def test_silence_has_no_utterances():
    assert list(split_utterances([np.zeros(10 * RATE, np.float32)], RATE)) == []


def test_endless_speech_is_cut_at_the_limit():
    wave, _ = joined_words(pause=0.0)  # three words back to back, ~3 s of speech
    endpointer = Endpointer(RATE, VADConfig(max_utterance_s=1.0))
    found = endpointer.feed(wave) + endpointer.flush()
    assert len(found) >= 2
    assert all(u.end - u.start <= 1.0 + 1e-6 for u in found)


def test_rejects_rates_webrtc_cannot_take():
    with pytest.raises(ValueError, match="VAD needs a sample rate"):
        Endpointer(22050)

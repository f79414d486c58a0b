"""The endpointer on real speech: utterance times, block-size independence, silence."""

import numpy as np
import pytest
import soundfile as sf

from asr.vad import Endpointer, VADConfig, split_utterances
from helpers import COMMANDS, require_shared

pytestmark = [pytest.mark.tier("fast"), pytest.mark.data]

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


def coloured(exponent: float, level: float, seed: int = 0, seconds: float = 10.0) -> np.ndarray:
    """Noise whose power falls as 1 / f**exponent (0 white, 1 pink, 2 brown), peak `level`."""
    n = int(seconds * RATE)
    spectrum = np.fft.rfft(np.random.default_rng(seed).standard_normal(n))
    freqs = np.fft.rfftfreq(n)
    freqs[0] = freqs[1]
    wave = np.fft.irfft(spectrum / freqs ** (exponent / 2), n)
    return (level * wave / np.abs(wave).max()).astype(np.float32)


def random_walk(level: float, seed: int = 0) -> np.ndarray:
    walk = np.cumsum(np.random.default_rng(seed).standard_normal(10 * RATE))
    walk -= walk.mean()
    return (level * walk / np.abs(walk).max()).astype(np.float32)


NOISES = {f"{name} at {level}": make(level) for level in (0.05, 0.3, 0.9) for name, make in [
    ("white", lambda level: coloured(0, level)), ("pink", lambda level: coloured(1, level)),
    ("brown", lambda level: coloured(2, level)), ("random walk", random_walk),
    ("mains hum", lambda level: (level * np.sin(2 * np.pi * 50 * np.arange(10 * RATE) / RATE)
                                 ).astype(np.float32))]}


@pytest.mark.parametrize("name", [n for n in NOISES if n.startswith("white")])
def test_white_noise_is_no_speech_to_the_endpointer(name):
    """WebRTC's VAD calls loud white noise speech; no frame of it is peaked like a vowel."""
    assert list(split_utterances([NOISES[name]], RATE)) == []


def test_noise_of_every_colour_transcribes_to_nothing(tmp_path):
    """The default model, through the endpointer and the no-speech guard: nothing is said."""
    from asr.transcriber import Transcriber

    transcriber = Transcriber.from_pretrained(device="cpu")
    for name, wave in NOISES.items():
        path = tmp_path / f"{name}.wav"
        sf.write(path, wave, RATE)
        assert transcriber.transcribe(path).text == "", name


def test_speech_in_white_noise_is_still_speech():
    """Real words at 5 dB SNR in white noise: each is still found, where the endpointer
    without the flatness test finds it."""
    wave, starts = joined_words()
    noise = np.random.default_rng(1).standard_normal(len(wave)).astype(np.float32)
    speech = wave[np.abs(wave) > 0].astype(np.float64)
    noise *= np.sqrt(np.mean(speech ** 2) / 10 ** 0.5 / np.mean(noise.astype(np.float64) ** 2))
    found = [(u.start, u.end) for u in split_utterances([wave + noise], RATE)]
    unfiltered = split_utterances([wave + noise], RATE, VADConfig(max_flatness=1.0))
    assert found == [(u.start, u.end) for u in unfiltered]
    assert len(found) == 3 and all(s <= a < b <= s + 1.4 for s, (a, b)
                                   in zip(starts, found, strict=True))

"""Kokoro-82M's voices (recipes/common/kokoro.py) and the cache of synthesised speech that every
engine goes through (recipes/common/synthesis.py). Kokoro's tests need tools/setup_kokoro.sh."""

from pathlib import Path

import numpy as np
import pytest
import soundfile as sf

from asr.grammar import Sentence
from recipes.common import kokoro, synthesis
from recipes.common.voices import (
    HELD_OUT,
    KOKORO_MIX_WEIGHT,
    Voice,
    choose_voice,
    discover_voices,
    split_voices,
)

pytestmark = pytest.mark.tier("slow")

needs_kokoro = pytest.mark.skipif(not kokoro.available(), reason=kokoro.NOT_SET_UP)


def rms(wave: np.ndarray) -> float:
    return float(np.sqrt(np.mean(wave.astype(np.float64) ** 2)))


@needs_kokoro
def test_speaks_a_command() -> None:
    wave, rate = kokoro.speak("turn on the lights", "af_heart")
    assert (rate, wave.dtype, wave.ndim) == (24000, np.float32, 1)
    assert 0.5 < wave.size / rate < 5
    assert rms(wave) > 0.01 and np.abs(wave).max() <= 1


@needs_kokoro
def test_english_voices_and_held_out_ones() -> None:
    names = kokoro.english_voices()
    assert len(names) == 28 and names == sorted(names)
    assert {name[:3] for name in names} == {"af_", "am_", "bf_", "bm_"}
    held_out = {voice: split for (engine, voice), split in HELD_OUT.items() if engine == "kokoro"}
    assert set(held_out) <= set(names)
    splits = split_voices(discover_voices(kokoro=True))
    counts = {split: sum(v.engine == "kokoro" for v in vs) for split, vs in splits.items()}
    assert counts == {"train": 23, "dev": 2, "test": 3}
    assert not any(voice.engine == "kokoro" for voice in discover_voices())  # only when asked for


@needs_kokoro
def test_a_mix_is_a_speaker_in_between() -> None:
    heart, adam = kokoro.style("af_heart"), kokoro.style("am_adam")
    mix = kokoro.style("af_heart*0.6+am_adam*0.4")
    assert mix.shape == (510, 256) and np.allclose(mix, 0.6 * heart + 0.4 * adam, atol=1e-6)
    assert np.allclose(kokoro.style("af_heart*3 + am_adam*2"), mix, atol=1e-6)  # weights are normalised
    text = "turn on the lights"
    mixed = kokoro.speak(text, "af_heart*0.6+am_adam*0.4")[0]
    for pure in ("af_heart", "am_adam"):
        wave = kokoro.speak(text, pure)[0]
        assert wave.shape != mixed.shape or not np.allclose(wave, mixed, atol=1e-3), pure


def test_training_mixes_kokoro_voices_of_one_accent() -> None:
    names = ["af_heart", "af_bella", "am_adam", "bf_emma", "bm_george", "bm_daniel"]
    voices = [Voice("kokoro", name) for name in names] + [Voice("flite", "awb")]
    rng = np.random.default_rng(0)
    drawn = [choose_voice(voices, "train", rng) for _ in range(400)]
    mixes = [voice.variant for voice in drawn if "+" in voice.variant]
    kokoro_draws = sum(voice.engine == "kokoro" for voice in drawn)
    assert 0.35 < len(mixes) / kokoro_draws < 0.65
    for mix in mixes:
        (first, w1), (second, w2) = (part.split("*") for part in mix.split("+"))
        assert first != second and first[0] == second[0] and {first, second} <= set(names)
        assert KOKORO_MIX_WEIGHT[0] <= float(w1) <= KOKORO_MIX_WEIGHT[1]
        assert float(w1) + float(w2) == pytest.approx(1.0)
    assert len(set(mixes)) > 50  # speakers in between, not a handful
    held_out = [Voice("kokoro", name) for name in ("af_sky", "am_michael", "bf_isabella")]
    assert all(choose_voice(held_out, "test", rng) in held_out for _ in range(50))


@needs_kokoro
def test_a_drawn_mix_speaks() -> None:
    rng = np.random.default_rng(3)
    voices = [Voice("kokoro", name) for name in ("af_heart", "af_bella")]
    mix = next(v for v in iter(lambda: choose_voice(voices, "train", rng), None) if "+" in v.variant)
    wave, rate = kokoro.speak("turn on the lights", mix.name)
    assert rate == 24000 and 0.5 < wave.size / rate < 5 and rms(wave) > 0.01


@needs_kokoro
def test_bad_voice_is_a_clear_error() -> None:
    with pytest.raises(ValueError, match=r"unknown Kokoro voice 'af_nobody': one of af_alloy, .*bm_lewis"):
        kokoro.speak("hello", "af_nobody")
    for spec in ("", "af_heart*0", "af_heart*-1", "af_heart+", "af_heart*x"):
        with pytest.raises(ValueError, match=r"bad Kokoro voice .* positive weights"):
            kokoro.style(spec)


def test_not_set_up_is_one_clear_error(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                       capsys: pytest.CaptureFixture) -> None:
    monkeypatch.setenv("ASR_KOKORO_DIR", str(tmp_path))
    assert not kokoro.available()
    with pytest.raises(RuntimeError, match=r"^Kokoro is not set up: run bash tools/setup_kokoro.sh$"):
        kokoro.speak("hello", "af_heart")
    with pytest.raises(RuntimeError, match="setup_kokoro.sh"):
        kokoro.english_voices()
    assert not any(voice.engine == "kokoro" for voice in discover_voices(kokoro=True))
    assert "Kokoro is not set up" in capsys.readouterr().out


@needs_kokoro
def test_a_long_text_is_cut_at_pauses() -> None:
    ids = kokoro.tokens(" ".join(["Lights on in the kitchen, then the hall, and the garden."] * 20))
    pieces = kokoro.chunks(ids)
    assert len(ids) > kokoro.MAX_TOKENS and len(pieces) > 1
    assert all(0 < len(piece) <= kokoro.MAX_TOKENS for piece in pieces)
    assert all(piece[-1] in {kokoro.vocab()[","], kokoro.vocab()["."]} for piece in pieces[:-1])
    space = kokoro.vocab()[" "]
    assert [t for piece in pieces for t in piece if t != space] == [t for t in ids if t != space]


@needs_kokoro
def test_synthesis_is_cached(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """The second synthesis of a job comes from the cache: nothing is spoken again, and the corpus
    (records and audio) is the same, in one process and in a pool."""
    monkeypatch.setenv("ASR_TTS_CACHE", str(tmp_path / "cache"))
    voices = [Voice("kokoro", "bf_emma"), Voice("espeak-ng", "m3", "en-us")]

    def corpus(out: Path, processes: int) -> tuple[list[dict], dict[str, int]]:
        (out / "wavs" / "train").mkdir(parents=True)
        jobs = [synthesis.Job("train", index, Sentence("set a timer for ten minutes", "timer"), voice, 7,
                              16000, str(out)) for index, voice in enumerate(voices)]
        before = synthesis.STATS.copy()
        records = synthesis.synthesize_all(jobs, processes)
        counts = synthesis.STATS - before
        return records, {key: counts[key] for key in ("synthesised", "cached")}

    first, counts = corpus(tmp_path / "a", 1)
    assert counts == {"synthesised": 2, "cached": 0}
    assert len(list((tmp_path / "cache").glob("*/*.flac"))) == 2
    again, counts = corpus(tmp_path / "b", 2)
    assert counts == {"synthesised": 0, "cached": 2}
    assert first == again and "cached" not in first[0]
    for record in first:
        assert (tmp_path / "a" / record["audio_filepath"]).read_bytes() == \
            (tmp_path / "b" / record["audio_filepath"]).read_bytes()
    assert [record["engine"] for record in first] == ["kokoro", "espeak-ng"]

    rng = np.random.default_rng(3)
    wave, rate, cached = synthesis.synthesize(voices[0], "open the door", rng)
    follows = rng.random()
    rng = np.random.default_rng(3)
    wave_again, _, cached_again = synthesis.synthesize(voices[0], "open the door", rng)
    assert (cached, cached_again, rate) == (False, True, 24000)
    assert np.array_equal(wave, wave_again) and rng.random() == follows  # the same draws, hit or miss
    assert {sf.info(str(path)).subtype for path in (tmp_path / "cache").glob("*/*.flac")} == {"PCM_16"}

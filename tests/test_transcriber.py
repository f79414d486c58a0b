"""The Python API on real speech: long files cut by the VAD with times, silence and noise
give no words, arrays and lists, the streamed resampler."""

import warnings

import numpy as np
import pytest
import soundfile as sf
import soxr
import torch

from asr import Segment, Transcriber, Transcript
from asr.audio import AudioError, load_audio
from asr.stream import stream_file
from helpers import noise_clips

pytestmark = [pytest.mark.tier("fast"), pytest.mark.data]

RATE = 16000


def long_recording(entries, path, rate: int = 22050, pause: float = 1.3, noise: float = 1e-4,
                   ) -> list[tuple[float, float]]:
    """Real utterances joined by pauses of faint noise (-80 dBFS), written at `rate` (so the
    stream is resampled); each clip's span in seconds."""
    rng = np.random.default_rng(0)
    parts, spans, t = [], [], 0.0
    for audio, _ in entries:
        clip = load_audio(audio, rate).numpy()
        gap = (rng.standard_normal(int(pause * rate)) * noise).astype(np.float32)
        parts += [gap, clip]
        spans.append((t + pause, t + pause + len(clip) / rate))
        t += pause + len(clip) / rate
    parts.append(np.zeros(int(pause * rate), np.float32))
    sf.write(path, np.concatenate(parts), rate)
    return spans


def test_long_file_is_cut_into_timed_segments(overfit_model, tmp_path):
    """Each clip becomes one segment with its text. The digit recordings are trimmed to the
    speech, so their segments start and end within 0.3 s of the joins; the one-second
    command clips hold silence around the word, so theirs lie within the clip, give or take
    0.3 s."""
    model_dir, entries, _ = overfit_model
    path = tmp_path / "long.wav"
    spans = long_recording(entries, path)
    transcriber = Transcriber.from_pretrained(model_dir, device="cpu", batch_size=3, beam_size=1)
    result = transcriber.transcribe(path)
    assert isinstance(result, Transcript)
    assert [s.text for s in result.segments] == [text for _, text in entries]
    assert result.text == " ".join(text for _, text in entries) == str(result)
    for segment, (audio, _), (start, end) in zip(result.segments, entries, spans, strict=True):
        assert start - 0.3 <= segment.start < segment.end <= end + 0.3
        if audio.parent.name == "recordings":  # FSDD
            assert abs(segment.start - start) <= 0.3 and abs(segment.end - end) <= 0.3


def noise_recording(seconds: int = 10) -> np.ndarray:
    """Real background noise, `seconds` long: one-second clips the model never heard."""
    parts = [sf.read(p, dtype="float32")[0] for p in noise_clips(0, seconds)]
    return np.concatenate(parts)[: seconds * RATE]


@pytest.mark.parametrize("kind", ["silence", "noise"])
def test_silence_and_noise_give_no_words(overfit_model, kind):
    model_dir, _, _ = overfit_model
    audio = np.zeros(10 * RATE, np.float32) if kind == "silence" else noise_recording()
    transcriber = Transcriber.from_pretrained(model_dir, device="cpu")
    for beam in (1, 5):
        transcriber.options.beam_size = beam
        assert transcriber.transcribe(audio, sample_rate=RATE) == Transcript("", [])


def test_lists_and_arrays_decode_like_files(overfit_model):
    model_dir, entries, _ = overfit_model
    transcriber = Transcriber.from_pretrained(model_dir, device="cpu", vad=None)
    files = [path for path, _ in entries]
    results = transcriber.transcribe(files)
    assert [r.text for r in results] == [text for _, text in entries]
    clip, rate = sf.read(files[0], dtype="float32")
    alone = transcriber.transcribe(torch.from_numpy(clip), sample_rate=rate)
    assert alone.text == entries[0][1]
    [segment] = alone.segments
    assert isinstance(segment, Segment) and segment.words is None
    assert (segment.start, segment.end, segment.text) == (0.0, round(len(clip) / rate, 3),
                                                          entries[0][1])


def test_streamed_resampling_matches_resampling_the_whole_file(tmp_path):
    """Blocks resampled one after another join without seams."""
    wave = noise_recording(3)
    path = tmp_path / "noise.wav"
    sf.write(path, wave, RATE)
    streamed = np.concatenate(list(stream_file(path, 8000, block_seconds=0.37)))
    whole = soxr.resample(wave, RATE, 8000)
    assert streamed.shape == whole.shape
    assert np.allclose(streamed, whole, atol=1e-4)


def test_unreadable_input_is_one_clear_error(overfit_model, tmp_path):
    model_dir, _, _ = overfit_model
    bad = tmp_path / "notes.wav"
    bad.write_text("not audio at all")
    transcriber = Transcriber.from_pretrained(model_dir, device="cpu")
    with pytest.raises(AudioError, match=f"^{bad}: not readable as audio"):
        transcriber.transcribe(bad)
    with pytest.raises(AudioError, match="contains NaN"):
        transcriber.transcribe(np.full(RATE, np.nan, np.float32))


def test_bad_arguments_and_the_long_audio_cap(overfit_model):
    """Every way in checks its arguments: a rate of 0 was taken as the model's own rate, and a
    whole input without the VAD (or a waveform handed to transcribe_waves) had no length cap."""
    model_dir, _, _ = overfit_model
    with pytest.raises(ValueError, match=r"^batch_size must be a whole number in \[1, 4096\], "
                                         "got 0"):
        Transcriber.from_pretrained(model_dir, device="cpu", batch_size=0)
    with pytest.raises(ValueError, match="^device must be auto, cpu, cuda or cuda:N, got 'meta'"):
        Transcriber.from_pretrained(model_dir, device="meta")
    with pytest.raises(ValueError, match=r"^decode.beam_size must be in \[1, 64\], got 0"):
        Transcriber.from_pretrained(model_dir, device="cpu", beam_size=0)
    with pytest.raises(ValueError, match="^decode: unknown key.s. colour"):
        Transcriber.from_pretrained(model_dir, device="cpu", colour="red")
    transcriber = Transcriber.from_pretrained(model_dir, device="cpu", vad=None)
    with pytest.raises(AudioError, match=r"^<array>: sample rate 0 Hz is outside"):
        transcriber.transcribe(np.zeros(RATE, np.float32), sample_rate=0)
    too_long = np.zeros(301 * RATE, np.float32)
    with pytest.raises(AudioError, match="^<array>: too long: 301.0 s, over the 300 s limit"):
        transcriber.transcribe(too_long)
    with pytest.raises(AudioError, match="^<input 0>: too long: 301.0 s, over the 300 s limit"):
        transcriber.transcribe_waves([torch.from_numpy(too_long)])
    with pytest.raises(ValueError, match="^on_error must be 'raise' or 'return'"):
        transcriber.transcribe([], on_error="skip")


def test_one_bad_input_does_not_lose_the_others(overfit_model, tmp_path):
    model_dir, entries, _ = overfit_model
    late_nan = tmp_path / "late_nan.wav"  # fine for its first 2^20 samples, then NaN
    samples = np.zeros(70 * RATE, np.float32)
    samples[(1 << 20) + 5] = np.nan
    sf.write(late_nan, samples, RATE, subtype="FLOAT")
    transcriber = Transcriber.from_pretrained(model_dir, device="cpu")
    inputs = [entries[0][0], late_nan, entries[5][0]]
    first, failed, last = transcriber.transcribe(inputs, on_error="return")
    assert (first.text, last.text) == (entries[0][1], entries[5][1])
    assert isinstance(failed, AudioError) and str(failed) == f"{late_nan}: contains NaN or infinite samples"
    with pytest.raises(AudioError, match="contains NaN"):
        transcriber.transcribe(inputs)


def test_arguments_of_the_wrong_type_are_refused_at_the_door(overfit_model, tmp_path):
    """vad="yes" was accepted and failed at the first input; a flag such as "no" read as true."""
    model_dir, _, _ = overfit_model
    for arguments, problem in [
            ({"vad": "yes"}, r"vad must be a VADConfig \(asr.vad\) or None \(each input "
                             r"decoded whole\), got 'yes'"),
            ({"vad": {"aggressiveness": 3}}, "vad must be a VADConfig"),
            ({"batch_size": 2.0}, r"batch_size must be a whole number in \[1, 4096\], got 2.0"),
            ({"backend": ["onnx"]}, r"backend must be torch or onnx, got \['onnx'\]")]:
        with pytest.raises(ValueError, match=f"^{problem}"):
            Transcriber.from_pretrained(tmp_path / "not loaded", device="cpu", **arguments)
    transcriber = Transcriber.from_pretrained(model_dir, device="cpu", vad=None)
    with pytest.raises(ValueError, match="^word_timestamps must be True or False, got 'no'"):
        transcriber.transcribe(np.zeros(RATE, np.float32), word_timestamps="no")
    with pytest.raises(ValueError, match="^options must be a DecodingOptions or None"):
        Transcriber(transcriber.model, transcriber.tokenizer, options={"beam_size": 2})


def test_tensors_and_arrays_of_any_make_are_read_for_their_samples(overfit_model):
    """A tensor that requires grad crashed transcription (numpy() of a graph's tensor); a
    reversed view and big-endian samples were refused as "not an array"."""
    model_dir, entries, _ = overfit_model
    transcriber = Transcriber.from_pretrained(model_dir, device="cpu", vad=None)
    clip, _ = sf.read(entries[0][0], dtype="float32")
    expected = transcriber.transcribe(clip).text
    grad = torch.from_numpy(clip).requires_grad_()
    for samples in (grad, grad * 1.0, clip[::-1][::-1], clip.astype(">f4"),
                    np.stack([clip, clip])[:, ::1]):
        assert transcriber.transcribe(samples).text == expected
    assert transcriber.transcribe_waves([grad])[0] == expected
    for tensor, kind in ((torch.empty(RATE, device="meta"), "meta"),
                         (torch.zeros(RATE).to_sparse(), "sparse_coo")):
        with pytest.raises(AudioError, match=f"^<array>: not an array of samples \\(a {kind} tensor"):
            transcriber.transcribe(tensor)


def test_samples_far_outside_full_scale_are_scaled_or_refused(overfit_model, tmp_path):
    """int16 PCM values passed as floats transcribed to garbage or "" without a word: an
    array of them is read as the PCM it is, others far outside [-1, 1] are scaled to a peak
    of 1, each with a warning; a float file is refused."""
    model_dir, entries, _ = overfit_model
    transcriber = Transcriber.from_pretrained(model_dir, device="cpu", vad=None)
    clip, rate = sf.read(entries[0][0], dtype="int16")
    pcm = clip.astype(np.float32)
    with pytest.warns(UserWarning, match=r"^<array>: samples reach \d+, far outside \[-1, 1\]; "
                                         r"taken as 16-bit PCM \(pass floats in \[-1, 1\]"):
        assert transcriber.transcribe(pcm, sample_rate=rate).text == entries[0][1]
    assert transcriber.transcribe(clip, sample_rate=rate).text == entries[0][1]
    with pytest.warns(UserWarning, match="; scaled to a peak of 1 "):
        transcriber.transcribe(pcm + 0.5, sample_rate=rate)
    hot = pcm / np.abs(pcm).max() * 1.9  # overs a float recording may have: taken as they are
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        transcriber.transcribe(hot, sample_rate=rate)
    path = tmp_path / "pcm_as_floats.wav"
    sf.write(path, pcm, rate, subtype="FLOAT")
    with pytest.raises(AudioError, match=f"^{path}: samples reach \\d+, far outside \\[-1, 1\\] "
                                         "\\(integer PCM stored as floats\\?\\); refused"):
        transcriber.transcribe(path)

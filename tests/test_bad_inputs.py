"""A corpus of broken and unusual inputs, generated at test time from real speech.

Each bad input gives exactly one clear error naming it; each unusual but valid one (8-bit,
24-bit, float, 6 channels, 4 kHz, 192 kHz, one sample) loads as the same mono signal.
"""

import json
import struct
import tracemalloc
from pathlib import Path

import numpy as np
import pytest
import soundfile as sf
import torch
import torchaudio.functional as AF

from asr.audio import MAX_SECONDS, AudioError, load_audio, stream_audio
from asr.data import ManifestError, read_manifest
from helpers import fsdd_file

pytestmark = [pytest.mark.tier("fast"), pytest.mark.data]

SPEECH, RATE = sf.read(str(fsdd_file(3)), dtype="float32")  # 3886 samples at 8 kHz
FRAMES = len(SPEECH)


def wav_header(frames: int, rate: int = 8000, channels: int = 1, bits: int = 16) -> bytes:
    """A canonical 44-byte PCM WAV header declaring `frames` frames."""
    block = channels * bits // 8
    return (b"RIFF" + struct.pack("<I", 36 + frames * block) + b"WAVE"
            + b"fmt " + struct.pack("<IHHIIHH", 16, 1, channels, rate, rate * block, block, bits)
            + b"data" + struct.pack("<I", frames * block))


def write(path: Path, samples: np.ndarray, rate: int = RATE, **kwargs) -> Path:
    sf.write(str(path), samples, rate, **kwargs)
    return path


def _missing(tmp: Path) -> Path:
    return tmp / "missing.wav"


def _empty(tmp: Path) -> Path:
    (tmp / "empty.wav").write_bytes(b"")
    return tmp / "empty.wav"


def _zero_samples(tmp: Path) -> Path:
    return write(tmp / "zero.wav", np.zeros(0, dtype=np.float32))


def _header_only(tmp: Path) -> Path:
    (tmp / "header.wav").write_bytes(wav_header(FRAMES))
    return tmp / "header.wav"


def _truncated_wav(tmp: Path) -> Path:
    whole = write(tmp / "whole.wav", SPEECH, subtype="PCM_16").read_bytes()
    (tmp / "cut.wav").write_bytes(whole[:1044])
    return tmp / "cut.wav"


def _truncated_flac(cut: int):
    def make(tmp: Path) -> Path:
        whole = write(tmp / "whole.flac", SPEECH).read_bytes()
        (tmp / "cut.flac").write_bytes(whole[:cut] if cut > 0 else whole[:len(whole) // 2])
        return tmp / "cut.flac"
    return make


def _text_as_wav(tmp: Path) -> Path:
    (tmp / "notes.wav").write_text("hello, I am a shopping list, not audio\n")
    return tmp / "notes.wav"


def _random_bytes(name: str):
    def make(tmp: Path) -> Path:
        (tmp / name).write_bytes(np.random.default_rng(7).bytes(4096))
        return tmp / name
    return make


def _riff_garbage(tmp: Path) -> Path:
    (tmp / "riff.wav").write_bytes(b"RIFF\x10\x00\x00\x00WAVEfmt \xff\xff\xff\x7f" + b"\x01" * 32)
    return tmp / "riff.wav"


def _non_finite(value: float, channels: int = 1):
    def make(tmp: Path) -> Path:
        samples = np.tile(SPEECH[:, None], (1, channels))
        samples[100, channels - 1] = value
        return write(tmp / "float.wav", samples, subtype="FLOAT")
    return make


def _rate(rate: int):
    def make(tmp: Path) -> Path:
        return write(tmp / f"{rate}.wav", SPEECH, rate)
    return make


def _two_hours_silent(tmp: Path) -> Path:
    """A real 2-hour 8 kHz 16-bit WAV of silence (115 MB, sparse on disk: no space used)."""
    frames = 2 * 3600 * 8000
    path = tmp / "two_hours.wav"
    with path.open("wb") as f:
        f.write(wav_header(frames))
        f.truncate(44 + 2 * frames)
    return path


def _bits(bits: int):
    """Real speech in whole bytes per sample under a header that declares `bits` bits."""
    def make(tmp: Path) -> Path:
        width = -(-bits // 8)
        data = (SPEECH * 2 ** (bits - 2)).astype(f"<i{width}" if width > 1 else "i1").tobytes()
        header = bytearray(wav_header(FRAMES, bits=8 * width))
        header[34:36] = struct.pack("<H", bits)
        path = tmp / f"bits{bits}.wav"
        path.write_bytes(bytes(header) + data)
        return path
    return make


def _directory(tmp: Path) -> Path:
    (tmp / "folder.wav").mkdir()
    return tmp / "folder.wav"


def _nul_in_name(tmp: Path) -> Path:
    return Path(str(tmp / "bad\0name.wav"))


BAD_AUDIO = {
    "missing file": (_missing, "no such file"),
    "empty file": (_empty, "empty file"),
    "zero samples": (_zero_samples, "contains no samples"),
    "header-only WAV": (_header_only,
                        f"truncated: header declares {2 * FRAMES} bytes of audio, file holds 0"),
    "truncated WAV": (_truncated_wav,
                      f"truncated: header declares {2 * FRAMES} bytes of audio, file holds 1000"),
    "FLAC cut in its header": (_truncated_flac(60),
                               "not readable as audio (Error : unknown error in flac decoder.)"),
    "FLAC cut in half": (_truncated_flac(0),
                         "not readable as audio (Error : flac decoder lost sync.)"),
    "text file named .wav": (_text_as_wav, "not readable as audio (Format not recognised.)"),
    "random bytes .wav": (_random_bytes("noise.wav"),
                          "not readable as audio (Format not recognised.)"),
    "random bytes .flac": (_random_bytes("noise.flac"),
                           "not readable as audio (Format not recognised.)"),
    "RIFF/WAVE with a broken fmt chunk": (
        _riff_garbage, "not readable as audio (Error in WAV/W64/RF64 file. Malformed 'fmt ' chunk.)"),
    "NaN sample": (_non_finite(np.nan), "contains NaN or infinite samples"),
    "+inf sample": (_non_finite(np.inf), "contains NaN or infinite samples"),
    "-inf in the 2nd channel": (_non_finite(-np.inf, 2), "contains NaN or infinite samples"),
    "2-hour silent file": (_two_hours_silent,
                           f"too long: 7200.0 s, over the {MAX_SECONDS:g} s limit for one input "
                           "(cut it into utterances first, e.g. with asr.vad)"),
    "1 kHz": (_rate(1000), "sample rate 1000 Hz is outside the supported 4000-384000 Hz"),
    "16001 Hz": (_rate(16001), "sample rate 16001 Hz cannot be converted to 16000 Hz "
                               "efficiently; resample it to a standard rate (e.g. 16000 Hz)"),
    "directory": (_directory, "is a directory, not an audio file"),
    "7 bits per sample": (_bits(7), "declares 7 bits per sample; only 8, 16, 24 and 32-bit PCM "
                                    "are read (write it again as 16-bit PCM)"),
    "12 bits per sample": (_bits(12), "declares 12 bits per sample; only 8, 16, 24 and 32-bit "
                                      "PCM are read (write it again as 16-bit PCM)"),
    "NUL in the name": (_nul_in_name, "no such file"),
}


@pytest.mark.parametrize("case", BAD_AUDIO)
def test_bad_audio_gives_one_clear_error(tmp_path, case):
    make, problem = BAD_AUDIO[case]
    path = make(tmp_path)
    with pytest.raises(AudioError) as caught:
        load_audio(path, 16000)
    assert str(caught.value) == f"{path}: {problem}"


def test_a_stream_that_decodes_short_of_its_header_is_truncated(tmp_path):
    """MP3 half cut off: libsndfile keeps the header's frame count and decodes what is left."""
    whole = write(tmp_path / "whole.mp3", SPEECH, format="MP3").read_bytes()
    (tmp_path / "cut.mp3").write_bytes(whole[:len(whole) // 2])
    with pytest.raises(AudioError, match=rf"cut.mp3: truncated or corrupt: header declares {FRAMES} "
                                         r"frames, \d+ could be decoded$"):
        load_audio(tmp_path / "cut.mp3", 16000)


def test_an_mp3_with_corrupt_frames_is_refused(tmp_path):
    """Bytes overwritten mid-stream: the decoder resyncs past them and decodes less."""
    whole = bytearray(write(tmp_path / "whole.mp3", LONG_SPEECH, format="MP3").read_bytes())
    third = len(whole) // 3
    whole[third:third + 200] = np.random.default_rng(0).integers(0, 256, 200, np.uint8).tobytes()
    (tmp_path / "bad.mp3").write_bytes(whole)
    with pytest.raises(AudioError, match=r"bad.mp3: truncated or corrupt: header declares "
                                         rf"{len(LONG_SPEECH)} frames, \d+ could be decoded$"):
        load_audio(tmp_path / "bad.mp3", 16000)


LONG_SPEECH = np.tile(SPEECH, 4)  # 1.9 s: an Ogg stream of several pages


def ogg_pages(data: bytes) -> list[tuple[int, int]]:
    """(start, length) of each page of an Ogg file."""
    pages, at = [], 0
    while at < len(data):
        segments = data[at + 26]
        length = 27 + segments + sum(data[at + 27:at + 27 + segments])
        pages.append((at, length))
        at += length
    return pages


@pytest.fixture(params=["VORBIS", "OPUS"])
def ogg(request, tmp_path) -> bytes:
    return write(tmp_path / "whole.ogg", LONG_SPEECH, format="OGG",
                 subtype=request.param).read_bytes()


def test_an_ogg_file_whose_pages_chain_loads(tmp_path, ogg):
    (tmp_path / "good.ogg").write_bytes(ogg)
    assert len(load_audio(tmp_path / "good.ogg", 8000)) == len(LONG_SPEECH)


def test_ogg_corruption_and_truncation_are_refused(tmp_path, ogg):
    """libsndfile skips a page whose checksum fails, and reports the length of what it can
    decode: each of these decoded to less audio, or other audio, with no error."""
    pages = ogg_pages(ogg)
    assert len(pages) >= 4
    start, length = pages[-2]
    flipped = bytearray(ogg)
    flipped[start + length - 5] ^= 0xFF
    cases = {"flipped.ogg": (bytes(flipped), f"corrupt: the Ogg page at byte {start} fails its "
                                             "checksum"),
             "cut_in_page.ogg": (ogg[:start + length // 2],
                                 f"truncated: the Ogg page at byte {start} is cut off"),
             "cut_at_page.ogg": (ogg[:start], "truncated: the Ogg stream ends before its last page"),
             "page_dropped.ogg": (ogg[:start] + ogg[start + length:],
                                  f"corrupt: Ogg page {len(pages) - 2} is missing (byte {start} "
                                  f"holds page {len(pages) - 1})"),
             "junk_after.ogg": (ogg + b"\0" * 100, f"corrupt: no Ogg page at byte {len(ogg)}")}
    for name, (data, problem) in cases.items():
        (tmp_path / name).write_bytes(data)
        with pytest.raises(AudioError) as caught:
            load_audio(tmp_path / name, 16000)
        assert str(caught.value) == f"{tmp_path / name}: {problem}"


def test_two_hour_file_is_refused_from_its_header_and_can_be_streamed(tmp_path):
    """Neither refusing nor walking 2 hours of audio holds more than a block in memory."""
    path = _two_hours_silent(tmp_path)
    tracemalloc.start()
    try:
        with pytest.raises(AudioError, match="too long: 7200.0 s"):
            load_audio(path, 16000)
        refused_peak = tracemalloc.get_traced_memory()[1]
        blocks, rate = stream_audio(path)
        frames = silent = 0
        for block in blocks:
            frames, silent = frames + len(block), silent + int((block == 0).sum())
        streamed_peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    assert (rate, frames, silent) == (8000, 2 * 3600 * 8000, 2 * 3600 * 8000)
    assert refused_peak < 1e6  # the samples alone would take 230 MB as float32
    assert streamed_peak < 16e6


def reference(rate: int = 16000) -> torch.Tensor:
    return AF.resample(torch.from_numpy(SPEECH), RATE, rate)


@pytest.mark.parametrize("subtype,atol", [("PCM_U8", 0.02), ("PCM_16", 1e-4), ("PCM_24", 1e-4),
                                          ("PCM_32", 1e-4), ("FLOAT", 1e-6), ("DOUBLE", 1e-6)])
def test_bit_depths_are_valid_audio(tmp_path, subtype, atol):
    wave = load_audio(write(tmp_path / "depth.wav", SPEECH, subtype=subtype), 16000)
    assert wave.dtype == torch.float32 and wave.shape == (2 * FRAMES,)
    assert torch.allclose(wave, reference(), atol=atol)


def test_six_channels_are_mixed_to_mono(tmp_path):
    """5.1 audio with the voice in the centre channel: the average of the six."""
    channels = np.zeros((FRAMES, 6), dtype=np.float32)
    channels[:, 2] = SPEECH
    channels[:, 5] = 0.5 * SPEECH
    wave = load_audio(write(tmp_path / "surround.wav", channels, subtype="FLOAT"), 16000)
    assert torch.allclose(wave, reference() * 1.5 / 6, atol=1e-5)


@pytest.mark.parametrize("rate", [4000, 192000])
def test_extreme_but_supported_rates_are_resampled(tmp_path, rate):
    """4 kHz (telephone band and below) and 192 kHz (studio) both arrive at 16 kHz."""
    original = reference(rate)
    wave = load_audio(write(tmp_path / "rate.wav", original.numpy(), rate, subtype="FLOAT"), 16000)
    assert wave.shape == (round(len(original) * 16000 / rate),)
    expected = AF.resample(original, rate, 16000)
    assert torch.allclose(wave, expected, atol=1e-6)
    if rate > 16000:  # nothing was lost on the way: it is the 16 kHz signal again
        assert torch.allclose(wave, reference(), atol=0.01)


def test_one_sample_file_is_valid(tmp_path):
    wave = load_audio(write(tmp_path / "one.wav", SPEECH[1000:1001], subtype="FLOAT"), 16000)
    assert wave.shape == (2,) and torch.isfinite(wave).all()


# --- manifests: line 2 of a manifest whose line 1 is good -------------------------------------

GOOD = {"audio_filepath": str(fsdd_file(2)), "text": "two", "duration": 0.4}


def line(**changes) -> str:
    entry = {**GOOD, **changes}
    return json.dumps({k: v for k, v in entry.items() if v is not ...})


NO_WORDS = 'text has no words (use "" for audio without speech): '
BAD_LINES = {
    "no audio_filepath": (line(audio_filepath=...), "missing key(s) audio_filepath"),
    "no text": (line(text=...), "missing key(s) text"),
    "absent duration": (line(duration=...), "missing key(s) duration"),
    "empty object": ("{}", "missing key(s) audio_filepath, text, duration"),
    "cut-off JSON": ('{"audio_filepath": "a.wav"', "bad JSON (Expecting ',' delimiter)"),
    "unquoted key": ('{text: "two"}', "bad JSON (Expecting property name enclosed in double quotes)"),
    "not JSON at all": ("audio.wav two 0.4", "bad JSON (Expecting value)"),
    "a JSON list": ('["a.wav", "two", 0.4]', "expected a JSON object"),
    "deeply nested": ("[" * 100000 + "]" * 100000, "bad JSON (nested too deeply)"),
    "negative duration": (line(duration=-1.5), "duration must be a positive number, got -1.5"),
    "zero duration": (line(duration=0), "duration must be a positive number, got 0"),
    "NaN duration": (line(duration=float("nan")), "duration must be a positive number, got nan"),
    "infinite duration": (line(duration=float("inf")),
                          "duration must be a positive number, got inf"),
    "duration as text": (line(duration="0.4"), "duration must be a positive number, got '0.4'"),
    "duration true": (line(duration=True), "duration must be a positive number, got True"),
    "duration null": (line(duration=None), "duration must be a positive number, got None"),
    "huge integer duration": ('{"audio_filepath": "a.wav", "text": "two", "duration": 1' + "0" * 400
                              + "}", f"duration must be a positive number, got 1{'0' * 400}"),
    "blank transcript": (line(text="  \t "), NO_WORDS + "'  \\t '"),
    "punctuation-only transcript": (line(text="?!... -- !"), NO_WORDS + "'?!... -- !'"),
    "transcript not a string": (line(text=2), "text must be a string"),
    "lone surrogate in transcript": ('{"audio_filepath": "a.wav", "text": "caf\\ud800", '
                                     '"duration": 1}', "text is not valid Unicode"),
    "non-UTF-8 transcript": (b'{"audio_filepath": "a.wav", "text": "caf\xe9", "duration": 1}',
                             "not UTF-8 text"),
    "audio_filepath a number": (line(audio_filepath=7), "audio_filepath must be a file name, got 7"),
    "empty audio_filepath": (line(audio_filepath=""), "audio_filepath must be a file name, got ''"),
    "NUL in audio_filepath": (line(audio_filepath="a\0.wav"),
                              "audio_filepath must be a file name, got 'a\\x00.wav'"),
    "nonexistent path": (line(audio_filepath="/nonexistent/x.wav"),
                         "audio file not found: /nonexistent/x.wav"),
    "relative nonexistent path": (line(audio_filepath="wavs/x.wav"),
                                  "audio file not found: {tmp}/wavs/x.wav"),
    "a directory as audio": (line(audio_filepath=str(fsdd_file(2).parent)),
                             f"audio path is not a file: {fsdd_file(2).parent}"),
    "a name too long": (line(audio_filepath="x" * 300 + ".wav"),
                        "audio file not usable (File name too long): {tmp}/" + "x" * 300 + ".wav"),
}


def test_empty_transcript_is_audio_without_speech(tmp_path):
    """Noise and silence clips are transcribed as "": the model must learn to say nothing."""
    manifest = tmp_path / "m.jsonl"
    manifest.write_text(line(text="") + "\n")
    assert [u.text for u in read_manifest(manifest)] == [""]


@pytest.mark.parametrize("case", BAD_LINES)
def test_bad_manifest_line_names_file_line_and_problem(tmp_path, case):
    bad, problem = BAD_LINES[case]
    manifest = tmp_path / "m.jsonl"
    manifest.write_bytes(line().encode() + b"\n" + (bad if isinstance(bad, bytes) else bad.encode())
                         + b"\n")
    with pytest.raises(ManifestError) as caught:
        read_manifest(manifest)
    assert str(caught.value) == f"{manifest}:2: {problem.format(tmp=tmp_path)}"
    skipped = []
    utts = read_manifest(manifest, on_error="skip", on_skip=skipped.append)
    assert [u.audio_filepath for u in utts] == [GOOD["audio_filepath"]]
    assert skipped == [str(caught.value)]


@pytest.mark.parametrize("name,content,problem", [
    ("none.jsonl", None, "manifest not found"),
    ("", None, "is a directory, not a manifest"),
    ("empty.jsonl", "", "no utterances"),
    ("blank.jsonl", "\n  \n", "no utterances"),
], ids=["missing", "directory", "empty", "blank lines only"])
def test_unusable_manifest_files(tmp_path, name, content, problem):
    path = tmp_path / name
    if content is not None:
        path.write_text(content)
    with pytest.raises(ManifestError) as caught:
        read_manifest(path)
    assert str(caught.value) == f"{path}: {problem}"


def test_skip_keeps_the_good_lines_in_order(tmp_path):
    manifest = tmp_path / "m.jsonl"
    manifest.write_text("\n".join([line(), line(duration=-1), "{", line(text="three", duration=1.0),
                                   line(text="!")]) + "\n")
    skipped = []
    utts = read_manifest(manifest, on_error="skip", on_skip=skipped.append)
    assert [(u.text, u.duration) for u in utts] == [("two", 0.4), ("three", 1.0)]
    assert [s.split(": ", 1)[0] for s in skipped] == [f"{manifest}:{n}" for n in (2, 3, 5)]


@pytest.mark.parametrize("size", [0x7FFFF000, 0xFFFFFFFF])
def test_a_wav_streamed_with_its_length_unknown_is_read_whole(tmp_path, size):
    """sox writing to a pipe declares 0x7FFFF000 bytes of data (others 0xFFFFFFFF): the
    samples are what the file holds, as soundfile and ffmpeg read it."""
    pcm = (np.clip(SPEECH, -1, 1 - 2**-15) * 32768).astype("<i2").tobytes()
    header = bytearray(wav_header(FRAMES))
    header[40:44] = struct.pack("<I", size)
    header[4:8] = struct.pack("<I", (size + 36) & 0xFFFFFFFF)
    path = tmp_path / "piped.wav"
    path.write_bytes(bytes(header) + pcm)
    expected = load_audio(write(tmp_path / "plain.wav", SPEECH), 16000)
    assert torch.equal(load_audio(path, 16000), expected)


def test_stereo_channels_that_cancel_in_the_mean_give_the_louder_channel(tmp_path):
    """One channel inverted: the mean is silence, so the louder channel is taken; channels
    that differ as recordings do are still averaged."""
    mono = load_audio(write(tmp_path / "mono.wav", SPEECH), 16000)
    inverted = write(tmp_path / "inverted.wav", np.stack([SPEECH, -0.9 * SPEECH], 1))
    assert torch.allclose(load_audio(inverted, 16000), mono, atol=1e-4)
    quieter = write(tmp_path / "quieter.wav", np.stack([SPEECH, 0.5 * SPEECH], 1))
    assert torch.allclose(load_audio(quieter, 16000), 0.75 * mono, atol=1e-4)
    from asr.audio import prepare_array
    array = torch.from_numpy(np.stack([SPEECH, -SPEECH]))  # channels x frames, in memory
    assert torch.allclose(prepare_array(array, RATE, 16000), mono, atol=1e-4)

"""Streaming recognition (asr/streaming.py) with the shipped base model on real speech: each
final equals offline decoding of the same audio, partials keep up with the speech, one stream
over a long input gives one final per utterance, bad samples get one-line errors, and the demo
prints the partials without changing what it does."""

from dataclasses import replace
from pathlib import Path

import numpy as np
import pytest
import soundfile as sf
import torch

from asr.assistant.demo import Console, main
from asr.audio import load_audio
from asr.grammar import Grammar
from asr.models import FOLDER
from asr.streaming import TranscriptStream
from asr.transcriber import Transcriber, Transcript
from asr.vad import VADConfig
from helpers import COMMANDS, ROOT, SHARED, fsdd_file, require_shared

pytestmark = [pytest.mark.tier("slow"), pytest.mark.data]

pytestmark = pytest.mark.skipif(not (FOLDER / "base" / "model.pt").is_file(),
                                reason="no base model shipped (bash recipes/base/run.sh)")
CATHY = SHARED / "cathy" / "data"
RATE = 16000
COFFEE = ROOT / "recipes" / "voice_commands" / "examples" / "coffee.yaml"


@pytest.fixture(scope="module")
def base() -> Transcriber:
    """The shipped model, decoding one utterance at a time offline too: a batch pads its
    utterances, which moves their scores by float rounding."""
    return Transcriber.from_pretrained(device="cpu", batch_size=1)


def cathy(index: int) -> Path:
    require_shared()
    return sorted(CATHY.glob("*.flac"))[index]


def streamed(stream: TranscriptStream, wave: np.ndarray | torch.Tensor, block: int
             ) -> tuple[list[Transcript], list[float], list[str]]:
    """Feed `wave` in blocks of `block` samples, then finish: the finals, the partial's lag
    behind the audio after every block in speech, and each new partial text."""
    finals, lags, partials = [], [], []
    for start in range(0, len(wave), block):
        if stream.accept(wave[start:start + block]):
            while (final := stream.final()) is not None:
                finals.append(final)
        if stream.in_speech:
            lags.append(stream.seconds - stream.partial_end)
        if stream.partial() and stream.partial() not in partials[-1:]:
            partials.append(stream.partial())
    waiting, rest = stream.finish(), []
    while (final := stream.final()) is not None:
        rest.append(final)
    assert waiting == bool(rest)
    return finals + rest, lags, partials


def segments(finals: list[Transcript]) -> list:
    assert all(len(f.segments) == 1 and f.text == f.segments[0].text for f in finals)
    return [f.segments[0] for f in finals]


def test_finals_equal_offline_decoding_of_the_same_files(base):
    """Cathy's read sentences (one of them two utterances) and a Speech Commands word at 16
    kHz, whatever the blocks' size: the same segments, times and scores as `transcribe`."""
    files = {cathy(2): 7919, sorted((COMMANDS / "left").glob("*.wav"))[0]: 480,
             sorted((COMMANDS / "stop").glob("*.wav"))[3]: 16000}
    counts = []
    for path, block in files.items():
        wave, rate = sf.read(path, dtype="float32")
        assert rate == RATE
        finals, _, _ = streamed(base.stream(), wave, block)
        assert segments(finals) == base.transcribe(path).segments, path
        counts.append(len(finals))
    assert counts == [2, 1, 1] and finals[0].text == "stop"


def test_eight_khz_int16_is_resampled_as_offline_reads_the_file(base):
    """FSDD's 8 kHz digits, taken as int16 (numpy and torch), resampled by the stream as one
    continuous stream: the same finals as `transcribe` of the files."""
    for path in (fsdd_file(7, "yweweler"), fsdd_file(0, "yweweler", 11)):
        pcm, rate = sf.read(path, dtype="int16")
        assert rate == 8000
        for wave in (pcm, torch.from_numpy(pcm)):
            finals, _, _ = streamed(base.stream(sample_rate=8000), wave, 240)
            assert segments(finals) == base.transcribe(path).segments, path


def test_a_grammar_stream_finals_equal_its_offline_search():
    """With the coffee grammar the final is the grammar search's sentence, as offline; the
    partial is what is heard, free of the grammar."""
    constrained = Transcriber.from_pretrained(device="cpu", batch_size=1, grammar=str(COFFEE))
    path = sorted((COMMANDS / "left").glob("*.wav"))[0]
    finals, _, partials = streamed(constrained.stream(), sf.read(path, dtype="float32")[0], 480)
    assert segments(finals) == constrained.transcribe(path).segments and len(finals) == 1
    assert Grammar.load(COFFEE).parse(finals[0].text) is not None
    assert partials and partials[-1] != finals[0].text


def test_partials_keep_within_half_a_second_of_the_speech(base):
    """Every 30 ms block of speech: the partial covers all but at most 0.5 s of the audio
    heard, and it grows into the final's words."""
    wave = load_audio(cathy(1), RATE).numpy()
    finals, lags, partials = streamed(base.stream(), wave, 480)
    assert [f.text for f in finals] == ["author of the danger trail philip steels etc"]
    speech = finals[0].segments[0].end - finals[0].segments[0].start
    assert len(lags) * 0.03 >= speech and max(lags) <= 0.5  # in speech throughout, and fresh
    assert len(partials) >= speech / 0.5 - 2  # new text about every half second
    assert len(partials[0]) < len(partials[-1]) and "trail philip" in partials[-1]


def test_a_long_input_gives_one_final_per_utterance(base):
    """A sentence and a word, with silence around them, in one stream of 1 s blocks: two
    finals in order, timed in the stream, equal to offline decoding of the whole input."""
    gap = np.zeros(RATE * 3 // 2, np.float32)
    parts = [gap, load_audio(cathy(1), RATE).numpy(), gap,
             sf.read(sorted((COMMANDS / "left").glob("*.wav"))[0], dtype="float32")[0], gap]
    wave = np.concatenate(parts)
    stream = base.stream()
    finals, _, _ = streamed(stream, wave, RATE)
    assert len(finals) == 2 and finals[1].text == "left"
    assert segments(finals) == base.transcribe(wave).segments
    assert stream.seconds == len(wave) / RATE and stream.partial() == ""
    assert 1.5 < finals[0].segments[0].start < finals[0].segments[0].end \
        < sum(map(len, parts[:3])) / RATE < finals[1].segments[0].start


def test_speech_that_never_stops_is_cut_and_memory_stays_bounded(base):
    """Four sentences without a pause, with utterances cut at 3 s: the utterance held (what
    a partial decodes) never grows past the cut, and every cut gives its final."""
    cheap = replace(base.options, mode="ctc_greedy", lm=None)  # the cut is the VAD's alone
    short = Transcriber(base.model, base.tokenizer, cheap, VADConfig(max_utterance_s=3.0))
    clip = load_audio(cathy(0), RATE).numpy()
    wave = np.tile(clip[int(0.2 * RATE):int(3.2 * RATE)], 4)  # 12 s of speech, no pause
    stream = short.stream()
    longest, finals = 0, 0
    for start in range(0, len(wave), 1600):
        stream.accept(wave[start:start + 1600])
        held = stream.endpointer.peek()
        longest = max(longest, 0 if held is None else len(held.samples))
        while stream.final() is not None:
            finals += 1
    assert longest <= 3.0 * RATE and finals >= 12 // 3 - 1


@pytest.mark.parametrize(("samples", "problem"), [
    ([0.0] * 100, "samples must be a numpy array or a torch tensor, got list"),
    (b"\x00\x01" * 50, "samples must be an array, got bytes (raw 16-bit PCM"),
    (np.zeros(100, np.int32), "samples must be float32 or float64 in [-1, 1] or int16 PCM, "
                              "got int32"),
    (np.zeros(100, np.float16), "samples must be float32 or float64 in [-1, 1] or int16 PCM, "
                                "got float16"),
    (torch.zeros(100, dtype=torch.bfloat16), "samples must be float32 or float64 in [-1, 1] "
                                             "or int16 PCM, got bfloat16"),
    (np.zeros((100, 2), np.float32), "samples must be mono: a 1-D array, or 2-D with one "
                                     "channel, got shape (100, 2)"),
    (np.array([0.0, np.nan], np.float32), "contains NaN or infinite samples"),
    (np.array([0.0, np.inf]), "contains NaN or infinite samples"),
    (np.full(100, 3000.0, np.float32), "samples reach 3000, far outside [-1, 1] (integer PCM "
                                       "as floats? pass it as int16); refused"),
])
def test_bad_samples_are_one_line_errors(base, samples, problem):
    stream = base.stream()
    with pytest.raises(ValueError) as err:
        stream.accept(samples)
    assert str(err.value).startswith(f"<stream>: {problem}") and "\n" not in str(err.value)
    assert stream.accept(np.zeros(480, np.float32)) is False  # the stream goes on


def test_bad_stream_settings_are_one_line_errors(base):
    cases = [({"sample_rate": 100}, "sample_rate must be a whole number of Hz in 4000-384000, "
                                    "got 100"),
             ({"sample_rate": True}, "sample_rate must be a whole number of Hz"),
             ({"sample_rate": "16000"}, "sample_rate must be a whole number of Hz"),
             ({"interval": 0}, "the partial interval must be a number of seconds in [0.01, 60]"),
             ({"interval": float("nan")}, "the partial interval must be a number of seconds"),
             ({"word_timestamps": "yes"}, "word_timestamps must be True or False")]
    for settings, problem in cases:
        with pytest.raises(ValueError) as err:
            base.stream(**settings)
        assert str(err.value).startswith(problem) and "\n" not in str(err.value), settings
    stream = base.stream(sample_rate=8000)
    with pytest.raises(ValueError, match=r"^this stream takes samples at 8000 Hz, got 16000 Hz"):
        stream.accept(np.zeros(100, np.float32), sample_rate=16000)
    assert stream.accept(np.zeros(100, np.float32), sample_rate=8000) is False
    stream.finish()
    with pytest.raises(ValueError, match=r"^this stream is finished \(finish\(\) was called\)"):
        stream.accept(np.zeros(100, np.float32))


def test_the_demo_prints_partials_and_does_the_same(tmp_path):
    """The demo on a file of a read sentence: `partial:` lines while it is said, before its
    turn; without partials every other line is the same."""
    wave = np.concatenate([np.zeros(RATE // 2, np.float32), load_audio(cathy(1), RATE).numpy(),
                           np.zeros(RATE, np.float32)])
    sf.write(tmp_path / "said.wav", wave, RATE, subtype="PCM_16")
    printed = {}
    for partial_ms in (500, 0):
        lines: list[str] = []
        argv = ["--input", str(tmp_path / "said.wav"), f"actions.home={tmp_path}",
                f"partial_ms={partial_ms}"]
        assert main(argv, console=Console(lines.append)) == 0
        printed[partial_ms] = lines
    shown = printed[500]
    partial = [i for i, line in enumerate(shown) if line.startswith("partial: ")]
    heard = [i for i, line in enumerate(shown) if " heard: " in line]
    assert len(heard) == 1 and len(partial) >= 3 and partial[-1] < heard[0]
    assert "trail" in shown[partial[-1]]
    kept = [line for line in shown if not line.startswith(("partial: ", "  latency"))]
    assert kept == [line for line in printed[0] if not line.startswith("  latency")]

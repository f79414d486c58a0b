"""Wake words (asr/wake.py, asr-wake, the demo's wake=): real people on telephone lines (WUW
Corpus II's held-out speakers), real noise and other speech, the shipped base model."""

import io
import json
import re
import shutil
import subprocess

import numpy as np
import pytest
import soundfile as sf
import soxr

from asr.assistant.demo import Console
from asr.assistant.demo import main as demo_main
from asr.checkpoint import ModelDirError
from asr.models import model_path
from asr.wake import WAKE_FILE, WakeConfig, WakeWordDetector, calibrated_margin
from asr.wake_cli import main as wake_main
from helpers import COMMANDS, SHARED, require_shared

pytestmark = [pytest.mark.tier("slow"), pytest.mark.data]

WUW = SHARED / "wuw" / "calls"
RATE = 16000
# Dev speakers' keywords said alone (utterances 001-005), with the corpus's keyword end time.
ALONE = [("00014/WUWII00014_001.ulaw", "operator"), ("00014/WUWII00014_002.ulaw", "thinkengine"),
         ("00014/WUWII00014_004.ulaw", "wildfire"), ("00014/WUWII00014_005.ulaw", "voyager")]
KEYWORDS = ["operator", "thinkengine", "onword", "wildfire", "voyager"]


def wuw(name: str) -> np.ndarray:
    samples, _ = sf.read(str(WUW / name), dtype="float32", format="RAW", subtype="ULAW",
                         samplerate=8000, channels=1)
    return soxr.resample(samples, 8000, RATE).astype(np.float32)


def reference_end(name: str) -> float:
    entries = json.loads((SHARED / "wuw" / "data.json").read_text())
    return next(e["endTime"] for group in entries.values() for e in group
                if e["filePath"] == f"calls/{name}")


def padded(wave: np.ndarray, after: float = 1.0) -> np.ndarray:
    return np.concatenate([np.zeros(RATE // 4, np.float32), wave,
                           np.zeros(round(after * RATE), np.float32)])


def espeak(text: str) -> np.ndarray:
    wav = subprocess.run(["espeak-ng", "-v", "en-us", "--stdout", text], capture_output=True,
                         check=True).stdout
    samples, rate = sf.read(io.BytesIO(wav), dtype="float32")
    return soxr.resample(samples, rate, RATE).astype(np.float32)


@pytest.fixture(scope="module")
def detector() -> WakeWordDetector:
    require_shared()
    return WakeWordDetector(KEYWORDS)


def frames(wave: np.ndarray, length: int = 512) -> list[np.ndarray]:
    pcm = (np.clip(wave, -1, 1) * 32767).astype(np.int16)
    return [pcm[i:i + length] for i in range(0, len(pcm) - length + 1, length)]


def test_streaming_and_offline_detection_agree(detector):
    """Frames through `process`, the file streamed by `detect` and the whole clip encoded at
    once (`spot`) find the same phrase, at the same time within a hop."""
    for name, keyword in ALONE:
        wave = padded(wuw(name))
        detector.reset()
        heard = [detector.last for f in frames(wave) if detector.process(f) >= 0]
        streamed = list(detector.detect(wave, RATE))
        offline = detector.spot(wave)
        assert [d.phrase for d in heard] == [d.phrase for d in streamed] == [keyword], name
        assert offline[0].phrase == keyword
        assert abs(heard[0].time - streamed[0].time) <= detector.config.hop_s
        assert abs(heard[0].time - offline[0].time) <= detector.config.hop_s


def test_a_detection_falls_within_half_a_second_of_the_keyword(detector):
    for name, keyword in ALONE:
        found = list(detector.detect(padded(wuw(name)), RATE))
        assert [d.phrase for d in found] == [keyword]
        assert abs(found[0].time - (reference_end(name) + 0.25)) <= 0.5, name


def test_noise_and_other_speech_wake_nothing_at_the_default_sensitivity(detector):
    """Three minutes of real noise (Speech Commands' background clips: white and pink noise, a
    tap, dishes, a bike) and three of other speech (cathy reading books) hold no wake word."""
    noise = np.concatenate([sf.read(p, dtype="float32")[0]
                            for p in sorted((COMMANDS / "_silence_").glob("*.wav"))[:180]])
    speech = np.concatenate([sf.read(p, dtype="float32")[0]
                             for p in sorted((SHARED / "cathy" / "data").glob("*.flac"))[:60]])
    assert len(noise) >= 180 * RATE and len(speech) >= 170 * RATE
    assert list(detector.detect(noise, RATE)) == []
    assert list(detector.detect(speech, RATE)) == []


def test_memory_is_a_window_whatever_the_stream(detector):
    detector.reset()
    before = detector._ring.nbytes
    for frame in frames(np.zeros(RATE * 30, np.float32)):
        detector.process(frame)
    assert detector._ring.nbytes == before == 4 * round(detector.config.window_s * RATE)


@pytest.mark.parametrize(("frame", "message"), [
    (np.zeros(300, np.int16), "a frame must be 512 samples (1-D), got shape (300,)"),
    (np.zeros((512, 2), np.int16), "a frame must be 512 samples (1-D), got shape (512, 2)"),
    (np.zeros(512, np.float64), "a frame must be int16 or float32 samples, got float64"),
    ([0] * 512, "a frame must be a numpy array of 512 int16 or float32 samples, got list"),
    (np.full(512, np.nan, np.float32), "a frame holds NaN or infinite samples")])
def test_a_bad_frame_is_one_line(detector, frame, message):
    with pytest.raises(ValueError, match=f"^{re.escape(message)}$"):
        detector.process(frame)


@pytest.mark.parametrize(("kwargs", "message"), [
    ({"phrases": []}, "no wake phrase given: name at least one"),
    ({"phrases": ["café"]}, "wake phrase 'café': this model cannot write 'é' "),
    ({"phrases": ["!!"]}, "wake phrase '!!' has no words to listen for"),
    ({"phrases": ["computer"], "sensitivity": 1.5}, r"sensitivity must be a number in \[0, 1\], got 1.5"),
    ({"phrases": ["computer"], "sample_rate": 8000}, "frames must be at 16000 Hz, got 8000 Hz")])
def test_bad_detector_settings_are_one_line(detector, kwargs, message):
    with pytest.raises(ValueError, match=f"^{message}"):
        WakeWordDetector(model=detector.transcriber, **kwargs)


def test_a_window_without_overlap_is_refused():
    with pytest.raises(ValueError, match=r"^wake.hop_s \(0.8\) must leave 0.5 s of overlap"):
        WakeConfig(window_s=1.0, hop_s=0.8)


@pytest.mark.parametrize("text", ["{", '{"margin": -1}', '{"margin": true}', "[1]"])
def test_a_bad_calibration_file_is_one_line(tmp_path, text):
    (tmp_path / WAKE_FILE).write_text(text)
    with pytest.raises(ModelDirError, match=f"^{tmp_path / WAKE_FILE}: "):
        calibrated_margin(tmp_path)


def test_the_shipped_model_carries_its_calibration():
    assert (model_path("base") / WAKE_FILE).is_file()
    assert 0 < calibrated_margin("base") < 20


def test_the_cli_prints_one_line_per_detection(tmp_path, capsys):
    name, keyword = ALONE[0]
    path = tmp_path / "clip.wav"
    sf.write(path, padded(wuw(name)), RATE)
    assert wake_main(["--wake", keyword, "--wake", "hey jarvis", str(path)]) == 0
    lines = capsys.readouterr().out.splitlines()
    assert len(lines) == 1 and lines[0].split("\t")[1] == keyword
    pcm = (padded(wuw(name)) * 32767).astype("<i2").tobytes()
    assert wake_main(["--wake", keyword, "-"], stdin=io.BytesIO(pcm)) == 0
    assert capsys.readouterr().out.splitlines() == lines


@pytest.mark.parametrize(("args", "message"), [
    (["--wake", "café", "X"], "error: wake phrase 'café': this model cannot write 'é'"),
    (["--wake", "computer", "/no/such.wav"], "error: /no/such.wav: no such file")])
def test_cli_errors_are_one_line(tmp_path, capsys, args, message):
    if args[-1] == "X":
        args[-1] = str(tmp_path / "x.wav")
        sf.write(args[-1], np.zeros(RATE, np.float32), RATE)
    assert wake_main(args) == 1
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and err.startswith(message)


@pytest.mark.xfail(strict=True, reason="known bug: after acting on its first command the demo "
                   "never wakes again (issue #78 stays open)")
def test_the_demo_wakes_takes_one_command_and_sleeps(tmp_path):
    """A command without the wake phrase is not acted on; "computer, show me my photos" in one
    breath is; the phrase with nothing after it times out and the demo sleeps again. (espeak-ng's
    "computer" is far from a person's: the most sensitive setting hears it.)"""
    require_shared()
    if shutil.which("espeak-ng") is None:
        pytest.skip("espeak-ng is not installed")
    home = tmp_path / "home"
    (home / "Pictures").mkdir(parents=True)
    (home / "Pictures" / "beach.jpg").write_text("jpeg")
    gap = lambda s: np.zeros(round(s * RATE), np.float32)  # noqa: E731
    stream = np.concatenate([gap(0.5), espeak("show me my photos"), gap(1.5),
                             espeak("computer, show me my photos"), gap(4.0),
                             espeak("computer,"), gap(7.0)])
    path = tmp_path / "room.wav"
    sf.write(path, stream, RATE)
    lines: list[str] = []
    assert demo_main(["--input", str(path), "wake=computer", f"actions.home={home}",
                      "wake_timeout_s=3", "wake_sensitivity=1"], console=Console(lines.append)) == 0
    awake = [line for line in lines if line.startswith("** awake: heard \"computer\"")]
    acted = [line for line in lines if line.startswith("  action:")]
    assert len(awake) == 2
    assert acted == [f"  action: 1 photo in {home}: 1. Pictures/beach.jpg"]
    assert "** no command within 3 s: sleeping" in lines
    assert lines[-1] == "end of input: 1 utterances"

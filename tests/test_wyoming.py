"""asr-wyoming: the server on 127.0.0.1 (a free port), talked to with the wyoming library's
client, as Home Assistant does: describe, transcriptions with partials, intents, and every
kind of bad input, each answered with its error (or a closed connection) while the server
goes on serving."""

import asyncio
import importlib.util
import json
import signal
import socket
import subprocess
import sys
import time

import numpy as np
import pytest
import soundfile as sf

from helpers import ROOT, SHARED, fsdd_file, require_shared

pytest.importorskip("wyoming")
pytest.importorskip("hassil")

from wyoming.asr import Transcribe  # noqa: E402
from wyoming.audio import AudioChunk, AudioStart, AudioStop  # noqa: E402
from wyoming.client import AsyncTcpClient  # noqa: E402
from wyoming.event import Event  # noqa: E402
from wyoming.info import Describe  # noqa: E402
from wyoming.intent import Recognize  # noqa: E402

pytestmark = [pytest.mark.tier("slow"), pytest.mark.data]

CATHY = SHARED / "cathy" / "data" / "arctic_a0001_1592748574.flac"
CATHY_TEXT = "author of the danger trail philip steels etc"
HOME = "areas: [kitchen, living room]\ndevices:\n  - {name: Kitchen Light, domain: light}\n"


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _start(log, *options: str) -> tuple[subprocess.Popen, int]:
    """The server in a process of its own, its log (stderr) in the file `log`."""
    port = _free_port()
    process = subprocess.Popen(
        [sys.executable, "-m", "asr.assistant.wyoming", "--uri", f"tcp://127.0.0.1:{port}",
         *options], cwd=ROOT, stderr=log.open("w"),
        env={"PYTHONPATH": str(ROOT), "PATH": "/usr/bin:/bin"})
    process.log = log
    return process, port


def _wait(process: subprocess.Popen, port: int) -> int:
    deadline = time.monotonic() + 240
    while time.monotonic() < deadline:
        assert process.poll() is None, process.log.read_text()
        try:
            socket.create_connection(("127.0.0.1", port), timeout=1).close()
            return port
        except OSError:
            time.sleep(0.5)
    raise AssertionError("the server did not start")


@pytest.fixture(scope="module")
def servers(tmp_path_factory):
    """A free-text server (tight bounds, to reach them fast) and one with Home Assistant's
    sentences, started together."""
    require_shared()
    folder = tmp_path_factory.mktemp("wyoming")
    home = folder / "home.yaml"
    home.write_text(HOME)
    free = _start(folder / "free.log", "--body-timeout", "2", "--max-audio-seconds", "5",
                  "--max-clients", "12")
    ha = _start(folder / "ha.log", "--grammar", "ha:en", "--home", str(home), "--workers", "1")
    yield {"free": _wait(*free), "ha": _wait(*ha), "free_process": free[0]}
    for process, _ in (free, ha):
        if process.poll() is None:
            process.kill()
        process.wait()


def run(coroutine):
    return asyncio.run(asyncio.wait_for(coroutine, 120))


async def _events_until(client: AsyncTcpClient, last: str) -> list[Event]:
    events = []
    while True:
        event = await client.read_event()
        if event is None:
            return events
        events.append(event)
        if event.type in (last, "error"):
            return events


async def _ask(port: int, *events: Event, until: str) -> list[Event]:
    async with AsyncTcpClient("127.0.0.1", port) as client:
        for event in events:
            await client.write_event(event)
        return await _events_until(client, until)


def _audio(pcm: bytes, rate: int, width: int, channels: int, frames: int = 1024) -> list[Event]:
    """Audio events as Home Assistant sends them: chunks of 1024 frames."""
    fmt, chunk = {"rate": rate, "width": width, "channels": channels}, frames * width * channels
    return [AudioStart(**fmt).event(),
            *(AudioChunk(**fmt, audio=pcm[i:i + chunk]).event() for i in range(0, len(pcm), chunk)),
            AudioStop().event()]


def _transcribe(port: int, pcm: bytes, rate: int, width: int = 2, channels: int = 1
                ) -> list[Event]:
    return run(_ask(port, Transcribe(language="en").event(),
                    *_audio(pcm, rate, width, channels), until="transcript-stop"))


def _int16(path) -> tuple[bytes, int]:
    samples, rate = sf.read(str(path), dtype="int16")
    return samples.tobytes(), rate


def test_describe_lists_speech_to_text_and_the_grammars_intents(servers):
    free = run(_ask(servers["free"], Describe().event(), until="info"))[-1].data
    ha = run(_ask(servers["ha"], Describe().event(), until="info"))[-1].data
    program = free["asr"][0]
    assert program["installed"] and program["supports_transcript_streaming"]
    assert program["models"][0]["name"] == "base" and program["models"][0]["languages"] == ["en"]
    assert free["intent"] == [] and ha["intent"][0]["models"][0]["name"] == "ha:en"
    assert ha["intent"][0]["installed"]
    if importlib.util.find_spec("asr.wake") is None:
        assert free["wake"] == [] and ha["wake"] == []


def test_a_real_sentence_streams_partials_then_the_right_transcript(servers):
    pcm, rate = _int16(CATHY)
    events = _transcribe(servers["free"], pcm, rate)
    kinds = [e.type for e in events]
    assert kinds[0] == "transcript-start" and kinds[-2:] == ["transcript", "transcript-stop"]
    assert "transcript-chunk" in kinds
    assert events[-2].data["text"] == CATHY_TEXT
    # the same speech as 24-bit stereo at 48 kHz: resampled and mixed down to the same words
    wave, _ = sf.read(str(CATHY), dtype="float32")
    wave48 = np.interp(np.arange(len(wave) * 3) / 3, np.arange(len(wave)), wave)
    frames = (np.clip(wave48, -1, 1) * (2 ** 23 - 1)).astype("<i4")
    stereo = np.stack([frames, frames], 1).reshape(-1).astype("<u4").view(np.uint8)
    pcm24 = stereo.reshape(-1, 4)[:, :3].tobytes()
    assert _transcribe(servers["free"], pcm24, 48000, 3, 2)[-2].data["text"] == CATHY_TEXT


def test_many_clients_at_once_all_answered(servers):
    pcm, rate = _int16(fsdd_file(7))

    async def many():
        return await asyncio.gather(*(_ask(servers["free"], Transcribe().event(),
                                           *_audio(pcm, rate, 2, 1), until="transcript-stop")
                                      for _ in range(8)))

    assert [events[-2].data["text"] for events in run(many())] == ["seven"] * 8


def test_recognize_text_and_audio_to_home_assistant_intents(servers, tmp_path):
    port = servers["ha"]
    found = run(_ask(port, Recognize(text="turn on the kitchen light").event(), until="intent"))
    assert found[-1].type == "intent" and found[-1].data["name"] == "HassTurnOn"
    assert found[-1].data["entities"] == [{"name": "name", "value": "Kitchen Light"}]
    lights = run(_ask(port, Recognize(text="turn off the lights in the living room").event(),
                      until="intent"))[-1].data
    assert {e["name"]: e["value"] for e in lights["entities"]} == {"area": "living room",
                                                                   "domain": "light"}
    other = run(_ask(port, Recognize(text="what is the meaning of life").event(),
                     until="not-recognized"))
    assert other[-1].type == "not-recognized"
    wav = tmp_path / "command.wav"
    subprocess.run(["espeak-ng", "-v", "en-us", "-w", str(wav), "turn on the kitchen light"],
                   check=True)
    pcm, rate = _int16(wav)
    heard = run(_ask(port, *_audio(pcm, rate, 2, 1), until="intent"))[-1]
    assert heard.type == "intent" and heard.data["name"] == "HassTurnOn"
    assert _transcribe(port, pcm, rate)[-2].data["text"] == "turn on the kitchen light"


async def _raw(port: int, data: bytes, wait: float = 10) -> list[dict]:
    """Send raw bytes; the events read back (as JSON headers) until the server closes."""
    reader, writer = await asyncio.open_connection("127.0.0.1", port)
    writer.write(data)
    await writer.drain()
    found = []
    try:
        while line := await asyncio.wait_for(reader.readline(), wait):
            header = json.loads(line)
            if header.get("data_length"):
                header["data"] = json.loads(await reader.readexactly(header["data_length"]))
            found.append(header)
    except asyncio.TimeoutError:
        found.append({"type": "still open"})
    writer.close()
    return found


def _header(kind: str, **fields) -> bytes:
    return json.dumps({"type": kind, **fields}).encode() + b"\n"


@pytest.mark.parametrize("data, problem", [
    (b"{not json\n", "the event header is not JSON"),
    (b"[1, 2]\n", "the event header is not a JSON object"),
    (_header("audio-chunk", payload_length=10 ** 12), "payload_length must be a whole number"),
    (_header("describe", data_length=-5), "data_length must be a whole number"),
    (_header("audio-chunk", payload_length=1000) + b"0123456789", "did not come within 2 s"),
    (b"x" * 70_000, "header line longer than"),
])
def test_bytes_that_are_no_event_get_one_error_and_a_closed_connection(servers, data, problem):
    events = run(_raw(servers["free"], data))
    assert [e["type"] for e in events] == ["error"], events
    assert problem in events[0]["data"]["text"] and events[0]["data"]["code"] == "bad-event"
    assert run(_ask(servers["free"], Describe().event(), until="info"))[-1].type == "info"


def _start_event(rate: int, width: int, channels: int) -> Event:
    return Event("audio-start", {"rate": rate, "width": width, "channels": channels})


@pytest.mark.parametrize("events, code", [
    ([_start_event(100, 2, 1)], "unsupported-audio"),
    ([Transcribe().event(), _start_event(16000, 5, 1)], "unsupported-audio"),
    ([Transcribe().event(), _start_event(16000, 2, 1),
      AudioChunk(rate=16000, width=2, channels=1, audio=b"abc").event()], "bad-audio"),
    ([Transcribe().event(), _start_event(16000, 2, 1),
      AudioChunk(rate=8000, width=2, channels=1, audio=b"ab").event()], "unsupported-audio"),
    ([AudioChunk(rate=16000, width=2, channels=1, audio=b"ab").event()], "no-audio-start"),
    ([AudioStop().event()], "no-audio-start"),
    ([Recognize(text="turn on the light").event()], "no-grammar"),
    ([Transcribe(language="fr").event()], "unsupported-language"),
    ([Event("detect", {})], "no-wake"),
])
def test_events_it_cannot_serve_get_an_error_and_the_connection_goes_on(servers, events, code):
    if code == "no-wake" and importlib.util.find_spec("asr.wake") is not None:
        pytest.skip("a wake service is there")

    async def exchange():
        async with AsyncTcpClient("127.0.0.1", servers["free"]) as client:
            for event in events:
                await client.write_event(event)
            error = await client.read_event()
            while error.type == "transcript-start":  # audio-start for a transcription
                error = await client.read_event()
            await client.write_event(Describe().event())
            return error, await client.read_event()

    error, after = run(exchange())
    assert error.type == "error" and error.data["code"] == code
    assert after.type == "info"


def test_audio_past_the_bound_and_clients_gone_mid_stream_leave_it_serving(servers):
    port = servers["free"]
    second = b"\0\0" * 16000
    chunks = [AudioChunk(rate=16000, width=2, channels=1, audio=second).event()] * 6
    long = run(_ask(port, Transcribe().event(), _start_event(16000, 2, 1), *chunks,
                    until="error"))
    assert long[-1].type == "error" and long[-1].data["code"] == "audio-too-long"

    async def vanish():
        _, writer = await asyncio.open_connection("127.0.0.1", port)
        for event in (Transcribe().event(), _start_event(16000, 2, 1), *chunks[:2]):
            writer.write(_header(event.type, data=event.data,
                                 payload_length=len(event.payload or b"")) + (event.payload or b""))
        writer.close()

    for _ in range(3):
        run(vanish())
    pcm, rate = _int16(fsdd_file(3))
    assert _transcribe(port, pcm, rate)[-2].data["text"] == "three"


def test_more_clients_than_allowed_are_told_it_is_busy(servers):
    async def crowd():
        held = [await asyncio.open_connection("127.0.0.1", servers["free"]) for _ in range(12)]
        await asyncio.sleep(0.5)
        refused = await _raw(servers["free"], b"", wait=5)
        for _, writer in held:
            writer.close()
        return refused

    refused = run(crowd())
    assert [e["type"] for e in refused] == ["error"] and refused[0]["data"]["code"] == "busy"
    time.sleep(0.5)
    assert run(_ask(servers["free"], Describe().event(), until="info"))[-1].type == "info"


def test_sigterm_stops_it_cleanly(servers):
    process = servers["free_process"]
    process.send_signal(signal.SIGTERM)
    assert process.wait(timeout=30) == 0
    assert "stopped" in process.log.read_text()

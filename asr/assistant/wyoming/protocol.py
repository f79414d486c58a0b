"""The Wyoming wire, read as untrusted input: events with bounded sizes and times, and audio
in any PCM format the events declare, converted to mono float32 at the model's rate.

A Wyoming event is a JSON header line, then `data_length` bytes of more JSON data, then
`payload_length` bytes of payload (audio). The `wyoming` library's reader takes both lengths
as they come (a header may ask for gigabytes) and waits for them forever; here each has its
bound (MAX_DATA_BYTES, MAX_PAYLOAD_BYTES), a header line is at most the stream's limit
(asyncio's 64 KiB), and the bytes an event announces must come within `body_timeout`. A
problem is a `ProtocolError`: the stream is out of step, so the server answers one `error`
event and closes the connection.
"""

import asyncio
import json

import numpy as np
import soxr
from wyoming.event import Event

from asr.audio import MAX_RATE, MIN_RATE, mono

MAX_DATA_BYTES = 64 * 1024  # an event's JSON data beyond its header (a transcript, an intent)
MAX_PAYLOAD_BYTES = 4 * 1024 * 1024  # one audio chunk (Home Assistant sends 2 KiB)
MAX_CHANNELS = 8
WIDTHS = (1, 2, 3, 4)  # bytes per sample: signed little-endian PCM, as Wyoming's audioop


class ProtocolError(ValueError):
    """Bytes that are no Wyoming event (or that did not come): one line, for an `error`."""


class RequestError(ValueError):
    """A well-formed event the server cannot serve now (audio in a format it cannot take,
    a chunk before audio-start): an `error` event with `code`, and the connection stays."""

    def __init__(self, text: str, code: str) -> None:
        super().__init__(text)
        self.code = code


async def read_event(reader: asyncio.StreamReader, idle_timeout: float,
                     body_timeout: float) -> Event | None:
    """The next event; None when the client has gone (at an event's end or inside one)."""
    try:
        line = await asyncio.wait_for(reader.readline(), idle_timeout)
    except asyncio.TimeoutError:
        raise ProtocolError(f"no event for {idle_timeout:g} s; closing") from None
    except (ValueError, asyncio.LimitOverrunError):
        raise ProtocolError(f"an event header line longer than {reader._limit} bytes") from None
    if not line.endswith(b"\n"):
        return None
    header = _json(line, "the event header")
    kind = header.get("type")
    if not isinstance(kind, str) or not kind:
        raise ProtocolError("an event header with no type")
    data = header.get("data") or {}
    if not isinstance(data, dict):
        raise ProtocolError(f"{kind}: data must be a JSON object")
    data_length = _length(header, "data_length", MAX_DATA_BYTES, kind)
    payload_length = _length(header, "payload_length", MAX_PAYLOAD_BYTES, kind)
    try:
        if data_length:
            data = {**data, **_json(await _exactly(reader, data_length, body_timeout, kind),
                                    f"{kind}'s data")}
        payload = await _exactly(reader, payload_length, body_timeout, kind) \
            if payload_length else None
    except asyncio.IncompleteReadError:
        return None
    return Event(type=kind, data=data, payload=payload)


def _json(raw: bytes, what: str) -> dict:
    try:
        value = json.loads(raw)
    except (ValueError, RecursionError):
        raise ProtocolError(f"{what} is not JSON") from None
    if not isinstance(value, dict):
        raise ProtocolError(f"{what} is not a JSON object")
    return value


def _length(header: dict, key: str, bound: int, kind: str) -> int:
    value = header.get(key)
    if value is None:
        return 0
    if isinstance(value, bool) or not isinstance(value, int) or not 0 <= value <= bound:
        raise ProtocolError(f"{kind}: {key} must be a whole number of bytes in 0-{bound}, "
                            f"got {str(value)[:40]}")
    return value


async def _exactly(reader: asyncio.StreamReader, count: int, timeout: float, kind: str) -> bytes:
    try:
        return await asyncio.wait_for(reader.readexactly(count), timeout)
    except asyncio.TimeoutError:
        raise ProtocolError(f"{kind}: the {count} bytes its header announces did not come "
                            f"within {timeout:g} s") from None


def audio_format(data: dict, kind: str) -> tuple[int, int, int]:
    """(rate, width, channels) that an audio event declares, each checked."""
    values = []
    for key, low, high in (("rate", MIN_RATE, MAX_RATE), ("width", 1, 4),
                           ("channels", 1, MAX_CHANNELS)):
        value = data.get(key)
        if isinstance(value, bool) or not isinstance(value, int) or not low <= value <= high:
            raise RequestError(f"{kind}: {key} must be a whole number in {low}-{high}, got "
                               f"{str(value)[:40]}", "unsupported-audio")
        values.append(value)
    return values[0], values[1], values[2]


def pcm_samples(payload: bytes, width: int, channels: int) -> np.ndarray:
    """Little-endian signed PCM frames -> mono float32 in [-1, 1)."""
    if len(payload) % (width * channels):
        raise RequestError(f"audio-chunk: {len(payload)} bytes is no whole number of "
                           f"{channels}-channel frames of {width} byte(s)", "bad-audio")
    if width == 3:
        raw = np.frombuffer(payload, np.uint8).reshape(-1, 3).astype(np.int32)
        samples = (raw[:, 0] | raw[:, 1] << 8 | raw[:, 2] << 16) << 8 >> 8
    else:
        samples = np.frombuffer(payload, {1: "<i1", 2: "<i2", 4: "<i4"}[width])
    scale = float(1 << (8 * width - 1))
    return mono(samples.astype(np.float32).reshape(-1, channels) / scale).astype(np.float32)


class AudioStream:
    """One utterance's audio as it comes: any declared format, resampled as one stream
    (soxr keeps its state between chunks), held as int16 at `sample_rate` (bounded by
    `max_seconds`)."""

    def __init__(self, rate: int, width: int, channels: int, sample_rate: int,
                 max_seconds: float) -> None:
        self.format, self.sample_rate, self.max_seconds = (rate, width, channels), sample_rate, \
            max_seconds
        self.resampler = None if rate == sample_rate else soxr.ResampleStream(
            rate, sample_rate, 1, dtype="float32")
        self.blocks: list[np.ndarray] = []
        self.samples = 0

    @property
    def seconds(self) -> float:
        return self.samples / self.sample_rate

    def add(self, payload: bytes, declared: tuple[int, int, int]) -> None:
        if declared != self.format:
            raise RequestError(f"audio-chunk: format {declared} (rate, width, channels) is not "
                               f"audio-start's {self.format}", "unsupported-audio")
        samples = pcm_samples(payload, self.format[1], self.format[2])
        self._keep(samples if self.resampler is None else self.resampler.resample_chunk(samples))
        if self.seconds > self.max_seconds:
            raise RequestError(f"audio: over {self.max_seconds:g} s with no audio-stop; the "
                               "utterance is dropped", "audio-too-long")

    def _keep(self, samples: np.ndarray) -> None:
        if samples.size:
            self.blocks.append((np.clip(samples, -1, 1) * 32767).astype(np.int16))
            self.samples += samples.size

    def finish(self) -> None:
        """The resampler's last samples (at audio-stop)."""
        if self.resampler is not None:
            self._keep(self.resampler.resample_chunk(np.zeros(0, np.float32), last=True))
            self.resampler = None

    def wave(self) -> np.ndarray:
        """All the audio so far, float32 at `sample_rate`."""
        if not self.blocks:
            return np.zeros(0, np.float32)
        self.blocks = [np.concatenate(self.blocks)]
        return self.blocks[0].astype(np.float32) / 32768

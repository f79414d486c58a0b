"""One client connection: the events it sends, the events it is answered with.

    describe                                   -> info
    transcribe, audio-start, audio-chunk*, audio-stop
                    -> transcript-start, transcript-chunk* (while audio comes),
                       transcript (final), transcript-stop
    recognize {text}                           -> intent {name, entities} | not-recognized
    audio-start, audio-chunk*, audio-stop (no transcribe first; with a grammar)
                                               -> intent | not-recognized
    detect, audio...                           -> detection | not-detected (a wake service)
    ping                                       -> pong

Partial transcripts: every `partial_seconds` of new audio the audio so far is decoded by the
CTC head's best path in a worker (never while every worker is busy: finals come first), and
the words two partials in a row agree on, but the last (which may be cut off mid-sound), are
sent as a `transcript-chunk` when they extend what was sent. The final transcript is the full
search on the whole utterance; its words past the chunks sent go out as a last chunk when the
chunks are its beginning.

Bad input never ends the server: an event it cannot serve is answered with one `error` (code
names the case) and the connection goes on; bytes that are no event, or an event that does not
come, get one `error` and the connection is closed (`protocol`).
"""

import asyncio
import logging

from wyoming.asr import Transcript, TranscriptChunk, TranscriptStart, TranscriptStop
from wyoming.error import Error
from wyoming.event import Event, async_write_event
from wyoming.intent import Entity, NotRecognized
from wyoming.intent import Intent as WyomingIntent
from wyoming.ping import Pong
from wyoming.server import AsyncEventHandler
from wyoming.wake import Detection, NotDetected

from asr.assistant.intents import Intent

from .engine import EnginePool, ServerConfig
from .protocol import AudioStream, ProtocolError, RequestError, audio_format, read_event
from .wake import WakeService

_LOGGER = logging.getLogger("asr.wyoming")


class Handler(AsyncEventHandler):
    """The events of one connection (see the module docstring)."""

    def __init__(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter,
                 server: "Service") -> None:
        super().__init__(reader, writer)
        self.server, self.config = server, server.config
        self.mode: str | None = None  # what the next audio is for: transcribe, intent, detect
        self.names: list[str] | None = None  # detect: the wake words asked for
        self.stream: AudioStream | None = None
        self.request = 0  # counts utterances: a partial of an earlier one is not sent
        self.sent: list[str] = []  # words sent as transcript chunks
        self.previous: list[str] = []  # the last partial's words: a word is sent once two agree
        self.partial_at = 0.0
        self.partial_job: asyncio.Task | None = None

    async def run(self) -> None:
        """Events until the client goes, each read within the protocol's bounds."""
        self.server.clients += 1
        try:
            if self.server.clients > self.config.max_clients:
                await self._error(f"busy: {self.config.max_clients} clients are connected; try "
                                  "again later", "busy")
                return
            while True:
                try:
                    event = await read_event(self.reader, self.config.idle_timeout,
                                             self.config.body_timeout)
                except ProtocolError as err:
                    await self._error(str(err), "bad-event")
                    break
                if event is None or not await self.handle_event(event):
                    break
        except (ConnectionError, asyncio.IncompleteReadError):
            pass
        finally:
            self.server.clients -= 1
            self._drop_partial()
            self.writer.close()

    async def handle_event(self, event: Event) -> bool:
        action = {"describe": self._describe, "transcribe": self._transcribe,
                  "audio-start": self._audio_start, "audio-chunk": self._audio_chunk,
                  "audio-stop": self._audio_stop, "recognize": self._recognize,
                  "detect": self._detect, "ping": self._ping}.get(event.type)
        if action is None:
            _LOGGER.debug("ignored event %s", event.type)
            return True
        try:
            await action(event)
        except RequestError as err:
            self._reset()
            await self._error(str(err), err.code)
        except ValueError as err:  # AudioError, GrammarError: what the audio or text could not be
            self._reset()
            await self._error(f"{event.type}: {err}", "failed")
        except (ConnectionError, asyncio.CancelledError):
            raise
        except Exception as err:  # a bug must not end the server, nor leave the client waiting
            _LOGGER.exception("%s failed", event.type)
            self._reset()
            await self._error(f"{event.type}: internal error ({type(err).__name__})", "internal")
        return True

    async def _error(self, text: str, code: str) -> None:
        _LOGGER.info("error to client (%s): %s", code, text)
        try:
            await async_write_event(Error(text=text, code=code).event(), self.writer)
        except ConnectionError:
            pass

    def _reset(self) -> None:
        self._drop_partial()
        self.mode, self.stream, self.sent, self.previous, self.partial_at = None, None, [], [], 0.0

    def _drop_partial(self) -> None:
        if self.partial_job is not None:
            self.partial_job.cancel()
            self.partial_job = None

    async def _describe(self, event: Event) -> None:
        await self.write_event(self.server.info.event())

    async def _ping(self, event: Event) -> None:
        await self.write_event(Pong(text=event.data.get("text")).event())

    async def _transcribe(self, event: Event) -> None:
        language = event.data.get("language")
        if language is not None and not str(language).lower().startswith("en"):
            raise RequestError(f"transcribe: language {str(language)[:20]!r} is not served "
                               "(only en)", "unsupported-language")
        self._reset()
        self.mode = "transcribe"

    async def _detect(self, event: Event) -> None:
        if self.server.wake is None:
            raise RequestError("detect: this server has no wake-word service", "no-wake")
        names = event.data.get("names")
        self._reset()
        self.mode = "detect"
        self.names = [str(n) for n in names] if isinstance(names, list) else None

    async def _audio_start(self, event: Event) -> None:
        rate, width, channels = audio_format(event.data, "audio-start")
        if self.mode is None:
            if not self.server.pool.has_grammar:
                raise RequestError("audio-start: send transcribe first (this server has no "
                                   "grammar for audio straight to intent)", "no-request")
            self.mode = "intent"
        self._drop_partial()
        self.request += 1
        self.sent, self.previous, self.partial_at = [], [], 0.0
        self.stream = AudioStream(rate, width, channels, self.server.pool.sample_rate,
                                  self.config.max_audio_seconds)
        if self.mode == "transcribe":
            await self.write_event(TranscriptStart(language="en").event())

    async def _audio_chunk(self, event: Event) -> None:
        if self.stream is None:
            raise RequestError("audio-chunk before audio-start", "no-audio-start")
        self.stream.add(event.payload or b"", audio_format(event.data, "audio-chunk"))
        due = self.config.partial_seconds and \
            self.stream.seconds - self.partial_at >= self.config.partial_seconds
        if self.mode == "transcribe" and due and self.partial_job is None \
                and not self.server.pool.busy:
            self.partial_at = self.stream.seconds
            self.partial_job = asyncio.create_task(self._partial(self.request,
                                                                 self.stream.wave()))

    async def _partial(self, request: int, wave) -> None:
        try:
            text = await self.server.pool.run("partial", wave)
        except Exception as err:  # a partial is a courtesy: the final transcript still comes
            _LOGGER.warning("partial transcript failed: %s", err)
            return
        finally:
            if request == self.request:
                self.partial_job = None
        if request == self.request and self.stream is not None:
            words = text.split()[:-1]
            stable = []
            for old, new in zip(self.previous, words, strict=False):
                if old != new:
                    break
                stable.append(new)
            self.previous = words
            await self._chunk(stable)

    async def _chunk(self, words: list[str]) -> None:
        """Send the words past those sent, when those sent are their beginning."""
        if len(words) > len(self.sent) and words[:len(self.sent)] == self.sent:
            new = " ".join(words[len(self.sent):])
            await self.write_event(TranscriptChunk(text=f" {new}" if self.sent else new).event())
            self.sent = list(words)

    async def _audio_stop(self, event: Event) -> None:
        if self.stream is None:
            raise RequestError("audio-stop before audio-start", "no-audio-start")
        stream, mode, names = self.stream, self.mode, self.names
        self._drop_partial()
        self.request += 1
        stream.finish()
        wave = stream.wave()
        self.stream, self.mode = None, None
        if mode == "transcribe":
            text = await self.server.pool.run("transcript", wave)
            await self._chunk(text.split())
            await self.write_event(Transcript(text=text, language="en").event())
            await self.write_event(TranscriptStop().event())
        elif mode == "intent":
            await self.write_event(_intent_event(await self.server.pool.run("intent_of_audio",
                                                                            wave)))
        else:
            found = await asyncio.get_running_loop().run_in_executor(
                self.server.pool.executor, self.server.wake.detect, wave, names)
            await self.write_event(NotDetected().event() if found is None else
                                   Detection(name=found[0], timestamp=int(found[1] * 1000)).event())
        self.sent = []

    async def _recognize(self, event: Event) -> None:
        text = event.data.get("text")
        if not isinstance(text, str):
            raise RequestError("recognize: text must be a string", "bad-request")
        if not self.server.pool.has_grammar:
            raise RequestError("recognize: this server has no grammar (start it with "
                               "--grammar)", "no-grammar")
        await self.write_event(_intent_event(await self.server.pool.run("intent_of_text",
                                                                        text[:2000])))


def _intent_event(intent: Intent) -> Event:
    """Our intent as Wyoming's: its slots as entities, or not-recognized."""
    if not intent.understood:
        return NotRecognized(text=intent.text).event()
    entities = [Entity(name=name, value=value) for name, value in intent.slots.items()]
    return WyomingIntent(name=intent.name, entities=entities, text=intent.text).event()


class Service:
    """What every connection shares: the settings, the engines, the info, the wake service."""

    def __init__(self, config: ServerConfig, pool: EnginePool, info,
                 wake: WakeService | None) -> None:
        self.config, self.pool, self.info, self.wake = config, pool, info, wake
        self.clients = 0

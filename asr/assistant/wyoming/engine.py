"""What the server decodes with: its settings, one model (and grammar) per worker thread, and
the `info` that describes them.

Decoding is CPU-bound, so it never runs on the event loop: `EnginePool` runs each job in a
thread pool of `workers` threads, each job on an `Engine` of its own (a model, and with a
grammar its recogniser: the grammar's search states are built as searches visit them, so two
threads never share one), one torch thread per decode (`torch.set_num_threads(1)`: the
workers are the parallelism).
"""

import asyncio
import queue
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, replace
from pathlib import Path

import numpy as np
import torch
from wyoming.info import AsrModel, AsrProgram, Attribution, Info, IntentModel, IntentProgram

from asr import __version__
from asr.assistant.intents import Intent, IntentRecognizer
from asr.decoding import DecodingTask
from asr.models import DEFAULT as DEFAULT_MODEL
from asr.transcriber import Transcriber, padded

ATTRIBUTION = Attribution(name="speech-transformer-asr",
                          url="https://pypi.org/project/speech-transformer-asr/")
LANGUAGES = ["en"]


@dataclass(frozen=True)
class ServerConfig:
    """Every setting of `asr-wyoming` (its options' defaults come from here)."""

    uri: str = "tcp://127.0.0.1:10300"  # loopback: Wyoming has no authentication
    model: str = DEFAULT_MODEL
    grammar: str | None = None  # a grammar (Rhino's, or Home Assistant's: "ha:en")
    home: str | None = None  # Home Assistant's sentences: the home's names (asr.grammar.hassil)
    min_confidence: float | None = None  # the grammar search's; None: the model's calibrated
    workers: int = 2  # decoding threads
    partial_seconds: float = 0.5  # a partial transcript per this much new audio (0: none)
    max_audio_seconds: float = 300.0  # an utterance with no audio-stop past this is dropped
    max_clients: int = 32  # connections at once; more are refused with an error
    idle_timeout: float = 300.0  # seconds a connection may send nothing
    body_timeout: float = 30.0  # seconds for the bytes an event header announces


class Engine:
    """One worker's model: the final search, the cheap partial search (the CTC head's best
    path, no decoder), and with a grammar its recogniser."""

    def __init__(self, config: ServerConfig) -> None:
        if config.grammar is None:
            self.recognizer = None
            self.transcriber = Transcriber.from_pretrained(config.model, device="cpu", vad=None)
        else:
            self.recognizer = IntentRecognizer.from_pretrained(
                config.model, config.grammar, "cpu", min_confidence=config.min_confidence,
                home=config.home)
            self.transcriber = self.recognizer.transcriber
        options = replace(self.transcriber.options, mode="ctc_greedy", grammar=None, lm=None,
                          beam_size=1)
        network = self.transcriber.network
        self.partial_task = DecodingTask(network, options, self.transcriber.tokenizer) \
            if network.has_ctc else None

    @property
    def sample_rate(self) -> int:
        return self.transcriber.sample_rate

    def partial(self, wave: np.ndarray) -> str:
        """What the audio so far says, by the CTC head's best path (fast, maybe revised)."""
        if self.partial_task is None or not len(wave):
            return ""
        ids = self.partial_task.run(*padded([torch.from_numpy(wave)], self.transcriber.device))
        return self.transcriber.tokenizer.decode(ids[0])

    def transcript(self, wave: np.ndarray) -> str:
        """The final transcript: the model's full search on the whole utterance; with a
        grammar, the grammar's sentence understood, or "" when it is no command."""
        if not len(wave):
            return ""
        if self.recognizer is not None:
            intent = self.intent_of_audio(wave)
            return intent.text if intent.understood else ""
        return self.transcriber.transcribe_waves([torch.from_numpy(wave)])[0]

    def intent_of_audio(self, wave: np.ndarray) -> Intent:
        if not len(wave):
            return Intent(None)
        return self.recognizer.recognize([torch.from_numpy(wave)])[0]

    def intent_of_text(self, text: str) -> Intent:
        return self.recognizer.parser.parse(text)


class EnginePool:
    """`workers` engines behind a thread pool: `await pool.run("transcript", wave)`."""

    def __init__(self, config: ServerConfig) -> None:
        torch.set_num_threads(1)
        self.engines: queue.SimpleQueue[Engine] = queue.SimpleQueue()
        first = Engine(config)
        self.sample_rate, self.has_grammar = first.sample_rate, first.recognizer is not None
        self.engines.put(first)
        for _ in range(config.workers - 1):
            self.engines.put(Engine(config))
        self.executor = ThreadPoolExecutor(config.workers, "asr-wyoming",
                                           initializer=torch.set_num_threads, initargs=(1,))
        self.workers, self.waiting = config.workers, 0

    @property
    def busy(self) -> bool:
        """Every worker has a job: a partial transcript now would delay a final one."""
        return self.waiting >= self.workers

    async def run(self, method: str, *args: object) -> object:
        self.waiting += 1
        try:
            return await asyncio.get_running_loop().run_in_executor(
                self.executor, self._call, method, args)
        finally:
            self.waiting -= 1

    def _call(self, method: str, args: tuple) -> object:
        engine = self.engines.get()
        try:
            return getattr(engine, method)(*args)
        finally:
            self.engines.put(engine)

    def close(self) -> None:
        self.executor.shutdown(wait=False, cancel_futures=True)


def describe(config: ServerConfig, wake_program: object | None = None) -> Info:
    """The `info` event's programs: speech to text always, intents with a grammar, wake
    words where a wake service is loaded (`asr.assistant.wyoming.wake`)."""
    model = Path(str(config.model)).name or str(config.model)
    asr = AsrProgram(
        name="speech-transformer-asr", attribution=ATTRIBUTION, installed=True,
        description="Speech-Transformer speech to text", version=__version__,
        models=[AsrModel(name=model, attribution=ATTRIBUTION, installed=True,
                         description=f"the {model} model", version=__version__,
                         languages=LANGUAGES)],
        supports_transcript_streaming=True)
    intent = [] if config.grammar is None else [IntentProgram(
        name="speech-transformer-asr-intents", attribution=ATTRIBUTION, installed=True,
        description="intents of a grammar, from text or audio", version=__version__,
        models=[IntentModel(name=str(config.grammar), attribution=ATTRIBUTION, installed=True,
                            description=f"the grammar {config.grammar}", version=__version__,
                            languages=LANGUAGES)])]
    return Info(asr=[asr], intent=intent, wake=[wake_program] if wake_program else [])

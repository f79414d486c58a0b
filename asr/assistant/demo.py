"""The voice-command demo: speak to the computer and it obeys.

    asr-demo                                      # listen to the default microphone
    asr-demo --input commands.wav                 # a WAV/FLAC file, through the same path
    arecord -q -f S16_LE -r 16000 -c 1 | asr-demo --input -    # raw 16-bit mono PCM on stdin
    asr-demo model_dir=exp/mine vad.aggressiveness=3 actions.home=/data/me   # conf/demo.yaml

Audio arrives in blocks of `block_ms`, from the microphone's callback or sliced from the input
file, and every block takes one path: the VAD endpointer (asr/vad.py) decides where each
utterance ends, the model transcribes it (asr/transcriber.py), the intent parser
(asr/assistant/intents/) maps the text and its confidence to a command of the grammar (the model
directory's grammar.yaml, or `grammar=FILE`), and the assistant
(asr/assistant/actions.py) carries it out. For each utterance the demo prints what it heard
(free of the grammar), the grammar sentence that matched, the intent, the result and the
latency from the end of speech to the result: the endpointer's wait for trailing silence plus
recognition and action.

The wait is what a user feels most, so the demo does not always sit out the endpointer's
`vad.end_silence_ms`: after `early_ms` of silence it decodes the speech so far, and when that is
a whole sentence of the grammar, understood, it acts at once and closes the utterance. Speech
that resumes within `vad.end_silence_ms` continues that command ("show me my photos ... please"):
when the two together still mean the same command, nothing more is done.

While a person speaks, the demo prints `partial: ...`, what it has heard so far, at least
every `partial_ms` of audio (`asr.streaming.PartialDecoder`: the CTC head's best path of the
utterance so far). The partials are for the person to watch: what the demo decides and does
comes from each whole utterance, as without them.

Time in the demo is the stream's: seconds of audio heard, from a microphone or from a file read
faster than real time alike, so a yes/no question expires (`actions.confirm_seconds`) and a
timer rings after so many seconds of audio. Every printed line is escaped (`asr.cli.tsv_field`):
a file name or slot value with a newline cannot forge a line of the output.
"""

import sys
import threading
import time
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass
from pathlib import Path
from queue import Queue
from typing import BinaryIO

import numpy as np
import torch
from hydra import compose, initialize_config_dir
from hydra.core.config_store import ConfigStore
from hydra.errors import HydraException
from omegaconf import DictConfig, OmegaConf
from omegaconf.errors import OmegaConfBaseException

from asr import CONF_DIR
from asr.assistant.actions import ActionsConfig, Assistant
from asr.assistant.intents import (
    Intent,
    IntentParser,
    default_min_confidence,
    free_text,
    grammar_file,
    nbest_texts,
)
from asr.assistant.wake_listen import WakeListener, WakeSettings
from asr.audio import AudioError, load_audio, resample
from asr.checkpoint import ModelDirError
from asr.cli import ArgumentParser, one_line, quiet_pipe, tsv_field
from asr.grammar import Grammar, GrammarError
from asr.streaming import PartialDecoder
from asr.transcriber import DEFAULT_VAD, Transcriber
from asr.untrusted import first_line, from_section
from asr.vad import VAD_RATES, Endpointer, SpeechSpan, VADConfig
from asr.wake import WakeWordDetector, calibrated_margin

PROG = "asr-demo"  # the name usage errors begin with
ASK_RATIO = 0.5  # ask "did you mean ...?" when the second reading is at least this likely
                 # relative to the first
Block = tuple[np.ndarray, float]  # samples and the time.monotonic() at which they arrived


class DemoError(RuntimeError):
    """A problem the user can fix (no microphone, bad input); printed as one line."""


@dataclass(frozen=True)
class Turn:
    """One utterance and what came of it."""

    start: float  # seconds into the stream
    end: float
    text: str  # what the search wrote: with the grammar search, a grammar sentence (`said`)
    intent: Intent
    result: str
    latency: float  # seconds from the end of speech to the result
    wait: float  # of which: waiting for the trailing silence that ends the utterance
    early: bool = False  # acted on after `early_ms` of silence, as a whole grammar sentence


class Console:
    """Prints whole lines, from any thread, without interleaving; each escaped, so that what
    it quotes (file names, slot values) stays on its line."""

    def __init__(self, write: Callable[[str], None] | None = None) -> None:
        """`write` takes every line, errors included; by default stdout (errors: stderr)."""
        self._write = write or (lambda line: print(line, flush=True))
        self._error = write or (lambda line: print(line, file=sys.stderr, flush=True))
        self._lock = threading.Lock()

    def __call__(self, *lines: str) -> None:
        with self._lock:
            for line in lines:
                self._write(tsv_field(line))

    def error(self, line: str) -> None:
        with self._lock:
            self._error(line)


class VoiceDemo:
    """Blocks of audio in, actions out; the same object serves the microphone and files."""

    def __init__(self, transcriber: Transcriber, parser: IntentParser, assistant: Assistant,
                 vad: VADConfig, sample_rate: int, console: Console, early_ms: int = 0,
                 partials: PartialDecoder | None = None, wake: WakeListener | None = None,
                 ) -> None:
        """`partials`: print what is heard so far while a person speaks (None: not). `wake`:
        act only on the utterance after the wake phrase (None: on every utterance)."""
        self.transcriber, self.parser, self.assistant = transcriber, parser, assistant
        self.partials = partials
        self.vad, self.sample_rate, self.console = vad, sample_rate, console
        if not 0 <= early_ms <= vad.end_silence_ms:
            raise ValueError(f"early_ms must be in [0, vad.end_silence_ms = {vad.end_silence_ms}],"
                             f" got {early_ms}")
        self.early_ms, self.wake = early_ms, wake
        Endpointer(sample_rate, vad)  # a bad VAD setting fails here, before any audio
        self.heard = 0  # samples heard by every run: the demo's clock, which never goes back
        assistant.set_clock(self.stream_seconds)

    def stream_seconds(self) -> float:
        """The demo's time: seconds of audio heard."""
        return self.heard / self.sample_rate

    def run(self, blocks: Iterable[Block]) -> list[Turn]:
        """Listen until the blocks end; act on each utterance as soon as it is over (with a
        wake phrase, on the one utterance after each time it is heard)."""
        endpointer = Endpointer(self.sample_rate, self.vad)
        turns: list[Turn] = []
        heard, received, pause = 0, time.monotonic(), 0  # heard: of this stream
        for samples, received in blocks:
            heard += len(samples)
            self.heard += len(samples)
            self.assistant.tick()
            if self.wake is not None:
                was_awake = self.wake.awake
                samples = self.wake.hear(samples, endpointer.in_speech)
                if samples is None:
                    continue
                if not was_awake:
                    endpointer = Endpointer(self.sample_rate, self.vad)
            done = len(turns)
            for utterance in endpointer.feed(samples):
                turns.append(self.handle(self._timed(utterance), heard, received, turns))
            before, pause = pause, endpointer.pause_ms
            if self.early_ms and before < self.early_ms <= pause:
                turns += self._early(endpointer, heard, received)
            self._partial(endpointer, heard)
            if self.wake is not None and len(turns) > done:
                self.wake.sleep()
        if self.wake is None or self.wake.awake:
            for utterance in endpointer.flush():
                turns.append(self.handle(self._timed(utterance), heard, received, turns))
        return turns

    def _timed(self, utterance: SpeechSpan) -> SpeechSpan:
        """An utterance in stream time (with a wake phrase, the endpointer starts on waking)."""
        return utterance if self.wake is None else self.wake.shifted(utterance)

    def _partial(self, endpointer: Endpointer, heard: int) -> None:
        """Print what the utterance in progress says so far, when it says something new."""
        if self.partials is None:
            return
        said_before = self.partials.text
        if self.partials.update(endpointer, heard) and self.partials.text not in ("", said_before):
            self.console(f"partial: {self.partials.text}")

    def _early(self, endpointer: Endpointer, heard: int, received: float) -> list[Turn]:
        """Act on the speech so far if it is a whole grammar sentence, understood."""
        utterance = endpointer.peek()
        if utterance is None:
            return []
        utterance = self._timed(utterance)
        decoded = self._recognize(utterance)
        if not (decoded[1].understood and decoded[1].similarity == 1.0):
            return []
        speech_end = utterance.end - endpointer.pause_ms / 1000
        endpointer.flush()
        return [self.turn(utterance, decoded, heard, received, speech_end, early=True)]

    def _recognize(self, utterance: SpeechSpan) -> tuple[str, Intent]:
        wave = resample(torch.from_numpy(utterance.samples), self.sample_rate,
                        self.transcriber.sample_rate)
        text, found = self.transcriber.transcribe_scored([wave])[0]
        return text, self.parser.parse(text, found, nbest_texts(self.transcriber, found),
                                       free_text(self.transcriber, found))

    def handle(self, utterance: SpeechSpan, heard: int, received: float,
               earlier: list[Turn] | None = None) -> Turn:
        """Transcribe, understand, act and report. `heard` samples had arrived by `received`;
        `earlier` turns tell whether this utterance continues a command acted on early."""
        decoded = self._recognize(utterance)
        # Speech ended `pad_ms` before the utterance's end (the endpointer keeps that much
        # trailing context); the samples after it were heard before `received`.
        speech_end = max(utterance.start, utterance.end - self.vad.pad_ms / 1000)
        return self.turn(utterance, decoded, heard, received, speech_end,
                          self.continued(utterance, said(*decoded), earlier or []))

    def continued(self, utterance: SpeechSpan, text: str, earlier: list[Turn]) -> Turn | None:
        """The early turn this utterance goes on from, when its sentence followed by `text`
        (what this utterance said) still means its command. `text` is best heard free of the
        grammar: the grammar search of the rest alone writes a whole sentence, never "please"."""
        last = earlier[-1] if earlier else None
        if last is None or not last.early or utterance.start - last.end > (
                self.vad.end_silence_ms + self.vad.pad_ms) / 1000:
            return None
        whole = self.parser.parse(f"{last.text} {text}")
        same = whole.understood and (whole.name, whole.slots) == (last.intent.name,
                                                                  last.intent.slots)
        return last if same else None

    def turn(self, utterance: SpeechSpan, decoded: tuple[str, Intent], heard: int,
              received: float, speech_end: float, continues: Turn | None = None,
              early: bool = False) -> Turn:
        text, intent = decoded
        if continues is not None:
            result = f"(the rest of \"{continues.text}\": already done)"
        elif intent.understood and unsure(intent):
            result = self.assistant.confirm(intent.name, intent.slots, intent.describe())
        elif intent.understood:
            result = self.assistant.act(intent.name, intent.slots)
        else:
            self.assistant.not_understood()
            result = f"Sorry, I did not understand: {said(text, intent)}"
        wait = heard / self.sample_rate - speech_end
        latency = wait + time.monotonic() - received
        turn = Turn(utterance.start, utterance.end, text, intent, result, latency, wait, early)
        self.console(*report(turn, self.parser))
        return turn


def unsure(intent: Intent) -> bool:
    """Whether the grammar search's two most likely readings are close (`ASK_RATIO`)."""
    readings = intent.alternatives
    return len(readings) > 1 and readings[1].probability >= ASK_RATIO * readings[0].probability


def said(text: str, intent: Intent) -> str:
    """What was said: the transcript free of the grammar, else the search's `text`."""
    return text if intent.heard is None else intent.heard


def report(turn: Turn, parser: IntentParser) -> list[str]:
    """The lines printed for one utterance. What was heard and the grammar sentence it matched
    are two lines, since the grammar search writes a sentence whatever was said; without a
    free transcript, the search's text is marked as such."""
    intent = turn.intent
    heard = f"\"{said(turn.text, intent)}\""
    if intent.heard is None:
        heard += " (no free transcript)"
    if parser.search == "grammar":
        sure = f"confidence {intent.confidence:.2f}"
        needs = f"{parser.min_confidence:.2f}"
    else:
        sure = f"similarity {intent.similarity:.2f}" + (
            f", acoustic confidence {intent.acoustic:.2f}" if intent.acoustic is not None else "")
        needs = f"{parser.threshold:.2f} and {parser.min_confidence:.2f}"
    if intent.understood:
        match = f"\"{intent.command}\" ({sure})"
    elif intent.command:
        match = f"none (closest: \"{intent.command}\", {sure}; needs {needs})"
    else:
        match = "none (nothing was recognised)"
    return [f"[{turn.start:.2f}-{turn.end:.2f} s] heard: {heard}",
            f"  match: {match}",
            f"  intent: {intent.describe() if intent.understood else 'none'}",
            f"  action: {turn.result}",
            f"  latency: {turn.latency:.2f} s ({turn.wait:.2f} s waiting for the end of speech, "
            f"{turn.latency - turn.wait:.2f} s recognition and action)"]


# ---------------------------------------------------------------------------- audio sources


def file_blocks(path: str | Path, sample_rate: int, block: int, realtime: bool = False
                ) -> Iterator[Block]:
    """A file in blocks of `block` samples, as if a microphone delivered them.

    The file is read (and checked) at once. `realtime` paces the blocks at the speed of real
    time; otherwise they come as fast as the demo takes them, and the latency reported is the
    same, since the wait for the end of speech is counted in stream time.
    """
    return _paced(load_audio(path, sample_rate).numpy(), sample_rate, block, realtime)


def _paced(wave: np.ndarray, sample_rate: int, block: int, realtime: bool) -> Iterator[Block]:
    started = time.monotonic()
    for start in range(0, len(wave), block):
        if realtime:
            time.sleep(max(0.0, started + (start + block) / sample_rate - time.monotonic()))
        yield wave[start:start + block], time.monotonic()


def pcm_blocks(stream: BinaryIO, block: int) -> Iterator[Block]:
    """Raw 16-bit little-endian mono PCM (e.g. `arecord -f S16_LE`) in blocks of `block`."""
    while data := stream.read(2 * block):
        whole = len(data) // 2 * 2  # a stream that ends mid-sample loses that half sample
        yield np.frombuffer(data[:whole], "<i2").astype(np.float32) / 32768, time.monotonic()


def microphone_blocks(sample_rate: int, block: int, device: str | int | None) -> Iterator[Block]:
    """Blocks from a sounddevice input stream; checks for PortAudio and a microphone first."""
    try:
        import sounddevice as sd
    except ImportError:
        raise DemoError("live mode needs the sounddevice package: pip install 'asr[mic]' "
                        "(or use --input FILE.wav)") from None
    except OSError as err:  # sounddevice is there, the PortAudio library is not
        raise DemoError(f"live mode needs PortAudio ({err}): apt-get install libportaudio2 "
                        "(or use --input FILE.wav)") from None
    try:
        sd.check_input_settings(device=device, channels=1, samplerate=sample_rate,
                                dtype="float32")
    except (sd.PortAudioError, ValueError) as err:
        problem = first_line(err)
        raise DemoError(f"no usable microphone: {problem} (use --input FILE.wav instead)") \
            from None
    return _listen(sd, sample_rate, block, device)


def _listen(sd, sample_rate: int, block: int, device: str | int | None) -> Iterator[Block]:
    queue: Queue[Block] = Queue()

    def callback(indata: np.ndarray, frames: int, time_info, status) -> None:
        queue.put((indata[:, 0].copy(), time.monotonic()))

    with sd.InputStream(samplerate=sample_rate, blocksize=block, device=device, channels=1,
                        dtype="float32", callback=callback):
        while True:
            yield queue.get()


# ---------------------------------------------------------------------------- command line


def load_config(overrides: list[str]) -> DictConfig:
    """conf/demo.yaml with Hydra overrides (`key=value`, `vad.aggressiveness=3`, ...)."""
    ConfigStore.instance().store(group="actions", name="base_actions", node=ActionsConfig)
    with initialize_config_dir(config_dir=str(CONF_DIR), version_base="1.3"):
        return compose("demo", overrides=overrides)


def build(cfg: DictConfig, console: Console) -> VoiceDemo:
    """The demo's parts from its config; the model is loaded here (the slow part)."""
    intents = dict(_plain(cfg.intents) or {})
    search = intents.get("search", IntentParser.search)
    grammar = Grammar.load(grammar_file(cfg.model_dir, cfg.grammar))
    transcriber = Transcriber.from_pretrained(cfg.model_dir, device=cfg.device, vad=DEFAULT_VAD,
                                              grammar=grammar if search == "grammar" else None)
    actions = from_section(ActionsConfig, _plain(cfg.actions), "actions")
    assistant = Assistant(actions, announce=lambda line: console(f"** {line}"))
    if intents.get("min_confidence") is None:
        intents["min_confidence"] = default_min_confidence(cfg.model_dir, search, cfg.grammar)
    parser = from_section(IntentParser, {"grammar": grammar, **intents}, "intents")
    vad = from_section(VADConfig, _plain(cfg.vad), "vad")
    partials = PartialDecoder(transcriber, cfg.partial_ms / 1000) if cfg.partial_ms else None
    return VoiceDemo(transcriber, parser, assistant, vad, cfg.sample_rate, console, cfg.early_ms,
                     partials, wake_listener(cfg, transcriber, console))


def wake_listener(cfg: DictConfig, transcriber: Transcriber, console: Console
                  ) -> WakeListener | None:
    """The wake phrase's listener (`wake=PHRASE`), None without one."""
    phrases = _plain(cfg.get("wake"))
    if phrases is None:
        return None
    settings = from_section(WakeSettings, {
        "phrases": [phrases] if isinstance(phrases, str) else phrases,
        "sensitivity": cfg.wake_sensitivity, "timeout_s": cfg.wake_timeout_s,
        "chime": cfg.wake_chime}, "wake")
    if cfg.sample_rate != transcriber.sample_rate:
        raise DemoError(f"a wake phrase needs sample_rate={transcriber.sample_rate} (the "
                        f"model's), got {cfg.sample_rate}")
    detector = WakeWordDetector(settings.phrases, settings.sensitivity, transcriber,
                                margin=calibrated_margin(cfg.model_dir))
    return WakeListener(detector, settings, lambda line: console(f"** {line}"))


def _plain(node: object) -> object:
    return OmegaConf.to_container(node, resolve=True) if OmegaConf.is_config(node) else node


def check_settings(cfg: DictConfig) -> None:
    """The demo's own settings (its parts check theirs as they are built)."""
    for key in ("model_dir", "device"):
        if not isinstance(cfg[key], str):
            raise DemoError(f"{key} must be a string, got {cfg[key]!r}")
    if not isinstance(cfg.grammar, str | None):
        raise DemoError(f"grammar must be a file name or null, got {cfg.grammar!r}")
    if cfg.sample_rate not in VAD_RATES or isinstance(cfg.sample_rate, bool):
        raise DemoError(f"sample_rate must be one of {VAD_RATES} (the VAD's), got "
                        f"{cfg.sample_rate!r}")
    if isinstance(cfg.block_ms, bool) or not isinstance(cfg.block_ms, int) \
            or not 10 <= cfg.block_ms <= 1000:
        raise DemoError(f"block_ms must be a whole number in [10, 1000], got {cfg.block_ms!r}")
    if isinstance(cfg.early_ms, bool) or not isinstance(cfg.early_ms, int):
        raise DemoError(f"early_ms must be a whole number of milliseconds, got {cfg.early_ms!r}")
    if isinstance(cfg.partial_ms, bool) or not isinstance(cfg.partial_ms, int) \
            or not (cfg.partial_ms == 0 or 10 <= cfg.partial_ms <= 60000):
        raise DemoError(f"partial_ms must be 0 (no partials) or a whole number of milliseconds "
                        f"in [10, 60000], got {cfg.partial_ms!r}")


def blocks_for(source: str | None, cfg: DictConfig, stdin: BinaryIO) -> Iterator[Block]:
    block = cfg.sample_rate * cfg.block_ms // 1000
    if source is None:
        return microphone_blocks(cfg.sample_rate, block, cfg.microphone)
    if source == "-":
        return pcm_blocks(stdin, block)
    return file_blocks(source, cfg.sample_rate, block, cfg.realtime)


@quiet_pipe
def main(argv: list[str] | None = None, stdin: BinaryIO | None = None,
         console: Console | None = None) -> int:
    parser = ArgumentParser(prog=PROG, description=__doc__.splitlines()[0])
    parser.add_argument("--input", metavar="FILE", help="a WAV/FLAC file, or - for raw 16-bit "
                        "mono PCM on stdin at sample_rate; without it, the microphone")
    parser.add_argument("--realtime", action="store_true",
                        help="feed --input at the pace of real time (realtime=true)")
    parser.add_argument("overrides", nargs="*", help="config overrides, e.g. vad.aggressiveness=3")
    args = parser.parse_args(argv)
    console = console or Console()
    try:
        cfg = load_config(args.overrides + (["realtime=true"] if args.realtime else []))
        check_settings(cfg)
        blocks = blocks_for(args.input, cfg, stdin or sys.stdin.buffer)  # no audio: fail fast
        demo = build(cfg, console)
        home = demo.assistant.home
        console(f"model {cfg.model_dir} on {demo.transcriber.device}; files from {home}; "
                f"launching {'on' if cfg.actions.launch else 'off'}; "
                f"{'listening to ' + args.input if args.input else 'listening (Ctrl-C stops)'}"
                + (f"; asleep until \"{demo.wake.detector.phrases[0]}\"" if demo.wake else ""))
        turns = demo.run(blocks)
    except (DemoError, AudioError, ModelDirError, GrammarError, HydraException,
            OmegaConfBaseException, ValueError) as err:
        console.error(f"error: {one_line(str(err))}")
        return 1
    except KeyboardInterrupt:
        console("stopped")
        return 0
    timers = demo.assistant.running_timers()
    console(f"end of input: {len(turns)} utterances"
            + (f"; timers still running stop with the demo: {', '.join(timers)}" if timers else ""))
    return 0


if __name__ == "__main__":
    sys.exit(main())

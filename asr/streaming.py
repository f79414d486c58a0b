"""Streaming recognition: samples in as they arrive, what is said so far while the person
speaks, and the final transcript of each utterance at its endpoint.

    stream = transcriber.stream()              # or .stream(sample_rate=8000): resampled
    for block in blocks:                       # any size; float32 in [-1, 1] or int16 PCM
        if stream.accept(block):               # True: an utterance has ended, its final waits
            while (final := stream.final()) is not None:
                print(final.text, final.segments[0].start, final.segments[0].end)
        else:
            print("partial:", stream.partial())    # never more than 0.5 s behind the audio
    stream.finish()                            # end of input: the utterance in progress ends
    while (final := stream.final()) is not None:
        print(final.text)

The shape is Vosk's (`AcceptWaveform` returning True at an endpoint, `PartialResult`,
`Result`, `FinalResult`) and sherpa-onnx's online streams (`accept_waveform`,
`input_finished`). One stream over hours of input gives one final per utterance.

Endpoints are the VAD's (`asr.vad.Endpointer`, the transcriber's `vad` settings): the
same cut that offline transcription makes of the same samples, whatever the blocks'
sizes. Each final is that utterance decoded by the transcriber's own search (beam, language
model, grammar: its options), so it equals offline `Transcriber.transcribe` of the same
audio: the same text, segment times and scores. An utterance in which nothing is recognised
(noise the VAD let through) gives no final, as it gives no segment offline.

Partials (`PartialDecoder`): the encoder is not a streaming one, so the utterance so far is
decoded again, with the cheapest search (the CTC head's best path: no decoder, no language
model, no grammar: what is heard), each time it is due, that is before the partial falls
`interval` (0.5 s) behind the audio heard. A partial then costs one encoder pass over the
utterance so far, bounded by `vad.max_utterance_s`; silence between utterances costs the
VAD alone. With a grammar, the partial is the free text heard, the final a grammar sentence.

Memory stays bounded over hours: the stream holds the utterance in progress (at most
`vad.max_utterance_s`) and a few frames before it, the resampler's filter, and the finals
not yet read (text only).
"""

from collections import deque
from dataclasses import replace
from typing import Generic, Protocol, TypeVar

import numpy as np
import soxr
import torch

from asr.audio import MAX_PEAK, MAX_RATE, MIN_RATE, AudioError
from asr.decoding import DecodingTask
from asr.network import Network
from asr.search import DecodingOptions
from asr.threads import torch_threads
from asr.tokenizer import Tokenizer
from asr.untrusted import short
from asr.vad import Endpointer, SpeechSpan, VADConfig

PARTIAL_SECONDS = 0.5  # a partial is never further behind the audio heard than this
STREAM = "<stream>"  # the name bad samples' errors begin with
DTYPES = {np.dtype(np.float32): 1.0, np.dtype(np.float64): 1.0, np.dtype(np.int16): 32768.0}
Final = TypeVar("Final")  # what a recogniser makes of an utterance: a Transcript


class Recognizer(Protocol[Final]):
    """What a stream needs of a recogniser: `asr.transcriber.Transcriber` (whose `stream`
    method makes one) is the one there is."""

    network: Network
    tokenizer: Tokenizer
    options: DecodingOptions
    sample_rate: int
    vad: VADConfig | None

    def decode_utterance(self, utterance: SpeechSpan, word_timestamps: bool = False
                         ) -> Final | None: ...


class PartialDecoder:
    """What the utterance in progress says so far, by the cheapest search, kept at most
    `interval` seconds behind the audio an `Endpointer` has been fed.

    The demo uses it beside its own endpointer; `TranscriptStream` uses it beside its own.
    `update` after each block fed decodes when the partial is due; `text` is the latest.
    """

    def __init__(self, transcriber: Recognizer, interval: float = PARTIAL_SECONDS) -> None:
        if isinstance(interval, bool) or not isinstance(interval, int | float) \
                or not 0.01 <= interval <= 60:
            raise ValueError(f"the partial interval must be a number of seconds in [0.01, 60], "
                             f"got {short(interval)}")
        self.interval = float(interval)
        self.network = transcriber.network
        self.task = DecodingTask(self.network, cheap_options(transcriber), transcriber.tokenizer)
        self.tokenizer = transcriber.tokenizer
        self.text = ""  # the latest partial of the utterance in progress
        self.start: float | None = None  # where that utterance starts (None: none in progress)
        self.end = 0.0  # seconds into the stream up to which `text` covers the audio
        self._length = 0  # its samples when last decoded

    def reset(self) -> None:
        """No utterance in progress: the partial is empty."""
        self.text, self.start, self._length = "", None, 0

    def update(self, endpointer: Endpointer, heard: int, behind: float = 0.0) -> bool:
        """After `heard` samples have been fed to `endpointer`: decode the utterance in
        progress if the partial is due. `behind`: seconds of audio taken but not yet fed
        (a resampler's delay), which the partial falls behind by too. True when a partial was
        decoded (its text may be the same as before)."""
        if not endpointer.in_speech:
            self.reset()
            return False
        frame = endpointer.frame / endpointer.sample_rate
        now = heard // endpointer.frame * frame  # the end of the frames classified
        late = frame + behind  # what the next frame, and the audio not yet fed, add
        if self.start is not None and now + late - self.end <= self.interval + 1e-9:
            return False  # still within `interval` after the next frame
        utterance = endpointer.peek()
        if utterance is None:
            return False  # not heard as speech yet (nothing peaked: noise, so far)
        if utterance.start != self.start:  # a new utterance, or one cut at max_utterance_s
            self.reset()
            self.start, self.end = utterance.start, utterance.start
            if now + late - self.end <= self.interval + 1e-9:
                return False
        if len(utterance.samples) == self._length:  # silence since: nothing new to hear
            self.end = now
            return False
        self.text = self._decode(utterance.samples)
        self.end, self._length = now, len(utterance.samples)
        return True

    def _decode(self, samples: np.ndarray) -> str:
        wave = torch.from_numpy(samples).to(self.network.device)
        lengths = torch.tensor([len(samples)], device=self.network.device)
        with torch_threads(1):  # one utterance: one thread (asr.threads)
            return self.tokenizer.decode(self.task.run(wave[None], lengths)[0])


def cheap_options(transcriber: Recognizer) -> DecodingOptions:
    """The transcriber's decoding options for partials: the CTC head's best path where the
    model has one, else greedy attention; no language model, grammar or word list."""
    options = replace(transcriber.options, lm=None, grammar=None, words=None)
    if transcriber.network.has_ctc:
        return replace(options, mode="ctc_greedy")
    return replace(options, mode="attention", beam_size=1)


class TranscriptStream(Generic[Final]):
    """One stream of audio in, partial and final transcripts out (the module's docstring).

    Made by `Transcriber.stream`: `sample_rate` is the rate of the samples accepted (default:
    the model's; another is resampled by soxr as one continuous stream), `interval` the
    most a partial may fall behind, `word_timestamps` times each final's words.
    """

    def __init__(self, transcriber: Recognizer[Final], sample_rate: int | None = None,
                 interval: float = PARTIAL_SECONDS, word_timestamps: bool = False) -> None:
        rate = transcriber.sample_rate if sample_rate is None else sample_rate
        if isinstance(rate, bool) or not isinstance(rate, int) or not MIN_RATE <= rate <= MAX_RATE:
            raise ValueError(f"sample_rate must be a whole number of Hz in {MIN_RATE}-{MAX_RATE}, "
                             f"got {short(rate)}")
        if not isinstance(word_timestamps, bool):
            raise ValueError(f"word_timestamps must be True or False, got {short(word_timestamps)}")
        if word_timestamps and not transcriber.network.has_ctc:
            raise ValueError("word timestamps need a model with a CTC head (model.ctc_weight > 0)")
        self.transcriber, self.sample_rate = transcriber, rate
        self.word_timestamps = word_timestamps
        self.vad = transcriber.vad or VADConfig()
        self.endpointer = Endpointer(transcriber.sample_rate, self.vad)
        self.partials = PartialDecoder(transcriber, interval)
        self._resampler = None if rate == transcriber.sample_rate else soxr.ResampleStream(
            rate, transcriber.sample_rate, 1, dtype="float32")
        self._accepted = 0  # samples accepted, at `sample_rate`
        self._heard = 0  # samples fed to the endpointer, at the model's rate
        self._finals: deque[Final] = deque()
        self._finished = False

    @property
    def seconds(self) -> float:
        """Seconds of audio accepted so far: the stream's clock."""
        return self._accepted / self.sample_rate

    @property
    def in_speech(self) -> bool:
        """Whether an utterance heard as speech is in progress (its partial is kept fresh)."""
        return self.partials.start is not None

    @property
    def partial_end(self) -> float:
        """Where the audio the partial covers ends, in seconds into the stream (an utterance
        just begun, with no partial yet: its start)."""
        return self.partials.end

    def accept(self, samples: np.ndarray | torch.Tensor, sample_rate: int | None = None) -> bool:
        """Take the next samples (mono, any number): float32/float64 in [-1, 1] or int16 PCM,
        numpy or torch, at the stream's rate (`sample_rate`, if given, must be it). True when
        a final waits to be read (`final`): an utterance has ended."""
        if self._finished:
            raise ValueError("this stream is finished (finish() was called): start a new one "
                             "with transcriber.stream()")
        if sample_rate is not None and sample_rate != self.sample_rate:
            raise ValueError(f"this stream takes samples at {self.sample_rate} Hz, got "
                             f"{short(sample_rate)} Hz (transcriber.stream(sample_rate=...) "
                             "sets its rate)")
        block = stream_block(samples)
        self._accepted += len(block)
        if self._resampler is not None and len(block):
            block = self._resampler.resample_chunk(block)
        self._feed(block)
        return bool(self._finals)

    def finish(self) -> bool:
        """End of input: the utterance in progress ends here. True when a final waits."""
        if not self._finished:
            self._finished = True
            if self._resampler is not None:
                self._feed(self._resampler.resample_chunk(np.zeros(0, np.float32), last=True))
            for utterance in self.endpointer.flush():
                self._final(utterance)
            self.partials.reset()
        return bool(self._finals)

    def partial(self) -> str:
        """What the utterance in progress says so far ("" when none is in progress)."""
        return self.partials.text

    def final(self) -> Final | None:
        """The next ended utterance's transcript, oldest first (None when none waits): a
        `Transcript` with one `Segment` timed in seconds into the stream."""
        return self._finals.popleft() if self._finals else None

    def _feed(self, block: np.ndarray) -> None:
        self._heard += len(block)
        for utterance in self.endpointer.feed(block):
            self._final(utterance)
        behind = self.seconds - self._heard / self.transcriber.sample_rate
        self.partials.update(self.endpointer, self._heard, max(0.0, behind))

    def _final(self, utterance: SpeechSpan) -> None:
        found = self.transcriber.decode_utterance(utterance, self.word_timestamps)
        if found is not None:
            self._finals.append(found)


def stream_block(samples: object) -> np.ndarray:
    """A block of samples as mono float32, or a one-line `AudioError` naming what is wrong
    with it: its type, dtype, shape, non-finite samples, or floats far outside [-1, 1]."""
    if isinstance(samples, bytes | bytearray | memoryview):
        raise AudioError(STREAM, "samples must be an array, got bytes (raw 16-bit PCM: "
                                 "np.frombuffer(data, '<i2'))")
    if isinstance(samples, torch.Tensor):
        if samples.dtype not in (torch.float32, torch.float64, torch.int16):
            raise _dtype_error(str(samples.dtype).removeprefix("torch."))
        samples = samples.detach().cpu().numpy()
    if not isinstance(samples, np.ndarray):
        raise AudioError(STREAM, f"samples must be a numpy array or a torch tensor, got "
                                 f"{type(samples).__name__}")
    if samples.dtype.byteorder not in "=|":
        samples = samples.astype(samples.dtype.newbyteorder("="))  # a big-endian file's
    if samples.dtype not in DTYPES:
        raise _dtype_error(str(samples.dtype))
    if samples.ndim == 2 and 1 in samples.shape:
        samples = samples.reshape(-1)  # one channel, (frames, 1) or (1, frames)
    if samples.ndim != 1:
        raise AudioError(STREAM, f"samples must be mono: a 1-D array, or 2-D with one channel, "
                                 f"got shape {samples.shape}")
    block = (samples / DTYPES[samples.dtype]).astype(np.float32) \
        if samples.dtype.kind == "i" else samples.astype(np.float32)
    if not np.isfinite(block).all():
        raise AudioError(STREAM, "contains NaN or infinite samples")
    peak = float(np.abs(block).max(initial=0.0))
    if peak > MAX_PEAK:
        raise AudioError(STREAM, f"samples reach {peak:.6g}, far outside [-1, 1] (integer PCM "
                                 "as floats? pass it as int16); refused")
    return block


def _dtype_error(dtype: str) -> AudioError:
    return AudioError(STREAM, f"samples must be float32 or float64 in [-1, 1] or int16 PCM, "
                              f"got {dtype}")

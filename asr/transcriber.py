"""Python API for inference: a trained model directory -> text with timed segments.

    from asr import Transcriber
    t = Transcriber.from_pretrained("exp/voice_commands", device="cpu")
    t.transcribe("command.wav").text        # "show me my photos please"
    t.transcribe("lecture.flac").segments   # [Segment(start=0.63, end=2.91, text="...", ...), ...]
    t.transcribe(["a.wav", "b.flac"])       # [Transcript, Transcript], decoded in batches
    t.transcribe("talk.ogg", word_timestamps=True).segments[0].words   # [Word(...), ...]
    Transcriber.from_pretrained("exp/voice_commands", backend="onnx")  # its exported graphs
    Transcriber.from_pretrained(grammar="coffee.yaml")   # only the grammar's sentences
    t.set_grammar(Grammar.from_yaml(text))                # another grammar, the model kept
    stream = t.stream()          # live audio: .accept(block), .partial(), .final() (asr.streaming)

Audio of any length is streamed (`asr.stream`), cut into utterances by the voice activity
detector (`asr.vad`) and the utterances of all inputs are decoded together in batches, so
memory stays bounded and a stretch of silence is never handed to the decoder to invent words
for. Each segment carries the decoder's scores (whisper's `avg_logprob` and `no_speech_prob`,
and the acoustic `confidence`) and, with `word_timestamps`, its words timed by the CTC head
(`asr.alignment`). The model runs in torch or, exported (`python -m asr.export`), in
onnxruntime (`backend="onnx"`): the same searches and scores either way. With a `grammar`
(a Rhino context file, `asr.grammar`) the search writes only the grammar's sentences, as Vosk's
grammar argument does; `transcribe_scored` also gives what the model heard without it. The
evaluate and transcribe command lines are thin wrappers around this class.
"""

from collections.abc import Iterable, Iterator
from dataclasses import dataclass, field, replace
from pathlib import Path

import torch
from torch.nn.utils.rnn import pad_sequence
from tqdm import tqdm

from asr.audio import AudioError, load_audio, prepare_array
from asr.checkpoint import CONFIG, ModelDirError, load_model_dir, section
from asr.decoding import DecodingOptions, DecodingTask, Hypothesis
from asr.device import pick_device
from asr.grammar import Grammar
from asr.lm import inside
from asr.model import SpeechTransformer
from asr.models import DEFAULT as DEFAULT_MODEL
from asr.models import model_path
from asr.network import Network, as_network
from asr.onnx_backend import OnnxNetwork
from asr.progress import progress
from asr.streaming import PARTIAL_SECONDS, TranscriptStream
from asr.threads import decoding_threads, idle_now, session_threads, torch_threads
from asr.tokenizer import Tokenizer
from asr.untrusted import from_section, short
from asr.utterances import (
    AudioInput,
    by_length,
    in_batches,
    input_starts,
    read_utterances,
    speech_span,
)
from asr.vad import SpeechSpan, VADConfig

DEFAULT_VAD = VADConfig()
MAX_BATCH = 4096  # utterances decoded at once
MAX_THREADS = 1024
BACKENDS = ("torch", "onnx")


@dataclass
class Word:
    """One word of a segment and where it lies in the input (seconds), from CTC alignment."""

    word: str
    start: float
    end: float
    probability: float  # mean CTC probability of its tokens on the frames aligned to them


@dataclass
class Segment:
    """One utterance found by the VAD: where it lies in the input (seconds), its text, and how
    sure the model is of it."""

    start: float
    end: float
    text: str
    avg_logprob: float  # attention decoder's log-probability per token, EOS included
    no_speech_prob: float  # attention decoder's probability that nothing was said
    confidence: float  # acoustic confidence in (0, 1]: attention and CTC together
    words: list[Word] | None = None  # with word_timestamps ([] if CTC could not align it)


@dataclass
class Transcript:
    """What was said in one input: the plain `text` (also `str(transcript)`) and its segments."""

    text: str
    segments: list[Segment] = field(default_factory=list)

    def __str__(self) -> str:
        return self.text


class Transcriber:
    """A model, its tokenizer, decoding options and a VAD, ready to turn audio into text.

    `model` is the torch model or another `asr.network.Network` (its ONNX export, on the
    CPU). `vad=None` decodes every input whole, as one utterance (for pre-cut utterances, as
    in a test manifest); otherwise inputs are cut into utterances first. `threads`: the CPU
    threads every decoding call takes; None chooses by the work (`asr.threads`): one for a
    single utterance, torch's count (at most the idle cores) for a batch.
    """

    def __init__(self, model: SpeechTransformer | Network, tokenizer: Tokenizer,
                 options: DecodingOptions | None = None,
                 vad: VADConfig | None = DEFAULT_VAD, batch_size: int = 16,
                 grammar: Grammar | None = None, threads: int | None = None) -> None:
        check_arguments(options, vad, batch_size, threads)
        self.model, self.tokenizer = model, tokenizer
        self.network = as_network(model)
        self.vad, self.batch_size = vad, batch_size
        self.threads = threads or torch.get_num_threads()
        self._fixed_threads = threads is not None
        if isinstance(model, SpeechTransformer):
            model.eval()
        self.device = self.network.device
        self.sample_rate = self.network.sample_rate
        self.task = DecodingTask(self.network, options, tokenizer, grammar)

    @property
    def options(self) -> DecodingOptions:
        return self.task.options

    @property
    def grammar(self) -> Grammar | None:
        """The grammar whose sentences alone are written (None: free text)."""
        return self.task.grammar

    def set_grammar(self, grammar: Grammar | str | Path | None) -> None:
        """Write only this grammar's sentences from now on (a `Grammar`, or a grammar file);
        None: free text again. The model stays loaded: a new grammar takes what reading it
        takes (as Vosk's `SetGrammar`). A language model stays loaded, fused into the free
        search only: the grammar's sentences are the grammar search's language."""
        if grammar is not None and not isinstance(grammar, Grammar):
            grammar = Grammar.load(grammar)
        options = replace(self.options, grammar=None)
        self.task = DecodingTask(self.network, options, self.tokenizer, grammar, self.task.lm)

    @classmethod
    def from_pretrained(cls, directory: str | Path = DEFAULT_MODEL, device: str = "auto",
                        vad: VADConfig | None = DEFAULT_VAD, batch_size: int = 16,
                        backend: str = "torch", threads: int | None = None,
                        **options) -> "Transcriber":
        """Load a model directory or a shipped model by name (`asr.models`: "base", the
        default); `options` override the decoding settings it was saved with
        (`grammar=FILE` or a loaded `Grammar`: write only the sentences of that grammar).

        `backend="onnx"` runs the graphs `python -m asr.export` wrote (DIR/onnx, or DIR itself
        when it is an export directory) in onnxruntime, on the CPU, with `threads` (default:
        one when `batch_size` is 1, else torch's count) fixed in its sessions. `threads`: as
        for the class."""
        if not isinstance(backend, str) or backend not in BACKENDS:
            raise ValueError(f"backend must be torch or onnx, got {short(backend)}")
        check_arguments(None, vad, batch_size, threads)  # before the model is loaded
        if backend == "onnx":
            model, tokenizer, config = OnnxNetwork.load(directory,
                                                        session_threads(batch_size, threads))
        else:
            model, tokenizer, config = load_model_dir(model_path(directory), pick_device(device))
        saved = section(config, "decode") or {}
        try:
            from_section(DecodingOptions, saved, "decode")
        except (TypeError, ValueError) as err:
            raise ModelDirError(f"{Path(directory) / CONFIG}: {err}") from None
        grammar = options.pop("grammar") if isinstance(options.get("grammar"), Grammar) else None
        if grammar is not None:
            options["grammar"] = None  # the object in place of the file the model may name
        saved = own_lm(saved, options, model_path(directory))
        chosen = from_section(DecodingOptions, {**saved, **options}, "decode")
        return cls(model, tokenizer, chosen, vad, batch_size, grammar, threads)

    def load(self, audio: AudioInput, sample_rate: int | None = None) -> torch.Tensor:
        """A path or an array (with its `sample_rate`) -> whole mono waveform at the model's rate."""
        if isinstance(audio, str | Path):
            return load_audio(audio, self.sample_rate)
        rate = self.sample_rate if sample_rate is None else sample_rate
        return prepare_array(audio, rate, self.sample_rate)

    def transcribe(self, audio: AudioInput | list[AudioInput], sample_rate: int | None = None,
                   word_timestamps: bool = False, on_error: str = "raise",
                   show_progress: bool = False) -> Transcript | list[Transcript | AudioError]:
        """Transcribe one input (returns a Transcript) or a list (a list, in order).

        Arrays are taken at `sample_rate` (default: the model's rate). `word_timestamps`
        times every word (needs the CTC head). An input that cannot be read raises its
        AudioError (`on_error="raise"`), or (`"return"`) takes that AudioError's place in the
        results while the other inputs are transcribed as usual. `show_progress`: a bar of the
        seconds of audio transcribed (on a terminal, for work of more than a second).
        """
        if on_error not in ("raise", "return"):
            raise ValueError(f"on_error must be 'raise' or 'return', got {on_error!r}")
        inputs = audio if isinstance(audio, list) else [audio]
        results = []
        for result in self.transcribe_each(inputs, sample_rate, word_timestamps, show_progress):
            if isinstance(result, AudioError) and on_error == "raise":
                raise result
            results.append(result)
        return results if isinstance(audio, list) else results[0]

    def transcribe_each(self, inputs: Iterable[AudioInput], sample_rate: int | None = None,
                        word_timestamps: bool = False, show_progress: bool = False,
                        ) -> Iterator[Transcript | AudioError]:
        """One result per input, in order, each as soon as its last utterance is decoded: its
        Transcript, or the AudioError that stopped it being read (the others go on).
        `show_progress` as in `transcribe` (the inputs' durations are read first)."""
        check_flags(word_timestamps=word_timestamps, show_progress=show_progress)
        if word_timestamps and not self.network.has_ctc:
            raise ValueError("word timestamps need a model with a CTC head (model.ctc_weight > 0)")
        if show_progress:
            inputs = list(inputs)
        starts = input_starts(inputs, sample_rate, self.sample_rate) if show_progress else None
        utterances = read_utterances(inputs, sample_rate, self.sample_rate, self.vad)
        with audio_progress(starts[-1] if starts else None, show_progress) as bar:
            index, segments = 0, []
            for item, found in in_batches(utterances, self.batch_size,
                                          lambda waves: self._hypotheses(waves, word_timestamps)):
                if isinstance(item, SpeechSpan):
                    text = self.tokenizer.decode(found.tokens)
                    if text:
                        segments.append(self._segment(item, found, text, word_timestamps))
                    if starts:
                        bar.update(starts[index] + item.end - bar.n)
                    continue
                index += 1
                if starts:
                    bar.update(starts[index] - bar.n)
                yield item or Transcript(" ".join(s.text for s in segments), segments)
                segments = []

    def stream(self, sample_rate: int | None = None, interval: float = PARTIAL_SECONDS,
               word_timestamps: bool = False) -> TranscriptStream[Transcript]:
        """A stream for live audio (`asr.streaming`): `.accept(samples)` as they arrive
        (at `sample_rate`, default the model's), `.partial()` what is said so far, never more
        than `interval` seconds behind, and `.final()` each utterance's transcript at its
        endpoint, equal to `transcribe` of the same audio."""
        return TranscriptStream(self, sample_rate, interval, word_timestamps)

    def decode_utterance(self, utterance: SpeechSpan, word_timestamps: bool = False
                         ) -> Transcript | None:
        """One utterance the VAD cut (at the model's rate) as `transcribe_each` decodes it:
        a Transcript of its one Segment, or None when nothing is recognised in it."""
        check_flags(word_timestamps=word_timestamps)
        found = self._hypotheses([torch.from_numpy(utterance.samples)], word_timestamps)[0]
        text = self.tokenizer.decode(found.tokens)
        if not text:
            return None
        return Transcript(text, [self._segment(utterance, found, text, word_timestamps)])

    def transcribe_waves(self, waves: list[torch.Tensor]) -> list[str]:
        """Decode whole waveforms (no VAD) in batches of similar length, keeping input order."""
        return [text for text, _ in self._batched(waves, scored=False)]

    def transcribe_scored(self, waves: list[torch.Tensor], align: bool = False
                          ) -> list[tuple[str, Hypothesis]]:
        """`transcribe_waves`, each text with its `Hypothesis`: its scores (`confidence`: how
        well the audio supports it, for rejecting what was not said clearly or at all), with a
        grammar its n-best list, `garbage_ratio` and the free transcript (`free_tokens`: what
        the model writes without the grammar), with `align` its words' frames."""
        return self._batched(waves, scored=True, align=align, free=True)

    def _batched(self, waves: list[torch.Tensor], scored: bool, align: bool = False,
                 free: bool = False) -> list:
        """Every wave is checked as an array input is (`prepare_array`: finite, not over
        MAX_SECONDS), whichever entry point it came through."""
        rate = self.sample_rate
        waves = [prepare_array(w, rate, rate, f"<input {i}>") for i, w in enumerate(waves)]
        return by_length(waves, self.batch_size,
                         lambda chunk: self._decode(chunk, scored, align, free))

    def _segment(self, utterance: SpeechSpan, found: Hypothesis, text: str,
                 word_timestamps: bool) -> Segment:
        start, end = speech_span(utterance, self.vad)
        words = None
        if word_timestamps:
            origin = utterance.start - self.options.lead_in_ms / 1000
            words = timed_words(self.tokenizer, found, origin, self.network.frame_seconds,
                                start, end)
        return Segment(start, end, text, found.avg_logprob, found.no_speech_prob,
                       found.confidence, words)

    def _hypotheses(self, waves: list[torch.Tensor], align: bool) -> list[Hypothesis]:
        """One batch, decoded with scores (and word frames with `align`)."""
        with self._threads(len(waves)):
            return self.task.hypotheses(*padded(waves, self.device), align)

    def _decode(self, waves: list[torch.Tensor], scored: bool, align: bool = False,
                free: bool = False) -> list:
        wave, lengths = padded(waves, self.device)
        with self._threads(len(waves)):
            if not scored:
                return [(self.tokenizer.decode(ids), None)
                        for ids in self.task.run(wave, lengths)]
            found = self.task.hypotheses(wave, lengths, align, free)
        return [(self.tokenizer.decode(h.tokens), h) for h in found]

    def _threads(self, rows: int):
        """torch's threads for decoding `rows` utterances at once (`asr.threads`)."""
        idle = idle_now() if rows > 1 and not self._fixed_threads else 1
        return torch_threads(decoding_threads(rows, self.threads, idle, self._fixed_threads))


def own_lm(saved: dict, options: dict, directory: Path) -> dict:
    """The saved decoding settings with the model's own language model (`decode.lm`, a folder
    inside the model directory) as a path, or without it where no search fuses one: CTC
    alone. With a grammar it is kept for the free transcript, never fused into the grammar's
    search (whose sentences are its language, as Vosk's grammar takes the place of its
    language model). An `lm` in `options` wins over it."""
    name = saved.get("lm")
    if name is None or "lm" in options:
        return saved
    if options.get("mode", saved.get("mode")) == "ctc_greedy":
        return {**saved, "lm": None}
    if not inside(name):
        raise ModelDirError(f"{directory / CONFIG}: decode.lm must name a folder inside the "
                            f"model directory, got {short(name)}")
    return {**saved, "lm": str(directory / name)}


def check_arguments(options: object, vad: object, batch_size: object,
                    threads: object = None) -> None:
    """A ValueError naming the argument whose type or value does not fit, before any work:
    a wrong type would otherwise fail far from the call, or pass for a different setting."""
    if options is not None and not isinstance(options, DecodingOptions):
        raise ValueError(f"options must be a DecodingOptions or None, got {short(options)}")
    if vad is not None and not isinstance(vad, VADConfig):
        raise ValueError(f"vad must be a VADConfig (asr.vad) or None (each input decoded whole), "
                         f"got {short(vad)}")
    if isinstance(batch_size, bool) or not isinstance(batch_size, int) \
            or not 1 <= batch_size <= MAX_BATCH:
        raise ValueError(f"batch_size must be a whole number in [1, {MAX_BATCH}], got "
                         f"{short(batch_size)}")
    if threads is not None and (isinstance(threads, bool) or not isinstance(threads, int)
                                or not 1 <= threads <= MAX_THREADS):
        raise ValueError(f"threads must be None or a whole number in [1, {MAX_THREADS}], got "
                         f"{short(threads)}")


def check_flags(**flags: object) -> None:
    """Each flag must be True or False: a string such as "no" would read as true."""
    for name, value in flags.items():
        if not isinstance(value, bool):
            raise ValueError(f"{name} must be True or False, got {short(value)}")


def timed_words(tokenizer: Tokenizer, found: Hypothesis, origin: float, frame_seconds: float,
                start: float, end: float) -> list[Word]:
    """The aligned words of `found` in seconds into the input (its frame 0 at `origin`),
    within the segment [start, end].

    A word starts where the CTC head first emits it and lasts until the next word starts
    (the last one until the segment ends): CTC emits a token on a frame or two, usually
    early in its sound, then blanks, so the frames it aligns mark where words begin, not
    where their sound stops. The aligned frames come in order, so the times do too.
    """
    timed = [(tokenizer.decode(w.ids), w) for w in found.words or []]
    timed = [(text, w) for text, w in timed if text]
    starts = [min(max(round(origin + w.start * frame_seconds, 3), start), end) for _, w in timed]
    ends = starts[1:] + [end]
    return [Word(text, first, last, w.probability)
            for (text, w), first, last in zip(timed, starts, ends, strict=True)]


def padded(waves: list[torch.Tensor], device: torch.device) -> tuple[torch.Tensor, torch.Tensor]:
    """One batch on `device`: padded waveforms and their lengths."""
    lengths = torch.tensor([len(w) for w in waves], device=device)
    return pad_sequence(waves, batch_first=True).to(device), lengths


def audio_progress(total: float | None, show: bool) -> tqdm:
    """A progress bar of the seconds of audio transcribed (with `show`, on a terminal)."""
    return progress(total=total, desc="transcribing", disable=None if show else True,
                    bar_format="{desc}: {percentage:3.0f}%|{bar}| {n:.0f}/{total:.0f} s of "
                               "audio [{elapsed}<{remaining}]")

"""Python API for inference: a trained model directory -> text with timed segments.

    from asr import Transcriber
    t = Transcriber.from_pretrained("exp/voice_commands", device="cpu")
    t.transcribe("command.wav").text        # "show me my photos please"
    t.transcribe("lecture.flac").segments   # [Segment(start=0.63, end=2.91, text="..."), ...]
    t.transcribe(["a.wav", "b.flac"])       # [Transcript, Transcript], decoded in batches
    Transcriber.from_pretrained("exp/voice_commands", backend="onnx")  # its exported graphs

Audio of any length is streamed (`asr.stream`), cut into utterances by the voice activity
detector (`asr.vad`) and the utterances of all inputs are decoded together in batches, so
memory stays bounded and a stretch of silence is never handed to the decoder to invent words
for. The evaluate and transcribe command lines are thin wrappers around this class.
"""

from collections.abc import Iterable, Iterator
from dataclasses import dataclass, field
from itertools import islice
from pathlib import Path

import numpy as np
import torch
from torch.nn.utils.rnn import pad_sequence

from asr.audio import audio_duration, load_audio, prepare_array
from asr.checkpoint import load_model_dir
from asr.decoding import DecodingOptions, Network, as_network, decode, decode_scored
from asr.lm import TokenLM, load_lm
from asr.model import SpeechTransformer
from asr.onnx_backend import OnnxNetwork
from asr.progress import progress
from asr.stream import stream_array, stream_file
from asr.tokenizer import Tokenizer
from asr.vad import Utterance, VADConfig, split_utterances

AudioInput = str | Path | np.ndarray | torch.Tensor
DEFAULT_VAD = VADConfig()
BACKENDS = ("torch", "onnx")


@dataclass
class Segment:
    """One utterance found by the VAD: where it lies in the input (seconds) and its text."""

    start: float
    end: float
    text: str


@dataclass
class Transcript:
    """What was said in one input: the plain `text` (also `str(transcript)`) and its segments."""

    text: str
    segments: list[Segment] = field(default_factory=list)

    def __str__(self) -> str:
        return self.text


def pick_device(device: str = "auto") -> torch.device:
    """"auto" means the GPU when there is one."""
    if device == "auto":
        return torch.device("cuda" if torch.cuda.is_available() else "cpu")
    return torch.device(device)


def decode_texts(model: SpeechTransformer | Network, tokenizer: Tokenizer, wave: torch.Tensor,
                 lengths: torch.Tensor, options: DecodingOptions,
                 lm: TokenLM | None = None) -> list[str]:
    """One padded batch of waveforms -> transcripts (`lm`: the loaded `options.lm`)."""
    pieces = tokenizer.pieces if options.words is not None else None
    return [tokenizer.decode(ids) for ids in decode(model, wave, lengths, options, pieces, lm)]


class Transcriber:
    """A model, its tokenizer, decoding options and a VAD, ready to turn audio into text.

    `model` is the torch model or another `asr.decoding.Network` (its ONNX export, on the
    CPU). `vad=None` decodes every input whole, as one utterance (for pre-cut utterances, as
    in a test manifest); otherwise inputs are cut into utterances first.
    """

    def __init__(self, model: SpeechTransformer | Network, tokenizer: Tokenizer,
                 options: DecodingOptions | None = None,
                 vad: VADConfig | None = DEFAULT_VAD, batch_size: int = 16) -> None:
        self.model, self.tokenizer = model, tokenizer
        self.network = as_network(model)
        self.options = options or DecodingOptions()
        self.vad, self.batch_size = vad, batch_size
        if isinstance(model, SpeechTransformer):
            model.eval()
        self.device = next(model.parameters()).device if isinstance(model, SpeechTransformer) \
            else torch.device("cpu")
        self.lm = load_lm(self.options.lm, tokenizer, self.device) if self.options.lm else None
        self.sample_rate = self.network.sample_rate

    @classmethod
    def from_pretrained(cls, directory: str | Path, device: str = "auto",
                        vad: VADConfig | None = DEFAULT_VAD, batch_size: int = 16,
                        backend: str = "torch", **options) -> "Transcriber":
        """Load a model directory; `options` override the decoding settings it was saved with.

        `backend="onnx"` runs the graphs `python -m asr.export` wrote (DIR/onnx, or DIR itself
        when it is an export directory) in onnxruntime, on the CPU."""
        if backend not in BACKENDS:
            raise ValueError(f"backend must be torch or onnx, got {backend!r}")
        if backend == "onnx":
            model, tokenizer, config = OnnxNetwork.load(directory)
        else:
            model, tokenizer, config = load_model_dir(directory, pick_device(device))
        saved = dict(config.get("decode", {}))
        saved.update(options)
        return cls(model, tokenizer, DecodingOptions(**saved), vad, batch_size)

    def load(self, audio: AudioInput, sample_rate: int | None = None) -> torch.Tensor:
        """A path or an array (with its `sample_rate`) -> whole mono waveform at the model's rate."""
        if isinstance(audio, str | Path):
            return load_audio(audio, self.sample_rate)
        return prepare_array(audio, sample_rate or self.sample_rate, self.sample_rate)

    def transcribe(self, audio: AudioInput | list[AudioInput], sample_rate: int | None = None,
                   show_progress: bool = False) -> Transcript | list[Transcript]:
        """Transcribe one input (returns a Transcript) or a list (a list, in order).

        Arrays are taken at `sample_rate` (default: the model's rate). `show_progress`: a bar
        of the seconds of audio transcribed (on a terminal, for work of more than a second).
        """
        inputs = audio if isinstance(audio, list) else [audio]
        segments: list[list[Segment]] = [[] for _ in inputs]
        starts = self._starts(inputs, sample_rate) if show_progress else None
        with progress(total=starts[-1] if starts else None, desc="transcribing",
                      disable=None if show_progress else True,
                      bar_format="{desc}: {percentage:3.0f}%|{bar}| {n:.0f}/{total:.0f} s of "
                                 "audio [{elapsed}<{remaining}]") as bar:
            for index, utterance, text in self._decode_stream(self._utterances(inputs,
                                                                               sample_rate)):
                if text:
                    segments[index].append(Segment(*self._speech_span(utterance), text))
                if starts:
                    bar.update(starts[index] + utterance.end - bar.n)
            if starts:
                bar.update(starts[-1] - bar.n)
        results = [Transcript(" ".join(s.text for s in segs), segs) for segs in segments]
        return results if isinstance(audio, list) else results[0]

    def _starts(self, inputs: list[AudioInput], sample_rate: int | None) -> list[float]:
        """Where each input begins in all of them, and (last) their total, in seconds."""
        starts = [0.0]
        for audio in inputs:
            seconds = audio_duration(audio) if isinstance(audio, str | Path) \
                else len(audio) / (sample_rate or self.sample_rate)
            starts.append(starts[-1] + seconds)
        return starts

    def transcribe_waves(self, waves: list[torch.Tensor]) -> list[str]:
        """Decode whole waveforms (no VAD) in batches of similar length, keeping input order."""
        return [text for text, _ in self._batched(waves, scored=False)]

    def transcribe_scored(self, waves: list[torch.Tensor]) -> list[tuple[str, float]]:
        """`transcribe_waves`, each text with its confidence in (0, 1] (`decoding.confidence`):
        how well the audio supports it, for rejecting what was not said clearly or at all."""
        return self._batched(waves, scored=True)

    def _batched(self, waves: list[torch.Tensor], scored: bool) -> list[tuple[str, float]]:
        order = sorted(range(len(waves)), key=lambda i: len(waves[i]))
        results: list[tuple[str, float]] = [("", 0.0)] * len(waves)
        for start in range(0, len(order), self.batch_size):
            chunk = order[start:start + self.batch_size]
            found = self._decode([waves[i] for i in chunk], scored)
            for i, result in zip(chunk, found, strict=True):
                results[i] = result
        return results

    def _utterances(self, inputs: list[AudioInput], sample_rate: int | None,
                    ) -> Iterator[tuple[int, Utterance]]:
        """(input index, utterance) for every utterance of every input, in order."""
        for index, audio in enumerate(inputs):
            if isinstance(audio, str | Path):
                blocks = stream_file(audio, self.sample_rate)
            else:
                blocks = stream_array(audio, sample_rate or self.sample_rate, self.sample_rate)
            if self.vad is None:
                wave = np.concatenate(list(blocks))
                yield index, Utterance(0.0, round(len(wave) / self.sample_rate, 3), wave)
            else:
                for utterance in split_utterances(blocks, self.sample_rate, self.vad):
                    yield index, utterance

    def _speech_span(self, utterance: Utterance) -> tuple[float, float]:
        """Where the speech lies: the VAD keeps `pad_ms` of context on both sides of it for
        the decoder, which the reported times leave out."""
        if self.vad is None:
            return utterance.start, utterance.end
        pad = self.vad.pad_ms / 1000
        middle = (utterance.start + utterance.end) / 2
        return (round(min(utterance.start + pad, middle), 3),
                round(max(utterance.end - pad, middle), 3))

    def _decode_stream(self, items: Iterable[tuple[int, Utterance]],
                       ) -> Iterator[tuple[int, Utterance, str]]:
        """Decode utterances `batch_size` at a time, as they come (bounded memory)."""
        items = iter(items)
        while batch := list(islice(items, self.batch_size)):
            texts = self.transcribe_waves([torch.from_numpy(u.samples) for _, u in batch])
            for (index, utterance), text in zip(batch, texts, strict=True):
                yield index, utterance, text

    def _decode(self, waves: list[torch.Tensor], scored: bool) -> list[tuple[str, float]]:
        wave = pad_sequence(waves, batch_first=True).to(self.device)
        lengths = torch.tensor([len(w) for w in waves], device=self.device)
        if not scored:
            texts = decode_texts(self.network, self.tokenizer, wave, lengths, self.options,
                                 self.lm)
            return [(text, 1.0) for text in texts]
        pieces = self.tokenizer.pieces if self.options.words is not None else None
        found, sure = decode_scored(self.network, wave, lengths, self.options, pieces, self.lm)
        return [(self.tokenizer.decode(ids), p) for ids, p in zip(found, sure, strict=True)]

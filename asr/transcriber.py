"""Python API for inference: a trained model directory -> text with timed segments.

    from asr import Transcriber
    t = Transcriber.from_pretrained("exp/voice_commands", device="cpu")
    t.transcribe("command.wav").text        # "show me my photos please"
    t.transcribe("lecture.flac").segments   # [Segment(start=0.63, end=2.91, text="..."), ...]
    t.transcribe(["a.wav", "b.flac"])       # [Transcript, Transcript], decoded in batches

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

from asr.audio import MAX_SECONDS, AudioError, load_audio, prepare_array
from asr.checkpoint import CONFIG, ModelDirError, load_model_dir, section
from asr.decoding import DecodingOptions, decode, decode_scored
from asr.lm import TokenLM, load_lm
from asr.model import SpeechTransformer
from asr.stream import stream_array, stream_file
from asr.tokenizer import Tokenizer
from asr.untrusted import from_section
from asr.vad import Utterance, VADConfig, split_utterances

AudioInput = str | Path | np.ndarray | torch.Tensor
DEFAULT_VAD = VADConfig()
MAX_BATCH = 4096  # utterances decoded at once


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


def pick_device(device: str | torch.device = "auto") -> torch.device:
    """"auto" means the GPU when there is one; else "cpu", "cuda" or "cuda:N", which must exist."""
    if device == "auto":
        return torch.device("cuda" if torch.cuda.is_available() else "cpu")
    try:
        chosen = torch.device(device)
    except (RuntimeError, TypeError, ValueError):
        chosen = None
    if chosen is None or chosen.type not in ("cpu", "cuda"):
        raise ValueError(f"device must be auto, cpu, cuda or cuda:N, got {device!r}")
    if chosen.type == "cuda" and not torch.cuda.is_available():
        raise ValueError(f"device {device}: no CUDA GPU is available here (use cpu)")
    if chosen.type == "cuda" and (chosen.index or 0) >= torch.cuda.device_count():
        raise ValueError(f"device {device}: there is no such GPU (this machine has "
                         f"{torch.cuda.device_count()})")
    return chosen


def decode_texts(model: SpeechTransformer, tokenizer: Tokenizer, wave: torch.Tensor,
                 lengths: torch.Tensor, options: DecodingOptions,
                 lm: TokenLM | None = None) -> list[str]:
    """One padded batch of waveforms -> transcripts (`lm`: the loaded `options.lm`)."""
    pieces = tokenizer.pieces if options.words is not None else None
    return [tokenizer.decode(ids) for ids in decode(model, wave, lengths, options, pieces, lm)]


class Transcriber:
    """A model, its tokenizer, decoding options and a VAD, ready to turn audio into text.

    `vad=None` decodes every input whole, as one utterance (for pre-cut utterances, as in a
    test manifest); otherwise inputs are cut into utterances first.
    """

    def __init__(self, model: SpeechTransformer, tokenizer: Tokenizer,
                 options: DecodingOptions | None = None,
                 vad: VADConfig | None = DEFAULT_VAD, batch_size: int = 16) -> None:
        if isinstance(batch_size, bool) or not isinstance(batch_size, int) \
                or not 1 <= batch_size <= MAX_BATCH:
            raise ValueError(f"batch_size must be a whole number in [1, {MAX_BATCH}], got "
                             f"{batch_size!r}")
        self.model, self.tokenizer = model.eval(), tokenizer
        self.options = options or DecodingOptions()
        self.vad, self.batch_size = vad, batch_size
        self.device = next(model.parameters()).device
        self.lm = load_lm(self.options.lm, tokenizer, self.device) if self.options.lm else None
        self.sample_rate = model.frontend.cfg.sample_rate

    @classmethod
    def from_pretrained(cls, directory: str | Path, device: str = "auto",
                        vad: VADConfig | None = DEFAULT_VAD, batch_size: int = 16,
                        **options) -> "Transcriber":
        """Load a model directory; `options` override the decoding settings it was saved with."""
        model, tokenizer, config = load_model_dir(directory, pick_device(device))
        saved = section(config, "decode") or {}
        try:
            from_section(DecodingOptions, saved, "decode")
        except (TypeError, ValueError) as err:
            raise ModelDirError(f"{Path(directory) / CONFIG}: {err}") from None
        chosen = from_section(DecodingOptions, {**saved, **options}, "decode")
        return cls(model, tokenizer, chosen, vad, batch_size)

    def load(self, audio: AudioInput, sample_rate: int | None = None) -> torch.Tensor:
        """A path or an array (with its `sample_rate`) -> whole mono waveform at the model's rate."""
        if isinstance(audio, str | Path):
            return load_audio(audio, self.sample_rate)
        rate = self.sample_rate if sample_rate is None else sample_rate
        return prepare_array(audio, rate, self.sample_rate)

    def transcribe(self, audio: AudioInput | list[AudioInput], sample_rate: int | None = None,
                   on_error: str = "raise") -> Transcript | list[Transcript | AudioError]:
        """Transcribe one input (returns a Transcript) or a list (a list, in order).

        Arrays are taken at `sample_rate` (default: the model's rate). An input that cannot
        be read raises its AudioError (`on_error="raise"`), or (`"return"`) takes that
        AudioError's place in the results while the other inputs are transcribed as usual.
        """
        if on_error not in ("raise", "return"):
            raise ValueError(f"on_error must be 'raise' or 'return', got {on_error!r}")
        inputs = audio if isinstance(audio, list) else [audio]
        failed: dict[int, AudioError] | None = {} if on_error == "return" else None
        segments: list[list[Segment]] = [[] for _ in inputs]
        utterances = self._utterances(inputs, sample_rate, failed)
        for index, utterance, text in self._decode_stream(utterances):
            if text:
                segments[index].append(Segment(*self._speech_span(utterance), text))
        results = [(failed or {}).get(index) or Transcript(" ".join(s.text for s in segs), segs)
                   for index, segs in enumerate(segments)]
        return results if isinstance(audio, list) else results[0]

    def transcribe_waves(self, waves: list[torch.Tensor]) -> list[str]:
        """Decode whole waveforms (no VAD) in batches of similar length, keeping input order."""
        return [text for text, _ in self._batched(waves, scored=False)]

    def transcribe_scored(self, waves: list[torch.Tensor]) -> list[tuple[str, float]]:
        """`transcribe_waves`, each text with its confidence in (0, 1] (`decoding.confidence`):
        how well the audio supports it, for rejecting what was not said clearly or at all."""
        return self._batched(waves, scored=True)

    def _batched(self, waves: list[torch.Tensor], scored: bool) -> list[tuple[str, float]]:
        """Every wave is checked as an array input is (`prepare_array`: finite, not over
        MAX_SECONDS), whichever entry point it came through."""
        rate = self.sample_rate
        waves = [prepare_array(w, rate, rate, f"<input {i}>") for i, w in enumerate(waves)]
        order = sorted(range(len(waves)), key=lambda i: len(waves[i]))
        results: list[tuple[str, float]] = [("", 0.0)] * len(waves)
        for start in range(0, len(order), self.batch_size):
            chunk = order[start:start + self.batch_size]
            found = self._decode([waves[i] for i in chunk], scored)
            for i, result in zip(chunk, found, strict=True):
                results[i] = result
        return results

    def _utterances(self, inputs: list[AudioInput], sample_rate: int | None,
                    failed: dict[int, AudioError] | None = None,
                    ) -> Iterator[tuple[int, Utterance]]:
        """(input index, utterance) for every utterance of every input, in order; an input
        that cannot be read raises, or given `failed`, is entered there and skipped."""
        for index, audio in enumerate(inputs):
            try:
                yield from ((index, u) for u in self._input_utterances(audio, sample_rate))
            except AudioError as err:
                if failed is None:
                    raise
                failed[index] = err

    def _input_utterances(self, audio: AudioInput, sample_rate: int | None,
                          ) -> Iterator[Utterance]:
        """One input's utterances; without a VAD the whole input, up to MAX_SECONDS."""
        limit = MAX_SECONDS if self.vad is None else None
        if isinstance(audio, str | Path):
            blocks = stream_file(audio, self.sample_rate, max_seconds=limit)
        else:
            rate = self.sample_rate if sample_rate is None else sample_rate
            blocks = stream_array(audio, rate, self.sample_rate, max_seconds=limit)
        if self.vad is None:
            wave = np.concatenate(list(blocks))
            yield Utterance(0.0, round(len(wave) / self.sample_rate, 3), wave)
        else:
            yield from split_utterances(blocks, self.sample_rate, self.vad)

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
            texts = decode_texts(self.model, self.tokenizer, wave, lengths, self.options, self.lm)
            return [(text, 1.0) for text in texts]
        pieces = self.tokenizer.pieces if self.options.words is not None else None
        found, sure = decode_scored(self.model, wave, lengths, self.options, pieces, self.lm)
        return [(self.tokenizer.decode(ids), p) for ids, p in zip(found, sure, strict=True)]

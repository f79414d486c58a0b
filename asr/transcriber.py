"""Python API for inference: a trained model directory -> text.

    from asr.transcriber import Transcriber
    t = Transcriber.from_pretrained("exp/voice_commands", device="cpu")
    t.transcribe("command.wav")          # -> "show me my photos please"
    t.transcribe(["a.wav", "b.flac"])    # -> ["...", "..."], decoded in batches

The evaluate and transcribe command lines are thin wrappers around this class.
"""

from pathlib import Path

import numpy as np
import torch
from torch.nn.utils.rnn import pad_sequence

from asr.audio import load_audio, prepare_array
from asr.checkpoint import load_model_dir
from asr.decoding import DecodingOptions, decode
from asr.model import SpeechTransformer
from asr.tokenizer import Tokenizer

AudioInput = str | Path | np.ndarray | torch.Tensor


def pick_device(device: str = "auto") -> torch.device:
    """"auto" means the GPU when there is one."""
    if device == "auto":
        return torch.device("cuda" if torch.cuda.is_available() else "cpu")
    return torch.device(device)


def decode_texts(model: SpeechTransformer, tokenizer: Tokenizer, wave: torch.Tensor,
                 lengths: torch.Tensor, options: DecodingOptions) -> list[str]:
    """One padded batch of waveforms -> transcripts."""
    return [tokenizer.decode(ids) for ids in decode(model, wave, lengths, options)]


class Transcriber:
    """A model, its tokenizer and decoding options, ready to turn audio into text."""

    def __init__(self, model: SpeechTransformer, tokenizer: Tokenizer,
                 options: DecodingOptions | None = None) -> None:
        self.model, self.tokenizer = model.eval(), tokenizer
        self.options = options or DecodingOptions()
        self.device = next(model.parameters()).device
        self.sample_rate = model.frontend.cfg.sample_rate

    @classmethod
    def from_pretrained(cls, directory: str | Path, device: str = "auto",
                        **options) -> "Transcriber":
        """Load a model directory; `options` override the decoding settings it was saved with."""
        model, tokenizer, config = load_model_dir(directory, pick_device(device))
        saved = dict(config.get("decode", {}))
        saved.update(options)
        return cls(model, tokenizer, DecodingOptions(**saved))

    def load(self, audio: AudioInput, sample_rate: int | None = None) -> torch.Tensor:
        """A path or an array (with its `sample_rate`) -> mono waveform at the model's rate."""
        if isinstance(audio, str | Path):
            return load_audio(audio, self.sample_rate)
        return prepare_array(audio, sample_rate or self.sample_rate, self.sample_rate)

    def transcribe(self, audio: AudioInput | list[AudioInput], sample_rate: int | None = None,
                   batch_size: int = 16) -> str | list[str]:
        """Transcribe one input (returns a string) or a list (returns a list, in order)."""
        if isinstance(audio, list):
            return self.transcribe_waves([self.load(a, sample_rate) for a in audio], batch_size)
        return self.transcribe_waves([self.load(audio, sample_rate)], 1)[0]

    def transcribe_waves(self, waves: list[torch.Tensor], batch_size: int = 16) -> list[str]:
        """Decode waveforms in batches of similar length (less padding), keeping input order."""
        order = sorted(range(len(waves)), key=lambda i: len(waves[i]))
        texts: list[str] = [""] * len(waves)
        for start in range(0, len(order), batch_size):
            chunk = order[start:start + batch_size]
            wave = pad_sequence([waves[i] for i in chunk], batch_first=True).to(self.device)
            lengths = torch.tensor([len(waves[i]) for i in chunk], device=self.device)
            for i, text in zip(chunk, decode_texts(self.model, self.tokenizer, wave, lengths,
                                                   self.options), strict=True):
                texts[i] = text
        return texts

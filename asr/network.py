"""What a search asks of a trained model, whatever runs it (torch or ONNX).

- `Network`: encode waveforms, the CTC head's logits, the decoder's logits, and step-by-step
  `Inference`; `TorchNetwork` is the torch model itself, `asr.onnx_backend.OnnxNetwork` its
  exported graphs.
- `Inference`: next-token log-probabilities from the attention decoder, with a key/value cache
  (`CachedInference`: each step feeds only the new tokens) or without (`FullInference`:
  re-runs the whole prefix; kept as the reference the cache must reproduce exactly).
"""

import torch
from torch import Tensor

from asr.attention import DecoderCache
from asr.model import ModelDimensions, SpeechTransformer, TextDecoder


class Network:
    """What the search needs of a trained model, whatever runs it.

    `memory` is what `encode` gives for each encoder frame, (batch, frames, ...): the search
    only selects its rows, cuts and pads its frames and hands it back to these methods, so
    each network keeps there what its decoder and CTC head need (the encoder states for
    torch; the projected cross-attention keys/values and CTC logits for ONNX).
    """

    dims: ModelDimensions  # the architecture (vocabulary size, layers, ...)
    sample_rate: int
    has_ctc: bool
    frame_seconds: float  # seconds between encoder frames (`asr.model.frame_seconds`)
    device: torch.device  # where its inputs go

    def encode(self, wave: Tensor, lengths: Tensor) -> tuple[Tensor, Tensor]:
        """Waveforms (batch, samples) -> memory and its lengths in frames."""
        raise NotImplementedError

    def ctc_logits(self, memory: Tensor) -> Tensor:
        """(batch, frames, vocab) logits of the CTC head."""
        raise NotImplementedError

    def logits(self, tokens: Tensor, memory: Tensor, memory_lengths: Tensor) -> Tensor:
        """The decoder's logits (batch, length, vocab) at every position of whole `tokens`."""
        raise NotImplementedError

    def inference(self, memory: Tensor, memory_lengths: Tensor, cached: bool) -> "Inference":
        """Step-by-step next-token log-probabilities for a search over this memory."""
        raise NotImplementedError


class TorchNetwork(Network):
    """The torch model itself (a live view: what it says follows the model, e.g. its device)."""

    def __init__(self, model: SpeechTransformer) -> None:
        self.model = model

    @property
    def dims(self) -> ModelDimensions:
        return self.model.dims

    @property
    def sample_rate(self) -> int:
        return self.model.frontend.cfg.sample_rate

    @property
    def has_ctc(self) -> bool:
        return self.model.ctc is not None

    @property
    def frame_seconds(self) -> float:
        return self.model.frame_seconds

    @property
    def device(self) -> torch.device:
        return next(self.model.parameters()).device

    def encode(self, wave: Tensor, lengths: Tensor) -> tuple[Tensor, Tensor]:
        return self.model.encode(wave, lengths)

    def ctc_logits(self, memory: Tensor) -> Tensor:
        return self.model.ctc(memory)

    def logits(self, tokens: Tensor, memory: Tensor, memory_lengths: Tensor) -> Tensor:
        return self.model.decoder(tokens, memory, memory_lengths)

    def inference(self, memory: Tensor, memory_lengths: Tensor, cached: bool) -> "Inference":
        kind = CachedInference if cached else FullInference
        return kind(self.model.decoder, memory, memory_lengths)


def as_network(model: "SpeechTransformer | Network") -> Network:
    """The search's view of a model: a torch model is wrapped, a Network passes as it is."""
    return model if isinstance(model, Network) else TorchNetwork(model)


class Inference:
    """Next-token log-probabilities of the attention decoder for a batch of hypotheses.

    Hypotheses come in equal groups per utterance (rows b * group .. (b + 1) * group - 1
    extend utterance b) and attend to its one copy of the memory.
    """

    def __init__(self, memory: Tensor, memory_lengths: Tensor) -> None:
        self.memory, self.memory_lengths = memory, memory_lengths

    def log_probs(self, tokens: Tensor) -> Tensor:
        """(hypotheses, length) token prefixes -> (hypotheses, vocab) log P(next token)."""
        raise NotImplementedError

    def select(self, rows: Tensor) -> None:
        """Continue with these hypotheses (rows of the previous step's batch)."""

    def keep(self, utterances: Tensor, rows: Tensor) -> None:
        """Go on with these utterances only (and `rows`, their hypotheses): the others ended."""
        frames = int(self.memory_lengths[utterances].max())
        self.memory = self.memory[utterances, :frames]
        self.memory_lengths = self.memory_lengths[utterances]


class FullInference(Inference):
    """No cache: every step runs the decoder over the whole prefix."""

    def __init__(self, decoder: TextDecoder, memory: Tensor, memory_lengths: Tensor) -> None:
        super().__init__(memory, memory_lengths)
        self.decoder = decoder

    def log_probs(self, tokens: Tensor) -> Tensor:
        return self.decoder(tokens, self.memory, self.memory_lengths)[:, -1].float().log_softmax(-1)


class CachedInference(Inference):
    """Key/value cache: every step runs the decoder over the new token only."""

    def __init__(self, decoder: TextDecoder, memory: Tensor, memory_lengths: Tensor) -> None:
        super().__init__(memory, memory_lengths)
        self.decoder = decoder
        self.cache = DecoderCache(len(decoder.blocks))

    def log_probs(self, tokens: Tensor) -> Tensor:
        new = tokens[:, self.cache.offset:]
        logits = self.decoder(new, self.memory, self.memory_lengths, self.cache)
        return logits[:, -1].float().log_softmax(-1)

    def select(self, rows: Tensor) -> None:
        self.cache.select(rows)

    def keep(self, utterances: Tensor, rows: Tensor) -> None:
        super().keep(utterances, rows)
        self.cache.select(rows)
        self.cache.keep_sources(utterances, self.memory.shape[1])

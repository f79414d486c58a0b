"""One padded batch of waveforms -> transcripts: the decoding search, then the tokenizer.

What both scoring during training (dev WER) and the `Transcriber` call when they want plain
texts of a batch; the search itself is `asr.decoding.decode`.
"""

import torch

from asr.decoding import DecodingOptions, decode
from asr.lm import TokenLM
from asr.model import SpeechTransformer
from asr.network import Network
from asr.tokenizer import Tokenizer


def decode_texts(model: SpeechTransformer | Network, tokenizer: Tokenizer, wave: torch.Tensor,
                 lengths: torch.Tensor, options: DecodingOptions,
                 lm: TokenLM | None = None) -> list[str]:
    """One padded batch of waveforms -> transcripts (`lm`: the loaded `options.lm`)."""
    pieces = tokenizer.pieces if options.words is not None else None
    return [tokenizer.decode(ids) for ids in decode(model, wave, lengths, options, pieces, lm)]

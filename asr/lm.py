"""A token language model for shallow fusion: P(next piece | pieces so far), from text alone.

The recogniser's decoder learns its language from the training transcripts only (an hour of
read speech is a few thousand sentences). A language model learns from text, of which there
is far more, and in beam search its log-probabilities are added to the decoder's (shallow
fusion, Gulcehre et al. 2015; ESPnet's and SpeechBrain's `lm_weight`). It predicts the same
BPE pieces as the recogniser, so it is trained with that model's tokenizer, and it is the
recogniser's `TextDecoder` without cross-attention: the key/value cache of beam search works
for it unchanged.
"""

from dataclasses import asdict, dataclass
from pathlib import Path

import torch
from torch import Tensor

from asr.checkpoint import ModelDirError, atomic_write, load_torch, save_torch
from asr.model import DecoderCache, ModelDimensions, TextDecoder
from asr.tokenizer import Tokenizer

LM_FILE, TOKENIZER_FILE = "lm.pt", "tokenizer.model"


@dataclass
class LMDimensions:
    """Sizes of the language model (a decoder-only Transformer with rotary positions)."""

    n_vocab: int
    d_model: int = 256
    n_head: int = 4
    d_ff: int = 1024
    n_layers: int = 4
    dropout: float = 0.1

    def decoder_dimensions(self) -> ModelDimensions:
        """The same sizes as the recogniser's decoder takes them."""
        return ModelDimensions(n_vocab=self.n_vocab, d_model=self.d_model, n_head=self.n_head,
                               d_ff=self.d_ff, n_decoder_layers=self.n_layers,
                               dropout=self.dropout, pos="rope")


class TokenLM(TextDecoder):
    """Token ids -> next-token logits: the recogniser's decoder without cross-attention."""

    def __init__(self, dims: LMDimensions) -> None:
        super().__init__(dims.decoder_dimensions(), cross_attention=False)
        self.dims = dims

    def forward(self, tokens: Tensor, cache: DecoderCache | None = None) -> Tensor:
        """Logits (batch, length, vocab) for every position of `tokens`; with a `cache`,
        `tokens` are only those after the `cache.offset` already seen."""
        return super().forward(tokens, None, None, cache)

    def new_cache(self) -> DecoderCache:
        return DecoderCache(len(self.blocks))


def save_lm(directory: Path, lm: TokenLM, tokenizer: Tokenizer, metrics: dict) -> None:
    """The weights, their sizes and the tokenizer they predict pieces of (written atomically)."""
    directory.mkdir(parents=True, exist_ok=True)
    save_torch({"dims": asdict(lm.dims), "state_dict": lm.state_dict(), "metrics": metrics},
               directory / LM_FILE)
    atomic_write(directory / TOKENIZER_FILE, lambda f: f.write(tokenizer.model_proto))


def load_lm(directory: str | Path, tokenizer: Tokenizer,
            device: str | torch.device = "cpu") -> TokenLM:
    """A language model directory, checked to speak the recogniser's pieces."""
    directory = Path(directory)
    for name in (LM_FILE, TOKENIZER_FILE):
        if not (directory / name).is_file():
            raise ModelDirError(f"{directory}: not a language model directory (no {name})")
    if (directory / TOKENIZER_FILE).read_bytes() != tokenizer.model_proto:
        raise ModelDirError(f"{directory}: this language model was trained with another "
                         f"tokenizer than the recogniser's (train it with the model's)")
    saved = load_torch(directory / LM_FILE, device)
    lm = TokenLM(LMDimensions(**saved["dims"]))
    lm.load_state_dict(saved["state_dict"])
    return lm.to(device).eval()

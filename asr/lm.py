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

from asr.attention import DecoderCache
from asr.checkpoint import (
    FORMAT_KEY,
    MAX_TOKENIZER_BYTES,
    WEIGHTS_FORMAT,
    ModelDirError,
    atomic_write,
    check_shapes,
    check_state_dict,
    is_meta,
    load_torch,
    network_bound,
    save_torch,
    shape_network,
    upgrade_weights,
)
from asr.model import ModelDimensions, TextDecoder
from asr.tokenizer import Tokenizer
from asr.untrusted import UntrustedInputError, check_fields, check_ranges, from_section, read_file

LM_FILE, TOKENIZER_FILE = "lm.pt", "tokenizer.model"
LM_FOLDER = "lm"  # a model directory's own language model, which its decode.lm names


def inside(name: str) -> bool:
    """Whether a model directory's `decode.lm` names a folder inside it (relative, no "..")."""
    path = Path(name)
    return not path.is_absolute() and ".." not in path.parts


def copy_lm(source: Path, out: Path, name: str) -> None:
    """The language model in folder `name` of model directory `source` into the same folder
    of `out` (its weights and tokenizer, nothing else the folder may hold), when it is there."""
    if not (inside(name) and (source / name).is_dir()):
        return
    for file in (LM_FILE, TOKENIZER_FILE):
        if not (source / name / file).is_file():
            raise ModelDirError(f"{source / name}: not a language model directory (no {file})")
    (out / name).mkdir(parents=True, exist_ok=True)
    for file in (LM_FILE, TOKENIZER_FILE):
        data = (source / name / file).read_bytes()
        atomic_write(out / name / file, lambda f, data=data: f.write(data))


@dataclass
class LMDimensions:
    """Sizes of the language model (a decoder-only Transformer with rotary positions)."""

    n_vocab: int
    d_model: int = 256
    n_head: int = 4
    d_ff: int = 1024
    n_layers: int = 4
    dropout: float = 0.1

    def __post_init__(self) -> None:
        check_fields(self, "dims")
        check_ranges(self, "dims", n_vocab=(5, 1 << 20), d_model=(1, 16384), n_head=(1, 256),
                     d_ff=(1, 65536), n_layers=(0, 128), dropout=(0, 1))
        if self.d_model % self.n_head:
            raise ValueError(f"dims.n_head ({self.n_head}) must divide dims.d_model "
                             f"({self.d_model})")

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
    save_torch({"dims": asdict(lm.dims), "state_dict": lm.state_dict(), "metrics": metrics,
                FORMAT_KEY: WEIGHTS_FORMAT}, directory / LM_FILE)
    atomic_write(directory / TOKENIZER_FILE, lambda f: f.write(tokenizer.model_proto))


def load_lm(directory: str | Path, tokenizer: Tokenizer,
            device: str | torch.device = "cpu") -> TokenLM:
    """A language model directory, checked as a model directory is (`asr.checkpoint`): it
    speaks the recogniser's pieces, its sizes are in range, and its weights are finite and
    of exactly the shapes those sizes make."""
    directory, path = Path(directory), Path(directory) / LM_FILE
    for name in (LM_FILE, TOKENIZER_FILE):
        if not (directory / name).is_file():
            raise ModelDirError(f"{directory}: not a language model directory (no {name})")
    try:
        proto = read_file(directory / TOKENIZER_FILE, MAX_TOKENIZER_BYTES, "the tokenizer")
    except UntrustedInputError as err:
        raise ModelDirError(str(err)) from None
    if proto != tokenizer.model_proto:
        raise ModelDirError(f"{directory}: this language model was trained with another "
                            f"tokenizer than the recogniser's (train it with the model's)")
    saved = load_torch(path)
    if not (isinstance(saved, dict) and "dims" in saved and "state_dict" in saved):
        raise ModelDirError(f"{path}: not a language model file (no dims and state_dict)")
    try:
        dims = from_section(LMDimensions, saved["dims"], "dims")
    except (TypeError, ValueError) as err:
        raise ModelDirError(f"{path}: {err}") from None
    if dims.n_vocab != tokenizer.vocab_size:
        raise ModelDirError(f"{path}: dims.n_vocab is {dims.n_vocab}, the tokenizer has "
                            f"{tokenizer.vocab_size} pieces")
    state = check_state_dict(saved["state_dict"], path)
    network = shape_network(lambda: TokenLM(dims), network_bound(dims.decoder_dimensions()))
    upgrade_weights(state, network, saved.get(FORMAT_KEY))
    check_shapes(state, network, path)
    lm = network if not is_meta(network) else TokenLM(dims)
    lm.load_state_dict(state)
    return lm.to(device).eval()

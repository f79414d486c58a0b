"""A trained model's exported ONNX graphs (`python -m asr.export`), run by onnxruntime.

The export directory holds two graphs, the model's config and its tokenizer:

    encoder.onnx   wave (batch, samples) float32, lengths (batch,) int64 ->
                   cross_kv (batch, frames, 2 * layers * d_model): every decoder layer's
                            cross-attention keys and values of each encoder frame
                            (key of layer 0, value of layer 0, key of layer 1, ...; heads in order),
                   frames (batch,) int64: the number of valid frames,
                   ctc_logits (batch, frames, vocab) when the model has a CTC head
    decoder.onnx   one decoder step over new tokens, with the self-attention key/value cache:
                   tokens (hyps, new) int64, cross_kv (2 * layers, batch, heads, frames, head_dim),
                   memory_lengths (batch,) int64, past_kv (2 * layers, previous, heads, past,
                   head_dim), rows (hyps,) int64: the row of past_kv each hypothesis continues ->
                   logits (hyps, new, vocab), present_kv (2 * layers, hyps, heads, past + new, head_dim)

Hypotheses come in equal groups per utterance (beam search): hyps = batch x group. The feature
front end runs inside encoder.onnx, so the graphs need nothing but audio. `OnnxNetwork` is the
`asr.network.Network` over them: the greedy and beam searches of asr/search.py run on it
unchanged, each step one onnxruntime call that feeds only the new token.
"""

import os
from pathlib import Path

import numpy as np
import torch
from omegaconf import DictConfig
from torch import Tensor

from asr.checkpoint import (
    CONFIG,
    TOKENIZER,
    WEIGHTS,
    ModelDirError,
    load_config,
    load_tokenizer,
    model_settings,
)
from asr.features import FeatureConfig
from asr.model import CONV2D_MIN_FRAMES, ModelDimensions, frame_seconds
from asr.network import Inference, Network
from asr.onnx_check import FLOAT, INT64, Spec, check_graph, check_same_export, read_graph
from asr.tokenizer import BOS_ID, Tokenizer
from asr.untrusted import first_line

ENCODER, DECODER = "encoder.onnx", "decoder.onnx"
ENCODER_INPUTS = ("wave", "lengths")
ENCODER_OUTPUTS = ("cross_kv", "frames", "ctc_logits")
DECODER_INPUTS = ("tokens", "cross_kv", "memory_lengths", "past_kv", "rows")
DECODER_OUTPUTS = ("logits", "present_kv")


def encoder_layout(dims: ModelDimensions) -> tuple[list[Spec], list[Spec]]:
    """encoder.onnx's inputs and outputs: names, element types and sizes (None: varies)."""
    outputs = [("cross_kv", FLOAT, (None, None, 2 * dims.n_decoder_layers * dims.d_model)),
               ("frames", INT64, (None,))]
    if dims.ctc_weight > 0:
        outputs.append(("ctc_logits", FLOAT, (None, None, dims.n_vocab)))
    return [("wave", FLOAT, (None, None)), ("lengths", INT64, (None,))], outputs


def decoder_layout(dims: ModelDimensions) -> tuple[list[Spec], list[Spec]]:
    """decoder.onnx's inputs and outputs, as `encoder_layout`."""
    cache = (2 * dims.n_decoder_layers, None, dims.n_head, None, dims.d_model // dims.n_head)
    return ([("tokens", INT64, (None, None)), ("cross_kv", FLOAT, cache),
             ("memory_lengths", INT64, (None,)), ("past_kv", FLOAT, cache),
             ("rows", INT64, (None,))],
            [("logits", FLOAT, (None, None, dims.n_vocab)), ("present_kv", FLOAT, cache)])


def cross_kv_layout(kv: Tensor, dims: ModelDimensions) -> Tensor:
    """The encoder graph's cross_kv (batch, frames, keys and values of every layer and head)
    as the decoder graph takes it: (2 * layers, batch, heads, frames, head_dim)."""
    return kv.unflatten(-1, (2 * dims.n_decoder_layers, dims.n_head, -1)).permute(
        2, 0, 3, 1, 4).contiguous()


class OnnxNetwork(Network):
    """encoder.onnx and decoder.onnx in onnxruntime sessions, on the CPU.

    `memory` (what the search carries per frame) is the encoder graph's cross-attention keys
    and values followed by its CTC logits. `threads`: onnxruntime's intra-op threads (default:
    torch's), fixed for the sessions' life; they sleep when idle instead of spinning (`spin`:
    onnxruntime's own spin-waiting, for comparison in `benchmarks/load.py`). The graphs are
    checked before a session is made of them (`asr.onnx_check`: operators, inputs and outputs
    against the config, one export with the tokenizer beside them), then run once on a short
    silence, whose results must have the sizes the config makes.
    """

    def __init__(self, directory: str | Path, dims: ModelDimensions, features: FeatureConfig,
                 threads: int | None = None, weights: Path | None = None,
                 spin: bool = False) -> None:
        try:
            import onnxruntime
        except ImportError:
            raise ModelDirError("backend onnx needs onnxruntime: "
                                "pip install 'speech-transformer-asr[onnx]'") from None
        directory = Path(directory)
        self.dims, self.features = dims, features
        self.has_ctc = dims.ctc_weight > 0
        encoder, encoder_bytes = read_graph(directory / ENCODER, "the encoder graph")
        decoder, decoder_bytes = read_graph(directory / DECODER, "the decoder graph")
        check_graph(encoder, directory / ENCODER, *encoder_layout(dims))
        check_graph(decoder, directory / DECODER, *decoder_layout(dims))
        check_same_export(encoder, decoder, directory / TOKENIZER, directory, weights)
        options = onnxruntime.SessionOptions()
        options.intra_op_num_threads = threads or torch.get_num_threads()
        options.inter_op_num_threads = 1
        # idle threads sleep instead of spinning, as torch's do (asr.threads)
        options.add_session_config_entry("session.intra_op.allow_spinning", str(int(spin)))
        options.log_severity_level = 4  # its errors come back as exceptions, on one line here

        def session(name: str, data: bytes):
            try:
                return onnxruntime.InferenceSession(data, options,
                                                    providers=["CPUExecutionProvider"])
            except Exception as err:  # onnxruntime raises its own classes for bad files
                raise ModelDirError(f"{directory / name}: cannot load ({first_line(err)})") from None

        self.encoder, self.decoder = session(ENCODER, encoder_bytes), session(DECODER, decoder_bytes)
        self.sample_rate = features.sample_rate
        self.frame_seconds = frame_seconds(dims, features)
        self.device = torch.device("cpu")
        self.kv_width = 2 * dims.n_decoder_layers * dims.d_model
        self.min_samples = features.n_fft + (CONV2D_MIN_FRAMES - 1) * features.hop_length \
            if dims.subsampling == "conv2d" else features.n_fft
        self._probe(directory)

    @classmethod
    def load(cls, directory: str | Path, threads: int | None = None, spin: bool = False,
             ) -> tuple["OnnxNetwork", Tokenizer, DictConfig]:
        """The graphs of an export directory, or of DIR/onnx for a model directory DIR. Its
        config and tokenizer are checked as a model directory's are (`asr.checkpoint`)."""
        if not isinstance(directory, str | os.PathLike):
            raise ModelDirError(f"a model directory must be a path, got {directory!r}")
        directory, weights = Path(directory), None
        if not (directory / ENCODER).is_file() and (directory / "onnx" / ENCODER).is_file():
            directory, weights = directory / "onnx", directory / WEIGHTS
            weights = weights if weights.is_file() else None
        for name in (ENCODER, DECODER, CONFIG, TOKENIZER):
            if not (directory / name).exists():
                raise ModelDirError(f"{directory}: missing {name} (export the model first: "
                                    "python -m asr.export --model DIR --format onnx)")
        config = load_config(directory / CONFIG)
        dims, features = model_settings(config, directory / CONFIG)
        tokenizer = load_tokenizer(directory / TOKENIZER, dims.n_vocab)
        return cls(directory, dims, features, threads, weights, spin), tokenizer, config

    def _probe(self, directory: Path) -> None:
        """Run both graphs on a quarter second of silence; a ModelDirError unless they run
        and return finite values of the sizes the config makes."""
        dims, samples = self.dims, max(self.min_samples, self.sample_rate // 4)
        try:
            memory, frames = self.encode(torch.zeros(1, samples), torch.tensor([samples]))
            width = self.kv_width + dims.n_vocab * self.has_ctc
            if frames.shape != (1,) or memory.ndim != 3 or memory.shape[::2] != (1, width) \
                    or not 0 < int(frames[0]) <= memory.shape[1]:
                raise ValueError(f"the encoder returns {tuple(memory.shape)} for {samples} "
                                 f"samples, {width} wide (keys, values and CTC) expected")
            logits, present = self.step(torch.full((1, 1), BOS_ID), self.cross_kv(memory), frames,
                                        self.empty_cache(1), torch.arange(1))
            grown = (2 * dims.n_decoder_layers, 1, dims.n_head, 1, dims.d_model // dims.n_head)
            if logits.shape != (1, 1, dims.n_vocab) or present.shape != grown:
                raise ValueError(f"the decoder returns {tuple(logits.shape)} and "
                                 f"{tuple(present.shape)}, the config makes "
                                 f"{(1, 1, dims.n_vocab)} and {grown}")
            if not (torch.isfinite(memory).all() and torch.isfinite(logits).all()):
                raise ValueError("the graphs return NaN or infinite values")
        except Exception as err:  # onnxruntime's own errors, and the sizes above
            raise ModelDirError(f"{directory}: the graphs do not run as this model's "
                                f"({first_line(err)}); refused") from None

    def encode(self, wave: Tensor, lengths: Tensor) -> tuple[Tensor, Tensor]:
        if wave.shape[1] < self.min_samples:  # what the torch model pads to inside
            wave = torch.nn.functional.pad(wave, (0, self.min_samples - wave.shape[1]))
        outputs = self.encoder.run(None, {"wave": _array(wave, np.float32),
                                          "lengths": _array(lengths, np.int64)})
        found = dict(zip((o.name for o in self.encoder.get_outputs()), outputs, strict=True))
        parts = [found["cross_kv"]] + ([found["ctc_logits"]] if self.has_ctc else [])
        return torch.from_numpy(np.concatenate(parts, -1)), torch.from_numpy(found["frames"])

    def ctc_logits(self, memory: Tensor) -> Tensor:
        return memory[..., self.kv_width:]

    def cross_kv(self, memory: Tensor) -> Tensor:
        """The decoder graph's cross_kv (2 * layers, batch, heads, frames, head_dim) of a memory."""
        return cross_kv_layout(memory[..., :self.kv_width], self.dims)

    def empty_cache(self, hyps: int) -> Tensor:
        dims = self.dims
        return torch.zeros(2 * dims.n_decoder_layers, hyps, dims.n_head, 0,
                           dims.d_model // dims.n_head)

    def step(self, tokens: Tensor, cross_kv: Tensor, memory_lengths: Tensor, past_kv: Tensor,
             rows: Tensor) -> tuple[Tensor, Tensor]:
        """One run of decoder.onnx: logits of the new tokens and the grown cache."""
        logits, present = self.decoder.run(None, {
            "tokens": _array(tokens, np.int64), "cross_kv": _array(cross_kv, np.float32),
            "memory_lengths": _array(memory_lengths, np.int64),
            "past_kv": _array(past_kv, np.float32), "rows": _array(rows, np.int64)})
        return torch.from_numpy(logits), torch.from_numpy(present)

    def logits(self, tokens: Tensor, memory: Tensor, memory_lengths: Tensor) -> Tensor:
        rows = torch.arange(len(tokens))
        return self.step(tokens, self.cross_kv(memory), memory_lengths,
                         self.empty_cache(len(tokens)), rows)[0]

    def inference(self, memory: Tensor, memory_lengths: Tensor, cached: bool) -> Inference:
        return OnnxInference(self, memory, memory_lengths, cached)


class OnnxInference(Inference):
    """Next-token log-probabilities from decoder.onnx. Cached, each step feeds the new tokens
    and the cache the last step returned; the hypotheses that survive a step are picked from
    it inside the next step (`rows`), as `asr.attention.KVCache` reorders lazily. Uncached, each
    step feeds the whole prefix to an empty cache (the reference the cache must match)."""

    def __init__(self, network: OnnxNetwork, memory: Tensor, memory_lengths: Tensor,
                 cached: bool) -> None:
        super().__init__(memory, memory_lengths)
        self.network, self.cached = network, cached
        self.cross = network.cross_kv(memory)
        self.past: Tensor | None = None
        self.rows: Tensor | None = None  # pending selection of the cache's rows
        self.offset = 0

    def log_probs(self, tokens: Tensor) -> Tensor:
        hyps = len(tokens)
        if self.cached and self.past is not None:
            new, past = tokens[:, self.offset:], self.past
        else:
            new, past = tokens, self.network.empty_cache(hyps)
        rows = self.rows if self.rows is not None else torch.arange(hyps)
        logits, present = self.network.step(new, self.cross, self.memory_lengths, past, rows)
        if self.cached:
            self.past, self.rows, self.offset = present, None, tokens.shape[1]
        return logits[:, -1].float().log_softmax(-1)

    def select(self, rows: Tensor) -> None:
        if self.past is not None:  # uncached, there is nothing to reorder
            self.rows = rows if self.rows is None else self.rows[rows]

    def keep(self, utterances: Tensor, rows: Tensor) -> None:
        super().keep(utterances, rows)
        self.cross = self.cross[:, utterances, :, :self.memory.shape[1]].contiguous()
        self.select(rows)


def _array(tensor: Tensor, dtype: type) -> np.ndarray:
    return np.ascontiguousarray(tensor.detach().cpu().numpy(), dtype=dtype)

"""Export a trained model to ONNX: `python -m asr.export --model DIR --format onnx`.

Writes encoder.onnx (front end + encoder + every decoder layer's cross-attention keys/values
and the CTC head), decoder.onnx (one decoder step over new tokens with its self-attention
key/value cache), the config, the tokenizer and the model's own language model (the folder
its `decode.lm` names, if any; it runs in torch) into OUT (default DIR/onnx), the layout
`asr.onnx_backend` documents. `Transcriber.from_pretrained(DIR, backend="onnx")` runs them
with the same searches. `--quantize int8` also quantises the weights of every matrix product
to int8 (onnxruntime's dynamic quantisation: activations quantised on the fly) into
DIR/onnx_int8.

OUT must be new, empty, or hold an earlier export of the same model (the same tokenizer and
network sizes): a folder that holds anything else, another trained model included, is refused
before anything is written. The export is written into a hidden folder beside OUT and checked
against the torch model there; only then does it replace OUT, so a failed export leaves the
old one whole. Both graphs carry an export id and the tokenizer's hash in their metadata, which
`asr.onnx_check` matches when they are loaded.

The feature front end is inside encoder.onnx: with it the graphs need nothing but audio, so
they run wherever onnxruntime does. Its FFT becomes a strided convolution (complex numbers do
not exist in ONNX), which onnxruntime runs as fast as torch's FFT. The exporter is torch's
TorchScript one (`dynamo=False`): torch.export (the default exporter) refuses the encoder's
symbolic frame arithmetic, and tracing keeps every shape symbolic in the graphs.
"""

import fcntl
import io
import logging
import os
import re
import shutil
import sys
import tempfile
import uuid
import warnings
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import torch
from torch import Tensor, nn

from asr.attention import DecoderCache, KVCache
from asr.checkpoint import (
    CONFIG,
    MAX_TOKENIZER_BYTES,
    TOKENIZER,
    WEIGHTS,
    ModelDirError,
    atomic_write,
    load_config,
    make_temp_dir,
    section,
)
from asr.cli import ArgumentParser, print_error, quiet_pipe
from asr.lm import copy_lm, inside
from asr.model import SpeechTransformer, TextDecoder
from asr.models import package_problem
from asr.onnx_backend import (
    DECODER,
    DECODER_INPUTS,
    DECODER_OUTPUTS,
    ENCODER,
    ENCODER_INPUTS,
    ENCODER_OUTPUTS,
    OnnxNetwork,
    cross_kv_layout,
)
from asr.onnx_check import (
    EXPORT_ID,
    TOKENIZER_SHA256,
    WEIGHTS_SHA256,
    tokenizer_digest,
    weights_digest,
)
from asr.untrusted import UntrustedInputError, read_file

OPSET = 17
QUANTIZED = ("MatMul", "Gemm")
EXPORT_FILES = (ENCODER, DECODER, CONFIG, TOKENIZER)
_TEMP = re.compile(r"\..+\.[a-z0-9_]{8}\.tmp")  # atomic_write's and make_temp_dir's names


class EncoderGraph(nn.Module):
    """Waveforms -> per frame: the decoder's cross-attention keys and values, the CTC logits.

    The keys and values of the encoder states depend on nothing the search does, so they are
    computed here once per utterance, not at every decoder step."""

    def __init__(self, model: SpeechTransformer) -> None:
        super().__init__()
        self.model = model

    def forward(self, wave: Tensor, lengths: Tensor) -> tuple[Tensor, ...]:
        memory, frames = self.model.encode(wave, lengths)
        kv = [part.transpose(1, 2).flatten(2) for block in self.model.decoder.blocks
              for part in block.cross_attn.project(memory)]
        outputs = (torch.cat(kv, -1), frames)
        return outputs + (self.model.ctc(memory),) if self.model.ctc is not None else outputs


class _ConcatCache(KVCache):
    """A self-attention cache given as tensors, grown by one concatenation (one ONNX Concat)."""

    def __init__(self, k: Tensor, v: Tensor) -> None:
        super().__init__(grows=True)
        self.k, self.v = k, v

    def _append(self, cached: Tensor, new: Tensor) -> Tensor:
        return torch.cat([cached, new], 2)


class DecoderStep(nn.Module):
    """The decoder over new tokens, its caches as inputs and outputs (`asr.onnx_backend`)."""

    def __init__(self, decoder: TextDecoder) -> None:
        super().__init__()
        self.decoder = decoder

    def forward(self, tokens: Tensor, cross_kv: Tensor, memory_lengths: Tensor, past_kv: Tensor,
                rows: Tensor) -> tuple[Tensor, Tensor]:
        past_kv = past_kv.index_select(1, rows)
        cache = DecoderCache(len(self.decoder.blocks))
        for i in range(len(self.decoder.blocks)):
            cache.self_attn[i] = _ConcatCache(past_kv[2 * i], past_kv[2 * i + 1])
            cache.cross_attn[i].k, cache.cross_attn[i].v = cross_kv[2 * i], cross_kv[2 * i + 1]
        cache.offset = past_kv.shape[3]  # traced: a size of the input, not a constant
        logits = self.decoder(tokens, None, memory_lengths, cache)
        present = torch.stack([t for layer in cache.self_attn for t in (layer.k, layer.v)])
        return logits, present


def export_onnx(model_dir: str | Path, out: str | Path) -> dict[str, float]:
    """Write the two graphs, the config and the tokenizer into `out` (which `check_out`
    must accept); returns the largest difference between the graphs (in onnxruntime) and the
    torch model on a check input of other shapes than the traced ones."""
    model_dir, out = Path(model_dir), Path(out)
    outside_package(out)
    model = loads(model_dir)
    with export_lock(out):
        check_out(out, model_dir)
        with staged(out) as folder:
            _export_graphs(model, folder, {
                EXPORT_ID: uuid.uuid4().hex,
                TOKENIZER_SHA256: tokenizer_digest(model_dir / TOKENIZER),
                WEIGHTS_SHA256: weights_digest(model_dir / WEIGHTS)})
            copy_settings(model_dir, folder)
            return check(model, folder)


@contextmanager
def export_lock(out: Path) -> Iterator[None]:
    """One export into `out` at a time: a second one, started while the first runs, is
    refused (both would report success and one replace the other's graphs). The lock is a
    hidden file beside `out`, held with flock (released when the process ends, however) and
    removed by its holder when done. An `out` in the installed package is refused first."""
    outside_package(out)
    out = out.resolve()
    out.parent.mkdir(parents=True, exist_ok=True)
    lock = out.parent / f".{out.name}.export-lock"
    fd = os.open(lock, os.O_RDWR | os.O_CREAT, 0o644)
    try:
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
            held = os.stat(lock).st_ino == os.fstat(fd).st_ino  # not removed by its holder since
        except (BlockingIOError, FileNotFoundError):
            held = False
        if not held:
            raise ModelDirError(f"{out}: another export into it is running; refused (wait for "
                                "it, or pick another --out)")
        try:
            yield
        finally:
            lock.unlink(missing_ok=True)  # still held: no other export can be inside it now
    finally:
        os.close(fd)


def _export_graphs(model: SpeechTransformer, out: Path, metadata: dict[str, str]) -> None:
    torch.manual_seed(0)
    rate = model.frontend.cfg.sample_rate
    wave = 0.1 * torch.randn(2, rate)
    lengths = torch.tensor([rate, rate * 3 // 4])
    encoder = EncoderGraph(model).eval()
    names = ENCODER_OUTPUTS if model.ctc is not None else ENCODER_OUTPUTS[:2]
    _export(encoder, (wave, lengths), out / ENCODER, ENCODER_INPUTS, names, {
        "wave": {0: "batch", 1: "samples"}, "lengths": {0: "batch"},
        "cross_kv": {0: "batch", 1: "frames"}, "ctc_logits": {0: "batch", 1: "frames"}},
            metadata)
    # Traced with two hypotheses per utterance and two new tokens: the paths that serve any
    # number of each (one token, greedy search) are then the ones recorded.
    with torch.no_grad():
        cross = cross_kv_layout(encoder(wave, lengths)[0], model.dims)
    dims = model.dims
    past = torch.randn(2 * dims.n_decoder_layers, 4, dims.n_head, 3, dims.d_model // dims.n_head)
    tokens = torch.randint(4, dims.n_vocab, (4, 2))
    _export(DecoderStep(model.decoder).eval(),
            (tokens, cross, lengths, past, torch.tensor([1, 0, 3, 3])), out / DECODER,
            DECODER_INPUTS, DECODER_OUTPUTS, {
                "tokens": {0: "hyps", 1: "new"}, "cross_kv": {1: "batch", 3: "frames"},
                "memory_lengths": {0: "batch"}, "past_kv": {1: "previous", 3: "past"},
                "rows": {0: "hyps"}, "logits": {0: "hyps", 1: "new"},
                "present_kv": {1: "hyps", 3: "length"}}, metadata)


def check_out(out: Path, source: Path) -> None:
    """A ModelDirError unless `out` is new, empty, or holds nothing but an export of the model
    in `source` (a model or export directory: the same tokenizer and network sizes), outside
    the installed package's models."""
    outside_package(out)
    if not out.exists():
        return
    if not out.is_dir():
        raise ModelDirError(f"{out}: not a folder; refused")
    names = {p.name for p in out.iterdir() if not _TEMP.fullmatch(p.name)}
    lm = lm_folder(source)
    others = sorted(names - {*EXPORT_FILES, *([Path(lm).parts[0]] if lm else [])})
    if others:
        more = f" and {len(others) - 1} more" if len(others) > 1 else ""
        raise ModelDirError(f"{out}: holds {others[0]}{more}, which no export writes; refused "
                            "(pick a new or empty --out)")
    if names and not _same_model(out, source):
        raise ModelDirError(f"{out}: holds the export of another model; refused (delete it or "
                            "pick another --out)")


def outside_package(out: Path) -> None:
    """A ModelDirError if `out` lies in the installed package's models (`asr.models`)."""
    problem = package_problem(out, "an export")
    if problem is not None:
        raise ModelDirError(f"{out} {problem}")


def _same_model(export: Path, source: Path) -> bool:
    """Whether the export in `export` has the tokenizer and network sizes of `source`'s."""
    try:
        tokenizers = [read_file(d / TOKENIZER, MAX_TOKENIZER_BYTES, "the tokenizer")
                      for d in (export, source)]
        sizes = [section(load_config(d / CONFIG), "model") for d in (export, source)]
    except (ModelDirError, UntrustedInputError):
        return False
    return tokenizers[0] == tokenizers[1] and sizes[0] == sizes[1]


@contextmanager
def staged(out: Path) -> Iterator[Path]:
    """A new hidden folder beside `out` to write the export into; when the block ends well it
    replaces `out` (an old export is moved aside, then deleted), else it is deleted and `out`
    is left as it was."""
    out = out.resolve()  # a link to a folder: the export goes where it points
    out.parent.mkdir(parents=True, exist_ok=True)
    folder = make_temp_dir(out)
    try:
        yield folder
        if out.exists():
            old = make_temp_dir(out)
            os.replace(out, old)
            os.replace(folder, out)
            shutil.rmtree(old)
        else:
            os.replace(folder, out)
    finally:
        shutil.rmtree(folder, ignore_errors=True)


def copy_settings(source: Path, out: Path) -> None:
    """The config and tokenizer files beside the graphs, as the model directory has them, and
    the model's own language model (the folder its `decode.lm` names, if any)."""
    for name in (CONFIG, TOKENIZER):
        data = (source / name).read_bytes()
        atomic_write(out / name, lambda f, data=data: f.write(data))
    lm = lm_folder(source)
    if lm is not None:
        copy_lm(source, out, lm)


def loads(model_dir: Path) -> SpeechTransformer:
    """The model, loaded as a transcription loads it before anything is written: what its
    export copies (its language model, its decoding settings) is refused here when the loader
    would refuse it (a language model with NaN weights), never at the first load of the
    export."""
    from asr.transcriber import Transcriber  # the library's front door: imported where used

    return Transcriber.from_pretrained(model_dir, "cpu", vad=None).model


def lm_folder(source: Path) -> str | None:
    """The folder inside a model or export directory that its config's `decode.lm` names."""
    try:
        lm = (section(load_config(source / CONFIG), "decode") or {}).get("lm")
    except (ModelDirError, AttributeError):
        return None
    return lm if isinstance(lm, str) and inside(lm) else None


def _export(module: nn.Module, args: tuple, path: Path, inputs: tuple, outputs: tuple,
            axes: dict, metadata: dict[str, str]) -> None:
    buffer = io.BytesIO()
    with warnings.catch_warnings(), torch.no_grad():
        warnings.simplefilter("ignore")  # tracer notes on shape arithmetic, deprecation of the exporter
        torch.onnx.export(module, args, buffer, dynamo=False, opset_version=OPSET,
                          input_names=list(inputs), output_names=list(outputs),
                          dynamic_axes={k: v for k, v in axes.items() if k in inputs + outputs})
    atomic_write(path, lambda f: f.write(_with_metadata(buffer.getvalue(), metadata)))


def _with_metadata(graph: bytes, metadata: dict[str, str]) -> bytes:
    """A serialised graph with `metadata` among its properties (replacing its own values)."""
    import onnx

    model = onnx.load_model_from_string(graph)
    kept = [(p.key, p.value) for p in model.metadata_props if p.key not in metadata]
    del model.metadata_props[:]
    for key, value in kept + list(metadata.items()):
        model.metadata_props.add(key=key, value=value)
    return model.SerializeToString()


@torch.no_grad()
def check(model: SpeechTransformer, out: Path) -> dict[str, float]:
    """Largest |ONNX - torch| of the memory and of decoder steps, on shapes other than the
    traced ones: three utterances of other lengths, one hypothesis each, an empty cache and a
    one-token step after it."""
    network, _, _ = OnnxNetwork.load(out)
    rate = model.frontend.cfg.sample_rate
    torch.manual_seed(1)
    wave = 0.1 * torch.randn(3, rate * 3 // 2)
    lengths = torch.tensor([rate * 3 // 2, rate // 2, rate])
    memory, frames = model.encode(wave, lengths)
    onnx_memory, onnx_frames = network.encode(wave, lengths)
    if not torch.equal(frames, onnx_frames):
        raise ModelDirError(f"{out}: the exported encoder counts frames differently")
    cross = network.cross_kv(onnx_memory)
    tokens = torch.randint(4, model.dims.n_vocab, (3, 3))
    cache = DecoderCache(len(model.decoder.blocks))
    torch_steps = [model.decoder(tokens[:, :2], memory, frames, cache),
                   model.decoder(tokens[:, 2:], memory, frames, cache)]
    first, past = network.step(tokens[:, :2], cross, frames, network.empty_cache(3),
                               torch.arange(3))
    second, _ = network.step(tokens[:, 2:], cross, frames, past, torch.arange(3))
    valid = torch.arange(memory.shape[1])[None, :] < frames[:, None]
    encoder = EncoderGraph(model)(wave, lengths)[0] - onnx_memory[..., :network.kv_width]
    differences = {"encoder": float(encoder.abs()[valid].max()), "decoder": max(float((a - b).abs().max())
                                  for a, b in zip(torch_steps, (first, second), strict=True))}
    if model.ctc is not None:
        ctc = (model.ctc(memory) - network.ctc_logits(onnx_memory)).abs()
        differences["ctc"] = float(ctc[valid].max())
    return differences


def quantize_int8(source: Path, out: Path) -> None:
    """Dynamic int8 quantisation (per output channel) of both graphs' products with a weight
    matrix, into `out` (which `check_out` must accept); the config, tokenizer and export
    metadata carried along.

    Left in float: the front end (its mel product spans twelve orders of magnitude of power,
    which 256 levels of a dynamically quantised activation flatten) and the products of two
    activations (attention scores and their weighted sums)."""
    import onnx
    from onnxruntime.quantization import QuantType, quantize_dynamic

    check_out(out, source)
    with staged(out) as folder, _without_preprocessing_advice():
        for name in (ENCODER, DECODER):
            model = onnx.load(source / name)
            weights = {w.name for w in model.graph.initializer}
            chosen = [node.name for node in model.graph.node if node.op_type in QUANTIZED
                      and not node.name.startswith("/frontend/") and node.input[1] in weights]
            with tempfile.TemporaryDirectory() as tmp:
                target = Path(tmp) / name
                quantize_dynamic(source / name, target, weight_type=QuantType.QInt8,
                                 per_channel=True, nodes_to_quantize=chosen)
                data = _with_metadata(target.read_bytes(), {p.key: p.value
                                                            for p in model.metadata_props})
            atomic_write(folder / name, lambda f, data=data: f.write(data))
        copy_settings(source, folder)


class _PreprocessingAdvice(logging.Filter):
    """onnxruntime's advice, logged once per graph, to run its shape pre-processing first: it
    helps quantisers that pick nodes by inferred shapes, and this one names its nodes."""

    def filter(self, record: logging.LogRecord) -> bool:
        return "pre-processing before quantization" not in record.getMessage()


@contextmanager
def _without_preprocessing_advice() -> Iterator[None]:
    advice, root = _PreprocessingAdvice(), logging.getLogger()
    root.addFilter(advice)
    try:
        yield
    finally:
        root.removeFilter(advice)


@quiet_pipe
def main(argv: list[str] | None = None) -> int:
    parser = ArgumentParser(prog="python -m asr.export", description=__doc__.splitlines()[0])
    parser.add_argument("--model", required=True, help="model directory written by training")
    parser.add_argument("--format", required=True, choices=["onnx"])
    parser.add_argument("--quantize", choices=["int8"],
                        help="also write int8 weights (dynamic quantisation) into OUT_int8")
    parser.add_argument("--out", type=Path, help="where the graphs go (default: MODEL/onnx)")
    args = parser.parse_args(argv)
    out = args.out or Path(args.model) / "onnx"
    try:
        quantized = out.resolve().with_name(f"{out.resolve().name}_{args.quantize}") \
            if args.quantize else None
        if quantized:  # refused before anything is written
            check_out(quantized, Path(args.model))
        differences = export_onnx(args.model, out)
        print(f"{out}: {ENCODER}, {DECODER}; largest |onnx - torch| on a check input: "
              + ", ".join(f"{name} {value:.1e}" for name, value in differences.items()))
        if quantized:
            quantize_int8(out, quantized)
            print(f"{quantized}: {ENCODER}, {DECODER} with int8 weights")
    except (ValueError, OSError) as err:  # ModelDirError among the ValueErrors
        print_error(err)
        return 1
    except KeyboardInterrupt:  # the graphs are staged and renamed into place: none is half-written
        print(f"interrupted: {out} holds no half-written export", file=sys.stderr)
        return 130
    return 0


if __name__ == "__main__":
    sys.exit(main())

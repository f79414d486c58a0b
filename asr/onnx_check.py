"""What an exported graph may hold, checked before onnxruntime is given it.

An export directory may come from a stranger, or be a mix of two exports, and onnxruntime runs
whatever a graph says: a Loop of 2^62 iterations hangs, a ConstantOfShape of a huge constant
shape exhausts memory, and a decoder of another model runs fine and decodes nonsense. So a
graph is read (bounded, a regular file) and parsed with `onnx` before a session is made of its
bytes, and it must be one of ours:

- its operators are those `asr.export` emits (`OPS`; int8 quantisation's included), in the
  standard domain, with no subgraphs, functions or weights in files outside it;
- its nodes come in an order in which each value is made before it is used;
- a shape it builds (ConstantOfShape, Expand, Range, Pad; a convolution's padding) comes from a
  graph input, so that it scales with the audio, or from constants followed to their values
  through the arithmetic the exporter emits on shapes (`_fold`), and then stays under
  MAX_ELEMENTS; a shape made of constants in any other way (through Neg or Gather, say) is
  refused, since its size cannot be known before it is built;
- it computes nothing on constants alone but that small shape arithmetic: onnxruntime folds
  such nodes when it loads a graph, so a chain of constant products would take minutes there;
- its inputs and outputs are the layout's (`asr.onnx_backend`): names in order, element
  types, ranks, and every size the config fixes (vocabulary, layers, heads, head size);
- its metadata names the export it belongs to and the tokenizer it was made with: the two
  graphs of a directory must come from one export, with the tokenizer beside them.

`asr.onnx_backend` then runs both graphs once on a short silence and checks the sizes they
return (`OnnxNetwork.load`).
"""

import hashlib
import math
from collections.abc import Iterable
from pathlib import Path

import numpy as np

from asr.checkpoint import MAX_TOKENIZER_BYTES, ModelDirError
from asr.untrusted import UntrustedInputError, first_line, read_file

MAX_GRAPH_BYTES = 2 << 30  # protobuf's limit for one message: our graphs keep weights inside
MAX_ELEMENTS = 1 << 24  # a shape built from constants; ours build none (theirs come from inputs)
MAX_FOLDED = 64  # elements of a constant that is followed through shape arithmetic
MAX_CONV_STEP = 1 << 16  # a convolution's padding, dilation and stride (ours: 0, 1 and the hop)
_SUBGRAPH_TYPES = (5, 10)  # AttributeProto.GRAPH, GRAPHS
EXPORT_ID, TOKENIZER_SHA256 = "asr.export", "asr.tokenizer_sha256"  # metadata keys
WEIGHTS_SHA256 = "asr.weights_sha256"  # the model.pt the graphs were exported from

# Every operator asr.export emits, for any architecture, fp32 or int8 (tests/test_export.py
# exports each one and loads it through this check).
OPS = frozenset({
    "Add", "And", "Cast", "Clip", "Concat", "Constant", "ConstantOfShape", "Conv", "Cos", "Div",
    "DynamicQuantizeLinear", "Equal", "Exp", "Expand", "Flatten", "Gather", "GatherElements",
    "Gemm", "Greater", "Identity", "IsNaN", "LayerNormalization", "Less", "LessOrEqual", "Log",
    "MatMul", "MatMulInteger", "Max", "Mod", "Mul", "Neg", "Not", "Or", "Pad", "Pow", "Range",
    "ReduceMax", "ReduceSum", "Relu", "Reshape", "ScatterElements", "ScatterND", "Shape", "Sin",
    "Slice", "Softmax", "Split", "Sqrt", "Squeeze", "Sub", "Transpose", "Unsqueeze", "Where"})
_ELEMENTWISE = {"Add": np.add, "Sub": np.subtract, "Mul": np.multiply, "Max": np.maximum}
# The inputs of an operator that set how much it makes: each comes from a graph input or is
# followed to its value (`_fold`).
SHAPE_INPUTS = {"ConstantOfShape": (0,), "Expand": (1,), "Range": (0, 1, 2), "Pad": (1,)}

# A value's declared type: its element type (onnx.TensorProto's number) and its sizes, an int
# where the config fixes one, None where it varies.
FLOAT, INT64 = 1, 7
Spec = tuple[str, int, tuple[int | None, ...]]


def read_graph(path: Path, what: str):
    """The parsed graph of `path` and its bytes (what the session is made of: the bytes
    checked are the bytes run)."""
    try:
        import onnx
    except ImportError:
        raise ModelDirError("backend onnx needs onnx and onnxruntime: "
                            "pip install 'speech-transformer-asr[onnx]'") from None
    try:
        data = read_file(path, MAX_GRAPH_BYTES, what)
    except UntrustedInputError as err:
        raise ModelDirError(str(err)) from None
    try:
        model = onnx.load_model_from_string(data)
    except Exception as err:  # protobuf's DecodeError, onnx's own
        raise ModelDirError(f"{path}: not an ONNX graph ({first_line(err)})") from None
    if not len(model.graph.node):  # what protobuf makes of empty (or unrelated) bytes
        raise ModelDirError(f"{path}: not an ONNX graph (no nodes)")
    return model, data


def check_graph(model, path: Path, inputs: list[Spec], outputs: list[Spec]) -> None:
    """Refuse a graph that is not one `asr.export` writes for this config (module docstring)."""
    graph = model.graph
    problem = _foreign_parts(model) or _bad_node(graph) or _out_of_order(graph) \
        or _bad_shape(graph) \
        or _mismatch("inputs", _declared(graph.input, {i.name for i in graph.initializer}),
                     inputs) \
        or _mismatch("outputs", _declared(graph.output, set()), outputs)
    if problem:
        raise ModelDirError(f"{path}: {problem}; refused")


def tokenizer_digest(path: Path) -> str:
    """The SHA-256 of a tokenizer file, as the export's metadata records it."""
    try:
        return hashlib.sha256(read_file(path, MAX_TOKENIZER_BYTES, "the tokenizer")).hexdigest()
    except UntrustedInputError as err:
        raise ModelDirError(str(err)) from None


def weights_digest(path: Path) -> str:
    """The SHA-256 of a weights file, as the export's metadata records it."""
    digest = hashlib.sha256()
    try:
        with path.open("rb") as f:
            while block := f.read(1 << 20):
                digest.update(block)
    except OSError as err:
        raise ModelDirError(f"{path}: cannot read ({err.strerror or err})") from None
    return digest.hexdigest()


def check_same_export(encoder, decoder, tokenizer: Path, directory: Path,
                      weights: Path | None = None) -> None:
    """Both graphs carry one export's id and the hash of the tokenizer file beside them, and,
    for the export inside a model directory, of that directory's weights (`weights`): an
    export of weights since changed would say other things than the model."""
    first, second = _metadata(encoder), _metadata(decoder)
    if not first.get(EXPORT_ID) or not second.get(EXPORT_ID):
        raise ModelDirError(f"{directory}: the graphs carry no export id (not written by "
                            "python -m asr.export of this version); export the model again")
    if first[EXPORT_ID] != second[EXPORT_ID]:
        raise ModelDirError(f"{directory}: encoder.onnx and decoder.onnx come from different "
                            "exports; export the model again")
    digest = tokenizer_digest(tokenizer)
    if first.get(TOKENIZER_SHA256) != digest or second.get(TOKENIZER_SHA256) != digest:
        raise ModelDirError(f"{directory}: the graphs were exported with another tokenizer than "
                            f"{tokenizer.name}; export the model again")
    if weights is not None and first.get(WEIGHTS_SHA256) != weights_digest(weights):
        raise ModelDirError(f"{directory}: the graphs were exported from other weights than "
                            f"{weights} holds now; export the model again")


def _metadata(model) -> dict[str, str]:
    return {prop.key: prop.value for prop in model.metadata_props}


def _foreign_parts(model) -> str | None:
    domains = sorted({o.domain for o in model.opset_import} - {"", "ai.onnx"})
    if domains:
        return f"imports operator domain(s) {', '.join(domains)}, which no export uses"
    if len(model.functions):
        return "defines functions, which no export does"
    tensors = list(model.graph.initializer) + [a.t for n in model.graph.node
                                               for a in n.attribute if a.HasField("t")]
    if any(t.data_location == 1 for t in tensors):  # TensorProto.EXTERNAL
        return "keeps weights in files outside it, which no export does"
    return None


def _bad_node(graph) -> str | None:
    for node in graph.node:
        where = _node(node)
        if node.domain not in ("", "ai.onnx") or node.op_type not in OPS:
            return f"{where}: an operator no export emits"
        if any(a.type in _SUBGRAPH_TYPES or a.HasField("g") or len(a.graphs)
               for a in node.attribute):
            return f"{where}: holds a subgraph, which no export does"
        if node.op_type == "Conv":
            steps = [v for a in node.attribute if a.name in ("pads", "dilations", "strides")
                     for v in a.ints]
            if any(not 0 <= v <= MAX_CONV_STEP for v in steps):
                return f"{where}: padding, dilation or stride out of [0, {MAX_CONV_STEP}]"
    return None


def _node(node) -> str:
    """How an error names a node: its name (or first output) and operator."""
    return f"node {node.name or (node.output[0] if node.output else '?')} ({node.op_type})"


def _out_of_order(graph) -> str | None:
    """A node that uses a value no graph input, weight or earlier node makes (ONNX wants
    nodes in an order that computes them; `_from_inputs` relies on it)."""
    made = {v.name for v in graph.input} | {t.name for t in graph.initializer} | {""}
    for node in graph.node:
        missing = [name for name in node.input if name not in made]
        if missing:
            return f"{_node(node)} uses {missing[0]} before any node makes it"
        made.update(node.output)
    return None


def _from_inputs(graph) -> set[str]:
    """The values that depend on a graph input (the audio, the tokens): the rest are
    constants, computed once whatever the input."""
    dynamic = {v.name for v in graph.input} - {t.name for t in graph.initializer}
    for node in graph.node:
        if any(name in dynamic for name in node.input):
            dynamic.update(node.output)
    return dynamic


def _bad_shape(graph) -> str | None:
    """A shape built from constants that cannot be followed, or that is over MAX_ELEMENTS
    (or not a shape at all); a node on constants alone that is more than shape arithmetic."""
    known, dynamic = _fold(graph), _from_inputs(graph)
    for node in graph.node:
        unknown = [name for i, name in enumerate(node.input)
                   if i in SHAPE_INPUTS.get(node.op_type, ()) and name
                   and name not in known and name not in dynamic]
        if unknown:
            return f"{_node(node)} takes a shape ({unknown[0]}) made of constants in a way " \
                   "this check cannot follow"
        values = [known.get(name) for name in node.input]
        try:
            size = _built_size(node.op_type, values)
        except (OverflowError, TypeError, ValueError):  # a size too large for a float, or no number
            size = math.inf
        if size is not None and not 0 <= size <= MAX_ELEMENTS:
            return f"{_node(node)} builds a constant shape of {size:.3g} elements (over " \
                   f"{MAX_ELEMENTS})"
        constant = node.op_type != "Constant" and not any(n in dynamic for n in node.input)
        if constant and any(name not in known for name in node.output):
            return f"{_node(node)} computes on constants alone beyond shape arithmetic"
    return None


def _built_size(op: str, values: list[np.ndarray | None]) -> float | None:
    """How many elements (or padding) `op` makes of the constant inputs among `values`;
    None when they are not constant."""
    if op == "ConstantOfShape" and values[0] is not None:
        return math.prod(float(v) for v in values[0].ravel())
    if op == "Expand" and len(values) > 1 and values[1] is not None:
        return math.prod(abs(float(v)) for v in values[1].ravel())
    if op == "Range" and len(values) == 3 and all(v is not None for v in values):
        start, limit, delta = (float(v.ravel()[0]) if v.size else 0.0 for v in values)
        return max(0, math.ceil((limit - start) / delta)) if delta else math.inf
    if op == "Pad" and len(values) > 1 and values[1] is not None:
        return sum(abs(float(v)) for v in values[1].ravel())
    return None


def _fold(graph) -> dict[str, np.ndarray]:
    """The values of the small constants and of what the shape arithmetic of our graphs
    (Concat, Cast, Unsqueeze, Squeeze, Identity, Reshape, Add, Sub, Mul, Max) makes of them,
    as arrays of Python numbers (no overflow)."""
    from onnx import numpy_helper

    known: dict[str, np.ndarray] = {}
    for tensor in graph.initializer:
        if math.prod(tensor.dims) <= MAX_FOLDED:
            known[tensor.name] = _plain(numpy_helper.to_array(tensor))
    for node in graph.node:
        value = _folded(node, [known.get(name) for name in node.input], numpy_helper)
        if value is not None and value.size <= MAX_FOLDED and node.output:
            known[node.output[0]] = value
    return known


def _folded(node, values: list[np.ndarray | None], numpy_helper) -> np.ndarray | None:
    op = node.op_type
    if op == "Constant":
        return _constant(node, numpy_helper)
    if op in ("Identity", "Cast", "Unsqueeze", "Squeeze", "Reshape"):  # the same values
        return values[0].ravel() if values and values[0] is not None else None
    if not values or any(v is None for v in values):
        return None
    try:
        if op == "Concat":
            return np.concatenate([v.ravel() for v in values])
        if op in _ELEMENTWISE and len(values) == 2:
            return _ELEMENTWISE[op](values[0], values[1])
    except (ValueError, TypeError, OverflowError):
        return None
    return None


def _constant(node, numpy_helper) -> np.ndarray | None:
    for attribute in node.attribute:
        if attribute.name == "value" and math.prod(attribute.t.dims) <= MAX_FOLDED:
            return _plain(numpy_helper.to_array(attribute.t))
        if attribute.name in ("value_int", "value_float"):
            return _plain(np.array([attribute.i if attribute.name == "value_int" else attribute.f]))
        if attribute.name in ("value_ints", "value_floats") and \
                len(attribute.ints) + len(attribute.floats) <= MAX_FOLDED:
            return _plain(np.array(list(attribute.ints) or list(attribute.floats)))
    return None


def _plain(array: np.ndarray) -> np.ndarray:
    """Python ints and floats: shape arithmetic on them never wraps around."""
    return np.array(array.tolist(), dtype=object).reshape(array.shape) \
        if array.dtype.kind in "iufb" else np.array([], dtype=object)


def _declared(values: Iterable, initializers: set[str]) -> list[Spec]:
    """(name, element type, sizes) of a graph's inputs or outputs, initialisers left out."""
    found = []
    for value in values:
        if value.name in initializers:
            continue
        tensor = value.type.tensor_type
        sizes = tuple(d.dim_value if d.HasField("dim_value") else None for d in tensor.shape.dim)
        found.append((value.name, tensor.elem_type, sizes))
    return found


def _mismatch(what: str, declared: list[Spec], expected: list[Spec]) -> str | None:
    names = [name for name, _, _ in declared]
    if names != [name for name, _, _ in expected]:
        return f"its {what} are {', '.join(names) or 'none'}, not " \
               f"{', '.join(name for name, _, _ in expected)} (not this graph of an export?)"
    for (name, kind, sizes), (_, want_kind, want_sizes) in zip(declared, expected, strict=True):
        if kind != want_kind:
            return f"{name} holds elements of type {kind}, not {want_kind}"
        if len(sizes) != len(want_sizes):
            return f"{name} has {len(sizes)} dimensions, not {len(want_sizes)}"
        for axis, (size, want) in enumerate(zip(sizes, want_sizes, strict=True)):
            if want is not None and size is not None and size != want:
                return f"{name} is {size} wide on axis {axis}, the config makes {want} " \
                       "(a graph of another model?)"
            if want is None and size is not None:
                return f"{name} is fixed at {size} on axis {axis}, which must vary"
    return None

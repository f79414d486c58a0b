"""Cases: ONNX export folders and exported graphs. `python -m asr.export --out` onto a folder
that holds anything but an export of the same model (another trained model, notes, a file, a
FIFO) must be refused before a byte is written; an export directory whose graphs are not this
model's (another vocabulary, swapped, from two exports, without the export's metadata) or hold
what no export emits (Loop, subgraphs, constant-shape bombs, outside weights, foreign
operators) must be refused with one line, before onnxruntime runs anything."""

import shutil
from collections.abc import Callable
from pathlib import Path

from robustness.case import TRANSCRIBE, Cli, Work, case, run_cli

EXPORT = "asr.export"
SLOW = 60  # seconds: a case that exports pays for an export (a few seconds) besides itself


def _shared_export(w: Work, name: str) -> Path:
    """The shared model's export (`onnx`) or another vocabulary's (`other`), made once."""
    target = w.shared / name
    if not target.exists():
        from asr.export import export_onnx
        export_onnx(w.shared / "model" if name == "onnx" else _other_model(w.shared), target)
    return target


def _other_model(shared: Path) -> Path:
    """An untrained model like the shared one but with a tokenizer of 24 pieces."""
    from omegaconf import open_dict

    from asr.checkpoint import build_model, save_model_dir
    from asr.tokenizer import Tokenizer
    from helpers import train_config

    cfg = train_config(shared / "other_run", shared / "train.jsonl")
    tokenizer = Tokenizer.train(["one", "four", "yes", "stop", "seven", "nine", "left"], 24)
    with open_dict(cfg):
        cfg.model.n_vocab, cfg.model.n_input = tokenizer.vocab_size, cfg.features.n_mels
    save_model_dir(shared / "other_model", build_model(cfg), tokenizer, cfg)
    return shared / "other_model"


def export(w: Work, name: str = "onnx") -> Path:
    """This case's own copy of an export."""
    return Path(shutil.copytree(_shared_export(w, name), w.folder / f"{name}_copy"))


def _exporting(w: Work, out: Path | str, *extra: str) -> Cli:
    return Cli(f"{EXPORT}:main", ["--model", str(w.model), "--format", "onnx", "--out", str(out),
                                  *extra])


def _untouched(w: Work, folder: Path, make_cli: Callable[[Work, Path], Cli]) -> bool:
    """`make_cli`'s command must fail with one line and leave every file of `folder` as it was
    (and no staging folder beside it)."""
    assert w.model.is_dir()  # the case's copy of the model, made before the folders are listed
    before = {p: p.read_bytes() for p in folder.rglob("*") if p.is_file()}
    beside = sorted(p.name for p in folder.parent.iterdir())
    status, _, err = run_cli(make_cli(w, folder))
    after = {p: p.read_bytes() for p in folder.rglob("*") if p.is_file()}
    return status == 1 and len(err.splitlines()) == 1 and err.startswith("error: ") \
        and after == before and sorted(p.name for p in folder.parent.iterdir()) == beside


def _another_trained_model(w: Work) -> Path:
    victim = w.folder / "victim"
    shutil.copytree(w.model, victim)
    (victim / "checkpoint.pt").write_bytes((victim / "model.pt").read_bytes())
    return victim


def _linked(target: Path, link: Path) -> Path:
    link.symlink_to(target)
    return target


def _notes(w: Work) -> Path:
    (w.folder / "notes").mkdir()
    (w.folder / "notes" / "todo.txt").write_text("mine")
    return w.folder / "notes"


case("export", "--out onto another trained model's folder", "ok", limit=SLOW)(
    lambda w: _untouched(w, _another_trained_model(w), _exporting))
case("export", "--out onto a folder of notes", "ok", limit=SLOW)(
    lambda w: _untouched(w, _notes(w), _exporting))
case("export", "--out onto an export of another model", "ok", limit=SLOW)(
    lambda w: _untouched(w, export(w, "other"), _exporting))
case("export", "--out onto the model directory itself", "ok", limit=SLOW)(
    lambda w: _untouched(w, w.model, _exporting))
case("export", "--out onto the folder that holds the model", limit=SLOW)(
    lambda w: (w.model, _exporting(w, w.folder))[1])
case("export", "--out a link to another trained model's folder", "ok", limit=SLOW)(
    lambda w: _untouched(w, _linked(_another_trained_model(w), w.folder / "link"),
                         lambda w, victim: _exporting(w, w.folder / "link")))
case("export", "--out a regular file")(lambda w: _exporting(w, w.file("out", "mine")))
case("export", "--out a FIFO")(lambda w: _exporting(w, w.fifo("out")))
case("export", "--out /dev/null")(lambda w: _exporting(w, "/dev/null"))
case("export", "--out inside a regular file", limit=SLOW)(
    lambda w: _exporting(w, w.file("out", "mine") / "onnx"))
case("export", "--out holding a half-written export of another model", "ok", limit=SLOW)(
    lambda w: _untouched(w, _half_export(w), _exporting))
case("export", "--quantize int8 beside an _int8 folder of notes", "ok", limit=SLOW)(
    lambda w: _untouched(w, _int8_notes(w), lambda w, folder: _exporting(
        w, folder / "new", "--quantize", "int8")))
case("export", "--model missing")(
    lambda w: Cli(f"{EXPORT}:main", ["--model", str(w.folder / "none"), "--format", "onnx"]))
case("export", "--format tflite")(
    lambda w: Cli(f"{EXPORT}:main", ["--model", str(w.model), "--format", "tflite"]))


def _half_export(w: Work) -> Path:
    folder = export(w, "other")
    (folder / "decoder.onnx").unlink()
    return folder


def _int8_notes(w: Work) -> Path:
    """A folder where `--out new --quantize int8` would put new_int8, which holds notes."""
    (w.folder / "exports" / "new_int8").mkdir(parents=True)
    (w.folder / "exports" / "new_int8" / "notes.txt").write_text("mine")
    return w.folder / "exports"


def _again_loads(w: Work) -> bool:
    """An export over the model's earlier export replaces it whole and loads."""
    from asr.export import export_onnx
    from asr.transcriber import Transcriber

    out = export(w)
    old = (out / "decoder.onnx").read_bytes()
    export_onnx(w.model, out)
    Transcriber.from_pretrained(out, backend="onnx")
    return (out / "decoder.onnx").read_bytes() != old \
        and not any(p.name.startswith(f".{out.name}.") for p in out.parent.iterdir())


case("api", "export over the same model's earlier export", "ok", limit=SLOW)(_again_loads)


# ------------------------------------------------------------------ spoiled export directories

def _loading(spoil: Callable[[Path, Work], object]) -> Callable[[Work], object]:
    """Transcriber.from_pretrained(backend="onnx") of a spoiled copy of the export."""
    def run(w: Work):
        from asr.transcriber import Transcriber
        folder = export(w)
        spoil(folder, w)
        return Transcriber.from_pretrained(folder, backend="onnx")
    return run


def _edit(name: str, change: Callable) -> Callable[[Path, Work], None]:
    """Change one graph in place, written as it is (onnx.save would check it first)."""
    def spoil(folder: Path, w: Work) -> None:
        import onnx
        model = onnx.load(folder / name)
        change(model)
        (folder / name).write_bytes(model.SerializeToString())
    return spoil


def _constant(name: str, values: list[int], kind: int = 7):
    from onnx import helper
    return helper.make_node("Constant", [], [name], value=helper.make_tensor(
        name, kind, [len(values)] if kind != 9 else [], values))


def _add(*nodes: Callable[[], list]) -> Callable:
    return lambda model: model.graph.node.extend([n for make in nodes for n in make()])


def _node(op: str, inputs: list[str], outputs: list[str], **attributes):
    from onnx import helper
    return helper.make_node(op, inputs, outputs, **attributes)


def _loop(model) -> None:
    from onnx import TensorProto, helper
    body = helper.make_graph([_node("Identity", ["cond_in"], ["cond_out"])], "body",
                             [helper.make_tensor_value_info("i", TensorProto.INT64, []),
                              helper.make_tensor_value_info("cond_in", TensorProto.BOOL, [])],
                             [helper.make_tensor_value_info("cond_out", TensorProto.BOOL, [])])
    model.graph.node.extend([_constant("trips", [1 << 62]), _constant("go", [1], kind=9),
                             _node("Loop", ["trips", "go"], ["spin"], body=body)])


def _if(model) -> None:
    from onnx import TensorProto, helper
    branch = helper.make_graph([_node("Constant", [], ["x"], value_ints=[1])], "branch", [],
                               [helper.make_tensor_value_info("x", TensorProto.INT64, [1])])
    model.graph.node.extend([_constant("go", [1], kind=9),
                             _node("If", ["go"], ["picked"], then_branch=branch,
                                   else_branch=branch)])


def _outside_weights(model) -> None:
    weight = model.graph.initializer[0]
    weight.data_location = 1  # TensorProto.EXTERNAL
    weight.external_data.add(key="location", value="/etc/passwd")


def _function(model) -> None:
    from onnx import helper
    model.functions.append(helper.make_function("ours.evil", "Twice", ["x"], ["y"],
                                                [_node("Add", ["x", "x"], ["y"])],
                                                [helper.make_opsetid("", 17)]))


def _fixed(value: str, axis: int, size: int) -> Callable:
    """Declare a size where the export leaves the axis free."""
    def change(model) -> None:
        found = [v for v in list(model.graph.input) + list(model.graph.output) if v.name == value]
        found[0].type.tensor_type.shape.dim[axis].dim_value = size
    return change


def _renamed_output(model) -> None:
    model.graph.output[0].name = "logits_of_another"


def _no_metadata(folder: Path, w: Work) -> None:
    for name in ("encoder.onnx", "decoder.onnx"):
        _edit(name, lambda model: model.metadata_props.__delitem__(slice(None)))(folder, w)


def _from_two_exports(folder: Path, w: Work) -> None:
    from asr.export import export_onnx
    export_onnx(w.model, w.folder / "again")
    shutil.copy(w.folder / "again" / "decoder.onnx", folder / "decoder.onnx")


def _swap(folder: Path, w: Work) -> None:
    (folder / "encoder.onnx").rename(folder / "x")
    (folder / "decoder.onnx").rename(folder / "encoder.onnx")
    (folder / "x").rename(folder / "decoder.onnx")


def _replace(name: str, make: Callable[[Path, Work], object]) -> Callable[[Path, Work], None]:
    def spoil(folder: Path, w: Work) -> None:
        (folder / name).unlink()
        make(folder / name, w)
    return spoil


SPOILED: dict[str, Callable[[Path, Work], object]] = {
    "a decoder of another vocabulary": lambda f, w: shutil.copy(
        _shared_export(w, "other") / "decoder.onnx", f),
    "an encoder of another vocabulary": lambda f, w: shutil.copy(
        _shared_export(w, "other") / "encoder.onnx", f),
    "the graphs of another vocabulary, this tokenizer": lambda f, w: [shutil.copy(
        _shared_export(w, "other") / n, f) for n in ("encoder.onnx", "decoder.onnx")],
    "another model's tokenizer beside the graphs": lambda f, w: shutil.copy(
        _shared_export(w, "other") / "tokenizer.model", f),
    "encoder.onnx and decoder.onnx swapped": _swap,
    "the decoder as both graphs": lambda f, w: shutil.copy(f / "decoder.onnx", f / "encoder.onnx"),
    "graphs of two exports of the model": _from_two_exports,
    "graphs without the export's metadata": _no_metadata,
    "a ConstantOfShape of a 2^20 x 2^20 constant": _edit("encoder.onnx", _add(lambda: [
        _constant("shape", [1 << 20, 1 << 20]), _node("ConstantOfShape", ["shape"], ["bomb"])])),
    "a ConstantOfShape of a shape multiplied up from constants": _edit("decoder.onnx", _add(
        lambda: [_constant("side", [1 << 12]), _node("Mul", ["side", "side"], ["edge"]),
                 _node("Concat", ["edge", "edge", "edge"], ["shape"], axis=0),
                 _node("ConstantOfShape", ["shape"], ["bomb"])])),
    "an Expand to 2^40 elements": _edit("encoder.onnx", _add(lambda: [
        _constant("one", [1]), _constant("big", [1 << 40]), _node("Expand", ["one", "big"],
                                                                  ["wide"])])),
    "a Range of 2^50 steps": _edit("decoder.onnx", _add(lambda: [
        _constant("zero", [0]), _constant("end", [1 << 50]), _constant("step", [1]),
        _node("Range", ["zero", "end", "step"], ["counted"])])),
    "a Pad of 2^40": _edit("encoder.onnx", _add(lambda: [
        _constant("pads", [0, 1 << 40]), _node("Pad", ["wave", "pads"], ["padded"])])),
    "a Loop of 2^62 iterations": _edit("decoder.onnx", _loop),
    "an If with subgraphs": _edit("encoder.onnx", _if),
    "a Tile (no export emits one)": _edit("encoder.onnx", _add(lambda: [
        _constant("times", [1 << 30, 1]), _node("Tile", ["wave", "times"], ["tiled"])])),
    "an operator of another domain": _edit("decoder.onnx", _add(lambda: [
        _node("Gelu", ["rows"], ["g"], domain="com.microsoft")])),
    "weights in /etc/passwd": _edit("encoder.onnx", _outside_weights),
    "a function of its own": _edit("decoder.onnx", _function),
    "a convolution padded by 2^40": _edit("encoder.onnx", lambda m: [
        a.ints.__setitem__(slice(None), [1 << 40] * len(a.ints)) for n in m.graph.node
        if n.op_type == "Conv" for a in n.attribute if a.name == "pads"]),
    "the wave input fixed at 16000 samples": _edit("encoder.onnx", _fixed("wave", 1, 16000)),
    "logits 7 wide": _edit("decoder.onnx", _fixed("logits", 2, 7)),
    "the decoder's first output renamed": _edit("decoder.onnx", _renamed_output),
    "an empty encoder.onnx": lambda f, w: (f / "encoder.onnx").write_bytes(b""),
    "random bytes as decoder.onnx": lambda f, w: (f / "decoder.onnx").write_bytes(
        bytes(range(256)) * 64),
    "encoder.onnx cut in half": lambda f, w: (f / "encoder.onnx").write_bytes(
        (f / "encoder.onnx").read_bytes()[:200000]),
    "encoder.onnx a FIFO": _replace("encoder.onnx", lambda p, w: __import__("os").mkfifo(p)),
    "decoder.onnx a directory": _replace("decoder.onnx", lambda p, w: p.mkdir()),
    "decoder.onnx a link to /dev/zero": _replace("decoder.onnx",
                                                 lambda p, w: p.symlink_to("/dev/zero")),
    "decoder.onnx missing": lambda f, w: (f / "decoder.onnx").unlink(),
}
for _name, _spoil in SPOILED.items():
    case("api", f"backend onnx: {_name}", limit=SLOW)(_loading(_spoil))


def _transcribing(spoil: Callable[[Path, Work], object]) -> Callable[[Work], Cli]:
    def make(w: Work) -> Cli:
        folder = export(w)
        spoil(folder, w)
        return Cli(f"{TRANSCRIBE}:main", ["--model", str(folder), "--backend", "onnx",
                                          str(w.clip)])
    return make


for _name in ("a decoder of another vocabulary", "a Loop of 2^62 iterations",
              "a ConstantOfShape of a 2^20 x 2^20 constant", "encoder.onnx and decoder.onnx swapped"):
    case("export", f"asr-transcribe --backend onnx: {_name}", limit=SLOW)(
        _transcribing(SPOILED[_name]))


def _same_as_torch(w: Work) -> bool:
    """The export, checked and run, transcribes the clip as the torch model does."""
    from asr.transcriber import Transcriber
    onnx = Transcriber.from_pretrained(export(w), backend="onnx", vad=None)
    torch = Transcriber.from_pretrained(w.model, device="cpu", vad=None)
    return onnx.transcribe(w.clip).text == torch.transcribe(w.clip).text


case("api", "backend onnx: the export itself decodes as torch", "ok", limit=SLOW)(_same_as_torch)

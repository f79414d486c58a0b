"""Input from strangers (a downloaded model directory, a grammar, a word list, API arguments).

Files are read bounded: a special file (a FIFO blocks forever, /dev/zero never ends), a file
over its size limit and text that is not UTF-8 are refused, with one line naming the file,
before anything is parsed. YAML is scanned before any loader builds it: aliases are refused
(a few hundred bytes of nested aliases expand to gigabytes in every loader that builds the
tree, OmegaConf's included) and so is nesting deeper than any config needs.

Config dataclasses (model sizes, features, decoding, language model, VAD, demo actions) are
built from such data by `from_section`, which refuses a section that is not a mapping or
names unknown keys, and each class's `__post_init__` holds its values to their annotated
types (`check_fields`) and to sane ranges (`check_ranges`), whether they came from a file
or from a caller of the Python API.
"""

import dataclasses
import math
import os
import stat
import types
import typing
from pathlib import Path

import yaml

MAX_YAML_DEPTH = 32  # nesting of mappings and lists; configs and grammars need a handful


class UntrustedInputError(ValueError):
    """`source[:line]: problem` on one line; the parts are kept for callers that reword it."""

    def __init__(self, source: str | Path, problem: str, line: int | None = None) -> None:
        super().__init__(f"{source}:{line}: {problem}" if line else f"{source}: {problem}")
        self.source, self.problem, self.line = str(source), problem, line


def read_file(path: str | Path, max_bytes: int, what: str = "the file") -> bytes:
    """The bytes of a regular file of at most `max_bytes`.

    The file is opened without blocking (a FIFO would wait for a writer) and checked to be a
    regular file before a byte is read.
    """
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK)
    except (OSError, ValueError) as err:  # ValueError: a NUL in the name
        raise UntrustedInputError(path, f"cannot read {what} ({first_line(err)})") from None
    info = os.fstat(fd)
    if not stat.S_ISREG(info.st_mode):
        os.close(fd)
        if stat.S_ISDIR(info.st_mode):
            raise UntrustedInputError(path, f"cannot read {what} (is a directory)")
        raise UntrustedInputError(path, f"{what} is not a regular file (a device, pipe or "
                                        "socket); refused")
    with os.fdopen(fd, "rb") as f:
        if info.st_size > max_bytes:
            raise _too_large(path, what, max_bytes)
        try:
            data = f.read(max_bytes + 1)
        except OSError as err:
            raise UntrustedInputError(path, f"cannot read {what} ({first_line(err)})") from None
    if len(data) > max_bytes:  # it grew while being read
        raise _too_large(path, what, max_bytes)
    return data


def read_text(path: str | Path, max_bytes: int, what: str = "the file") -> str:
    """`read_file`, decoded as UTF-8."""
    try:
        return read_file(path, max_bytes, what).decode("utf-8")
    except UnicodeDecodeError:
        raise UntrustedInputError(path, f"{what} is not UTF-8 text") from None


def read_yaml(path: str | Path, max_bytes: int, what: str = "the file") -> str:
    """The text of a YAML file that `check_yaml` accepts, for a loader to build."""
    text = read_text(path, max_bytes, what)
    check_yaml(text, path)
    return text


def check_yaml(text: str, source: str | Path, loader: type = yaml.SafeLoader) -> None:
    """Scan YAML's parse events (nothing is built): refuse aliases and deep nesting; a syntax
    error names its line. `loader`: the parser (libyaml's is faster on large files)."""
    depth = 0
    try:
        for event in yaml.parse(text, Loader=loader):
            if isinstance(event, yaml.AliasEvent):
                raise UntrustedInputError(source, "YAML aliases are not allowed",
                                          event.start_mark.line + 1)
            if isinstance(event, yaml.CollectionStartEvent):
                depth += 1
                if depth > MAX_YAML_DEPTH:
                    raise UntrustedInputError(source, f"YAML nested deeper than {MAX_YAML_DEPTH} "
                                              "levels; refused", event.start_mark.line + 1)
            elif isinstance(event, yaml.CollectionEndEvent):
                depth -= 1
    except yaml.YAMLError as err:
        mark = getattr(err, "problem_mark", None)
        problem = getattr(err, "problem", None) or str(err).splitlines()[0]
        raise UntrustedInputError(source, f"not valid YAML: {problem}",
                                  mark.line + 1 if mark else None) from None


# ---------------------------------------------------------------------------- config dataclasses

T = typing.TypeVar("T")


def from_section(cls: type[T], values: object, section: str) -> T:
    """`cls(**values)` for a section of untrusted data: a mapping whose keys are `cls`'s
    fields, every required one present (the values are `cls`'s own `__post_init__`'s to
    check)."""
    if values is None:
        raise ValueError(f"no {section} section")
    if not isinstance(values, dict):
        raise ValueError(f"{section} must be a mapping, got {short(values)}")
    fields = [f for f in dataclasses.fields(cls) if f.init]
    names = {f.name for f in fields}
    unknown = sorted(str(key) for key in values if key not in names)
    if unknown:
        raise ValueError(f"{section}: unknown key(s) {', '.join(unknown)} (expected some of "
                         f"{', '.join(sorted(names))})")
    missing = [f.name for f in fields if f.name not in values
               and f.default is dataclasses.MISSING and f.default_factory is dataclasses.MISSING]
    if missing:
        raise ValueError(f"{section}: missing {', '.join(missing)}")
    return cls(**values)


def check_fields(obj: object, section: str) -> None:
    """Hold every field of a dataclass instance to its annotated type: `int` (not a bool),
    `float` (an int is converted; NaN and infinities are refused), `str`, `bool`, `list[X]`,
    `dict[str, X]` and `X | None`."""
    hints = typing.get_type_hints(type(obj))
    for f in dataclasses.fields(obj):
        value = getattr(obj, f.name)
        fitted = _fit(value, hints[f.name])
        if fitted is _BAD:
            raise ValueError(f"{section}.{f.name} must be {_describe(hints[f.name])}, got "
                             f"{short(value)}")
        if fitted is not value:
            object.__setattr__(obj, f.name, fitted)  # frozen dataclasses too


def check_ranges(obj: object, section: str, **bounds: tuple[float, float]) -> None:
    """Each named field within its closed interval (fields of a checked type)."""
    for name, (low, high) in bounds.items():
        value = getattr(obj, name)
        if value is not None and not low <= value <= high:
            raise ValueError(f"{section}.{name} must be in [{_number(low)}, {_number(high)}], "
                             f"got {value!r}")


_BAD = object()


def _fit(value: object, hint: object) -> object:
    """`value` as `hint` wants it (an int for a float becomes a float), or _BAD."""
    origin, args = typing.get_origin(hint), typing.get_args(hint)
    if origin in (typing.Union, types.UnionType):
        for option in args:
            fitted = _fit(value, option)
            if fitted is not _BAD:
                return fitted
        return _BAD
    if hint is type(None):
        return value if value is None else _BAD
    if hint is bool:
        return value if isinstance(value, bool) else _BAD
    if hint is int:
        return value if isinstance(value, int) and not isinstance(value, bool) else _BAD
    if hint is float:
        if isinstance(value, int | float) and not isinstance(value, bool) \
                and abs(value) < 1e300 and math.isfinite(value):
            return float(value)
        return _BAD
    if hint is str:
        return value if isinstance(value, str) else _BAD
    if origin is list:
        if not isinstance(value, list | tuple):
            return _BAD
        items = [_fit(item, args[0]) for item in value]
        return _BAD if any(item is _BAD for item in items) else items
    if origin is dict:
        if not isinstance(value, dict) or not all(isinstance(k, str) for k in value):
            return _BAD
        items = {k: _fit(v, args[1]) for k, v in value.items()}
        return _BAD if any(v is _BAD for v in items.values()) else items
    return value  # a type this schema does not describe: left to the class


def _describe(hint: object) -> str:
    args = typing.get_args(hint)
    if typing.get_origin(hint) in (typing.Union, types.UnionType):
        return " or ".join(_describe(option) for option in args)
    if typing.get_origin(hint) is list:
        return f"a list of {_describe(args[0]).removeprefix('a ').removeprefix('an ')}s"
    if typing.get_origin(hint) is dict:
        return f"a mapping of names to {_describe(args[1])}"
    return {type(None): "null", bool: "true or false", int: "an integer",
            float: "a finite number", str: "a string"}.get(hint, str(hint))


def _number(value: float) -> str:
    return str(int(value)) if float(value).is_integer() else f"{value:g}"


def short(value: object, limit: int = 60) -> str:
    """`repr(value)`, cut to `limit` characters: a value quoted in a one-line error."""
    text = repr(value)
    return text if len(text) <= limit else text[:limit - 3] + "..."


def first_line(err: Exception) -> str:
    """A library's own words for an error, on one line (the first), or its type's name when
    it has none; an OS error's and libsndfile's text without the path they repeat."""
    text = getattr(err, "error_string", None) or getattr(err, "strerror", None) or str(err)
    lines = text.strip().splitlines()
    return lines[0] if lines else type(err).__name__


def _too_large(path: str | Path, what: str, max_bytes: int) -> UntrustedInputError:
    return UntrustedInputError(path, f"{what} is larger than {max_bytes} bytes; refused")

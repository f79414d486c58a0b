"""Cases: a spoiled model.pt (cut, random, wrong structure or shapes, NaN, a pickle payload, odd files)."""

import os
from collections.abc import Callable
from pathlib import Path

from robustness.case import Cli, Payload, Work, case, save, state, transcribe


def spoil_weights(name: str, write: Callable[[Path], None]) -> None:
    def make(w: Work) -> Cli:
        write(w.model / "model.pt")
        return transcribe(w)
    case("weights", name)(make)


def _edit_state(edit: Callable[[dict], object]) -> Callable[[Path], None]:
    """Edit the saved state dict in place, or replace it with the dict `edit` returns."""
    def write(path: Path) -> None:
        loaded = state(path)
        result = edit(loaded)
        save(path, result if isinstance(result, dict) else loaded)
    return write


spoil_weights("empty file", lambda p: p.write_bytes(b""))
spoil_weights("cut to 100 bytes", lambda p: p.write_bytes(p.read_bytes()[:100]))
spoil_weights("random bytes", lambda p: p.write_bytes(os.urandom(4096)))
spoil_weights("a list", lambda p: save(p, [1, 2, 3]))
spoil_weights("a bare tensor", lambda p: save(p, __import__("torch").zeros(3)))
spoil_weights("strings for tensors", lambda p: save(p, {"a": "b"}))
spoil_weights("a tensor missing", _edit_state(lambda s: s.pop(sorted(s)[-1])))
spoil_weights("an extra tensor", _edit_state(lambda s: s.update(extra=__import__("torch").zeros(1))))
spoil_weights("a wrong shape", _edit_state(
    lambda s: s.update({"ctc.bias": __import__("torch").zeros(7)})))
spoil_weights("NaN weights", _edit_state(lambda s: [v.fill_(float("nan")) for v in s.values()
                                                     if v.is_floating_point()]))
spoil_weights("one infinite weight", _edit_state(
    lambda s: s["ctc.bias"].__setitem__(0, float("inf"))))
spoil_weights("integer weights", _edit_state(
    lambda s: {k: v.long() if v.is_floating_point() else v for k, v in s.items()}))
spoil_weights("pickled os.system", lambda p: save(p, {"model": Payload()}))
spoil_weights("a sparse 9 GB file", lambda p: os.truncate(p, 9 << 30))
spoil_weights("a directory", lambda p: (p.unlink(), p.mkdir()))
spoil_weights("a FIFO", lambda p: (p.unlink(), os.mkfifo(p)))
spoil_weights("a link to /dev/zero", lambda p: (p.unlink(), p.symlink_to("/dev/zero")))

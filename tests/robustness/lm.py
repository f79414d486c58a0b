"""Cases: a spoiled language model directory given with --lm (lm.pt, its dims, its tokenizer)."""

import os
import shutil
from collections.abc import Callable
from pathlib import Path

from robustness.case import Cli, Payload, Work, case, save, state, transcribe


def spoil_lm(name: str, write: Callable[[Path], None] | None, *extra: str) -> None:
    def make(w: Work) -> Cli:
        if write is not None:
            write(w.lm)
        return transcribe(w, "--lm", str(w.lm), *extra)
    case("lm", name)(make)


def _lm_saved(edit: Callable[[dict], None]) -> Callable[[Path], None]:
    def write(lm: Path) -> None:
        saved = state(lm / "lm.pt")
        edit(saved)
        save(lm / "lm.pt", saved)
    return write


spoil_lm("no such directory", lambda lm: shutil.rmtree(lm))
spoil_lm("no lm.pt", lambda lm: (lm / "lm.pt").unlink())
spoil_lm("empty lm.pt", lambda lm: (lm / "lm.pt").write_bytes(b""))
spoil_lm("lm.pt is a list", lambda lm: save(lm / "lm.pt", [1]))
spoil_lm("no dims", _lm_saved(lambda s: s.pop("dims")))
spoil_lm("dims not a mapping", _lm_saved(lambda s: s.update(dims=5)))
spoil_lm("dims with an unknown key", _lm_saved(lambda s: s["dims"].update(colour=1)))
spoil_lm("dims.n_vocab of another tokenizer", _lm_saved(lambda s: s["dims"].update(n_vocab=99)))
spoil_lm("dims.d_model -1", _lm_saved(lambda s: s["dims"].update(d_model=-1)))
spoil_lm("dims.n_layers 10 million", _lm_saved(lambda s: s["dims"].update(n_layers=10**7)))
spoil_lm("dims.d_model 10**6 (a huge allocation)", _lm_saved(lambda s: s["dims"].update(
    d_model=10**6, n_head=1)))
spoil_lm("a tensor missing", _lm_saved(lambda s: s["state_dict"].pop(sorted(s["state_dict"])[0])))
spoil_lm("a wrong shape", _lm_saved(lambda s: s["state_dict"].update(
    {sorted(s["state_dict"])[0]: __import__("torch").zeros(3)})))
spoil_lm("NaN weights", _lm_saved(lambda s: [v.fill_(float("nan")) for v in
                                            s["state_dict"].values()]))
spoil_lm("another tokenizer", lambda lm: (lm / "tokenizer.model").write_bytes(b"other"))
spoil_lm("pickled os.system", lambda lm: save(lm / "lm.pt", {"dims": Payload()}))
spoil_lm("with --mode ctc_greedy", None, "--mode", "ctc_greedy")
spoil_lm("tokenizer a FIFO", lambda lm: ((lm / "tokenizer.model").unlink(),
                                         os.mkfifo(lm / "tokenizer.model")))

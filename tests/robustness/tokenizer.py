"""Cases: a spoiled tokenizer.model (empty, random, cut, another vocabulary, odd files)."""

import io
import os
from collections.abc import Callable
from pathlib import Path

from robustness.case import Cli, Work, case, transcribe


def spoil_tokenizer(name: str, write: Callable[[Path], None]) -> None:
    def make(w: Work) -> Cli:
        write(w.model / "tokenizer.model")
        return transcribe(w)
    case("tokenizer", name)(make)


def _other_tokenizer(vocab: int, **ids: int) -> Callable[[Path], None]:
    def write(path: Path) -> None:
        import sentencepiece as spm
        proto = io.BytesIO()
        spm.SentencePieceTrainer.train(
            sentence_iterator=iter(["one two three four five six seven eight nine ten"] * 20),
            model_writer=proto, vocab_size=vocab, hard_vocab_limit=False, minloglevel=2, **ids)
        path.write_bytes(proto.getvalue())
    return write


spoil_tokenizer("empty", lambda p: p.write_bytes(b""))
spoil_tokenizer("random bytes", lambda p: p.write_bytes(os.urandom(2048)))
spoil_tokenizer("cut in half", lambda p: p.write_bytes(p.read_bytes()[: len(p.read_bytes()) // 2]))
spoil_tokenizer("another vocabulary size", _other_tokenizer(30, pad_id=0, unk_id=1, bos_id=2,
                                                            eos_id=3))
spoil_tokenizer("sentencepiece's own special ids", _other_tokenizer(20))
spoil_tokenizer("a directory", lambda p: (p.unlink(), p.mkdir()))
spoil_tokenizer("a FIFO", lambda p: (p.unlink(), os.mkfifo(p)))
spoil_tokenizer("100 MB", lambda p: os.truncate(p, 100 << 20))

"""BPE tokenizer: sentencepiece trained on the training transcripts, saved with the model.

Ids are fixed so that the model can rely on them: 0 = padding (also the CTC blank),
1 = unknown, 2 = beginning of sentence, 3 = end of sentence.
"""

import io
import re
from collections.abc import Iterable
from pathlib import Path

import sentencepiece as spm

from asr.text import normalize_text

PAD_ID, UNK_ID, BOS_ID, EOS_ID = 0, 1, 2, 3
# Pieces every vocabulary has, whatever its transcripts spell: a model trained on commands
# without a "j" or "q" can still be fine-tuned on any English text (trainer.init_from).
ENGLISH_LETTERS = "abcdefghijklmnopqrstuvwxyz'"
# sentencepiece's least vocabulary holding them: the letters, the word mark and the four ids
# above. A smaller one (a test's toy model) spells only its transcripts' letters.
MIN_VOCAB_FOR_LETTERS = len(ENGLISH_LETTERS) + 5
WORD_START = "\u2581"  # sentencepiece's mark on the first piece of a word
# Older sentencepiece aborts the whole process (a failed C++ check) when a required letter is
# absent from the transcripts, as most command sets' are.
LEAST_SENTENCEPIECE = (0, 2, 3)


class Tokenizer:
    """Normalised text <-> BPE token ids."""

    def __init__(self, model_proto: bytes) -> None:
        self.model_proto = model_proto
        self.sp = spm.SentencePieceProcessor(model_proto=model_proto)
        self.pad_id, self.unk_id, self.bos_id, self.eos_id = PAD_ID, UNK_ID, BOS_ID, EOS_ID

    @classmethod
    def train(cls, texts: Iterable[str], vocab_size: int, model_type: str = "bpe",
              letters: bool = True) -> "Tokenizer":
        """Learn a vocabulary from normalised transcripts.

        `hard_vocab_limit=False` lets a small corpus (a few hundred distinct words) end up with
        fewer pieces than asked for instead of failing. With `letters`, every English letter and
        the apostrophe is a piece even where the transcripts lack it (`ENGLISH_LETTERS`), in
        any vocabulary of `MIN_VOCAB_FOR_LETTERS` or more.
        """
        normalised = [t for t in (normalize_text(x) for x in texts) if t]
        if not normalised:
            raise ValueError("cannot train a tokenizer: no non-empty transcripts")
        required = ENGLISH_LETTERS if letters and vocab_size >= MIN_VOCAB_FOR_LETTERS else ""
        version = tuple(int(x) for x in re.findall(r"\d+", spm.__version__)[:3])
        if required and version < LEAST_SENTENCEPIECE:
            raise RuntimeError(f"sentencepiece {spm.__version__} cannot learn this vocabulary "
                               "(it aborts on letters the transcripts lack): install "
                               "sentencepiece>=0.2.3")
        proto = io.BytesIO()
        spm.SentencePieceTrainer.train(
            sentence_iterator=iter(normalised), model_writer=proto, vocab_size=vocab_size,
            model_type=model_type, character_coverage=1.0, hard_vocab_limit=False,
            pad_id=PAD_ID, unk_id=UNK_ID, bos_id=BOS_ID, eos_id=EOS_ID, minloglevel=2,
            required_chars=required,
        )
        return cls(proto.getvalue())

    @classmethod
    def load(cls, path: str | Path) -> "Tokenizer":
        return cls(Path(path).read_bytes())

    @property
    def vocab_size(self) -> int:
        return self.sp.get_piece_size()

    @property
    def pieces(self) -> list[str]:
        """The piece of every id ("\u2581" marks a word's first piece), for word-level rules."""
        return [self.sp.id_to_piece(i) for i in range(self.vocab_size)]

    def encode(self, text: str) -> list[int]:
        return self.sp.encode(normalize_text(text))

    def decode(self, ids: Iterable[int]) -> str:
        specials = {self.pad_id, self.bos_id, self.eos_id}
        return normalize_text(self.sp.decode([i for i in ids if i not in specials]))

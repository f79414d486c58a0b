"""Normalisation, tokenizer and error rates, with exact expected values."""

import pytest

from asr.metrics import char_errors, error_rate, word_errors
from asr.text import normalize_text
from asr.tokenizer import BOS_ID, EOS_ID, PAD_ID, UNK_ID, Tokenizer

pytestmark = pytest.mark.tier("fast")


@pytest.mark.parametrize("raw,expected", [
    ("Show me my PHOTOS, please!", "show me my photos please"),
    ("  hey   computer\t-- open the browser. ", "hey computer open the browser"),
    ("It's 'quoted' don't", "it's quoted don't"),
    ("_unknown_", "unknown"),
    ("...", ""),
    ("Café Ünïcode", "café ünïcode"),
    ("op\u200ben the bro\u200dwser\ufeff", "open the browser"),  # zero-width: dropped, no break
    ("so\u00adft \u202aleft\u202c\u2061", "soft left"),  # every format character (Cf)
    ("ｏｐｅｎ", "open"),  # full-width letters (NFKC)
    ("999,999,999,999,999,999", "nine hundred ninety nine million nine hundred ninety nine "
     "thousand nine hundred ninety nine billion nine hundred ninety nine million nine hundred "
     "ninety nine thousand nine hundred ninety nine"),
    ("call 0123456789012345678", "call " + " ".join(
        "zero one two three four five six seven eight nine".split() * 2)[:-len(" nine")]),
    ("the 10000000000000000000th", "the one " + "zero " * 18 + "zeroth"),
])
def test_normalize_text(raw, expected):
    assert normalize_text(raw) == expected


def test_numbers_past_billions_are_read_digit_by_digit_whatever_their_length():
    """Python refuses int() of more than 4300 digits; a transcript or grammar may hold any."""
    assert normalize_text("9" * 5000) == " ".join(["nine"] * 5000)


def test_word_and_char_errors():
    counts = word_errors("show me my photos please", "show my fotos please now")
    assert (counts.substitutions, counts.deletions, counts.insertions) == (1, 1, 1)
    assert counts.reference_length == 5
    assert word_errors("Stop!", "stop").errors == 0
    assert word_errors("", "go").as_dict() == {"substitutions": 0, "deletions": 0,
                                               "insertions": 1, "reference_length": 0}
    assert word_errors("go", "").deletions == 1
    chars = char_errors("go on", "go in")
    assert (chars.errors, chars.reference_length) == (1, 5)
    assert error_rate([("a b c d", "a b x d"), ("e f", "e f")]) == pytest.approx(1 / 6)
    assert error_rate([("abcd", "abed")], unit="char") == pytest.approx(1 / 4)


def test_tokenizer_round_trip_and_special_ids(tmp_path):
    texts = ["show me my photos please", "set a timer for five minutes", "turn off the wifi",
             "what time is it", "open the browser"] * 20
    tokenizer = Tokenizer.train(texts, vocab_size=60)
    assert (tokenizer.sp.pad_id(), tokenizer.sp.unk_id(), tokenizer.sp.bos_id(),
            tokenizer.sp.eos_id()) == (PAD_ID, UNK_ID, BOS_ID, EOS_ID)
    ids = tokenizer.encode("Set a TIMER for five minutes!")
    assert tokenizer.decode(ids) == "set a timer for five minutes"
    assert tokenizer.decode([BOS_ID, *ids, EOS_ID, PAD_ID]) == "set a timer for five minutes"
    path = tmp_path / "tok.model"
    path.write_bytes(tokenizer.model_proto)
    assert Tokenizer.load(path).encode("open the wifi") == tokenizer.encode("open the wifi")


def test_tokenizer_spells_every_english_letter():
    """Letters the transcripts lack are pieces all the same, so any English text can be
    fine-tuned on; accented letters outside them stay unknown."""
    tokenizer = Tokenizer.train(["yes no up down left right"] * 20, vocab_size=40)
    ids = tokenizer.encode("jazz quiz, x's")
    assert UNK_ID not in ids
    assert tokenizer.decode(ids) == "jazz quiz x's"
    assert UNK_ID in tokenizer.encode("café")


def test_tokenizer_needs_text():
    with pytest.raises(ValueError, match="no non-empty transcripts"):
        Tokenizer.train(["", "!!"], vocab_size=20)


def test_tokenizer_refuses_a_sentencepiece_that_would_abort(monkeypatch):
    """sentencepiece 0.2.2 kills the process on a required letter the transcripts lack (seen on
    the GPU machine): the tokenizer names the version to install instead; without required
    letters (a toy vocabulary) any version trains."""
    import sentencepiece

    monkeypatch.setattr(sentencepiece, "__version__", "0.2.2")
    with pytest.raises(RuntimeError, match=r"sentencepiece 0\.2\.2 cannot .* sentencepiece>=0\.2\.3"):
        Tokenizer.train(["yes no up down"] * 20, vocab_size=40)
    assert Tokenizer.train(["yes no up down"] * 20, vocab_size=20).vocab_size > 4

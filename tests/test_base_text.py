"""The base model's text: sources, disjoint splits, held-out sentences and words kept out of train."""

import random

import pytest

from asr.grammar import Grammar
from asr.text import normalize_text
from helpers import SHARED
from recipes.base import text
from recipes.base.text import Line
from recipes.common import corpora, hash_split
from recipes.common.sentence_splits import intent_pools, split_sentences

pytestmark = [pytest.mark.tier("slow"), pytest.mark.data]

REAL_ROOT = SHARED if SHARED.is_dir() else None


@pytest.fixture(scope="module")
def corpus() -> dict[str, list[Line]]:
    return text.corpus_text(REAL_ROOT, seed=0)


def texts(lines: list[Line]) -> set[str]:
    return {line.text for line in lines}


def test_splits_are_disjoint_normalised_and_deduplicated(corpus):
    assert set(corpus) == {"train", "dev", "test"}
    for split, lines in corpus.items():
        assert lines, split
        assert len(texts(lines)) == len(lines), f"{split} repeats a text"
        assert all(line.text and normalize_text(line.text) == line.text for line in lines)
    assert not texts(corpus["train"]) & texts(corpus["dev"])
    assert not texts(corpus["train"]) & texts(corpus["test"])
    assert not texts(corpus["dev"]) & texts(corpus["test"])


def test_every_source_is_there(corpus):
    sources = {line.source for lines in corpus.values() for line in lines}
    expected = {"grammar:commands", "grammar:coffee", "domains", "numbers", "letters", "words"}
    if REAL_ROOT is not None:
        expected |= {"grammar:picovoice_coffee_maker", "read", "wuw"}
    assert sources == expected
    held_out = {line.source for split in ("dev", "test") for line in corpus[split]}
    assert {"domains", "numbers", "letters", "words"} <= held_out
    assert not any(source.startswith("grammar:") for source in held_out)


def test_wide_vocabulary(corpus):
    train = text.vocabulary(corpus["train"])
    assert len(train) >= 8000
    domains = text.vocabulary(line for lines in corpus.values() for line in lines
                              if line.source == "domains")
    assert len(domains) >= 2000
    assert {"thermostat", "screenshot", "tuesday", "february", "kilometres", "broccoli",
            "thirteenth", "o'clock", "reykjavik"} <= train


def test_deterministic_for_a_seed(monkeypatch):
    monkeypatch.setattr(text, "DOMAIN_SENTENCES", 20)
    first, again = text.corpus_text(None, seed=3), text.corpus_text(None, seed=3)
    assert first == again
    assert text.corpus_text(None, seed=4) != first


def test_voice_command_held_out_sentences_are_in_no_split(corpus):
    ours = {line.text for lines in corpus.values() for line in lines}
    for path in text.REPO_GRAMMARS:
        splits = split_sentences(intent_pools(Grammar.load(path), 0), 0)
        trained = texts(splits["train"])
        scored = {s.text for split in ("dev", "test") for s in splits[split]} - trained
        assert scored and not scored & ours, path
    assert "could you open the editor please" in {
        s.text for s in split_sentences(intent_pools(Grammar.load(text.REPO_GRAMMARS[0]), 0),
                                        0)["test"]}
    assert "could you open the editor please" not in ours


def test_held_out_words_are_never_trained_on(corpus):
    train = text.vocabulary(corpus["train"])
    for split in ("dev", "test"):
        lines = [line for line in corpus[split] if line.source == "words"]
        assert len(lines) >= 500
        assert all(set(line.text.split()) - train for line in lines)
        assert len(text.vocabulary(lines) - train) >= 150


def test_cathy_held_out_prompts_are_not_in_train(corpus):
    if REAL_ROOT is None or not (REAL_ROOT / "cathy").is_dir():
        pytest.skip(f"real speech missing: {SHARED}")
    train = texts(corpus["train"])
    held_out = {normalize_text(prompt_text) for _, prompt, prompt_text in
                corpora.arctic_utterances(REAL_ROOT / "cathy")
                if hash_split(prompt, corpora.CATHY_DEV_PERCENT, corpora.CATHY_TEST_PERCENT,
                                 corpora.SALT) != "train"}
    assert len(held_out) >= 100
    assert not held_out & train
    read = {split: texts(line for line in corpus[split] if line.source == "read")
            for split in ("dev", "test")}
    assert read["dev"] | read["test"] == held_out


def test_wuw_test_speakers_sentences_are_not_in_train(corpus):
    if REAL_ROOT is None or not (REAL_ROOT / "wuw").is_dir():
        pytest.skip(f"real speech missing: {SHARED}")
    held_out = text.wuw_lines(REAL_ROOT / "wuw")["test"]
    sentences = {line.text for line in held_out if " " in line.text}
    assert len(sentences) >= 100
    assert not sentences & texts(corpus["train"])


def test_domains_grammar_loads_with_many_intents():
    grammar = Grammar.load(text.DOMAINS)
    assert len(grammar.intents) >= 25
    assert {"lights", "thermostat", "timer", "calendar", "weather", "math", "spelling",
            "computerApps", "shopping", "navigation"} <= set(grammar.intents)
    assert grammar.parse("what is twelve times seven").intent == "math"
    assert grammar.parse("could you turn off the kitchen lights please").intent == "lights"
    assert grammar.parse("b as in bravo").intent == "spelling"


def test_disjoint_keeps_each_text_in_one_split():
    parts = [{"train": [Line("yes", "a"), Line("turn it on", "a"), Line("gone now", "a")],
              "test": [Line("yes", "b")]},
             {"train": [Line("yes", "c"), Line("dim it", "c")], "dev": [Line("turn it on", "c")]}]
    merged = text.disjoint(parts, banned={"gone now"})
    assert merged == {"train": [Line("yes", "a"), Line("dim it", "c")],
                      "dev": [Line("turn it on", "c")], "test": []}


def test_word_list_keeps_plain_words():
    words = text.word_list()
    assert 7000 <= len(words) <= text.WORD_LIST
    assert {"the", "a", "i", "don't", "weather", "kitchen"} <= set(words)
    assert not {"mr", "u.s", "3d", "b", "x", "1st"} & set(words)


def test_numbers_and_letters_are_words():
    rng = random.Random(0)
    for make in (text.cardinal, text.year, text.ordinal, text.digits, text.price, text.percentage,
                 text.decimal, text.clock_time, text.date, text.measure):
        for _ in range(50):
            said = make(rng)
            assert said and normalize_text(said) == said, (make.__name__, said)
    letters = text.letter_lines(["kitchen"], seed=0)
    spelt = [line.text for lines in letters.values() for line in lines if "k i t c h e n" in line.text]
    assert spelt


def test_source_counts_follow_the_shares():
    lines = [Line("x", "grammar:a"), Line("y", "grammar:b"), Line("z", "domains"), Line("w", "words")]
    assert text.source_counts(lines, 1000) == {"domains": 333, "grammar:a": 233, "grammar:b": 233,
                                               "words": 200}
    assert sum(text.SOURCE_SHARES.values()) == pytest.approx(1.0)


def test_alone_text_says_each_command_word_alone_in_every_split():
    alone = text.alone_text()
    assert alone["train"] == alone["dev"] == alone["test"]
    spoken = {line.text: line.source for line in alone["train"]}
    assert len(alone["train"]) == len(spoken) == 35
    assert set(spoken) == set(corpora.COMMANDS) | set(corpora.AUXILIARY)
    assert {word for word, source in spoken.items() if source == "alone:digits"} == set(corpora.DIGITS)
    assert set(spoken.values()) == {"alone:digits", "alone:words"}
    assert sum(text.ALONE_SHARES.values()) == pytest.approx(1.0)

"""Searching inside a grammar: the word automaton says exactly the grammar's sentences and reads
their meaning off the path, its token rule allows exactly the pieces that stay inside, and the
decoder's constrained search writes only grammar sentences.

The automaton is checked against brute force on random small grammars (words, choices,
optionals, macros, slots with multi-word values): the words allowed after every prefix, which
prefixes end a sentence, what each sentence means and which words each slot spans. The token
rule is checked against the sentences' spelling with a real sentencepiece vocabulary. The
search runs a tiny model trained here in seconds on twelve real recordings: its constrained
hypotheses are grammar sentences (even where the length limit cuts a hypothesis short), a
grammar holding the free transcripts changes nothing, batching changes nothing, torch and ONNX
agree, and the garbage ratio tells the audio's words from a sentence forced on it.
"""

import itertools
import json
import math
import random

import numpy as np
import pytest
import soundfile as sf
import torch

import asr.grammar.automaton as automaton_module
from asr.grammar import Grammar, GrammarError
from asr.grammar.automaton import DEAD, TokenGrammar
from asr.grammar.expansion import expand
from asr.tokenizer import EOS_ID, WORD_START, Tokenizer
from helpers import small_real_set, train_config, write_manifest

pytestmark = [pytest.mark.tier("fast"), pytest.mark.data]

WORDS = ["go", "stop", "the", "red", "light", "on", "off", "now", "please", "gone"]


# ---------------------------------------------------------------------------- random grammars


class RandomGrammar:
    """A random small Rhino grammar over WORDS, and which slot type each slot name has."""

    def __init__(self, seed: int) -> None:
        self.rng = rng = random.Random(seed)
        self.types: dict[str, list[str]] = {}
        for name in ("color", "thing")[:rng.randint(1, 2)]:
            spoken: dict[str, str] = {}
            while len(spoken) < rng.randint(2, 4):
                words = rng.sample(WORDS, rng.randint(1, 2))
                written = " ".join(words)
                spoken.setdefault(written, written.title() if rng.random() < 0.3 else written)
            self.types[name] = list(spoken.values())
        self.macro = [self._words(rng.randint(1, 2)) for _ in range(2)]
        self.slot_types: list[dict[str, str]] = []  # per expression: slot name -> type
        self.expressions: dict[str, list[str]] = {}
        for intent in ("alpha", "beta", "gamma")[:rng.randint(1, 3)]:
            for _ in range(rng.randint(1, 2)):
                names: dict[str, str] = {}
                self.expressions.setdefault(intent, []).append(self._sequence(0, names))
                self.slot_types.append(names)

    def _words(self, n: int) -> str:
        return " ".join(self.rng.choice(WORDS) for _ in range(n))

    def _sequence(self, depth: int, names: dict[str, str]) -> str:
        rng, parts = self.rng, []
        for _ in range(rng.randint(1, 3)):
            pick = rng.random()
            if pick < 0.35 or depth >= 2:
                parts.append(rng.choice(WORDS))
            elif pick < 0.5:
                parts.append("[" + ", ".join(self._sequence(depth + 1, names)
                                             for _ in range(rng.randint(2, 3))) + "]")
            elif pick < 0.65:
                parts.append("(" + ", ".join(self._sequence(depth + 1, names)
                                             for _ in range(rng.randint(1, 2))) + ")")
            elif pick < 0.7:
                parts.append("@polite")
            else:
                kind = rng.choice([*self.types, "pv.SingleDigitInteger"] if pick > 0.95
                                  else list(self.types))
                name = f"s{len(names)}"
                names[name] = kind
                parts.append(f"${kind}:{name}")
        return " ".join(parts)

    def yaml(self) -> str:
        lines = ["context:", "  expressions:"]
        for intent, expressions in self.expressions.items():
            lines += [f"    {intent}:"] + [f"      - {json.dumps(e)}" for e in expressions]
        lines += ["  slots:"] + [f"    {name}: {json.dumps(values)}"
                                 for name, values in self.types.items()]
        lines += ["  macros:", f"    polite: {json.dumps(self.macro)}"]
        return "\n".join(lines) + "\n"


def readings_by_text(grammar: Grammar) -> dict[str, set[tuple[int, str, tuple]]]:
    """Brute force: every sentence's text -> its (expression, intent, sorted slot values)."""
    found: dict[str, set[tuple[int, str, tuple]]] = {}
    for index, expression in enumerate(grammar.expressions):
        for words, slots, _ in expand(expression.elements, grammar.slots):
            found.setdefault(" ".join(words), set()).add(
                (index, expression.intent, tuple(sorted(slots))))
    return found


def random_grammars(count: int, most: int = 500):
    """`count` random grammars of at most `most` sentences (seed, generator, YAML, grammar);
    those with an expression whose every part is optional are refused as they load (silence
    would be a command) and skipped."""
    seed = 0
    while count:
        generated = RandomGrammar(seed)
        text = generated.yaml()
        try:
            grammar = Grammar.from_yaml(text)
        except GrammarError as err:
            assert "every part of" in str(err)
            seed += 1
            continue
        if grammar.count() <= most:
            yield seed, generated, text, grammar
            count -= 1
        seed += 1


def test_random_grammars_accept_exactly_their_sentences_word_by_word():
    """After every prefix of every sentence the automaton allows exactly the words some
    sentence goes on with, and may end exactly where a sentence ends; any other word leads
    nowhere and random word strings that are no sentence are refused."""
    checked = 0
    for seed, _, text, grammar in random_grammars(150):
        automaton, sentences = grammar.automaton, readings_by_text(grammar)
        split = [tuple(s.split()) for s in sentences]
        follows: dict[tuple[str, ...], set[str]] = {}
        for words in split:
            for n in range(len(words) + 1):
                follows.setdefault(words[:n], set()).update(words[n:n + 1])
        states = {(): 0}
        for prefix, nexts in sorted(follows.items(), key=lambda item: len(item[0])):
            if prefix:
                states[prefix] = automaton.step(states[prefix[:-1]], prefix[-1])
            state = states[prefix]
            assert automaton.allowed(state) == nexts, (seed, prefix, text)
            assert automaton.can_end(state) == (prefix in split), (seed, prefix, text)
            assert automaton.step(state, "banana") == DEAD
        rng = random.Random(seed)
        for _ in range(50):
            words = [rng.choice([*WORDS, "zero", "banana"]) for _ in range(rng.randint(0, 6))]
            said = " ".join(words) in sentences
            assert automaton.accepts(words) == said, (seed, words, text)
            assert (grammar.parse(" ".join(words)) is not None) == said, (seed, words, text)
            checked += not said
    assert checked > 5000


def test_random_grammar_sentences_parse_to_their_own_intent_and_slots():
    """A sentence reads as the first expression (in the file's order) that says it, with
    slot values of one of that expression's paths (the only one when the sentence has one
    meaning), as the file writes them; every slot spans exactly the words of its spoken
    value, spans in order and apart. Sampled sentences (more than `limit`) too."""
    ambiguous = 0
    for seed, generated, text, grammar in random_grammars(150):
        sentences = readings_by_text(grammar)
        sampled = [s for intent in grammar.intents
                   for s in grammar.sentences(intent, 4, random.Random(seed))]
        for intent in grammar.intents:
            every = grammar.sentences(intent, 10**6, random.Random(0))
            assert {s.text for s in every} == {t for t, r in sentences.items()
                                               if intent in {i for _, i, _ in r}}
        for sentence in [*sampled, *grammar.sentences(grammar.intents[0], 10**6, random.Random(0))]:
            words = sentence.text.split()
            assert grammar.automaton.accepts(words), (seed, sentence, text)
            reading = grammar.parse(sentence.text)
            meanings = sentences[sentence.text]
            first = min(index for index, _, _ in meanings)
            mine = {(i, tuple(sorted(values))) for index, i, values in meanings if index == first}
            assert reading.expression == first, (seed, sentence, text)
            assert (reading.intent, tuple(sorted(reading.values.items()))) in mine, (seed, text)
            if len({(i, v) for _, i, v in meanings}) == 1:
                assert (reading.intent, reading.values) == (sentence.intent, sentence.slots)
            else:
                ambiguous += 1
            assert len(reading.values) == len(reading.slots)
            types = generated.slot_types[reading.expression]
            end = 0
            for span in reading.slots:
                assert end <= span.start < span.end <= len(words), (seed, sentence, text)
                said = " ".join(words[span.start:span.end])
                assert (said, span.value) in grammar.slots[types[span.name]], (seed, text)
                end = span.end
    assert ambiguous > 0  # the generator does make sentences with two meanings


def test_a_slot_value_is_reported_as_written_and_spans_its_words():
    grammar = Grammar.from_yaml("""context:
  expressions:
    paint: ["paint (it) $color:color (now)", "paint the $color:color light"]
  slots:
    color: ["Dark Red", red, "red light"]
""")
    reading = grammar.parse("Paint it dark red now!")
    assert (reading.intent, reading.values, reading.expression) == ("paint", {"color": "Dark Red"}, 0)
    assert [(s.name, s.value, s.start, s.end) for s in reading.slots] == [("color", "Dark Red", 2, 4)]
    reading = grammar.parse("paint the red light")
    assert (reading.expression, reading.values, reading.slots[0].start) == (1, {"color": "red"}, 2)
    reading = grammar.parse("paint red light")
    assert (reading.values, reading.slots[0].start, reading.slots[0].end) == (
        {"color": "red light"}, 1, 3)
    assert grammar.parse("paint it dark") is None and grammar.parse("paint") is None


# ---------------------------------------------------------------------------- tokens


def spelt(pieces: list[str], ids: list[int]) -> str:
    return "".join(pieces[i] for i in ids).replace(WORD_START, " ")


def test_token_rule_allows_exactly_the_pieces_that_spell_on_towards_a_sentence():
    """With a real sentencepiece vocabulary trained on the sentences: each sentence's own
    tokens are allowed one after another and EOS after the last; along random walks the mask
    allows exactly the pieces whose spelling stays a prefix of some sentence (a word is
    started by a WORD_START piece, never glued on; no WORD_START where no word may follow)
    and EOS exactly after a whole sentence; once a word is begun, a token the mask refuses
    leaves the grammar for good (nothing is allowed after it)."""
    walked = refused = 0
    for seed, _, _, grammar in random_grammars(8, most=300):
        texts = {t for t in readings_by_text(grammar) if t}
        tokenizer = Tokenizer.train(sorted(texts), 60, letters=False)
        pieces = tokenizer.pieces
        assert set("".join(texts).replace(" ", "")) <= set(pieces)  # every rest can be spelt
        rule = TokenGrammar(grammar.automaton, pieces)
        for text in texts:
            state = (0, None)
            for token in tokenizer.encode(text):
                assert rule.mask(state)[token], (seed, text)
                state = rule.advance(state, token)
            assert rule.mask(state)[EOS_ID], (seed, text)
        whole = {" " + t for t in texts} | ({""} if "" in readings_by_text(grammar) else set())
        prefixes = {t[:n] for t in whole for n in range(len(t) + 1)}
        rng = random.Random(seed)
        for _ in range(30):
            state, ids = (0, None), []
            while True:
                mask = rule.mask(state)
                expected = [spelt(pieces, [*ids, t]) in prefixes for t in range(len(pieces))]
                expected[EOS_ID] = spelt(pieces, ids) in whole
                assert mask.tolist() == expected, (seed, spelt(pieces, ids))
                if ids:  # once a word is begun, a refused token leaves the grammar for good
                    gone = rule.advance(state, rng.choice((~mask).nonzero()[:, 0].tolist()))
                    assert not rule.mask(gone).any()
                    assert not rule.mask(rule.advance(gone, rng.randrange(len(pieces)))).any()
                    refused += 1
                token = rng.choice(mask.nonzero()[:, 0].tolist())
                if token == EOS_ID:
                    break
                state, ids = rule.advance(state, token), [*ids, token]
            assert spelt(pieces, ids).strip() in texts | {""}
            walked += 1
    assert walked == 240 and refused > 1000


# ---------------------------------------------------------------------------- size


HUNDRED_MILLION = """context:
  expressions:
    code:
      - "code $digit:a $digit:b $digit:c $digit:d $digit:e $digit:f $digit:g $digit:h (please)"
      - "[clear, reset] (the code)"
  slots:
    digit: [zero, one, two, three, four, five, six, seven, eight, nine]
"""


def test_a_hundred_million_sentences_compile_small_and_walk_without_expanding():
    """10^8 sentences (eight slots of ten values) are a graph of a few dozen arcs, compiled
    without expanding them; sentences are stepped, parsed and spelt in tokens through the
    states they visit, and no more states are built."""
    grammar = Grammar.from_yaml(HUNDRED_MILLION)
    automaton = grammar.automaton
    assert grammar.count() == 2 * 10**8 + 4
    assert automaton.arcs == 26 and len(automaton.empty) == 24  # one trie holds the digits
    assert len(automaton.tries) == 5 and len(automaton.tries["digit"].children) == 11
    rng = random.Random(0)
    digits = HUNDRED_MILLION.split("[")[-1].rstrip("]\n").split(", ")
    tokenizer = Tokenizer.train(["code please clear reset the"] + digits, 60)
    rule = TokenGrammar(automaton, tokenizer.pieces)
    for _ in range(20):
        said = [rng.randrange(10) for _ in range(8)]
        text = "code " + " ".join(digits[d] for d in said) + " please" * rng.randint(0, 1)
        reading = grammar.parse(text)
        assert (reading.intent, list(reading.values.values())) == ("code", [digits[d] for d in said])
        assert [(s.start, s.end) for s in reading.slots] == [(i, i + 1) for i in range(1, 9)]
        assert not automaton.accepts(text.split()[:-2])  # seven digits are no code
        state = (0, None)
        for token in tokenizer.encode(text):
            assert rule.mask(state)[token]
            state = rule.advance(state, token)
        assert rule.mask(state)[EOS_ID]
    assert grammar.parse("reset the code").values == {}
    assert automaton.states_held <= 2 + 8 * 10 + 2  # at most one per (position, value said)


def test_the_memory_of_states_starts_again_only_between_walks(monkeypatch):
    """Past MAX_STATES remembered states their memory starts again where no state is held (as
    `accepts` and each search begin), never in the middle of a walk: the answers stay exact,
    and the token masks, cached per state, start again with it."""
    monkeypatch.setattr(automaton_module, "MAX_STATES", 4)
    grammar = Grammar.from_yaml("context:\n  expressions:\n    code: [\"$d:a $d:b\"]\n"
                                "  slots:\n    d: [one, two, three]\n")
    digits = ["one", "two", "three"]
    tokenizer = Tokenizer.train(digits, 20, letters=False)
    rule = TokenGrammar(grammar.automaton, tokenizer.pieces)
    for length in (2, 3, 1, 2, 3):
        for words in itertools.product(digits, repeat=length):
            assert grammar.automaton.accepts(list(words)) == (length == 2), words
            state, inside = rule.start(), True
            for token in tokenizer.encode(" ".join(words)):
                inside = inside and bool(rule.mask(state)[token])
                state = rule.advance(state, token)
            assert (inside and bool(rule.mask(state)[EOS_ID])) == (length == 2), words
    assert grammar.automaton.generation > 5


# ---------------------------------------------------------------------------- search


@pytest.fixture(scope="module")
def tiny_model(tmp_path_factory) -> dict:
    """A tiny model trained (one CPU thread, as the search tests run: a busy machine's threads
    fight over two cores) until it has memorised eight real recordings of single words and
    four of two words in a row (Speech Commands' words put back to back)."""
    from asr.train import Trainer

    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    tmp = tmp_path_factory.mktemp("grammar_search")
    singles = small_real_set()
    words = {text: path for path, text in singles[4:]}
    pairs = []
    for first, second in [("yes", "stop"), ("left", "go"), ("go", "yes"), ("stop", "left")]:
        path = tmp / f"{first}_{second}.wav"
        sf.write(path, np.concatenate([sf.read(words[w], dtype="float32")[0]
                                       for w in (first, second)]), 16000)
        pairs.append((path, f"{first} {second}"))
    entries = singles + pairs
    cfg = train_config(tmp, write_manifest(tmp / "train.jsonl", entries * 8),
                       f"data.dev_manifest={write_manifest(tmp / 'dev.jsonl', entries)}",
                       "trainer.max_epochs=30", "trainer.num_threads=1",
                       "trainer.save_every_minutes=null", "tokenizer.vocab_size=30",
                       "tokenizer.letters=false", "data.batch_size=12",
                       "scheduler.warmup_steps=10", "optim.lr=3e-3",
                       "features.freq_masks=0", "features.time_masks=0")
    Trainer(cfg).fit()
    yield {"dir": tmp / "model", "entries": entries, "tmp": tmp}
    torch.set_num_threads(threads)


# Words the tiny model's tokenizer can spell; most sentences are not what the recordings say.
SEARCH_GRAMMAR = """context:
  expressions:
    move: ["[go, stop] (left)", "left $digit:digit"]
    answer: ["yes (yes)", "$digit:first $digit:second", "nine"]
  slots:
    digit: [one, four, seven, nine]
"""

SEARCHES = {f"{name}{' ctc' if ctc else ''}{'' if cache else ' no cache'}":
            {"beam_size": beam, "ctc_weight": ctc, "kv_cache": cache}
            for name, beam in [("greedy", 1), ("beam 3", 3)]
            for ctc in (0.0, 0.5) for cache in (True, False)}


def loaded(tiny_model: dict) -> tuple:
    """The model, its tokenizer, and the recordings as one padded batch with their lengths."""
    from asr.checkpoint import load_model_dir
    from asr.transcriber import Transcriber

    model, tokenizer, _ = load_model_dir(tiny_model["dir"])
    waves = [Transcriber(model, tokenizer).load(path) for path, _ in tiny_model["entries"]]
    lengths = torch.tensor([len(w) for w in waves])
    return model, tokenizer, torch.nn.utils.rnn.pad_sequence(waves, batch_first=True), lengths


def test_the_tiny_model_says_what_its_recordings_say(tiny_model):
    from asr.decoding import DecodingTask

    model, tokenizer, wave, lengths = loaded(tiny_model)
    texts = [tokenizer.decode(ids) for ids in DecodingTask(model).run(wave, lengths)]
    assert texts == [text for _, text in tiny_model["entries"]]


@pytest.mark.parametrize("search", SEARCHES)
def test_constrained_search_writes_only_grammar_sentences(tiny_model, search):
    """Greedy and beam, attention alone and with CTC, with the key/value cache and without:
    the transcript and every n-best hypothesis of every recording is a grammar sentence,
    best first, also where the recording says something else ("left go"); a recording whose
    length limit (max_len_ratio) leaves no room for a sentence the search was writing finds
    none rather than a cut one ("seven seve", greedy). What is a sentence is heard as said."""
    from asr.decoding import DecodingOptions, DecodingTask

    model, tokenizer, wave, lengths = loaded(tiny_model)
    grammar = Grammar.from_yaml(SEARCH_GRAMMAR)
    options = DecodingOptions(**SEARCHES[search])
    found = DecodingTask(model, options, tokenizer, grammar).hypotheses(wave, lengths)
    texts = [tokenizer.decode(h.tokens) for h in found]
    for h, text in zip(found, texts, strict=True):
        if not h.nbest:  # no sentence fits (the utterance is too short for it): nothing found
            assert (h.tokens, h.garbage_ratio) == ([], math.inf)
            continue
        assert grammar.parse(text) is not None, (text, search)
        assert h.nbest[0][0] == h.tokens and (len(h.nbest) == 1 or options.beam_size > 1)
        assert all(grammar.parse(tokenizer.decode(ids)) is not None for ids, _ in h.nbest)
    said = [text for _, text in tiny_model["entries"]]
    commands = [(s, t) for s, t in zip(said, texts, strict=True) if grammar.parse(s)]
    assert [s for s, _ in commands] == ["nine", "yes", "stop", "go", "stop left"]
    assert all(s == t for s, t in commands), commands  # what is a sentence is heard as said
    assert sum(bool(h.nbest) for h in found) >= 10
    with pytest.raises(ValueError, match="a grammar needs the tokenizer"):
        DecodingTask(model, options, grammar=grammar)
    with pytest.raises(ValueError, match="not with decode.mode=ctc_greedy"):
        DecodingTask(model, DecodingOptions(mode="ctc_greedy"), tokenizer, grammar)


@pytest.mark.parametrize("grammar", [True, False])
def test_ctc_scores_every_token_a_grammar_allows(tiny_model, grammar):
    """Greedy joint search (a pre-beam of 2 tokens by attention): inside a grammar the CTC
    head scores every token the grammar allows next, each with a finite joint score, so the
    attention decoder's prior cannot drop a word the audio says before CTC hears it; free
    search keeps its pre-beam."""
    from asr.decoding import DecodingOptions, DecodingTask
    from asr.search import Scorer
    from asr.tokenizer import BOS_ID

    model, tokenizer, wave, lengths = loaded(tiny_model)
    task = DecodingTask(model, DecodingOptions(ctc_weight=0.5), tokenizer,
                        Grammar.from_yaml(SEARCH_GRAMMAR) if grammar else None)
    memory, memory_lengths = task.encode(wave, lengths)
    scorer = Scorer(task, memory, memory_lengths, task.ctc_logits(memory), group=1)
    bos = torch.full((len(wave), 1), BOS_ID)
    candidates, _, joint = scorer.candidates(bos, torch.zeros(len(wave), dtype=torch.bool),
                                             torch.zeros(len(wave)))
    if not grammar:
        assert candidates.shape[1] == scorer.pre_beam == 2
        return
    starts = [WORD_START + word for word in ("go", "stop", "left", "yes", "one", "four", "seven",
                                            "nine")]
    allowed = {i for i, piece in enumerate(tokenizer.pieces)
               if piece.startswith(WORD_START) and any(w.startswith(piece) for w in starts)}
    assert len(allowed) > 2
    for row, scores in zip(candidates.tolist(), joint, strict=True):
        assert {t for t, score in zip(row, scores, strict=True) if score > -math.inf} == allowed


def test_a_grammar_holding_the_free_transcripts_changes_nothing(tiny_model, tmp_path):
    """Greedy search inside a grammar whose sentences include the free greedy transcripts
    (and others) writes exactly the free tokens: every token it would choose is allowed."""
    from asr.decoding import DecodingTask, decode

    model, tokenizer, wave, lengths = loaded(tiny_model)
    free = decode(model, wave, lengths)
    texts = [tokenizer.decode(ids) for ids in free]
    sentences = [*texts, "seven seven seven", "go left", "one four nine", "yes yes"]
    grammar = Grammar.from_yaml("context:\n  expressions:\n    heard: "
                                + json.dumps(sentences) + "\n")
    assert DecodingTask(model, tokenizer=tokenizer, grammar=grammar).run(wave, lengths) == free
    assert len(set(texts)) == len(texts) == 12


@pytest.mark.parametrize("search", ["greedy ctc", "beam 3 ctc", "beam 3 no cache"])
def test_batched_constrained_search_equals_one_at_a_time(tiny_model, search):
    from asr.decoding import DecodingOptions, DecodingTask

    model, tokenizer, wave, lengths = loaded(tiny_model)
    options = DecodingOptions(encoder_batch=5, **SEARCHES[search])
    task = DecodingTask(model, options, tokenizer, Grammar.from_yaml(SEARCH_GRAMMAR))
    together = task.hypotheses(wave, lengths)
    for i, h in enumerate(together):
        alone = task.hypotheses(wave[i:i + 1, :lengths[i]], lengths[i:i + 1])[0]
        assert [ids for ids, _ in h.nbest] == [ids for ids, _ in alone.nbest]
        assert [s for _, s in h.nbest] == pytest.approx([s for _, s in alone.nbest], abs=1e-4)
        assert h.garbage_ratio == pytest.approx(alone.garbage_ratio, abs=1e-4)


def test_garbage_ratio_is_lowest_for_what_the_audio_says(tiny_model):
    """Each recording against every transcript of the set: the ratio of its own words is
    below that of every other sentence (near 0: the free best path says them too). The
    grammar search reports the ratio of the sentence it found: a recording that says a
    grammar sentence gets its own words' ratio, one that says something else gets a sentence
    forced on it, with a higher ratio than its own words have (or none at all: inf)."""
    from asr.decoding import DecodingTask, encode, garbage_ratio
    from asr.network import as_network

    model, tokenizer, wave, lengths = loaded(tiny_model)
    network = as_network(model)
    memory, memory_lengths = encode(network, wave, lengths, 12)
    texts = [text for _, text in tiny_model["entries"]]
    ratios = [garbage_ratio(network, memory, memory_lengths, [tokenizer.encode(text)] * len(texts))
              for text in texts]  # ratios[sentence][recording]
    for heard, own in enumerate(texts):
        others = [ratios[s][heard] for s in range(len(texts)) if s != heard]
        assert abs(ratios[heard][heard]) < 0.1 and ratios[heard][heard] < min(others), own
    assert garbage_ratio(network, memory[:1], memory_lengths[:1], [[]]) == [math.inf]
    task = DecodingTask(model, tokenizer=tokenizer, grammar=Grammar.from_yaml(SEARCH_GRAMMAR))
    found = task.hypotheses(wave, lengths)
    assert [h.garbage_ratio for h in found] == pytest.approx(
        garbage_ratio(network, memory, memory_lengths, [h.tokens for h in found]), abs=1e-5)
    grammar = Grammar.from_yaml(SEARCH_GRAMMAR)
    for heard, (h, own) in enumerate(zip(found, texts, strict=True)):
        if grammar.parse(own):  # a sentence: found as said
            assert tokenizer.decode(h.tokens) == own and h.garbage_ratio == pytest.approx(
                ratios[heard][heard], abs=1e-5)
        else:  # the grammar's nearest sentence is forced on it: a worse ratio than its words'
            assert h.garbage_ratio > ratios[heard][heard] + 0.1, own


def test_onnx_searches_the_grammar_as_torch(tiny_model):
    """The exported graphs in onnxruntime find the same sentences, n-best lists and garbage
    ratios as the torch model, through `Transcriber.from_pretrained(grammar=FILE)`."""
    pytest.importorskip("onnx")
    pytest.importorskip("onnxruntime")
    from asr.export import export_onnx
    from asr.transcriber import Transcriber

    out = tiny_model["tmp"] / "onnx"
    assert max(export_onnx(tiny_model["dir"], out).values()) < 1e-3
    grammar = tiny_model["tmp"] / "search.yaml"
    grammar.write_text(SEARCH_GRAMMAR)
    options = {"beam_size": 3, "ctc_weight": 0.5, "grammar": str(grammar)}
    ours = Transcriber.from_pretrained(tiny_model["dir"], "cpu", vad=None, **options)
    onnx = Transcriber.from_pretrained(out, vad=None, backend="onnx", **options)
    waves = [ours.load(path) for path, _ in tiny_model["entries"]]
    expected, found = ours.transcribe_scored(waves), onnx.transcribe_scored(waves)
    assert [text for text, _ in found] == [text for text, _ in expected]
    assert all(ours.grammar.parse(text) for text, _ in found)
    for (_, a), (_, b) in zip(found, expected, strict=True):
        assert [ids for ids, _ in a.nbest] == [ids for ids, _ in b.nbest]
        assert [s for _, s in a.nbest] == pytest.approx([s for _, s in b.nbest], abs=1e-4)
        assert a.garbage_ratio == pytest.approx(b.garbage_ratio, abs=1e-4)


def test_words_the_tokenizer_cannot_write_are_named_at_load(tiny_model):
    """A Cyrillic look-alike letter, an accent, a script the tokenizer never saw: the
    sentences holding them could never be written, so the search's construction says so."""
    from asr.decoding import DecodingTask

    model, tokenizer, _, _ = loaded(tiny_model)
    grammar = Grammar.from_yaml("context:\n  expressions:\n    go: [\"go left\", \"go l\u0435ft\"]\n"
                                "    stop: [\"stop\", \"東京 stop\"]\n", "looks.yaml")
    with pytest.warns(UserWarning, match=r"^looks.yaml: this model cannot write 'l\u0435ft', "
                                         r"'東京' \(letters its tokenizer lacks\)"):
        DecodingTask(model, tokenizer=tokenizer, grammar=grammar)

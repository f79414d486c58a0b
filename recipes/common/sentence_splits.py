"""Which sentences of the grammar each split of the voice-command corpus speaks.

Each intent's sentences are enumerated when there are at most POOL, and sampled otherwise, so a
grammar that expands to millions of sentences costs no more than a small one. Train, dev and
test hold different multi-word sentences, so the test error measures commands phrased in ways
the model never heard; small intents are repeated so that every intent gets a fair share.
"""

import math
import random
from collections import defaultdict
from collections.abc import Callable, Iterator
from itertools import islice

from asr.grammar import Grammar, Sentence

SPLITS = ("train", "dev", "test")  # the corpus splits, in the order their seeds are drawn
# Sentences per intent at most: enumerated below this, sampled above it.
POOL = 4000
# Share of each intent's non-core sentences held out for dev and test (cores stay in train).
SENTENCE_FRACTIONS = {"dev": 0.1, "test": 0.2}
# Every intent gets at least this share of a split's sentence pool, so that small intents
# ("what time is it", single words) are not drowned by the 480 timer sentences.
MIN_INTENT_SHARE = 0.04


def intent_pools(grammar: Grammar, seed: int) -> dict[str, list[Sentence]]:
    """Each intent's sentences: all of them, or POOL draws for a large intent."""
    return {intent: grammar.sentences(intent, POOL, random.Random(f"{seed}:{intent}"))
            for intent in grammar.intents}


def split_sentences(pools: dict[str, list[Sentence]], seed: int) -> dict[str, list[Sentence]]:
    """Sentences per split: multi-word sentences disjoint, every intent in every split.

    Each core sentence (no optional part said: "open the editor") stays in train, so every
    word is trained on and dev and test hold unseen combinations of known parts ("open the
    editor please"). One-word sentences ("yes", "three") are a closed set and appear in all
    three splits, and so do the sentences of an intent that has nothing but cores.
    """
    rng = random.Random(seed)
    splits: dict[str, list[Sentence]] = {name: [] for name in SPLITS}
    for _, group in sorted(pools.items()):
        extras = [s for s in group if not s.core and " " in s.text]
        if not extras:
            for name in SPLITS:
                splits[name] += group
            continue
        rng.shuffle(extras)
        counts = {name: max(1, round(fraction * len(extras)))
                  for name, fraction in SENTENCE_FRACTIONS.items()}
        splits["dev"] += extras[:counts["dev"]]
        splits["test"] += extras[counts["dev"]:counts["dev"] + counts["test"]]
        splits["train"] += extras[counts["dev"] + counts["test"]:]
        splits["train"] += [s for s in group if s.core or " " not in s.text]
    return {name: sorted(found, key=lambda s: s.text) for name, found in splits.items()}


def sentence_pool(sentences: list[Sentence]) -> list[Sentence]:
    """The sentences, those of small intents repeated so each intent gets a fair share."""
    by_intent: dict[str, list[Sentence]] = defaultdict(list)
    for sentence in sentences:
        by_intent[sentence.intent].append(sentence)
    floor = MIN_INTENT_SHARE * len(sentences)
    return [sentence for group in by_intent.values()
            for sentence in group * max(1, math.ceil(floor / len(group)))]


def round_robin(pool: list[Sentence], rng: random.Random) -> Iterator[Sentence]:
    """The pool in reshuffled passes, endlessly: every sentence once before any twice."""
    while True:
        order = list(pool)
        rng.shuffle(order)
        yield from order


def draw_sentences(pool: list[Sentence], count: int, rng: random.Random) -> list[Sentence]:
    """`count` sentences by round-robin over reshuffled passes: the whole pool is covered."""
    return list(islice(round_robin(pool, rng), count))


def draw_seconds(pool: list[Sentence], seconds: float, rng: random.Random,
                 duration: Callable[[Sentence], float]) -> list[Sentence]:
    """Sentences by the same round-robin until their expected `duration`s add up to `seconds`
    (the first of them are `draw_sentences`' with the same generator)."""
    drawn, total, sentences = [], 0.0, round_robin(pool, rng)
    while total < seconds:
        drawn.append(next(sentences))
        total += duration(drawn[-1])
    return drawn

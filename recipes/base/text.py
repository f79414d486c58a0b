"""Text for the base model: what its synthetic voices say, from many sources, split three ways.

    python -m recipes.base.text [--real-root ../shared/data] [--seed 0]

The base model is trained once and then serves any command grammar at load time, so it must
spell words no grammar of its training had. Its text therefore mixes:

- grammar:NAME: each voice-command grammar (the repository's, and `real_root/grammars/*.yaml`),
  only the sentences that the voice-command recipe trains on (`sentence_splits` with seed 0); its
  dev and test sentences are that recipe's held-out sets and are in none of the splits here;
- domains: `domains.yaml`, requests across forty-odd assistant domains with long slot lists;
- read: the CMU ARCTIC prompts that cathy reads, split by prompt exactly as `recipes.cathy`
  splits them, so a held-out prompt is held out for real and synthetic speech alike;
- wuw: WUW Corpus II's transcripts, each in the split of its speaker (`session_splits`);
- numbers: cardinals, years, ordinals, digit strings, prices, percentages, dates, clock times;
- letters: spelt letters ("spell it d o g", "b as in bravo"), written as single letters, as
  `normalize_text` writes "B";
- words: the most frequent English words (wordfreq), alone and in carrier phrases, split by
  word, so that dev and test measure how the model spells words it never heard.

Every text is normalised (`asr.text.normalize_text`) and said in one split only: a text that
two sources put in different splits stays in the most held-out one (test, then dev), so nothing
scored is trained on, except one-word texts ("yes", "operator"), a closed set that every split
says and that stays in train. SOURCE_SHARES says how many synthetic utterances each source
should get (`source_counts`).
"""

import argparse
import random
import re
import time
from collections import Counter
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from pathlib import Path

from asr.grammar import Grammar
from asr.text import normalize_text, normalize_transcription, number_words, ordinal_words, spell_number
from recipes.common import corpora, hash_split
from recipes.common.real import DEFAULT_REAL_ROOT
from recipes.common.sentence_splits import intent_pools, split_sentences

SPLITS = ("train", "dev", "test")  # from least to most held out
HERE = Path(__file__).resolve().parent
DOMAINS = HERE / "domains.yaml"
REPO_GRAMMARS = (HERE.parent / "voice_commands" / "commands.yaml",
                 *sorted((HERE.parent / "voice_commands" / "examples").glob("*.yaml")))
SALT = "asr-base:"  # hash splits of texts and words, stable across seeds and runs

GRAMMAR_CAP = 3000  # training sentences taken from one grammar at most
DOMAIN_SENTENCES = 800  # sentences drawn per intent of domains.yaml
TEXT_PERCENT = {"dev": 4.0, "test": 6.0}  # domains, numbers and letters: held out by sentence
WORD_LIST = 8000  # the most frequent English words considered
WORD_PERCENT = {"dev": 3.0, "test": 5.0}  # words held out, with every line that says them
WORD_CARRIERS = 2  # carrier phrases per word, besides the word alone
WORD_TUPLES = 2  # lines of two or three random words, per word
NUMBER_LINES = 6000
LETTER_LINES = 3000

# Share of the synthetic training utterances per source kind (a kind's share is divided equally
# among its sources, e.g. the grammars): commands and requests first, then read speech and
# unseen words, then the numbers and letters that every grammar may use.
SOURCE_SHARES = {"grammar": 0.35, "domains": 0.25, "read": 0.10, "wuw": 0.05, "words": 0.15,
                 "numbers": 0.06, "letters": 0.04}
# The shares of `alone_text`, a corpus of its own: the digits get half, Speech Commands' other
# 25 words the other half (the digits are where people's commands fail most).
ALONE_SHARES = {"alone": 1.0}

_WORD = re.compile(r"[a-z]+(?:'[a-z]+)?")
_VOWEL = re.compile(r"[aeiouy]")
LETTERS = "abcdefghijklmnopqrstuvwxyz"
NATO = ("alpha bravo charlie delta echo foxtrot golf hotel india juliet kilo lima mike november "
        "oscar papa quebec romeo sierra tango uniform victor whiskey x-ray yankee zulu").split()
WEEKDAYS = "monday tuesday wednesday thursday friday saturday sunday".split()
MONTHS = ("january february march april may june july august september october november "
          "december").split()
DIGITS = corpora.DIGITS


@dataclass(frozen=True)
class Line:
    text: str  # normalised with asr.text.normalize_text
    source: str  # "grammar:commands", "domains", "read", "wuw", "numbers", "letters", "words"


Splits = dict[str, list[Line]]


def corpus_text(real_root: Path | None, seed: int = 0) -> Splits:
    """Sentences per split (train/dev/test), no sentence in two splits, deduplicated, sorted by
    source and text; `real_root` (a folder laid out like ../shared/data) adds its grammars and
    the read and WUW transcripts."""
    real_root = Path(real_root) if real_root is not None else None
    grammars = [*REPO_GRAMMARS, *(sorted((real_root / "grammars").glob("*.yaml"))
                                  if real_root is not None else [])]
    held_out: set[str] = set()
    parts = []
    for path in grammars:
        train, scored = grammar_lines(path, seed)
        parts.append({"train": train})
        held_out |= scored
    parts += [domain_lines(seed), number_lines(seed)]
    if real_root is not None and (real_root / "cathy").is_dir():
        parts.append(read_lines(real_root / "cathy"))
    if real_root is not None and (real_root / "wuw").is_dir():
        parts.append(wuw_lines(real_root / "wuw"))
    words = word_list()
    word_split = {word: hash_split(word, WORD_PERCENT["dev"], WORD_PERCENT["test"], SALT)
                  for word in words}
    parts.append(letter_lines([w for w in words if word_split[w] == "train"], seed))
    others = disjoint(parts, held_out)
    heard = vocabulary(others["train"])
    word_split = {word: "train" if word in heard else split for word, split in word_split.items()}
    return disjoint([others, word_lines(word_split, seed)], held_out)


def alone_text() -> Splits:
    """The one-word commands people say, each alone: Speech Commands' 35 words, the digits
    among them, which the broad text says mostly inside sentences. Every split says the same
    words; a split's voices are its own, so dev and test hear them in held-out voices."""
    words = sorted(set(corpora.COMMANDS + corpora.AUXILIARY) - set(DIGITS))
    lines = [Line(word, "alone:digits") for word in DIGITS]
    lines += [Line(word, "alone:words") for word in words]
    return {split: list(lines) for split in SPLITS}


def grammar_lines(path: Path, seed: int) -> tuple[list[Line], set[str]]:
    """A voice-command grammar's training sentences (at most GRAMMAR_CAP, drawn with `seed`),
    and the texts its recipe scores on (dev and test sentences it never trains on)."""
    splits = split_sentences(intent_pools(Grammar.load(path), 0), 0)
    trained = sorted({normalize_text(s.text) for s in splits["train"]})
    scored = {normalize_text(s.text) for split in ("dev", "test") for s in splits[split]}
    train = trained
    if len(trained) > GRAMMAR_CAP:
        train = sorted(random.Random(f"{seed}:{path.stem}").sample(trained, GRAMMAR_CAP))
    return [Line(text, f"grammar:{path.stem}") for text in train], scored - set(trained)


def domain_lines(seed: int) -> Splits:
    """DOMAIN_SENTENCES drawn per intent of domains.yaml, split by sentence."""
    grammar = Grammar.load(DOMAINS)
    texts = {normalize_text(s.text) for intent in grammar.intents
             for s in grammar.sentences(intent, DOMAIN_SENTENCES, random.Random(f"{seed}:{intent}"))}
    return split_texts(texts, "domains")


def split_texts(texts: Iterable[str], source: str) -> Splits:
    """Texts split by a hash of the text (TEXT_PERCENT), so a sentence keeps its split whatever
    else is drawn; one-word texts stay in train."""
    splits: Splits = {split: [] for split in SPLITS}
    for text in sorted(set(texts)):
        split = "train"
        if " " in text:
            split = hash_split(text, TEXT_PERCENT["dev"], TEXT_PERCENT["test"], SALT)
        splits[split].append(Line(text, source))
    return splits


def read_lines(root: Path) -> Splits:
    """cathy's ARCTIC prompts, in the split that `recipes.cathy.prepare` gives their prompt id."""
    splits: Splits = {split: [] for split in SPLITS}
    for _, prompt, text in corpora.arctic_utterances(root):
        split = hash_split(prompt, corpora.CATHY_DEV_PERCENT, corpora.CATHY_TEST_PERCENT, corpora.SALT)
        splits[split].append(Line(normalize_text(text), "read"))
    return splits


def wuw_lines(root: Path) -> Splits:
    """WUW Corpus II's transcripts (markup removed), each in its speaker's split."""
    entries = corpora.entries(root)
    speaker_split = corpora.session_splits(entries)
    splits: Splits = {split: [] for split in SPLITS}
    for entry in entries:
        text = normalize_transcription(entry["transcription"])
        if text:
            splits[speaker_split[entry["sessionNumber"]]].append(Line(text, "wuw"))
    return splits


def word_list() -> list[str]:
    """The WORD_LIST most frequent English words that are one plain word to the normaliser
    ("don't" stays; "u.s", "3d" and vowel-less abbreviations such as "mr" go: a voice would
    say them otherwise than they are written), single letters left to `letter_lines`."""
    try:
        from wordfreq import top_n_list
    except ImportError:
        raise SystemExit("error: the base recipe needs wordfreq: pip install -e '.[base]'") from None
    return [w for w in top_n_list("en", WORD_LIST) if _WORD.fullmatch(w) and normalize_text(w) == w
            and _VOWEL.search(w) and (len(w) > 1 or w in ("a", "i"))]


WORD_FRAMES = ("the word {}", "say {}", "i said {}", "{} please", "{} again", "it is {}",
               "what does {} mean", "type {}", "search for {}", "how do you say {}", "{} is the word",
               "write {}", "is it {}", "i think {}", "did you say {}", "find {}")


def word_lines(word_split: dict[str, str], seed: int) -> Splits:
    """Each word alone and in WORD_CARRIERS carrier phrases, and WORD_TUPLES lines of two or
    three words per word: train's of train words only, a held-out line has a word of its split."""
    rng = random.Random(f"{seed}:words")
    train_words = sorted(w for w, split in word_split.items() if split == "train")
    splits: Splits = {split: [] for split in SPLITS}
    for word, split in sorted(word_split.items()):
        lines = [word] + [frame.format(word) for frame in rng.sample(WORD_FRAMES, WORD_CARRIERS)]
        for _ in range(WORD_TUPLES):
            others = rng.sample(train_words, rng.randint(1, 2))
            others.insert(rng.randint(0, len(others)), word)
            lines.append(" ".join(others))
        splits[split] += [Line(text, "words") for text in lines]
    return splits


def letter_lines(words: list[str], seed: int) -> Splits:
    """LETTER_LINES spelt letters in carrier phrases, split by sentence: letter strings, words
    spelt after themselves (`words`: those that train may hear), phonetic alphabets, codes."""
    rng = random.Random(f"{seed}:letters")
    spellable = [w for w in words if w.isalpha() and 3 <= len(w) <= 9]

    def letters(count: int) -> str:
        return " ".join(rng.choice(LETTERS) for _ in range(count))

    def spelt() -> str:
        word = rng.choice(spellable)
        return rng.choice(("{w} {s}", "spell {w} {s}", "{w} is spelled {s}", "{w} that's {s}",
                           "it's spelled {s}", "{s} {w}")).format(w=word, s=" ".join(word))

    def code() -> str:
        parts = [rng.choice(LETTERS) if rng.random() < 0.6 else rng.choice(DIGITS)
                 for _ in range(rng.randint(2, 7))]
        return rng.choice(("the code is {}", "my postcode is {}", "the plate is {}", "{}",
                           "reference {}", "enter {}", "flight {}")).format(" ".join(parts))

    def letter() -> str:
        index = rng.randrange(len(LETTERS))
        return rng.choice(("the letter {l}", "letter {l}", "capital {l}", "a capital {l}",
                           "lower case {l}", "press {l}", "option {l}", "plan {l}", "vitamin {l}",
                           "row {l} seat {n}", "section {l} {n}", "it starts with {l}",
                           "{l} as in {p}")).format(l=LETTERS[index], p=NATO[index],
                                                    n=number_words(rng.randint(1, 40)))

    makers: list[Callable[[], str]] = [
        lambda: letters(rng.randint(1, 7)),
        lambda: rng.choice(("spell it {}", "that's {}", "it's {}", "the letters {}", "type {}",
                            "my initials are {}")).format(letters(rng.randint(2, 6))),
        spelt, spelt, code, letter,
        lambda: " ".join(rng.choice(NATO) for _ in range(rng.randint(2, 6))),
    ]
    return split_texts((normalize_text(rng.choice(makers)()) for _ in range(LETTER_LINES)),
                       "letters")


def number_lines(seed: int) -> Splits:
    """NUMBER_LINES numbers, dates and times, mostly in carrier phrases, split by sentence."""
    rng = random.Random(f"{seed}:numbers")
    makers = [cardinal, year, ordinal, digits, price, percentage, decimal, clock_time, date,
              measure]
    frames = {
        cardinal: ("{}", "the number {}", "there are {}", "about {}", "it was {}", "we need {}",
                   "page {}", "number {}", "{} people", "{} times", "more than {}", "set it to {}"),
        year: ("{}", "in {}", "the year {}", "since {}", "born in {}", "back in {}", "the {} model"),
        ordinal: ("the {}", "on the {}", "the {} one", "my {} time", "the {} item", "{} place",
                  "the {} time", "it's the {}"),
        digits: ("{}", "call {}", "my number is {}", "dial {}", "the code is {}", "my pin is {}",
                 "order number {}", "extension {}"),
        price: ("{}", "it costs {}", "that's {}", "the total is {}", "pay {}", "send {}",
                "it was {}", "only {}", "about {}"),
        percentage: ("{}", "set it to {}", "about {}", "battery at {}", "brightness {}", "{} off",
                     "up {}", "it's {}"),
        decimal: ("{}", "it's {}", "about {}", "roughly {}", "exactly {}"),
        clock_time: ("{}", "at {}", "it's {}", "wake me up at {}", "set an alarm for {}",
                     "the train leaves at {}", "meet me at {}", "remind me at {}"),
        date: ("{}", "on {}", "it's {}", "what day is {}", "book it for {}", "my birthday is {}",
               "the meeting is on {}", "due {}"),
        measure: ("{}", "it's {}", "about {}", "add {}", "nearly {}", "more than {}"),
    }
    texts = (rng.choice(frames[make]).format(make(rng))
             for make in (rng.choice(makers) for _ in range(NUMBER_LINES)))
    return split_texts((normalize_text(text) for text in texts), "numbers")


def cardinal(rng: random.Random) -> str:
    """A whole number of one to nine digits (each length as likely), British "and" at times."""
    length = rng.randint(1, 9)
    value = rng.randrange(10 ** (length - 1) if length > 1 else 0, 10 ** length)
    words = number_words(value)
    if rng.random() < 0.3 and 100 < value < 1000 and value % 100:
        words = words.replace("hundred", "hundred and")
    return words


def year(rng: random.Random) -> str:
    """A year as people say it: "nineteen o eight", "two thousand and five", "twenty twenty four"."""
    value = rng.randint(1100, 2099)
    if value >= 2010 and rng.random() < 0.5:
        return f"twenty {number_words(value % 100)}"
    if 2000 < value < 2010 and rng.random() < 0.5:
        return f"two thousand and {number_words(value % 100)}"
    return spell_number(str(value))


def ordinal(rng: random.Random) -> str:
    """Mostly a day of the month or a place in a list, at times up to the thousandth."""
    return ordinal_words(number_words(rng.randint(1, 31 if rng.random() < 0.8 else 1000)))


def digits(rng: random.Random) -> str:
    """A phone, PIN or order number, digit by digit; zero said "zero" or "o"."""
    zero = rng.choice(("zero", "o"))
    return " ".join(zero if d == 0 else DIGITS[d]
                    for d in (rng.randrange(10) for _ in range(rng.randint(3, 11))))


def price(rng: random.Random) -> str:
    whole = rng.choice((rng.randint(1, 20), rng.randint(1, 999), rng.randint(1000, 99999)))
    cents = rng.randrange(100)
    unit, small = rng.choice((("dollar", "cent"), ("pound", "pence"), ("euro", "cent")))
    plural = "" if whole == 1 else "s"
    if cents == 0 or rng.random() < 0.3:
        return f"{number_words(whole)} {unit}{plural}"
    if rng.random() < 0.5 and whole < 100 and cents >= 10:
        return f"{number_words(whole)} {number_words(cents)}"  # "nine ninety nine"
    small += "" if small == "pence" or cents == 1 else "s"
    return f"{number_words(whole)} {unit}{plural} and {number_words(cents)} {small}"


def percentage(rng: random.Random) -> str:
    value = rng.randint(0, 100)
    if rng.random() < 0.2:
        return f"{number_words(value)} point {DIGITS[rng.randrange(10)]} percent"
    return f"{number_words(value)} percent"


def decimal(rng: random.Random) -> str:
    """"three point one four", "minus two point five", "a half"."""
    if rng.random() < 0.15:
        return rng.choice(("a half", "a quarter", "three quarters", "a third", "two thirds",
                           "one and a half", "two and a half"))
    sign = "minus " if rng.random() < 0.15 else ""
    return f"{sign}{number_words(rng.randint(0, 999))} point " + " ".join(
        DIGITS[rng.randrange(10)] for _ in range(rng.randint(1, 3)))


def clock_time(rng: random.Random) -> str:
    """A time of day in one of the ways it is said: "seven thirty p m", "quarter past six",
    "ten to five", "six o'clock", "oh five hundred"."""
    hour, minute = rng.randint(1, 12), rng.choice((0, 5, 10, 15, 20, 25, 30, 40, 45, 50, 55,
                                                   rng.randint(0, 59)))
    style = rng.randrange(5)
    if style == 0:
        return f"{number_words(hour)} o'clock"
    if style == 1 and 0 < minute <= 30:
        past = {15: "quarter", 30: "half"}.get(minute, number_words(minute))
        return f"{past} past {number_words(hour)}"
    if style == 2 and minute >= 30:
        to = "quarter" if minute == 45 else number_words(60 - minute)
        return f"{to} to {number_words(hour % 12 + 1)}"
    if style == 3:
        hour24 = rng.randint(0, 23)
        return f"{number_words(hour24)} hundred hours" if hour24 else "midnight"
    tail = "" if minute == 0 else f" o {DIGITS[minute]}" if minute < 10 else f" {number_words(minute)}"
    return f"{number_words(hour)}{tail}" + rng.choice(("", " a m", " p m"))


def date(rng: random.Random) -> str:
    """A date as it is said: "monday the third of march", "march third twenty twenty five"."""
    month, day = rng.choice(MONTHS), ordinal_words(number_words(rng.randint(1, 31)))
    text = rng.choice((f"the {day} of {month}", f"{month} {day}", f"{month} the {day}",
                       f"{rng.choice(WEEKDAYS)} the {day}", f"{rng.choice(WEEKDAYS)} {month} {day}",
                       f"{rng.choice(WEEKDAYS)} the {day} of {month}"))
    return f"{text} {year(rng)}" if rng.random() < 0.3 else text


def measure(rng: random.Random) -> str:
    amount = rng.choice((number_words(rng.randint(1, 500)), decimal(rng)))
    return f"{amount} " + rng.choice(("kilometres", "miles", "metres", "feet", "inches", "kilos",
                                      "grams", "pounds", "litres", "degrees", "minutes", "hours",
                                      "days", "weeks", "years", "cups", "volts", "megabytes"))


def disjoint(parts: list[Splits], banned: set[str]) -> Splits:
    """The parts merged: `banned` texts dropped, each text in one split (the most held-out one
    that any part gives it, train for a one-word text that any part trains on), the first line of
    a text kept, sorted by source and text."""
    home: dict[str, int] = {}
    for part in parts:
        for rank, split in enumerate(SPLITS):
            for line in part.get(split, []):
                old = home.get(line.text, rank)
                home[line.text] = min(old, rank) if " " not in line.text else max(old, rank)
    merged: Splits = {}
    for rank, split in enumerate(SPLITS):
        kept: dict[str, Line] = {}
        for part in parts:
            for line in part.get(split, []):
                if line.text and line.text not in banned and home[line.text] == rank:
                    kept.setdefault(line.text, line)
        merged[split] = sorted(kept.values(), key=lambda line: (line.source, line.text))
    return merged


def vocabulary(lines: Iterable[Line]) -> set[str]:
    return {word for line in lines for word in line.text.split()}


def source_kind(source: str) -> str:
    """"grammar:coffee" -> "grammar": the key of SOURCE_SHARES."""
    return source.partition(":")[0]


def source_counts(lines: list[Line], total: int) -> dict[str, int]:
    """How many of `total` synthetic utterances to draw from each source of `lines`, by
    SOURCE_SHARES (shares of absent kinds spread over the others)."""
    sources = sorted({line.source for line in lines})
    per_kind = Counter(source_kind(source) for source in sources)
    weights = {s: SOURCE_SHARES[source_kind(s)] / per_kind[source_kind(s)] for s in sources}
    norm = sum(weights.values())
    return {source: round(total * weight / norm) for source, weight in weights.items()}


def summary(splits: Splits, seconds: float) -> str:
    """Lines per source and split, and the words each split says (and train never does)."""
    sources = sorted({line.source for lines in splits.values() for line in lines})
    counts = {split: Counter(line.source for line in lines) for split, lines in splits.items()}
    rows = [f"  {source:32s}" + "".join(f"{counts[split][source]:8d}" for split in SPLITS)
            for source in sources]
    train = vocabulary(splits["train"])
    words = [f"  {split}: {len(splits[split])} lines, {len(vocabulary(splits[split]))} words"
             + ("" if split == "train" else
                f", {len(vocabulary(splits[split]) - train)} of them never in train")
             for split in SPLITS]
    return "\n".join(["base text:", f"  {'source':32s}" + "".join(f"{s:>8s}" for s in SPLITS),
                      *rows, *words, f"  built in {seconds:.1f} s"])


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--real-root", type=Path, default=DEFAULT_REAL_ROOT,
                        help="folder laid out like ../shared/data (default: it, when present); "
                             "'none' for the repository's text only")
    parser.add_argument("--seed", type=int, default=0)
    args = parser.parse_args(argv)
    root = None if args.real_root is None or str(args.real_root) == "none" else args.real_root
    start = time.monotonic()
    splits = corpus_text(root, args.seed)
    print(summary(splits, time.monotonic() - start))


if __name__ == "__main__":
    main()

"""The numbers a transcript says, as values: what the grammar search's sentence and the free
transcript are compared by, where their letters alone agree too well ("zero minutes" and
"four minutes" differ by three letters of twelve; "minus one" and "nineteen" by a few)."""

_ONES = ("zero one two three four five six seven eight nine ten eleven twelve thirteen "
         "fourteen fifteen sixteen seventeen eighteen nineteen").split()
_TENS = "twenty thirty forty fifty sixty seventy eighty ninety".split()
_SCALES = {"hundred": 100, "thousand": 1000, "million": 10**6, "billion": 10**9}
_SMALL = {word: value for value, word in enumerate(_ONES)} | {"oh": 0}
_TENS_VALUES = {word: 20 + 10 * i for i, word in enumerate(_TENS)}
NEGATIVE = ("minus", "negative")


def spoken_numbers(text: str) -> list[int]:
    """The numbers in a normalised transcript, in order: each run of number words read as
    one value ("twenty four" 24, "two hundred and five" 205), a new one where a word cannot
    continue the run ("four twenty" is 4, 20; "one two" is 1, 2); "minus" before a number
    makes it negative."""
    numbers: list[int] = []
    run: list[int] | None = None  # [total, current, last kind, sign]
    for word in text.split():
        kind = "small" if word in _SMALL else "tens" if word in _TENS_VALUES else \
            "scale" if word in _SCALES else "and" if word == "and" and run else \
            "sign" if word in NEGATIVE else None
        if run is not None and not _continues(run, kind):
            numbers.append(run[3] * (run[0] + run[1]))
            run = None
        if kind == "sign":
            run = [0, 0, "sign", -1]
        elif kind in ("small", "tens", "scale"):
            run = _add(run or [0, 0, None, 1], word, kind)
    if run is not None and run[2] != "sign":
        numbers.append(run[3] * (run[0] + run[1]))
    return numbers


def _continues(run: list, kind: str | None) -> bool:
    """Whether a word of `kind` goes on the number being read."""
    last = run[2]
    if kind == "and" or last in ("sign", "and", "scale"):
        return kind in ("small", "tens", "and") or (kind == "scale" and last != "scale")
    if kind == "scale":
        return last in ("small", "tens")
    return kind == "small" and last == "tens" and run[1] % 10 == 0


def _add(run: list, word: str, kind: str) -> list:
    total, current, _, sign = run
    if kind == "small":
        current += _SMALL[word]
    elif kind == "tens":
        current += _TENS_VALUES[word]
    else:
        scale = _SCALES[word]
        if scale == 100:
            current = max(current, 1) * 100
        else:
            total, current = total + max(current, 1) * scale, 0
    return [total, current, kind, sign]


def numbers_differ(sentence: str, heard: str | None) -> bool:
    """Whether the free transcript says numbers, and not the grammar sentence's: a sentence
    whose slot holds another number than the one heard ("four minutes" for "zero minutes")."""
    if heard is None:
        return False
    said = spoken_numbers(sentence)
    found = spoken_numbers(heard)
    return bool(said) and bool(found) and said != found

"""Text normalisation: the one function that training, decoding and scoring all share.

Using a single normaliser everywhere means a word error is never an artefact of one side
lower-casing or stripping punctuation differently from the other.
"""

import re
import unicodedata

_NOT_WORD = re.compile(r"[^\w']+")
_APOSTROPHES = re.compile(r"(^|\s)'+|'+(\s|$)")
_NUMBER = re.compile(r"\b\d+(?:,\d{3})*(?:st|nd|rd|th)?\b")
_ONES = ("zero one two three four five six seven eight nine ten eleven twelve thirteen "
         "fourteen fifteen sixteen seventeen eighteen nineteen").split()
_TENS = "_ _ twenty thirty forty fifty sixty seventy eighty ninety".split()
_SCALES = ((10**9, "billion"), (10**6, "million"), (1000, "thousand"), (100, "hundred"))
# Past this many digits a number is read digit by digit (an account or serial number): its
# value would need "billion billion", which nobody says, and Python refuses to convert
# strings of thousands of digits to an int at all.
MAX_NUMBER_DIGITS = 18
_ORDINALS = {"one": "first", "two": "second", "three": "third", "five": "fifth",
             "eight": "eighth", "nine": "ninth", "twelve": "twelfth"}
# A hand transcription's markup (LDC's conventions, as WUW Corpus II uses them).
_SPEAKER_NOISE = re.compile(r"\{[^{}]*\}")  # {breath} {lip smack}: may sit inside a word
_EVENT = re.compile(r"\[[^\[\]{}]*[\]}]")  # [click] [static/] [\static] [/phone fuzz] [[skip]]
_TAG = re.compile(r"<[^<>]*>|\(\(|\)\)|[\[\]]")  # <as> asides </as>, ((uncertain)), strays
_TRAILING = ".,;:?!\"'_"
# Filled pauses, marked (%um) or not (uh): not words a recogniser should be asked to write.
HESITATIONS = frozenset("uh um umm uhm ah er erm hm hmm mm mhm".split())


def normalize_text(text: str) -> str:
    """Lower-case, spell out numbers, drop punctuation (keeping in-word apostrophes), collapse
    whitespace.

    Numbers are spelt as a reader says them (book prompts such as CMU ARCTIC's write "1908" or
    "2nd"), so a reference with digits and a hypothesis in words score alike.

    >>> normalize_text("  Show me my PHOTOS, please! ")
    'show me my photos please'
    >>> normalize_text("It's 'quoted'")
    "it's quoted"
    >>> normalize_text("In 1908, 2nd of 3,500 & 21 more")
    'in nineteen o eight second of three thousand five hundred and twenty one more'
    """
    text = without_format_characters(unicodedata.normalize("NFKC", text)).lower()
    text = text.replace("_", " ").replace("&", " and ")
    text = _NUMBER.sub(lambda m: f" {spell_number(m.group())} ", text)
    text = _NOT_WORD.sub(" ", text)
    text = _APOSTROPHES.sub(" ", text)
    return " ".join(text.split())


def without_format_characters(text: str) -> str:
    """`text` without its invisible characters that join or break nothing a listener hears:
    every Unicode format character (category Cf: zero-width space, non-joiner, joiner, word
    joiner, byte-order mark, soft hyphen, bidi marks, ...), dropped, not taken for word breaks.
    ASCII has none."""
    if text.isascii():
        return text
    return "".join(c for c in text if unicodedata.category(c) != "Cf")


def normalize_transcription(text: str) -> str:
    """The words of a hand transcription, its markup removed, then `normalize_text`.

    The markup of LDC-style transcripts (WUW Corpus II's): speaker noises `{breath}` go, even
    inside a word (`Think{breath}Engine` is "thinkengine"); background events `[click]`,
    `[static/] ... [/static]`, `[[skip]]` go; `<as> ... </as>` (an aside) and `((uncertain
    words))` keep their words, so `(( ))` (unintelligible) leaves nothing; `%um` and unmarked
    filled pauses (HESITATIONS) go; word fragments cut off by the speaker (`ph-`, `-perator`)
    go; the marks on whole words stay words: `^John` (a name), `+gonna` (said oddly),
    `*gonna` (not in the dictionary), `~CPX` (spelt out), `_Onword_` (the keyword). A
    replacement character where the source had a curly apostrophe (`I\ufffdm`) is one again.

    >>> normalize_transcription("{breath} Uh, I'm *gonna say (( )) ((hi)) %um _Onword_ [static\\]")
    "i'm gonna say hi onword"
    >>> normalize_transcription("[phone fuzz/] the ph- call to +the Th{breath}inkEngine [/phone fuzz]")
    'the call to the thinkengine'
    """
    text = _SPEAKER_NOISE.sub("", text.replace("\ufffd", "'"))
    while (stripped := _EVENT.sub(" ", text)) != text:
        text = stripped
    words = []
    for token in _TAG.sub(" ", text).split():
        bare = token.rstrip(_TRAILING)
        if token.startswith("%") or bare.endswith("-") or token.lstrip("_").startswith("-"):
            continue  # a marked hesitation or a fragment
        words.append(token)
    return " ".join(w for w in normalize_text(" ".join(words)).split() if w not in HESITATIONS)


def spell_number(token: str) -> str:
    """"42" -> "forty two", "3rd" -> "third", "1,000" -> "one thousand", "1908" -> "nineteen o
    eight" (four-digit numbers from 1100 to 1999 are read as years), more than
    MAX_NUMBER_DIGITS digits one by one ("one two three ...")."""
    suffix = token[-2:] if token[-2:].isalpha() else ""
    digits = token.removesuffix(suffix).replace(",", "")
    if len(digits) > MAX_NUMBER_DIGITS:
        words = " ".join(_ONES[int(digit)] for digit in digits)
        return ordinal_words(words) if suffix else words
    value = int(digits)
    if "," not in token and 1100 <= value <= 1999:
        high, low = divmod(value, 100)
        tail = "hundred" if low == 0 else number_words(low) if low >= 10 else f"o {_ONES[low]}"
        words = f"{number_words(high)} {tail}"
    else:
        words = number_words(value)
    return ordinal_words(words) if suffix else words


def ordinal_words(words: str) -> str:
    """A number's words as its ordinal: "twenty one" -> "twenty first"."""
    head, _, last = words.rpartition(" ")
    last = _ORDINALS.get(last) or (last[:-1] + "ieth" if last.endswith("y") else last + "th")
    return f"{head} {last}".strip()


def number_words(value: int) -> str:
    """A whole number >= 0 in words: 42 -> "forty two"."""
    if value < 20:
        return _ONES[value]
    if value < 100:
        tens, ones = divmod(value, 10)
        return _TENS[tens] + (f" {_ONES[ones]}" if ones else "")
    for scale, name in _SCALES:
        if value >= scale:
            high, low = divmod(value, scale)
            return f"{number_words(high)} {name}" + (f" {number_words(low)}" if low else "")
    raise AssertionError("unreachable")

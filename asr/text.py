"""Text normalisation: the one function that training, decoding and scoring all share.

Using a single normaliser everywhere means a word error is never an artefact of one side
lower-casing or stripping punctuation differently from the other.
"""

import re
import unicodedata

_NOT_WORD = re.compile(r"[^\w']+")
_APOSTROPHES = re.compile(r"(^|\s)'+|'+(\s|$)")


def normalize_text(text: str) -> str:
    """Lower-case, drop punctuation (keeping in-word apostrophes) and collapse whitespace.

    >>> normalize_text("  Show me my PHOTOS, please! ")
    'show me my photos please'
    >>> normalize_text("It's 'quoted'")
    "it's quoted"
    """
    text = unicodedata.normalize("NFKC", text).lower().replace("_", " ")
    text = _NOT_WORD.sub(" ", text)
    text = _APOSTROPHES.sub(" ", text)
    return " ".join(text.split())

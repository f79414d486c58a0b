"""Text for cathy's language model: public-domain English from Debian packages, one sentence a line.

    sudo apt-get install diatheke sword-text-web fortunes
    python -m recipes.cathy.lm_text --out data/cathy/lm --exclude data/cathy/dev.jsonl \
        --exclude data/cathy/test.jsonl

Sources: the World English Bible (public domain; SWORD module `engWEB2015eb`, read with
`diatheke`) and the `fortunes` collection (quotations, literature, riddles). Neither holds
the ARCTIC prompts (they come from Project Gutenberg novels), and every sentence that equals a
dev or test prompt after normalisation is dropped all the same (`--exclude`), so the LM never
reads the sentences it is scored on.
"""

import argparse
import re
import subprocess
import sys
from collections import Counter
from pathlib import Path

from asr.data import read_manifest
from asr.text import normalize_text

WEB_MODULE = "engWEB2015eb"
FORTUNES = Path("/usr/share/games/fortunes")
SENTENCE_END = re.compile(r"(?<=[.!?])\s+")
VERSE_REFERENCE = re.compile(r"^[1-3]?\s?[A-Z][A-Za-z ]+ \d+:\d+: ")
TYPOGRAPHY = str.maketrans({"\u2019": "'", "\u2018": "'", "\u201c": '"', "\u201d": '"'})


def bible() -> list[str]:
    """The text of the World English Bible, without verse references and headings."""
    try:
        out = subprocess.run(["diatheke", "-b", WEB_MODULE, "-f", "plain", "-k",
                              "Genesis 1:1 - Revelation 22:21"], capture_output=True, text=True,
                             check=True).stdout
    except (OSError, subprocess.CalledProcessError) as err:
        raise SystemExit(f"error: diatheke {WEB_MODULE}: cannot read the Bible text ({err}); "
                         "apt-get install diatheke sword-text-web") from None
    return verses(out)


def verses(plain: str) -> list[str]:
    """diatheke's plain output as one paragraph: no references ("Genesis 1:1: ", indented on
    most lines, which a reader would not say), headings or markup."""
    # Verses of poetry run over several lines; headings ("A Psalm by David.") and markup
    # recur hundreds of times: joined into one stream without them, split into sentences.
    lines = [VERSE_REFERENCE.sub("", line.strip()) for line in plain.splitlines()]
    counts = Counter(lines)
    return [" ".join(line for line in lines
                     if line and counts[line] <= 5 and line[0] not in "<(")]


def fortunes(folder: Path = FORTUNES) -> list[str]:
    """Each fortune cookie (entries end at a line holding only '%') as one paragraph."""
    if not folder.is_dir():
        raise SystemExit(f"error: {folder}: not found; apt-get install fortunes")
    entries = []
    for path in sorted(folder.iterdir()):
        if path.suffix in (".dat", ".u8") or not path.is_file():
            continue
        text = path.read_text(encoding="utf-8", errors="replace")
        entries += [e for e in (" ".join(x.split()) for x in text.split("\n%\n")) if e]
    return entries


def sentences(paragraphs: list[str], exclude: set[str]) -> list[str]:
    """Paragraphs -> normalised sentences of 3 words or more, minus the excluded ones."""
    out = []
    for paragraph in paragraphs:
        for sentence in SENTENCE_END.split(paragraph.translate(TYPOGRAPHY)):
            text = normalize_text(sentence)
            if len(text.split()) >= 3 and text not in exclude:
                out.append(text)
    return out


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", type=Path, required=True, help="folder for bible.txt, fortunes.txt")
    parser.add_argument("--exclude", type=Path, action="append", default=[],
                        help="manifest whose transcripts must not appear in the text")
    args = parser.parse_args(argv)
    exclude = {normalize_text(u.text) for path in args.exclude for u in read_manifest(path)}
    args.out.mkdir(parents=True, exist_ok=True)
    for name, paragraphs in (("bible", bible()), ("fortunes", fortunes())):
        lines = sentences(paragraphs, exclude)
        (args.out / f"{name}.txt").write_text("".join(f"{s}\n" for s in lines), encoding="utf-8")
        print(f"{args.out / name}.txt: {len(lines)} sentences, "
              f"{sum(len(s.split()) for s in lines)} words")
    return 0


if __name__ == "__main__":
    sys.exit(main())

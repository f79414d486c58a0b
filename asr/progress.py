"""Progress bars for the steps a user waits on: one place for how they look and when they show.

Bars go to stderr, so what a command prints on stdout (transcripts, JSON) pipes cleanly; they
appear only on a terminal (tqdm's `disable=None`), and only once a step has run for `DELAY`
seconds, so quick steps stay silent.
"""

import sys

from tqdm import tqdm

DELAY = 1.0  # seconds before a bar appears


def progress(iterable=None, desc: str | None = None, **options) -> tqdm:
    """A tqdm bar with this package's defaults; `options` override them (e.g. `disable`,
    `leave`, `unit`, `total`)."""
    settings = {"disable": None, "delay": DELAY, "leave": False, "dynamic_ncols": True,
                "desc": desc, **options}
    return tqdm(iterable, **settings)


def print_line(text: str) -> None:
    """`print(text)` on stdout, flushed, that leaves a bar on the terminal whole (tqdm clears
    it, prints, and draws it again below)."""
    tqdm.write(text, file=sys.stdout)
    sys.stdout.flush()

"""cathy: CMU ARCTIC prompts read by one speaker, split by prompt.

    python -m recipes.cathy.prepare --root ../shared/data/cathy --out data/cathy
    python -m recipes.cathy.prepare --out data/cathy      # downloads rhasspy/dataset-voice-cathy

Each utterance is `{arctic_id}_{take}.{flac,wav}` with its prompt in `{arctic_id}_{take}.txt`;
many prompts were read twice or more. Splitting by file would put one take of a sentence in
train and another in test, and the test WER would measure memory, not recognition: every take
of a prompt goes to the same split, chosen by the hash of its ARCTIC id
(`recipes.common.hash_split`).

Transcripts are written as the prompts spell them ("Philip Steels, etc."); the one normaliser,
`asr.text.normalize_text` (lower case, numbers spelt out, punctuation dropped), is applied by
the tokenizer and by scoring alike, so training, decoding and WER agree on every word. The
upstream 48 kHz stereo WAVs need no conversion: `asr.audio.load_audio` downmixes and
resamples (converting them once to 16 kHz mono FLAC makes training epochs faster).

`--rehearse MANIFEST [...]` also puts every utterance of other corpora into *train* (kind
"rehearsal"), e.g. synthetic sentences by other voices (`recipes.common.synthetic --text`).

Writes OUT/{train,dev,test}.jsonl; each line also has `prompt` (the ARCTIC id).
"""

import json
import re
from collections import defaultdict
from collections.abc import Iterable, Mapping
from pathlib import Path

import soundfile as sf

from asr.progress import progress
from recipes.common import (
    REHEARSAL,
    download,
    hash_split,
    manifest_line,
    percent_split_cli,
    rehearsal,
    write_manifests,
)

URL = "https://github.com/rhasspy/dataset-voice-cathy/archive/refs/heads/master.zip"
NAME = re.compile(r"(arctic_[ab]\d{4})_\d+")
DEV_PERCENT, TEST_PERCENT = 5.0, 10.0
SALT = "asr-recipes:"


def utterances(root: Path) -> list[tuple[Path, str, str]]:
    """(audio, prompt id, text) for every transcript under `root` that has its audio."""
    found = []
    for text_path in sorted(root.rglob("arctic_*.txt")):
        match = NAME.fullmatch(text_path.stem)
        audio = next((p for p in (text_path.with_suffix(".flac"), text_path.with_suffix(".wav"))
                      if p.is_file()), None)
        if not match or audio is None:
            continue
        try:
            text = text_path.read_text(encoding="utf-8").strip()
        except UnicodeDecodeError:
            raise SystemExit(f"error: {text_path}: not UTF-8 text") from None
        found.append((audio.resolve(), match[1], text))
    if not found:
        raise SystemExit(f"error: {root}: no ARCTIC utterances (arctic_*_N.txt with audio)")
    return found


def prepare(root: Path | None, out: Path, *, dev_percent: float = DEV_PERCENT,
            test_percent: float = TEST_PERCENT, rehearse: Iterable[Path] = ()) -> dict[str, Path]:
    """Write OUT/{train,dev,test}.jsonl, split by prompt; their paths by split. `rehearse`:
    manifests whose utterances join train."""
    out = Path(out)
    extra = rehearsal(rehearse)  # errors first
    if root is None:
        root = download(URL, out / "download", marker="LICENSE")
    entries: dict[str, list[dict]] = defaultdict(list)
    for audio, prompt, text in progress(utterances(Path(root)), "cathy", unit="utt"):
        split = hash_split(prompt, dev_percent, test_percent, SALT)
        entries[split].append(manifest_line(audio, text, sf.info(str(audio)).duration,
                                            prompt=prompt))
    entries["train"] += extra
    return write_manifests(out, entries)


def summary(paths: Mapping[str, Path]) -> str:
    lines = ["cathy:"]
    for split, path in paths.items():
        rows = [json.loads(line) for line in path.read_text().splitlines()]
        minutes = sum(r["duration"] for r in rows) / 60
        prompts = {r["prompt"] for r in rows if r.get("kind") != REHEARSAL}
        rehearsed = sum(r.get("kind") == REHEARSAL for r in rows)
        lines.append(f"  {split:5s}: {len(rows):5d} utterances, {minutes:5.1f} min, "
                     f"{len(prompts):4d} prompts"
                     + (f" ({rehearsed} utterances rehearsed)" if rehearsed else ""))
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> None:
    percent_split_cli(argv, __doc__.split("\n\n")[0], "data/cathy", prepare, summary, DEV_PERCENT,
                      TEST_PERCENT, rehearse=True)


if __name__ == "__main__":
    main()

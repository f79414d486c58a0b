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
from recipes.common.corpora import CATHY_DEV_PERCENT as DEV_PERCENT
from recipes.common.corpora import CATHY_TEST_PERCENT as TEST_PERCENT
from recipes.common.corpora import SALT, arctic_utterances

URL = "https://github.com/rhasspy/dataset-voice-cathy/archive/refs/heads/master.zip"


def prepare(root: Path | None, out: Path, *, dev_percent: float = DEV_PERCENT,
            test_percent: float = TEST_PERCENT, rehearse: Iterable[Path] = ()) -> dict[str, Path]:
    """Write OUT/{train,dev,test}.jsonl, split by prompt; their paths by split. `rehearse`:
    manifests whose utterances join train."""
    out = Path(out)
    extra = rehearsal(rehearse)  # errors first
    if root is None:
        root = download(URL, out / "download", marker="LICENSE")
    entries: dict[str, list[dict]] = defaultdict(list)
    for audio, prompt, text in progress(arctic_utterances(Path(root)), "cathy", unit="utt"):
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

"""Speech Commands v0.02: ten command words, other words, and silence, split by speaker.

    python -m recipes.speech_commands.prepare --root ../shared/data/speech_commands \
        --out data/speech_commands
    python -m recipes.speech_commands.prepare --out data/speech_commands   # downloads first

The layout is the official test archive's: `{word}/{speaker}_nohash_{n}.wav` for the ten
commands, `_unknown_/{word}_{speaker}_nohash_{n}.wav` for other words, `_silence_/{n}.wav`
for one-second clips of background noise. Transcripts:
- a command word is its folder name ("stop");
- an `_unknown_` word is the word itself (its file-name prefix, "marvin"): a recogniser that
  writes text should write what was said, and a command layer can ignore unknown words;
- `_silence_` is the empty text: the model must say nothing, and anything it says is scored
  as insertions.

Speakers are assigned to train/dev/test by the hash of their id, Speech Commands' own rule
(`recipes.common.hash_split`), salted with SALT: unsalted, every speaker of the official test
archive hashes into its test band, so the rule would put them all in one split. Silence clips,
which have no speaker, go by the hash of their file name.

Also writes OUT/noise.jsonl, the *training* silence clips, as the noise source of
`data.augment.noise` (dev and test noise is never mixed into training).
"""

import json
from collections import defaultdict
from collections.abc import Iterable, Mapping
from pathlib import Path

import soundfile as sf

from asr.progress import progress
from recipes.common import (
    REHEARSAL,
    SPLITS,
    download,
    hash_split,
    manifest_line,
    percent_split_cli,
    rehearsal,
    write_manifests,
)
from recipes.common.corpora import SALT, SILENCE, UNKNOWN, clips, describe

URL = "http://download.tensorflow.org/data/speech_commands_test_set_v0.02.tar.gz"
DEV_PERCENT, TEST_PERCENT = 10.0, 10.0


def prepare(root: Path | None, out: Path, *, dev_percent: float = DEV_PERCENT,
            test_percent: float = TEST_PERCENT, unknown: bool = True,
            silence: bool = True, rehearse: Iterable[Path] = ()) -> dict[str, Path]:
    """Write OUT/{train,dev,test,noise}.jsonl; their paths by name.

    `root` holds the word folders; None downloads the official test archive into
    `out/download`. `unknown`/`silence` leave those classes out when false. `rehearse`:
    manifests of other corpora (synthetic speech of these words) whose utterances join train.
    """
    out = Path(out)
    extra = rehearsal(rehearse)  # errors first
    if root is None:
        root = download(URL, out / "download", marker=SILENCE)
    entries: dict[str, list[dict]] = defaultdict(list)
    for path in progress(clips(Path(root), unknown, silence), "reading clips", unit="clip"):
        text, group = describe(path)
        split = hash_split(group, dev_percent, test_percent, SALT)
        kind = path.parent.name if path.parent.name in (UNKNOWN, SILENCE) else "command"
        entries[split].append(manifest_line(path.resolve(), text, sf.info(str(path)).duration,
                                            speaker=group, kind=kind))
    entries["noise"] = [e for e in entries["train"] if e["kind"] == SILENCE]
    entries["train"] += extra
    return write_manifests(out, entries, names=(*SPLITS, "noise"))


def summary(paths: Mapping[str, Path]) -> str:
    lines = ["Speech Commands:"]
    for split, path in paths.items():
        rows = [json.loads(line) for line in path.read_text().splitlines()]
        kinds = defaultdict(int)
        for row in rows:
            kinds[row["kind"]] += 1
        speakers = len({r["speaker"] for r in rows if r["kind"] not in (SILENCE, REHEARSAL)})
        counts = ", ".join(f"{kind} {n}" for kind, n in sorted(kinds.items()))
        lines.append(f"  {split:5s}: {len(rows):5d} clips ({counts}), {speakers} speakers")
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> None:
    percent_split_cli(argv, __doc__.split("\n\n")[0], "data/speech_commands", prepare, summary,
                      DEV_PERCENT, TEST_PERCENT, rehearse=True)


if __name__ == "__main__":
    main()

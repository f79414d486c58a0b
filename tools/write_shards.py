"""Pack a manifest's audio and transcripts into WebDataset shards for training at scale.

    python -m tools.write_shards --manifest data/librispeech/train.jsonl --out data/librispeech/shards
    python -m asr.train data=librispeech data.train_shards=data/librispeech/shards ...

Writes OUT/shard-000000.tar, ... (at most --max-count utterances each: the original audio
bytes and a JSON of text, duration and source path per utterance) and, last, the index
OUT/shards.json. See asr/shards.py for how training reads them.
"""

import argparse
from pathlib import Path

from asr.data import ManifestError
from asr.shards import write_shards


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--manifest", type=Path, required=True)
    parser.add_argument("--out", type=Path, required=True, help="folder for the shards")
    parser.add_argument("--max-count", type=int, default=1000, help="utterances per shard")
    args = parser.parse_args(argv)
    if args.max_count < 1:
        parser.error("--max-count must be at least 1")
    try:
        index = write_shards(args.manifest, args.out, args.max_count)
    except (ManifestError, OSError) as err:
        raise SystemExit(f"error: {err}") from None
    print(f"{index['utterances']} utterances ({index['seconds'] / 3600:.2f} h) in "
          f"{len(index['shards'])} shard(s) under {args.out}")


if __name__ == "__main__":
    main()

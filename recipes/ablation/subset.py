"""Write the first N lines of a manifest with absolute audio paths (so it can live elsewhere)."""

import argparse
import json
from pathlib import Path

from asr.checkpoint import save_text


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("manifest", type=Path)
    parser.add_argument("out", type=Path)
    parser.add_argument("--count", type=int, default=100)
    args = parser.parse_args()
    if not args.manifest.is_file():
        raise SystemExit(f"error: {args.manifest}: not found (build the corpus first)")
    lines = []
    for line in args.manifest.read_text().splitlines()[: args.count]:
        entry = json.loads(line)
        entry["audio_filepath"] = str((args.manifest.parent / entry["audio_filepath"]).resolve())
        lines.append(json.dumps(entry))
    save_text("\n".join(lines) + "\n", args.out)


if __name__ == "__main__":
    main()

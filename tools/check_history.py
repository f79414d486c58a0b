"""Flag what makes the history hard to read or heavy to clone, before it is pushed.

    python -m tools.check_history [RANGE]    # default: main..HEAD; exit 1 if anything is flagged

Two rules: a commit subject says what changed in at most 72 characters (figures go in the body
or in a RESULTS.md), and no file over 1 MB is committed outside asr/models (the shipped
weights, which change at most once per issue). A file counts if any commit of the range adds
it, or if it is tracked now: a large file added and removed again still weighs on every clone.
"""

import argparse
import subprocess
import sys
from pathlib import Path

MAX_SUBJECT = 72
MAX_BYTES = 1_000_000
EXEMPT = ("asr/models/",)


def _git(repo: Path, *args: str) -> str:
    return subprocess.run(["git", "-C", str(repo), *args], check=True, capture_output=True,
                          text=True).stdout


def long_subjects(repo: Path, revisions: str) -> list[str]:
    """`commit: subject (n characters)` for each commit of the range whose subject is too long."""
    found = []
    for line in _git(repo, "log", "--format=%h %s", revisions).splitlines():
        commit, _, subject = line.partition(" ")
        if len(subject) > MAX_SUBJECT:
            found.append(f"{commit}: {subject[:60]}... ({len(subject)} characters > {MAX_SUBJECT})")
    return found


def _sizes(repo: Path, objects: list[tuple[str, str]]) -> dict[str, int]:
    """Blob id -> size in bytes, read in one `git cat-file --batch-check`."""
    query = "".join(f"{blob}\n" for blob, _ in objects)
    out = subprocess.run(["git", "-C", str(repo), "cat-file", "--batch-check"], input=query,
                         check=True, capture_output=True, text=True).stdout
    sizes = {}
    for line in out.splitlines():
        fields = line.split()  # `id blob size`, or `id missing` for a submodule's commit
        if len(fields) == 3 and fields[1] == "blob":
            sizes[fields[0]] = int(fields[2])
    return sizes


def large_files(repo: Path, revisions: str) -> list[str]:
    """`path (n bytes)` for each file over the limit outside the exempt folders, added by a
    commit of the range or tracked at HEAD."""
    objects = []
    for line in _git(repo, "rev-list", "--objects", revisions).splitlines():
        blob, _, path = line.partition(" ")
        if path:
            objects.append((blob, path))
    for line in _git(repo, "ls-tree", "-r", "HEAD").splitlines():
        meta, _, path = line.partition("\t")
        objects.append((meta.split()[2], path))
    sizes = _sizes(repo, objects)
    found = {f"{path} ({sizes[blob]:,} bytes > {MAX_BYTES:,})" for blob, path in objects
             if sizes.get(blob, 0) > MAX_BYTES and not path.startswith(EXEMPT)}
    return sorted(found)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("range", nargs="?", default="main..HEAD",
                        help="the commits to check, as git log takes them (default: main..HEAD)")
    parser.add_argument("--repo", type=Path, default=Path("."))
    args = parser.parse_args(argv)
    try:
        found = long_subjects(args.repo, args.range) + large_files(args.repo, args.range)
    except subprocess.CalledProcessError as error:
        reason = (error.stderr or "").strip().splitlines() or [str(error)]
        print(f"error: git could not read {args.range!r} in {args.repo}: {reason[0]}",
              file=sys.stderr)
        return 2
    print("\n".join(found) if found else f"{args.range}: subjects and file sizes within the limits")
    return 1 if found else 0


if __name__ == "__main__":
    sys.exit(main())

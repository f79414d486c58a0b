"""Report modules, classes and functions over the size limits newcomers can read in one sitting.

The limits flag bloat, not length: a module that is one idea may be as long as the idea needs
(whisper's decoding.py is 826 lines), so they sit well above a typical module.

    python -m tools.check_sizes [DIR ...]    # default: CHECKED; exit 1 if any is over

Limits: a module 600 lines, a class 300, a function 80 (first to last line, docstring included).
One may be longer when its docstring says why, in a paragraph that starts with "Size:".
"""

import argparse
import ast
import sys
from pathlib import Path

LIMITS = {"module": 600, "class": 300, "function": 80}
REASON = "Size:"


CHECKED = ("asr", "recipes", "tools", "benchmarks", "tests/robustness")  # the code of the tree

def _explained(node: ast.AST) -> bool:
    doc = ast.get_docstring(node) or ""  # type: ignore[arg-type]
    return any(line.strip().startswith(REASON) for line in doc.splitlines())


def oversized(path: Path) -> list[str]:
    """One line per part of `path` over its limit without a reason: `path:line: kind name (n lines)`."""
    source = path.read_text(encoding="utf-8")
    tree = ast.parse(source, filename=str(path))
    found = []
    lines = len(source.splitlines())
    if lines > LIMITS["module"] and not _explained(tree):
        found.append(f"{path}:1: module ({lines} lines > {LIMITS['module']})")
    for node in ast.walk(tree):
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
            kind = "class" if isinstance(node, ast.ClassDef) else "function"
            length = node.end_lineno - node.lineno + 1
            if length > LIMITS[kind] and not _explained(node):
                found.append(f"{path}:{node.lineno}: {kind} {node.name} "
                             f"({length} lines > {LIMITS[kind]})")
    return found


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("dirs", nargs="*", default=list(CHECKED))
    args = parser.parse_args(argv)
    found = [line for d in args.dirs for path in sorted(Path(d).rglob("*.py"))
             for line in oversized(path)]
    print("\n".join(found) if found else "every module, class and function within its limit")
    return 1 if found else 0


if __name__ == "__main__":
    sys.exit(main())

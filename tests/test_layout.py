"""The library's layout: apps depend on the toolkit, never the other way round.

`asr/` is the toolkit (audio, features, model, decoding, train, transcribe); the voice
assistant in `asr/assistant/` is an app built on it. No module of `asr/` outside
`asr/assistant/` imports `asr.assistant`, and no module of `asr/` imports the recipes or the
tools of the checkout (they are not shipped in the wheel).
"""

import ast
from pathlib import Path

import pytest

from helpers import ROOT

pytestmark = pytest.mark.tier("fast")

APP = "asr.assistant"
CHECKOUT_ONLY = ("recipes", "tools", "benchmarks")


def _within(name: str, package: str) -> bool:
    return name == package or name.startswith(package + ".")


def _imports(node: ast.AST, package: str) -> list[tuple[str, str]]:
    """(absolute module name, statement) for each name an import brings in; `from a import b`
    counts as a.b (b may be a module), relative imports are resolved against `package`."""
    if isinstance(node, ast.Import):
        return [(alias.name, f"import {alias.name}") for alias in node.names]
    if not isinstance(node, ast.ImportFrom):
        return []
    base = node.module or ""
    if node.level:
        parts = package.split(".")
        base = ".".join(parts[:len(parts) - node.level + 1] + ([base] if base else []))
    written = "." * node.level + (node.module or "")
    return [(f"{base}.{alias.name}", f"from {written} import {alias.name}") for alias in node.names]


def breaches(source: str, module: str, package: str) -> list[str]:
    """`module:line: statement` for each import in `source` that breaks the layout."""
    found = []
    for node in ast.walk(ast.parse(source)):
        for name, statement in _imports(node, package):
            app = _within(name, APP) and not _within(module, APP)
            if app or any(_within(name, top) for top in CHECKOUT_ONLY):
                found.append(f"{module}:{node.lineno}: {statement}")
    return found


def module_and_package(path: Path) -> tuple[str, str]:
    parts = path.relative_to(ROOT).with_suffix("").parts
    if parts[-1] == "__init__":
        return ".".join(parts[:-1]), ".".join(parts[:-1])
    return ".".join(parts), ".".join(parts[:-1])


def test_the_toolkit_never_imports_the_assistant_recipes_or_tools():
    paths = sorted((ROOT / "asr").rglob("*.py"))
    assert ROOT / "asr" / "assistant" / "demo.py" in paths
    found = [line for path in paths
             for line in breaches(path.read_text(encoding="utf-8"), *module_and_package(path))]
    assert not found, "modules of asr/ importing the app or the checkout:\n" + "\n".join(found)


def test_a_breach_is_named_with_its_module_and_import():
    """The check itself: each way of importing the app or the checkout is caught, and the
    assistant importing the toolkit (or itself) is not."""
    source = ("import recipes.common\nfrom asr import assistant\n"
              "from asr.assistant.intents import IntentParser\nfrom tools import bench_common\n"
              "from .assistant import demo\nfrom asr.audio import load_audio\nimport torch\n"
              "from asr.grammar import Grammar\n")
    assert breaches(source, "asr.transcriber", "asr") == [
        "asr.transcriber:1: import recipes.common",
        "asr.transcriber:2: from asr import assistant",
        "asr.transcriber:3: from asr.assistant.intents import IntentParser",
        "asr.transcriber:4: from tools import bench_common",
        "asr.transcriber:5: from .assistant import demo",
    ]
    assert breaches("from asr.grammar import Grammar\nfrom . import intents\n"
                    "from asr.assistant.actions import ACTIONS\n"
                    "from .. import vad\n", "asr.assistant.demo", "asr.assistant") == []
    assert module_and_package(ROOT / "asr" / "assistant" / "__init__.py") == ("asr.assistant",) * 2
    assert module_and_package(ROOT / "asr" / "vad.py") == ("asr.vad", "asr")


def import_graph() -> dict[str, set[str]]:
    """Each module of asr/ -> the modules of asr/ it imports anywhere (type-hint and deferred
    imports included); `from a import b` counts as a.b where b is a module, else a."""
    modules = {module_and_package(p)[0]: p for p in sorted((ROOT / "asr").rglob("*.py"))}
    graph = {}
    for module, path in modules.items():
        graph[module] = set()
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            for name, _ in _imports(node, module_and_package(path)[1]):
                while name and name not in modules:
                    name = name.rpartition(".")[0]
                if name and name != module:
                    graph[module].add(name)
    return graph


def circles(graph: dict[str, set[str]]) -> list[list[str]]:
    """The strongly connected parts of more than one module (Tarjan's algorithm)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    found = []

    def visit(v: str) -> None:
        index[v] = low[v] = len(index)
        stack.append(v)
        for w in graph[v]:
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in stack:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            part = stack[stack.index(v):]
            del stack[stack.index(v):]
            if len(part) > 1:
                found.append(sorted(part))

    for v in graph:
        if v not in index:
            visit(v)
    return found


def test_the_toolkit_has_no_import_circles():
    graph = import_graph()
    assert "asr.decoding" in graph["asr.transcriber"]
    assert circles(graph) == []


def test_an_import_circle_is_found():
    assert circles({"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}}) == [["a", "b", "c"]]


def test_recipes_share_only_through_recipes_common():
    found = []
    for path in sorted((ROOT / "recipes").rglob("*.py")):
        module, package = module_and_package(path)
        own = ".".join(module.split(".")[:2])  # recipes.<name>, or recipes.common
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            for name, statement in _imports(node, package):
                allowed = (_within(name, "recipes.common") or _within(name, own)
                           or not _within(name, "recipes"))
                if not allowed:
                    found.append(f"{module}:{node.lineno}: {statement}")
    assert not found, "recipes importing another recipe:\n" + "\n".join(found)


def declared_tier(source: str) -> str | None:
    """The tier a test module's `pytestmark` declares (`pytest.mark.tier("fast")`, alone or in
    a list), or None where it declares none."""
    for node in ast.parse(source).body:
        if not (isinstance(node, ast.Assign)
                and any(getattr(target, "id", None) == "pytestmark" for target in node.targets)):
            continue
        for call in ast.walk(node.value):
            if (isinstance(call, ast.Call) and isinstance(call.func, ast.Attribute)
                    and call.func.attr == "tier" and len(call.args) == 1
                    and isinstance(call.args[0], ast.Constant)):
                return call.args[0].value
    return None


def test_every_test_module_declares_its_tier():
    from conftest import TIERS

    paths = sorted((ROOT / "tests").rglob("test_*.py"))
    assert ROOT / "tests" / "robustness" / "test_corpus.py" in paths
    found = [f"{path.relative_to(ROOT)}: {tier!r}" for path in paths
             if (tier := declared_tier(path.read_text(encoding="utf-8"))) not in TIERS]
    assert not found, ('test modules without pytestmark = pytest.mark.tier("fast") or "slow":\n'
                       + "\n".join(found))


def test_a_tier_is_read_from_pytestmark_alone_or_in_a_list():
    assert declared_tier('pytestmark = pytest.mark.tier("slow")\n') == "slow"
    assert declared_tier('pytestmark = [pytest.mark.data, pytest.mark.tier("fast")]\n') == "fast"
    assert declared_tier('x = pytest.mark.tier("fast")\n') is None
    assert declared_tier("pytestmark = pytest.mark.data\n") is None

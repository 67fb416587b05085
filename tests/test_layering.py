"""Imports flow one way (README.md, "Layout"): client → remoting, codec; broker → remoting,
store, codec; store → codec.

``codec`` (a message's bytes, shared by store, client and broker) and ``remoting`` import
nothing else of ours. Checked on the AST of every module so
a lazy import inside a function counts too. Between modules, imports form no cycle (an
import under ``TYPE_CHECKING`` counts: a reader follows it all the same).
"""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
ALLOWED = {
    "codec": {"codec"},
    "remoting": {"remoting"},
    "store": {"store", "codec"},
    "client": {"client", "remoting", "codec"},
    "broker": {"broker", "remoting", "store", "codec"},
}


def _imported_packages(path: Path) -> set[str]:
    tree = ast.parse(path.read_text(), filename=str(path))
    found: set[str] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            found.update(alias.name.split(".")[0] for alias in node.names)
        elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            found.add(node.module.split(".")[0])
    return found & set(ALLOWED)


@pytest.mark.parametrize("package", sorted(ALLOWED))
def test_package_imports_only_what_the_module_map_allows(package: str) -> None:
    offenders = []
    for path in sorted((ROOT / package).rglob("*.py")):
        bad = _imported_packages(path) - ALLOWED[package]
        if bad:
            offenders.append(f"{path.relative_to(ROOT)} imports {sorted(bad)}")
    assert not offenders, "\n".join(offenders)


def test_every_module_has_a_docstring() -> None:
    missing = [
        str(path.relative_to(ROOT))
        for package in ALLOWED
        for path in sorted((ROOT / package).rglob("*.py"))
        if path.stat().st_size and ast.get_docstring(ast.parse(path.read_text())) is None
    ]
    assert not missing, f"modules without a docstring: {missing}"


def _module_name(path: Path) -> str:
    parts = list(path.relative_to(ROOT).with_suffix("").parts)
    if parts[-1] == "__init__":
        parts.pop()
    return ".".join(parts)


def _module_graph() -> dict[str, set[str]]:
    """Module → the modules of ours it imports (``from a import b`` names the module
    ``a.b`` where there is one, else ``a``)."""
    paths = {_module_name(p): p for pkg in ALLOWED for p in sorted((ROOT / pkg).rglob("*.py"))}
    graph: dict[str, set[str]] = {}
    for name, path in paths.items():
        targets: set[str] = set()
        for node in ast.walk(ast.parse(path.read_text(), filename=str(path))):
            if isinstance(node, ast.Import):
                targets.update(alias.name for alias in node.names)
            elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
                for alias in node.names:
                    full = f"{node.module}.{alias.name}"
                    targets.add(full if full in paths else node.module)
        graph[name] = {t for t in targets if t in paths and t != name}
    return graph


def _cycles(graph: dict[str, set[str]]) -> list[set[str]]:
    """The strongly connected components of more than one module (Tarjan, iterative)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    found: list[set[str]] = []
    for root in sorted(graph):
        if root in index:
            continue
        work = [(root, iter(sorted(graph[root])))]
        index[root] = low[root] = len(index)
        stack.append(root)
        on_stack.add(root)
        while work:
            node, edges = work[-1]
            nxt = next(edges, None)
            if nxt is not None:
                if nxt not in index:
                    index[nxt] = low[nxt] = len(index)
                    stack.append(nxt)
                    on_stack.add(nxt)
                    work.append((nxt, iter(sorted(graph[nxt]))))
                elif nxt in on_stack:
                    low[node] = min(low[node], index[nxt])
                continue
            work.pop()
            if work:
                low[work[-1][0]] = min(low[work[-1][0]], low[node])
            if low[node] == index[node]:
                component = set()
                while True:
                    member = stack.pop()
                    on_stack.discard(member)
                    component.add(member)
                    if member == node:
                        break
                if len(component) > 1:
                    found.append(component)
    return found


def test_no_import_cycles_between_modules() -> None:
    cycles = [sorted(c) for c in _cycles(_module_graph())]
    assert not cycles, f"modules that import each other: {cycles}"


def test_the_cycle_finder_finds_cycles() -> None:
    graph = {"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}, "e": {"e"}, "f": set()}
    assert _cycles(graph) == [{"a", "b", "c"}]
    assert _cycles({"x": {"y"}, "y": set()}) == []


def _readme_layout() -> str:
    text = (ROOT / "README.md").read_text()
    section = text.split("## Layout\n", 1)[1].split("\n## ", 1)[0]
    return section.split("```\n", 2)[1]


def test_the_readme_layout_names_only_files_that_exist_and_every_package() -> None:
    """README's Layout is the map a newcomer reads first: every module it names exists where
    it says, and every package and subpackage of ours is on it."""
    block = _readme_layout()
    missing: list[str] = []
    top = sub = ""
    for line in block.splitlines():
        indent = len(line) - len(line.lstrip())
        first = line.split()[0] if line.strip() else ""
        if first.endswith("/") and indent == 0:
            top, sub = first.rstrip("/"), ""
        elif first.endswith("/") and indent == 2:
            sub = first.rstrip("/")
        for word in line.replace(",", " ").replace("(", " ").replace(")", " ").split():
            if word.endswith(".py") and "*" not in word:
                places = [ROOT / top / sub / word, ROOT / top / word, ROOT / word]
                if not any(p.is_file() for p in places):
                    missing.append(f"{top}/{sub}/{word}".replace("//", "/"))
    assert not missing, f"README's Layout names modules that do not exist: {missing}"
    named = {w.rstrip("/") for w in block.split() if w.endswith("/")}
    packages = {
        p.parent.name
        for pkg in ALLOWED
        for p in (ROOT / pkg).rglob("__init__.py")
        if "__pycache__" not in p.parts
    }
    assert packages - named == set(), f"packages missing from README's Layout: {packages - named}"

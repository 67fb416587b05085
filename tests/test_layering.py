"""Imports flow one way (STYLE.md): client → remoting, codec; broker → remoting, store,
codec; store → codec.

``codec`` (a message's bytes, shared by store, client and broker) and ``remoting`` import
nothing else of ours. Checked on the AST of every module so
a lazy import inside a function counts too.
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

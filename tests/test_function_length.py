"""No function over 60 lines without a reason (issue 21, M13 item 4).

Every function and method in codec, remoting, store, broker and client is at most
``MAX_LINES`` long, counted from its ``def`` line to its last line, docstring included
(decorators not). A longer one says why in a comment line of its own body starting
``# Long because`` (a hot loop that a call per step would make measurably slower, say).
A nested function is measured on its own, and its comment does not excuse the function
around it. Checked on the AST and the source lines of every module.
"""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
PACKAGES = ("codec", "remoting", "store", "broker", "client")
MAX_LINES = 60
REASON = "# Long because"

_FUNCTIONS = (ast.FunctionDef, ast.AsyncFunctionDef)
_SCOPES = (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)


def long_functions(source: str, module: str) -> dict[str, int]:
    """``module:qualified.name`` -> length, for every function of ``source`` longer than
    MAX_LINES whose own body has no comment line starting with REASON."""
    lines = source.splitlines()
    found: dict[str, int] = {}

    def visit(node: ast.AST, prefix: str) -> None:
        for child in ast.iter_child_nodes(node):
            if isinstance(child, _SCOPES):
                name = f"{prefix}{child.name}"
                if isinstance(child, _FUNCTIONS):
                    length = _last_line(child) - child.lineno + 1
                    if length > MAX_LINES and not _gives_reason(child, lines):
                        found[f"{module}:{name}"] = length
                visit(child, name + ".")
            else:
                visit(child, prefix)

    visit(ast.parse(source), "")
    return found


def _last_line(node: ast.stmt) -> int:
    assert node.end_lineno is not None  # ast.parse sets it on every statement
    return node.end_lineno


def _gives_reason(func: ast.FunctionDef | ast.AsyncFunctionDef, lines: list[str]) -> bool:
    """Whether a line of ``func``'s body, outside the functions and classes nested in it,
    is a comment starting with REASON."""
    nested: set[int] = set()
    for node in ast.walk(func):
        if node is not func and isinstance(node, _SCOPES):
            nested.update(range(node.lineno, _last_line(node) + 1))
    # from the line after ``def``: a comment before the first statement is in the body too
    body = range(func.lineno + 1, _last_line(func) + 1)
    return any(lines[n - 1].lstrip().startswith(REASON) for n in body if n not in nested)


def _module_name(path: Path) -> str:
    parts = list(path.relative_to(ROOT).with_suffix("").parts)
    if parts[-1] == "__init__":
        parts.pop()
    return ".".join(parts)


def _all_long_functions() -> dict[str, int]:
    found: dict[str, int] = {}
    for package in PACKAGES:
        paths = sorted((ROOT / package).rglob("*.py"))
        assert paths, f"no module under {package}/: nothing would be checked"
        for path in paths:
            found.update(long_functions(path.read_text(), _module_name(path)))
    return found


def test_no_function_is_long_without_a_reason() -> None:
    offenders = _all_long_functions()
    assert not offenders, (
        f"functions over {MAX_LINES} lines with no '{REASON} ...' comment in their body "
        "(split them into named steps, or say why they must be long): "
        + "; ".join(f"{name} ({n} lines)" for name, n in sorted(offenders.items()))
    )


# ---------------------------------------------------------------------- the checker itself


def _function(name: str, body_lines: int, *, indent: str = "", comment: str = "") -> str:
    """A function of exactly ``1 + body_lines`` lines (``comment`` replaces the first)."""
    body = [f"{indent}    x = {i}" for i in range(body_lines)]
    if comment:
        body[0] = f"{indent}    {comment}"
    return "\n".join([f"{indent}def {name}() -> None:", *body]) + "\n"


def test_the_checker_finds_a_long_function_and_reports_its_length() -> None:
    source = _function("short", MAX_LINES - 1) + _function("long", MAX_LINES)
    assert long_functions(source, "pkg.mod") == {"pkg.mod:long": MAX_LINES + 1}


def test_the_checker_accepts_a_reason_only_in_the_functions_own_body() -> None:
    because = f"{REASON} it is one pass over the records."
    source = (
        _function("explained", MAX_LINES + 5, comment=because)
        + _function("later", MAX_LINES + 5)
        + f"{because}\n"  # after a function, not in it: excuses nothing
        + "def outer() -> None:\n"
        + _function("inner", 3, indent="    ", comment=because)
        + "".join(f"    y = {i}\n" for i in range(MAX_LINES))
    )
    assert long_functions(source, "m") == {"m:later": MAX_LINES + 6, "m:outer": MAX_LINES + 5}


def test_the_checker_names_methods_and_nested_functions_by_their_path(tmp_path: Path) -> None:
    path = tmp_path / "sample.py"
    source = "class Service:\n" + _function("run", MAX_LINES + 1, indent="    ")
    source += "    async def poll(self) -> None:\n"
    source += _function("step", MAX_LINES + 1, indent="        ")
    path.write_text(source)
    found = long_functions(path.read_text(), "sample")
    assert found == {
        "sample:Service.run": MAX_LINES + 2,
        "sample:Service.poll": MAX_LINES + 3,
        "sample:Service.poll.step": MAX_LINES + 2,
    }


@pytest.mark.parametrize("lines", [MAX_LINES, MAX_LINES + 1])
def test_the_limit_counts_the_def_line_and_the_docstring(lines: int) -> None:
    doc = '    """One line of documentation."""\n'
    source = (
        "@staticmethod\ndef f() -> None:\n"
        + doc
        + "".join(f"    x = {i}\n" for i in range(lines - 2))
    )
    assert long_functions(source, "m") == ({} if lines <= MAX_LINES else {"m:f": lines})

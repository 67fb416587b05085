"""The console's templates keep within its Content-Security-Policy (``script-src 'self'``,
``style-src 'self'``): no inline script, event handler, style attribute or ``javascript:``
URL, which the browser would refuse silently (a button that does nothing). And every
template parses, so a typo fails here rather than on the page that uses it."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from client.dashboard.app import template_env

TEMPLATES = Path(__file__).resolve().parents[2] / "client" / "dashboard" / "templates"
FORBIDDEN = {
    "an inline script": re.compile(r"<script(?![^>]*\bsrc=)[^>]*>", re.I),
    "an event handler attribute": re.compile(r"\son[a-z]+\s*=", re.I),
    "a style attribute": re.compile(r"\sstyle\s*=", re.I),
    "a javascript: URL": re.compile(r"javascript:", re.I),
    "an hx-on attribute (needs eval)": re.compile(r"\shx-on", re.I),
}


def _templates() -> list[Path]:
    return sorted(TEMPLATES.glob("*.html"))


@pytest.mark.parametrize("path", _templates(), ids=lambda p: p.name)
def test_a_template_holds_nothing_the_csp_refuses(path: Path) -> None:
    text = path.read_text()
    found = [what for what, pattern in FORBIDDEN.items() if pattern.search(text)]
    assert not found, f"{path.name} has {', '.join(found)}"


@pytest.mark.parametrize("path", _templates(), ids=lambda p: p.name)
def test_a_template_parses(path: Path) -> None:
    template_env().get_template(path.name)


def test_the_patterns_find_what_they_look_for() -> None:
    bad = '<script>x()</script><a onclick="f()" style="color:red" href="javascript:x">'
    assert all(p.search(bad) for p in FORBIDDEN.values() if "hx-on" not in p.pattern)
    assert not FORBIDDEN["an inline script"].search('<script src="/static/console.js"></script>')

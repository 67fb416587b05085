"""Shared helpers for the codec tests: both implementations of a hot function, hosts, bodies.

The codec's hot functions exist twice (``codec._ext``): the pure-Python reference, importable
as ``codec.<module>.<name>_py`` (or as ``codec.<module>.<name>`` while it has no compiled
twin), and a typed Cython one in one of the extension modules ``codec._c*``, when built.
``implementations`` finds both at collection time, so a test parametrized over it runs once
per implementation that exists: ``pure`` always, ``compiled`` only where an extension module
imports and defines the function. ``AEROLITE_NO_EXTENSIONS=1`` leaves only ``pure``, as it
leaves the codec pure.

Test modules import them: ``from tests.codec.conftest import …``; the hosts, the properties
text and the batch bodies they build inputs from (by hand, from docs/protocol.md §9-§10,
independently of the code under test) are tests/support.py's, shared with the store tests.
"""

from __future__ import annotations

import dataclasses
import importlib
import inspect
from collections.abc import Callable
from types import ModuleType
from typing import Any, cast

import pytest

from codec import Host, _ext
from tests.support import BORN_HOST, BORN_HOST_V6, STORE_HOST, STORE_HOST_V6

PURE = "pure"
COMPILED = "compiled"


def _extension_modules() -> list[ModuleType]:
    """The codec's extension modules that import here (none with AEROLITE_NO_EXTENSIONS)."""
    if _ext.DISABLED:
        return []
    modules = []
    for name in _ext.EXTENSIONS:
        try:
            modules.append(importlib.import_module(f"codec.{name}"))
        except ImportError:
            continue
    return modules


def _is_python_function(fn: Callable[..., Any]) -> bool:
    """Whether ``fn`` is plain Python code (an ``lru_cache`` wrapper looked through)."""
    return inspect.isfunction(inspect.unwrap(fn))


def pure(module_name: str, name: str) -> Callable[..., Any]:
    """The pure-Python ``codec.<module_name>.<name>``: its ``<name>_py`` where the public
    name may be bound to a compiled twin, else the public name itself.

    Raises:
        TypeError: the public name is compiled code and no ``<name>_py`` is left beside it.
    """
    module = importlib.import_module(f"codec.{module_name}")
    fn = cast("Callable[..., Any]", getattr(module, f"{name}_py", None) or getattr(module, name))
    if not _is_python_function(fn):
        raise TypeError(f"codec.{module_name}.{name} is compiled and has no {name}_py beside it")
    return fn


def compiled(name: str) -> Callable[..., Any] | None:
    """The compiled ``name`` from whichever ``codec._c*`` module defines it, or None (not
    built, not (yet) compiled, or AEROLITE_NO_EXTENSIONS set). A pure function an extension
    module merely imports does not count."""
    for module in _extension_modules():
        fn = getattr(module, name, None)
        if callable(fn) and not _is_python_function(fn):
            return cast("Callable[..., Any]", fn)
    return None


def implementations(module_name: str, name: str) -> list[tuple[str, Callable[..., Any]]]:
    """``[("pure", fn), ("compiled", fn)]`` for ``codec.<module_name>.<name>``, the second
    only when a compiled version exists."""
    found = [(PURE, pure(module_name, name))]
    fast = compiled(name)
    if fast is not None:
        found.append((COMPILED, fast))
    return found


def over(module_name: str, name: str, argname: str = "impl") -> pytest.MarkDecorator:
    """``pytest.mark.parametrize`` of ``argname`` over ``implementations(module_name, name)``,
    with ids ``pure`` / ``compiled`` (``<name>-pure`` when ``argname`` is not ``impl``, so
    two such parametrizations of one test read apart)."""
    found = implementations(module_name, name)
    prefix = "" if argname == "impl" else f"{name}-"
    return pytest.mark.parametrize(
        argname, [fn for _label, fn in found], ids=[f"{prefix}{label}" for label, _fn in found]
    )


# ---------------------------------------------------------------------------- record views


def _view_class(label: str, attach: Callable[[type[Any]], None]) -> type[Any]:
    from codec.view import MessageExt

    cls = type(f"{label.capitalize()}MessageExt", (MessageExt,), {})
    attach(cls)
    return cls


def record_views() -> list[tuple[str, Callable[..., list[Any]], type[Any]]]:
    """``[(label, decode_records, view class)]`` for each implementation of
    ``codec.view.decode_records``: the class a ``MessageExt`` subclass whose lazy fields
    are the same implementation's (``attach_lazy_fields``; the pure one where only
    ``decode_records`` is compiled)."""
    attach = dict(implementations("view", "attach_lazy_fields"))
    return [
        (label, decode, _view_class(label, attach.get(label, attach[PURE])))
        for label, decode in implementations("view", "decode_records")
    ]


def over_record_views() -> pytest.MarkDecorator:
    """``pytest.mark.parametrize`` of ``decode_records, view_class`` over ``record_views()``."""
    found = record_views()
    return pytest.mark.parametrize(
        ("decode_records", "view_class"),
        [(decode, cls) for _label, decode, cls in found],
        ids=[label for label, _decode, _cls in found],
    )


def view_fields(view: Any) -> dict[str, Any]:
    """A record view's fields by name (each lazy one decoded on the way)."""
    return {f.name: getattr(view, f.name) for f in dataclasses.fields(view)}


# ---------------------------------------------------------------------------------- hosts

# (born host, store host) in the four combinations of IPv4 and IPv6
HOST_PAIRS: list[tuple[Host, Host]] = [
    (BORN_HOST, STORE_HOST),
    (BORN_HOST_V6, STORE_HOST),
    (BORN_HOST, STORE_HOST_V6),
    (BORN_HOST_V6, STORE_HOST_V6),
]
HOST_PAIR_IDS = ["ipv4", "born-v6", "store-v6", "ipv6"]

"""Which implementation of the codec's hot functions runs: compiled or pure Python.

The msgpack / aiokafka arrangement: each hot function has a pure-Python implementation in
its module (``<name>_py``, always there, the reference) and may have a typed Cython one
in an extension module beside it (``codec/_c*.pyx``), built by ``pip install`` when a C
compiler is present. A module binds the public name to the compiled function when its
extension imports; ``AEROLITE_NO_EXTENSIONS=1`` keeps every name pure.
"""

from __future__ import annotations

import importlib
import os

# Set (to anything but "" or "0") to run the pure-Python codec even where it was compiled.
DISABLED = os.environ.get("AEROLITE_NO_EXTENSIONS", "") not in ("", "0")

# The extension modules the build makes (setup.py compiles codec/<name>.pyx).
EXTENSIONS = ("_cbatch", "_chash", "_cprops", "_cunits", "_cview")


def status() -> str:
    """``compiled`` when every extension module imports, else ``pure-python (<why>)``:
    what ``aerolite --version`` and the broker's start line report as ``speedups``."""
    if DISABLED:
        return "pure-python (AEROLITE_NO_EXTENSIONS=1)"
    missing = []
    for name in EXTENSIONS:
        try:
            importlib.import_module(f"codec.{name}")
        except ImportError:
            missing.append(name)
    if not missing:
        return "compiled"
    if len(missing) == len(EXTENSIONS):
        return "pure-python (extensions not built)"
    return f"partly compiled ({', '.join(missing)} not built)"

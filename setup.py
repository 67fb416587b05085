"""Build the codec's optional compiled speedups (typed Cython, ``codec/_c*.pyx``).

Everything else about the package is in pyproject.toml. The extensions are optional, the
msgpack / aiokafka way: without Cython, a C compiler or Python's headers the build still
succeeds, says once that it fell back, and Aerolite runs the pure-Python codec.
``AEROLITE_NO_EXTENSIONS=1`` at build time skips them too.
"""

from __future__ import annotations

import os
import sys
from pathlib import Path

from setuptools import Extension, setup
from setuptools.command.build_ext import build_ext

HERE = Path(__file__).resolve().parent
NO_EXTENSIONS = os.environ.get("AEROLITE_NO_EXTENSIONS", "") not in ("", "0")


def _say(text: str) -> None:
    # stderr: pip shows a build backend's stderr with -v; make install prints the outcome too
    print(f"aerolite: {text}", file=sys.stderr)


class OptionalBuildExt(build_ext):
    """build_ext that turns a failed compile into the pure-Python fallback."""

    def run(self) -> None:
        try:
            super().run()
        except Exception as exc:
            _say(f"compiled speedups not built ({exc}); the pure-Python codec will run")

    def build_extension(self, ext: Extension) -> None:
        try:
            super().build_extension(ext)
        except Exception as exc:
            _say(f"{ext.name} not built ({exc}); its pure-Python functions will run")


def _extensions() -> list[Extension]:
    if NO_EXTENSIONS:
        _say("AEROLITE_NO_EXTENSIONS is set: building without the compiled speedups")
        return []
    sources = sorted(str(p.relative_to(HERE)) for p in (HERE / "codec").glob("_c*.pyx"))
    if not sources:
        return []
    try:
        from Cython.Build import cythonize  # noqa: PLC0415 - optional: absent means pure Python
    except ImportError:
        _say("Cython is not installed: building without the compiled speedups")
        return []
    extensions = [Extension(f"codec.{Path(src).stem}", [src]) for src in sources]
    try:
        return list(cythonize(extensions, compiler_directives={"language_level": "3"}, quiet=True))
    except Exception as exc:
        _say(f"Cython could not translate the speedups ({exc}); pure Python will run")
        return []


setup(ext_modules=_extensions(), cmdclass={"build_ext": OptionalBuildExt})

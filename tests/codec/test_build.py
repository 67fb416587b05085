"""The codec's compiled speedups: built by an install, optional, and switchable.

The msgpack / aiokafka arrangement (codec/_ext.py): ``pip install`` builds
``codec/_c*.pyx`` with Cython where a C compiler is present, and succeeds without one,
saying so; ``AEROLITE_NO_EXTENSIONS=1`` runs the pure-Python functions even where the
compiled ones exist. ``make test`` sets ``AEROLITE_REQUIRE_SPEEDUPS=1``: the run that is
meant to exercise the compiled codec fails here if it would silently run pure Python.
"""

from __future__ import annotations

import importlib
import os
import shutil
import subprocess
import sys
import zipfile
from pathlib import Path

import pytest

import codec
from codec import _ext

# No event loop or codec choice changes the tooling: make test-asyncio leaves it out.
pytestmark = pytest.mark.once

ROOT = Path(__file__).resolve().parents[2]
MODULES = ("batch", "hashing", "message", "msgid", "properties", "record", "units", "view")


def _pure_twins() -> list[tuple[str, str]]:
    """(module, name) of every function that has a pure ``<name>_py`` reference."""
    out = []
    for mod_name in MODULES:
        try:
            mod = importlib.import_module(f"codec.{mod_name}")
        except ImportError:
            continue
        out += [(mod_name, attr[:-3]) for attr in vars(mod) if attr.endswith("_py")]
    return out


@pytest.mark.skipif(
    not os.environ.get("AEROLITE_REQUIRE_SPEEDUPS"), reason="only where make test asks for them"
)
def test_the_speedups_are_built_and_bound() -> None:
    assert not _ext.DISABLED, "make test runs with the speedups: unset AEROLITE_NO_EXTENSIONS"
    for name in _ext.EXTENSIONS:
        importlib.import_module(f"codec.{name}")  # raises if make install did not build it
    assert codec.SPEEDUPS == "compiled"
    twins = _pure_twins()
    assert twins, "no function has a compiled twin"
    for mod_name, name in twins:
        mod = importlib.import_module(f"codec.{mod_name}")
        assert getattr(mod, name) is not getattr(mod, f"{name}_py"), f"{mod_name}.{name}"


def test_no_extensions_binds_every_name_to_pure_python() -> None:
    script = (
        "import importlib, codec\n"
        f"for m in {MODULES!r}:\n"
        "    try:\n"
        "        mod = importlib.import_module('codec.' + m)\n"
        "    except ImportError:\n"
        "        continue\n"
        "    for a in list(vars(mod)):\n"
        "        if a.endswith('_py'):\n"
        "            assert getattr(mod, a[:-3]) is getattr(mod, a), (m, a)\n"
        "print(codec.SPEEDUPS)\n"
    )
    env = {**os.environ, "AEROLITE_NO_EXTENSIONS": "1"}
    out = subprocess.run(
        [sys.executable, "-c", script],
        cwd=ROOT,
        env=env,
        capture_output=True,
        text=True,
        check=False,
    )
    assert out.returncode == 0, out.stderr
    assert out.stdout.strip() == "pure-python (AEROLITE_NO_EXTENSIONS=1)"


def test_version_names_the_speedups() -> None:
    out = subprocess.run(
        [sys.executable, "-m", "broker", "--version"],
        cwd=ROOT,
        capture_output=True,
        text=True,
        check=False,
        timeout=60,
    )
    assert out.returncode == 0, out.stderr
    assert out.stdout.startswith("aerolite ")
    assert f"speedups: {codec.SPEEDUPS}" in out.stdout


def _source_copy(dest: Path) -> Path:
    """The project's sources without build products, as a fresh clone has them."""
    dest.mkdir(parents=True)
    ignore = shutil.ignore_patterns("__pycache__", "*.so", "*.c", "*.html", "*.egg-info")
    for name in ("pyproject.toml", "setup.py", "MANIFEST.in", "README.md", "pyspark_aerolite.py"):
        shutil.copy2(ROOT / name, dest / name)
    for package in ("broker", "remoting", "store", "client", "codec"):
        shutil.copytree(ROOT / package, dest / package, ignore=ignore)
    return dest


def _build_env() -> dict[str, str]:
    """This environment, less the switch that would skip the speedups in a build too."""
    env = {k: v for k, v in os.environ.items() if k != "AEROLITE_NO_EXTENSIONS"}
    return {**env, "PIP_DISABLE_PIP_VERSION_CHECK": "1"}


def _build_wheel(src: Path, out: Path, env: dict[str, str]) -> tuple[Path, str]:
    done = subprocess.run(
        [sys.executable, "-m", "pip", "wheel", "-v", "--no-deps", "-w", str(out), str(src)],
        env=env,
        capture_output=True,
        text=True,
        check=False,
        timeout=600,
    )
    assert done.returncode == 0, done.stdout[-4000:] + done.stderr[-4000:]
    (wheel,) = out.glob("aerolite-*.whl")
    return wheel, done.stdout + done.stderr


@pytest.mark.slow
def test_an_install_without_a_compiler_succeeds_and_says_so(tmp_path: Path) -> None:
    src = _source_copy(tmp_path / "src")
    # A compiler that fails every compile: what a machine without gcc gives setuptools.
    env = {**_build_env(), "CC": "/bin/false"}
    wheel, output = _build_wheel(src, tmp_path / "dist", env)
    names = zipfile.ZipFile(wheel).namelist()
    assert "codec/record.py" in names
    assert not [n for n in names if n.endswith((".so", ".c", ".pyx", ".pxd"))]
    assert "not built" in output and "pure-Python" in output


@pytest.mark.slow
def test_an_install_builds_every_speedup(tmp_path: Path) -> None:
    if shutil.which(os.environ.get("CC", "gcc")) is None:
        pytest.skip("no C compiler here: the fallback test covers this machine")
    src = _source_copy(tmp_path / "src")
    wheel, _output = _build_wheel(src, tmp_path / "dist", _build_env())
    names = zipfile.ZipFile(wheel).namelist()
    built = {n.split("/")[1].split(".")[0] for n in names if n.endswith(".so")}
    assert built == set(_ext.EXTENSIONS)
    assert {f"codec/{name}.pyi" for name in _ext.EXTENSIONS} <= set(names)

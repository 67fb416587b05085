"""JSON table files under ``<storePathRootDir>/config/``, written atomically.

RocketMQ counterpart: ``ConfigManager`` and ``MixAll.string2File``: the previous file is kept
as ``<name>.bak`` and a load falls back to it when the main file is missing or unreadable
(a crash between write and rename leaves one of the two intact). We write through a temp
file, fsync it and rename, so a reader never sees half a file.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

import structlog

from remoting.route import dumps, loads

log = structlog.get_logger(__name__)


def write_json(path: Path, doc: Any) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    data = dumps(doc)
    tmp = path.with_name(path.name + ".tmp")
    with tmp.open("wb") as f:
        f.write(data)
        f.flush()
        os.fsync(f.fileno())
    if path.exists():
        os.replace(path, path.with_name(path.name + ".bak"))
    os.replace(tmp, path)


def read_json(path: Path) -> Any | None:
    """The document in ``path`` (or its ``.bak``); None when neither exists or parses."""
    for candidate in (path, path.with_name(path.name + ".bak")):
        try:
            data = candidate.read_bytes()
        except FileNotFoundError:
            continue
        if not data.strip():
            continue
        try:
            return loads(data)
        except (ValueError, UnicodeDecodeError) as exc:
            log.warning("config_file_unreadable", path=str(candidate), error=str(exc))
    return None

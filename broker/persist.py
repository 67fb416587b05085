"""JSON table files under ``<storePathRootDir>/config/``, written atomically.

RocketMQ counterpart: ``ConfigManager`` and ``MixAll.string2File``: the previous file is kept
as ``<name>.bak`` and a load falls back to it when the main file is missing or unreadable
(a crash between write and rename leaves one of the two intact). We write through a temp
file, fsync it and rename, so a reader never sees half a file. A write that fails (a full
disk: ENOSPC) removes its temp file and leaves the previous file as it was; the periodic
writers log it (``config_file_write_failed``) and write again at their next turn.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
from pathlib import Path
from typing import Any

import structlog

from remoting.route import dumps, loads

log = structlog.get_logger(__name__)


def write_json(path: Path, doc: Any) -> None:
    """Replace ``path`` with ``doc`` as JSON, the previous file kept as ``.bak``.

    Raises:
        OSError: the write failed (ENOSPC on a full disk); ``path`` is unchanged and no
            temp file is left.
    """
    path.parent.mkdir(parents=True, exist_ok=True)
    data = dumps(doc)
    tmp = path.with_name(path.name + ".tmp")
    try:
        with tmp.open("wb") as f:
            f.write(data)
            f.flush()
            os.fsync(f.fileno())
    except OSError:
        with contextlib.suppress(OSError):
            tmp.unlink()  # a half-written temp file would hold on to the space it got
        raise
    if path.exists():
        os.replace(path, path.with_name(path.name + ".bak"))
    os.replace(tmp, path)


def try_write_json(path: Path, doc: Any) -> bool:
    """``write_json`` that logs a failure (``config_file_write_failed``) instead of raising
    it: what start, shutdown and the periodic writers use, so that a full disk costs the
    newest copy of a table, never the broker. Returns whether the file was written."""
    try:
        write_json(path, doc)
    except OSError as exc:  # ENOSPC says it all: no traceback every few seconds
        log.error("config_file_write_failed", path=str(path), error=str(exc))  # noqa: TRY400
        return False
    return True


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


class JsonFile:
    """A table file whose writes leave the event loop.

    ``save_soon`` hands the newest document to a writer task (fsync runs in a thread; a burst
    of changes writes the last one once more at most); ``save_now`` writes synchronously, for
    start-up and the final persist at shutdown.
    """

    def __init__(self, path: Path) -> None:
        self.path = path
        self._pending: Any | None = None
        self._writer: asyncio.Task[None] | None = None

    def save_now(self, doc: Any) -> bool:
        """Write ``doc`` now; False (logged) when it could not be written."""
        self._pending = None
        return try_write_json(self.path, doc)

    def save_soon(self, doc: Any) -> None:
        try:
            asyncio.get_running_loop()
        except RuntimeError:
            self.save_now(doc)
            return
        self._pending = doc
        if self._writer is None or self._writer.done():
            self._writer = asyncio.create_task(self._drain(), name=f"persist-{self.path.name}")

    async def _drain(self) -> None:
        while self._pending is not None:
            doc, self._pending = self._pending, None
            await asyncio.to_thread(try_write_json, self.path, doc)

    async def flush(self) -> None:
        """Wait for a write in progress (shutdown calls this before ``save_now``)."""
        if self._writer is not None:
            await self._writer
            self._writer = None

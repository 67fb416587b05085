"""A store load says what it is doing: ``store_recovering`` first, ``store_recovery_progress``
while it verifies the commit log and dispatches it again (every ``RECOVERY_PROGRESS_S``; here
at every step), and ``store_loaded`` with how long it took. A large store takes seconds to
recover, and the name server port of a standalone is already open meanwhile."""

from __future__ import annotations

import logging
import shutil
from collections.abc import Iterator
from pathlib import Path

import pytest
import structlog
from structlog.testing import capture_logs

import store.message_store
from store.message_store import MessageStore
from tests.store.conftest import message, tiny_config


@pytest.fixture
def info_logs() -> Iterator[None]:
    """Let info lines through (the suite keeps warnings and errors only)."""
    structlog.configure(wrapper_class=structlog.make_filtering_bound_logger(logging.INFO))
    try:
        yield
    finally:
        structlog.configure(wrapper_class=structlog.make_filtering_bound_logger(logging.WARNING))


@pytest.mark.usefixtures("info_logs")
async def test_a_load_after_a_crash_logs_progress_and_its_duration(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    config = tiny_config(tmp_path / "store", commit_log_file_bytes=1 << 20)
    async with MessageStore(config) as s:
        for n in range(20_000):
            assert (await s.put_message(message("TopicLoad", n % 4, b"x" * 40))).status.stored
    (config.root_dir / "abort").touch()  # as a kill -9 leaves it
    shutil.rmtree(config.root_dir / "consumequeue")  # everything is dispatched again
    monkeypatch.setattr(store.message_store, "RECOVERY_PROGRESS_S", 0.0)
    with capture_logs() as logs:
        s = MessageStore(config)
        s.load()
        await s.shutdown()
    events = [e["event"] for e in logs]
    assert events.index("store_recovering") < events.index("store_loaded")
    progress = [e for e in logs if e["event"] == "store_recovery_progress"]
    phases = [e["phase"] for e in progress]
    assert "verify_commit_log" in phases and "dispatch" in phases
    assert phases.index("verify_commit_log") < phases.index("dispatch")
    dispatched = [e["commit_log_offset"] for e in progress if e["phase"] == "dispatch"]
    assert dispatched == sorted(dispatched) and dispatched[-1] > dispatched[0]
    loaded = next(e for e in logs if e["event"] == "store_loaded")
    assert loaded["last_exit_ok"] is False and loaded["duration_ms"] > 0
    assert loaded["records_redispatched"] == 20_000  # every record, once
    assert all(0 <= e["percent"] <= 100 for e in progress)
    # Each line says how long it has taken and, once there is a pace, how long is left.
    records = [e["records_redispatched"] for e in progress]
    assert records == sorted(records) and 0 < records[-1] <= 20_000
    elapsed = [e["elapsed_s"] for e in progress]
    assert elapsed == sorted(elapsed)
    assert any(e["eta_s"] is not None and e["eta_s"] >= 0 for e in progress)

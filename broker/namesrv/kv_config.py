"""``KVConfig``: the name server's namespaced key/value settings.

RocketMQ counterpart: ``KVConfigManager`` (PUT/GET/DELETE_KV_CONFIG,
GET_KVLIST_BY_NAMESPACE; persisted to ``kvConfig.json`` as ``{"configTable":{ns:{k:v}}}``).
The ``ORDER_TOPIC_CONFIG`` namespace holds ``broker-a:4;broker-b:4`` per ordered topic.
"""

from __future__ import annotations

import contextlib
import os
from pathlib import Path

import structlog

from remoting.route import dumps, loads

log = structlog.get_logger(__name__)

ORDER_TOPIC_CONFIG = "ORDER_TOPIC_CONFIG"


class KVConfig:
    """Namespaced settings, written through to ``path`` when one is given."""

    def __init__(self, path: Path | None) -> None:
        self.path = path
        self.table: dict[str, dict[str, str]] = {}

    def load(self) -> None:
        if self.path is None or not self.path.exists():
            return
        try:
            doc = loads(self.path.read_bytes())
            table = doc.get("configTable") or {}
            self.table = {
                str(ns): {str(k): str(v) for k, v in kv.items()} for ns, kv in table.items()
            }
        except (ValueError, AttributeError, OSError) as exc:
            # Keep serving routes; an unreadable file is reported, not fatal.
            log.exception("kv_config_unreadable", path=str(self.path), error=str(exc))

    def _persist(self) -> None:
        """Replace the file through a temp file.

        Raises:
            OSError: the write failed (ENOSPC on a full disk): the previous file is as it
                was and no temp file is left; the request that changed the table gets a
                SYSTEM_ERROR naming it.
        """
        if self.path is None:
            return
        self.path.parent.mkdir(parents=True, exist_ok=True)
        tmp = self.path.with_name(self.path.name + ".tmp")
        try:
            tmp.write_bytes(dumps({"configTable": self.table}))
        except OSError as exc:
            with contextlib.suppress(OSError):
                tmp.unlink()  # a half-written temp file would hold on to the space it got
            log.error("kv_config_write_failed", path=str(self.path), error=str(exc))  # noqa: TRY400 - ENOSPC says it all
            raise
        os.replace(tmp, self.path)

    def put(self, namespace: str, key: str, value: str) -> None:
        self.table.setdefault(namespace, {})[key] = value
        log.info("kv_config_put", namespace=namespace, key=key)
        self._persist()

    def get(self, namespace: str, key: str) -> str | None:
        return self.table.get(namespace, {}).get(key)

    def delete(self, namespace: str, key: str) -> None:
        kv = self.table.get(namespace)
        if kv is not None and kv.pop(key, None) is not None:
            if not kv:
                del self.table[namespace]
            log.info("kv_config_deleted", namespace=namespace, key=key)
            self._persist()

    def namespace(self, namespace: str) -> dict[str, str] | None:
        kv = self.table.get(namespace)
        return dict(kv) if kv else None

"""``SubscriptionGroupTable``: consumer group settings, in ``config/subscriptionGroup.json``.

RocketMQ counterpart: ``SubscriptionGroupManager``. A group is created with defaults the
first time a consumer of it shows up when ``autoCreateSubscriptionGroup`` is on (the default);
``UPDATE_AND_CREATE_SUBSCRIPTIONGROUP`` sets retry queue count, retry limit, consume enable.
"""

from __future__ import annotations

import time
from pathlib import Path
from typing import Any

import structlog

from broker.persist import JsonFile, read_json
from remoting.bodies import BUILTIN_GROUPS, DataVersion, SubscriptionGroupConfig

log = structlog.get_logger(__name__)


class SubscriptionGroupTable:
    def __init__(self, path: Path, *, auto_create: bool) -> None:
        self.path = path
        self.file = JsonFile(path)
        self.auto_create = auto_create
        self.table: dict[str, SubscriptionGroupConfig] = {
            g: SubscriptionGroupConfig(g) for g in BUILTIN_GROUPS
        }
        self.table["TOOLS_CONSUMER"].consume_broadcast_enable = True
        self.data_version = DataVersion()

    def load(self) -> None:
        doc = read_json(self.path)
        if doc is None:
            return
        for name, cfg in (doc.get("subscriptionGroupTable") or {}).items():
            self.table[str(name)] = SubscriptionGroupConfig.from_json(cfg)
        self.data_version = DataVersion.from_json(doc.get("dataVersion"))
        log.info("subscription_groups_loaded", path=str(self.path), groups=len(self.table))

    def to_json(self) -> dict[str, Any]:
        return {
            "dataVersion": self.data_version.to_json(),
            "subscriptionGroupTable": {k: v.to_json() for k, v in sorted(self.table.items())},
        }

    def persist(self) -> None:
        self.file.save_now(self.to_json())

    def _changed(self) -> None:
        self.data_version.bump(int(time.time() * 1000))
        self.file.save_soon(self.to_json())

    def find(self, group: str) -> SubscriptionGroupConfig | None:
        """The group's settings; created with defaults when auto-creation is on."""
        cfg = self.table.get(group)
        if cfg is None and self.auto_create:
            cfg = self.table[group] = SubscriptionGroupConfig(group)
            log.info("subscription_group_created", group=group)
            self._changed()
        return cfg

    def update(self, cfg: SubscriptionGroupConfig) -> None:
        self.table[cfg.group_name] = cfg
        log.info("subscription_group_updated", group=cfg.group_name)
        self._changed()

    def delete(self, group: str) -> bool:
        if self.table.pop(group, None) is None:
            return False
        log.info("subscription_group_deleted", group=group)
        self._changed()
        return True

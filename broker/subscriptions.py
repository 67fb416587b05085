"""``SubscriptionGroupTable``: consumer group settings, in ``config/subscriptionGroup.json``.

RocketMQ counterpart: ``SubscriptionGroupManager``. A group is created with defaults the
first time a consumer of it shows up when ``autoCreateSubscriptionGroup`` is on (the default);
``UPDATE_AND_CREATE_SUBSCRIPTIONGROUP`` sets retry queue count, retry limit, consume enable.

A group name must make legal topics of ``%RETRY%<group>`` and ``%DLQ%<group>``
(``TopicValidator.validateGroup`` in 5.x: ``[%|a-zA-Z0-9_-]``, at most 120 characters). A
message for a topic the store refuses would otherwise wait at the head of its delay level
forever. Requests naming such a group are refused (``group_refusal``); one loaded from an
older broker's file is kept in the file but never found.
"""

from __future__ import annotations

import re
import time
from pathlib import Path
from typing import Any, Final

import structlog

from broker.persist import JsonFile, read_json
from broker.topics import RETRY_GROUP_TOPIC_PREFIX, TOPIC_MAX_LENGTH
from remoting.bodies import BUILTIN_GROUPS, DataVersion, SubscriptionGroupConfig
from remoting.codes import ResponseCode
from remoting.command import RemotingCommand, response_to

log = structlog.get_logger(__name__)

# 5.x's GROUP_MAX_LENGTH (120): the longest group whose retry topic (%RETRY% is longer than
# %DLQ%) is still a legal topic, which the store holds to 127 bytes.
GROUP_MAX_LENGTH: Final = TOPIC_MAX_LENGTH - len(RETRY_GROUP_TOPIC_PREFIX)
_VALID_NAME = re.compile(r"[%|a-zA-Z0-9_-]+")


def check_group_name(group: str) -> str | None:
    """Why ``group`` cannot name a consumer group (``TopicValidator.validateGroup``), or None."""
    if not group or not group.strip():
        return "The specified group is blank."
    if not _VALID_NAME.fullmatch(group):
        return (
            f"The specified group[{group}] contains illegal characters, "
            "allowing only ^[%|a-zA-Z0-9_-]+$ (its retry topic would not be a legal topic)"
        )
    if len(group) > GROUP_MAX_LENGTH:
        return (
            f"The specified group[{group}] is {len(group)} characters, longer than the group "
            f"max length {GROUP_MAX_LENGTH}: its retry topic {RETRY_GROUP_TOPIC_PREFIX}<group> "
            f"would exceed the topic max length {TOPIC_MAX_LENGTH}"
        )
    return None


def group_refusal(request: RemotingCommand, group: str) -> RemotingCommand | None:
    """SUBSCRIPTION_GROUP_NOT_EXIST naming the rule, if ``group`` cannot be a consumer group
    (RocketMQ 5 finds no such group: it never creates one with an illegal name)."""
    reason = check_group_name(group)
    if reason is None:
        return None
    return response_to(request, ResponseCode.SUBSCRIPTION_GROUP_NOT_EXIST, reason)


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
            reason = check_group_name(str(name))
            if reason is not None:
                # Written by a broker that did not check: kept, but no request finds it.
                log.warning("subscription_group_name_illegal", group=str(name), reason=reason)
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
        """The group's settings; created with defaults when auto-creation is on. None for a
        name that cannot be a group (``check_group_name``), even one loaded from a file."""
        if check_group_name(group) is not None:
            return None
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

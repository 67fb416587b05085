"""ACL 1.0: ``plain_acl.yml`` accounts, IP whitelists, and the check every request passes.

RocketMQ counterpart: ``PlainAccessValidator`` (which resources a request needs),
``PlainPermissionManager`` (the file, the whitelists, the signature and permission checks),
``RemoteAddressStrategyFactory`` and ``Permission`` of rocketmq-acl 4.9.

The file::

    globalWhiteRemoteAddresses: [10.10.103.*, 192.168.0.*]
    accounts:
      - accessKey: RocketMQ
        secretKey: "12345678"
        whiteRemoteAddress: 192.168.1.*
        admin: false
        defaultTopicPerm: DENY          # DENY | PUB | SUB | PUB|SUB
        defaultGroupPerm: SUB
        topicPerms: [topicA=DENY, topicB=PUB|SUB, topicC=SUB]
        groupPerms: [groupA=DENY, groupB=PUB|SUB, groupC=SUB]

The check, in RocketMQ's order: a peer on the global whitelist passes; otherwise the request
must name a known access key; a peer on that account's whitelist passes; otherwise the
signature must match and every resource the request touches must be allowed: topics by
``topicPerms`` else ``defaultTopicPerm``, groups (as their retry topic) by ``groupPerms``
else ``defaultGroupPerm``; the admin codes need ``admin: true``. A refusal is NO_PERMISSION
with RocketMQ's wording, logged as ``acl_denied``. The file is re-read when it changes; a
file that no longer parses keeps the rules in force and is logged.
"""

from __future__ import annotations

import ipaddress
import os
import re
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import structlog
import yaml

from remoting.acl import ACCESS_KEY, SIGNATURE, signature, signed_content
from remoting.bodies import HeartbeatData
from remoting.codes import RequestCode
from remoting.command import RemotingCommand
from remoting.errors import ConfigError, NoPermissionError

log = structlog.get_logger(__name__)

DENY, ANY, PUB, SUB = 1, 1 << 1, 1 << 2, 1 << 3
RETRY_PREFIX = "%RETRY%"
# Permission.ADMIN_CODE (4.9), and the ACL's own updates
ADMIN_CODES = frozenset(
    {
        RequestCode.UPDATE_AND_CREATE_ACL_CONFIG,
        RequestCode.DELETE_ACL_CONFIG,
        RequestCode.UPDATE_GLOBAL_WHITE_ADDRS_CONFIG,
        RequestCode.UPDATE_AND_CREATE_TOPIC,
        RequestCode.UPDATE_BROKER_CONFIG,
        RequestCode.DELETE_TOPIC_IN_BROKER,
        RequestCode.UPDATE_AND_CREATE_SUBSCRIPTIONGROUP,
        RequestCode.DELETE_SUBSCRIPTIONGROUP,
    }
)


def parse_perm(text: str | None) -> int:
    """``Permission.parsePermFromString``: anything unknown is DENY."""
    value = (text or "").strip().upper()
    return {"PUB": PUB, "SUB": SUB, "PUB|SUB": PUB | SUB, "SUB|PUB": PUB | SUB}.get(value, DENY)


def perm_text(perm: int) -> str:
    return {PUB: "PUB", SUB: "SUB", PUB | SUB: "PUB|SUB"}.get(perm, "DENY")


def check_permission(needed: int, owned: int) -> bool:
    if owned & DENY:
        return False
    if needed & ANY:
        return bool(owned & (PUB | SUB))
    return bool(needed & owned)


# --------------------------------------------------------------------------- addresses

_RANGE = re.compile(r"(\d+)-(\d+)")
_CHOICES = re.compile(r"\{([\d,\s]+)\}")


def address_matcher(pattern: str | None) -> Callable[[str], bool]:
    """``RemoteAddressStrategyFactory``: ``*``, ``1.2.3.*``, ``1.2.*.*``, ``1.2.3.1-10``,
    ``1.2.3.{1,2,3}``, a plain IPv4 or IPv6 address, or several comma-separated; empty
    matches nothing.

    Raises:
        ConfigError: a pattern none of these describes.
    """
    text = (pattern or "").strip()
    if not text:
        return lambda _addr: False
    if text in ("*", "*.*.*.*"):
        return lambda _addr: True
    if "," in text and "{" not in text:
        parts = [address_matcher(p) for p in text.split(",") if p.strip()]
        return lambda addr: any(m(addr) for m in parts)
    fields = text.split(".")
    if len(fields) != 4:
        try:
            exact = str(ipaddress.ip_address(text))
        except ValueError:
            raise ConfigError(f"remote address pattern {pattern!r} is not understood") from None
        return lambda addr: addr == exact
    head, last = fields[:3], fields[3]
    if not all(f == "*" or (f.isdigit() and int(f) <= 255) for f in head):
        raise ConfigError(f"remote address pattern {pattern!r} is not understood")
    allowed: Callable[[int], bool]
    if last == "*":
        allowed = range(256).__contains__
    elif m := _RANGE.fullmatch(last):
        lo, hi = int(m.group(1)), int(m.group(2))
        if not lo <= hi <= 255:
            raise ConfigError(f"remote address pattern {pattern!r}: bad range {last}")
        allowed = range(lo, hi + 1).__contains__
    elif m := _CHOICES.fullmatch(last):
        allowed = frozenset(int(x) for x in m.group(1).split(",") if x.strip()).__contains__
    elif last.isdigit() and int(last) <= 255:
        allowed = frozenset({int(last)}).__contains__
    else:
        raise ConfigError(f"remote address pattern {pattern!r} is not understood")

    def match(addr: str) -> bool:
        parts = addr.split(".")
        if len(parts) != 4 or not all(p.isdigit() for p in parts):
            return False
        if any(f not in ("*", p) for f, p in zip(head, parts[:3], strict=True)):
            return False
        return allowed(int(parts[3]))

    return match


# ---------------------------------------------------------------------------- accounts


@dataclass(slots=True)
class Account:
    access_key: str
    secret_key: str
    white_remote_address: str | None = None
    admin: bool = False
    default_topic_perm: int = DENY
    default_group_perm: int = DENY
    resources: dict[str, int] = field(default_factory=dict)  # topic or %RETRY%group → perm
    topic_perms: list[str] = field(default_factory=list)  # as written, for the admin API
    group_perms: list[str] = field(default_factory=list)
    whitelisted: Callable[[str], bool] = field(default=lambda _a: False, repr=False)

    @classmethod
    def from_yaml(cls, doc: Mapping[str, Any]) -> Account:
        ak = str(doc.get("accessKey") or "").strip()
        sk = str(doc.get("secretKey") or "").strip()
        if not ak or not sk:
            raise ConfigError("an account needs accessKey and secretKey")
        if len(ak) < 6 or len(sk) < 6:
            raise ConfigError(f"account {ak}: accessKey and secretKey need 6 characters or more")
        white = doc.get("whiteRemoteAddress")
        acct = cls(
            access_key=ak,
            secret_key=sk,
            white_remote_address=str(white) if white else None,
            admin=bool(doc.get("admin", False)),
            default_topic_perm=parse_perm(doc.get("defaultTopicPerm")),
            default_group_perm=parse_perm(doc.get("defaultGroupPerm")),
            topic_perms=[str(x) for x in doc.get("topicPerms") or []],
            group_perms=[str(x) for x in doc.get("groupPerms") or []],
            whitelisted=address_matcher(str(white) if white else None),
        )
        for entry in acct.topic_perms:
            name, _, perm = entry.partition("=")
            acct.resources[name.strip()] = parse_perm(perm)
        for entry in acct.group_perms:
            name, _, perm = entry.partition("=")
            acct.resources[RETRY_PREFIX + name.strip()] = parse_perm(perm)
        return acct

    def to_yaml(self) -> dict[str, Any]:
        out: dict[str, Any] = {
            "accessKey": self.access_key,
            "secretKey": self.secret_key,
            "whiteRemoteAddress": self.white_remote_address,
            "admin": self.admin,
            "defaultTopicPerm": perm_text(self.default_topic_perm),
            "defaultGroupPerm": perm_text(self.default_group_perm),
        }
        if self.topic_perms:
            out["topicPerms"] = list(self.topic_perms)
        if self.group_perms:
            out["groupPerms"] = list(self.group_perms)
        return out


@dataclass(slots=True)
class AclRules:
    global_white: list[str] = field(default_factory=list)
    accounts: dict[str, Account] = field(default_factory=dict)
    global_matchers: list[Callable[[str], bool]] = field(default_factory=list)

    @classmethod
    def parse(cls, text: str) -> AclRules:
        """Raises:
        ConfigError: not YAML, or an entry that makes no sense (named)."""
        try:
            doc = yaml.safe_load(text) or {}
        except yaml.YAMLError as exc:
            raise ConfigError(f"not valid YAML: {exc}") from None
        if not isinstance(doc, dict):
            raise ConfigError("the ACL file must be a mapping")
        white = [str(w) for w in doc.get("globalWhiteRemoteAddresses") or []]
        rules = cls(white, {}, [address_matcher(w) for w in white])
        for entry in doc.get("accounts") or []:
            if not isinstance(entry, dict):
                raise ConfigError(f"account entry {entry!r} is not a mapping")
            acct = Account.from_yaml(entry)
            if acct.access_key in rules.accounts:
                raise ConfigError(f"accessKey {acct.access_key} appears twice")
            rules.accounts[acct.access_key] = acct
        return rules

    def to_yaml(self) -> str:
        doc = {
            "globalWhiteRemoteAddresses": list(self.global_white),
            "accounts": [a.to_yaml() for a in self.accounts.values()],
        }
        return yaml.safe_dump(doc, sort_keys=False)


# ------------------------------------------------------------------------- validation


def resources_of(request: RemotingCommand) -> dict[str, int]:
    """``PlainAccessValidator.parse``: the topics and groups a request touches.

    Raises:
        NoPermissionError: a body that cannot be read for its resources.
    """
    ext = request.ext_fields
    code = request.code
    need: dict[str, int] = {}

    def add(resource: str | None, perm: int) -> None:
        if resource:
            need[resource] = need.get(resource, 0) | perm

    if code == RequestCode.SEND_MESSAGE:
        add(ext.get("topic"), PUB)
    elif code in (RequestCode.SEND_MESSAGE_V2, RequestCode.SEND_BATCH_MESSAGE):
        add(ext.get("b") or ext.get("topic"), PUB)
    elif code == RequestCode.CONSUMER_SEND_MSG_BACK:
        add(ext.get("originTopic"), PUB)
        add(RETRY_PREFIX + ext.get("group", ""), SUB)
    elif code == RequestCode.PULL_MESSAGE:
        add(ext.get("topic"), SUB)
        add(RETRY_PREFIX + ext.get("consumerGroup", ""), SUB)
    elif code == RequestCode.QUERY_MESSAGE:
        add(ext.get("topic"), SUB)
    elif code == RequestCode.HEART_BEAT:
        try:
            hb = HeartbeatData.decode(request.body_bytes)
        except (ValueError, KeyError, TypeError, AttributeError) as exc:
            raise NoPermissionError(f"heartbeat body unreadable for the ACL check: {exc}") from None
        for consumer in hb.consumer_data_set:
            add(RETRY_PREFIX + consumer.group_name, SUB)
            for sub in consumer.subscription_data_set:
                add(sub.topic, SUB)
    elif code in (
        RequestCode.UNREGISTER_CLIENT,
        RequestCode.GET_CONSUMER_LIST_BY_GROUP,
        RequestCode.QUERY_CONSUMER_OFFSET,
    ):
        add(RETRY_PREFIX + ext.get("consumerGroup", ""), SUB)
        if code == RequestCode.QUERY_CONSUMER_OFFSET:
            add(ext.get("topic"), SUB)
    elif code == RequestCode.UPDATE_CONSUMER_OFFSET:
        add(RETRY_PREFIX + ext.get("consumerGroup", ""), SUB)
        add(ext.get("topic"), SUB)
    return need


class PlainAcl:
    """The rules of one ``plain_acl.yml``, re-read when the file changes (an RPC hook)."""

    def __init__(self, path: Path) -> None:
        self.path = path
        self.rules = AclRules()
        self._mtime: float | None = None
        self.version = 0  # bumped on every (re)load, for GET_BROKER_CLUSTER_ACL_INFO

    def load(self) -> None:
        """Read the file now.

        Raises:
            ConfigError: it cannot be read or parsed (the rules in force stay).
        """
        try:
            stat = self.path.stat()
            text = self.path.read_text(encoding="utf-8")
        except OSError as exc:
            raise ConfigError(f"aclFilePath {self.path}: {exc.strerror or exc}") from None
        try:
            rules = AclRules.parse(text)
        except ConfigError as exc:
            raise ConfigError(f"aclFilePath {self.path}: {exc}") from None
        self.rules = rules
        self._mtime = stat.st_mtime
        self.version += 1

    def reload_if_changed(self) -> bool:
        try:
            mtime = self.path.stat().st_mtime
        except OSError as exc:
            log.error("acl_file_unreadable", path=str(self.path), error=str(exc))  # noqa: TRY400 - the reason is the message; no traceback wanted
            return False
        if mtime == self._mtime:
            return False
        try:
            self.load()
        except ConfigError as exc:
            self._mtime = mtime  # do not retry a broken file every round
            log.error("acl_reload_failed", path=str(self.path), error=str(exc))  # noqa: TRY400 - as above
            return False
        log.info("acl_reloaded", path=str(self.path), accounts=len(self.rules.accounts))
        return True

    def save(self, rules: AclRules) -> None:
        """Write ``rules`` to the file (atomically) and put them in force."""
        tmp = self.path.with_suffix(self.path.suffix + ".tmp")
        tmp.write_text(rules.to_yaml(), encoding="utf-8")
        os.replace(tmp, self.path)
        self.load()

    # ------------------------------------------------------------------- the check

    def check(self, remote_addr: str, request: RemotingCommand) -> None:
        """Raises:
        NoPermissionError: the request may not pass (RocketMQ's remark)."""
        rules = self.rules
        host = remote_addr.rsplit(":", 1)[0].strip("[]")
        if any(m(host) for m in rules.global_matchers):
            return
        ext = request.ext_fields
        ak = ext.get(ACCESS_KEY)
        if ak is None:
            raise NoPermissionError("No accessKey is configured")
        acct = rules.accounts.get(ak)
        if acct is None:
            raise NoPermissionError(f"No acl config for {ak}")
        if acct.whitelisted(host):
            return
        expected = signature(signed_content(ext, request.body), acct.secret_key)
        if expected != ext.get(SIGNATURE):
            raise NoPermissionError(f"Check signature failed for accessKey={ak}")
        if request.code in ADMIN_CODES and not acct.admin:
            raise NoPermissionError(
                f"Need admin permission for request code={request.code}, but accessKey={ak} is not"
            )
        need = resources_of(request)
        if not need or (acct.admin and not acct.resources):
            return
        for resource, perm in need.items():
            is_group = resource.startswith(RETRY_PREFIX)
            owned = acct.resources.get(resource)
            if owned is None:
                owned = acct.default_group_perm if is_group else acct.default_topic_perm
            if not check_permission(perm, owned):
                what = f"group={resource[len(RETRY_PREFIX) :]}" if is_group else f"topic={resource}"
                raise NoPermissionError(f"No default permission for {what}")

    # The RPC hook interface (remoting.dispatch.RPCHook).

    def before_request(self, remote_addr: str, request: RemotingCommand) -> None:
        try:
            self.check(remote_addr, request)
        except NoPermissionError as exc:
            log.warning(
                "acl_denied",
                peer=remote_addr,
                code=request.code,
                access_key=request.ext_fields.get(ACCESS_KEY),
                reason=str(exc),
            )
            raise

    def after_response(
        self, remote_addr: str, request: RemotingCommand, response: RemotingCommand | None
    ) -> None:
        return None

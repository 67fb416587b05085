"""ACL 1.0: ``plain_acl.yml`` accounts, IP whitelists, and the check every request passes.

RocketMQ counterpart: ``PlainAccessValidator`` (which resources a request needs),
``PlainPermissionManager`` (the file, the whitelists, the signature and permission checks),
``RemoteAddressStrategyFactory`` and ``Permission`` of rocketmq-acl 4.9; the table of what
each request code needs also follows RocketMQ 5's ``DefaultAuthorizationContextBuilder`` and
the ``@RocketMQAction`` / ``@RocketMQResource`` annotations of its request headers.

The file::

    globalWhiteRemoteAddresses: [10.10.103.*, 192.168.0.*]
    accounts:
      - accessKey: RocketMQ
        secretKey: "12345678"
        whiteRemoteAddress: 192.168.1.*   # where this account may connect from (unset: anywhere)
        admin: false
        defaultTopicPerm: DENY          # DENY | PUB | SUB | PUB|SUB
        defaultGroupPerm: SUB
        topicPerms: [topicA=DENY, topicB=PUB|SUB, topicC=SUB]
        groupPerms: [groupA=DENY, groupB=PUB|SUB, groupC=SUB]

The check: a peer on the global whitelist passes (a trusted network, as in RocketMQ);
otherwise the request must name a known access key, come from an address the account's
``whiteRemoteAddress`` allows, and carry a matching signature, always (RocketMQ 4.9 let an
account's whitelist skip the signature and every permission). Then ``PERMISSIONS``, one entry
per request code the broker serves, says what the code needs: nothing more, an admin
account, or permissions on the topics and groups named by the header fields (or body, or
stored message) the entry names: topics by ``topicPerms`` else ``defaultTopicPerm``, groups
(as their retry topic) by ``groupPerms`` else ``defaultGroupPerm``. A code without an entry
is an admin code; a topic clients may not send to (the broker's parking and system topics,
not the trace topic) needs an admin account whatever the permissions say. A refusal is
NO_PERMISSION with RocketMQ's wording, logged as ``acl_denied``. The file is re-read when it
changes; a file that no longer parses keeps the rules in force and is logged.
"""

from __future__ import annotations

import hmac
import ipaddress
import os
import re
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any, Literal

import structlog
import yaml

from broker.topics import (
    SCHEDULE_TOPIC,
    TIMER_TOPIC,
    TRACE_TOPIC,
    TRANS_HALF_TOPIC,
    send_forbidden,
)
from codec import PROPERTY_REAL_TOPIC, RecordInfo, decode_properties
from remoting.acl import ACCESS_KEY, SIGNATURE, signature, signed_content
from remoting.bodies import MALFORMED_BODY, HeartbeatData, LockBatchBody
from remoting.codes import RequestCode
from remoting.command import RemotingCommand
from remoting.errors import ConfigError, NoPermissionError

if TYPE_CHECKING:
    from store.message_store import MessageStore

log = structlog.get_logger(__name__)

DENY, ANY, PUB, SUB = 1, 1 << 1, 1 << 2, 1 << 3
RETRY_PREFIX = "%RETRY%"


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
    # whiteRemoteAddress: the addresses this account may connect from (unset: any)
    allowed_from: Callable[[str], bool] = field(default=lambda _a: True, repr=False)

    @classmethod
    def from_yaml(cls, doc: Mapping[str, Any]) -> Account:
        ak = str(doc.get("accessKey") or "").strip()
        sk = str(doc.get("secretKey") or "").strip()
        if not ak or not sk:
            raise ConfigError("an account needs accessKey and secretKey")
        if len(ak) < 6 or len(sk) < 6:
            raise ConfigError(f"account {ak}: accessKey and secretKey need 6 characters or more")
        white = str(doc.get("whiteRemoteAddress") or "").strip()
        acct = cls(
            access_key=ak,
            secret_key=sk,
            white_remote_address=white or None,
            admin=bool(doc.get("admin", False)),
            default_topic_perm=parse_perm(doc.get("defaultTopicPerm")),
            default_group_perm=parse_perm(doc.get("defaultGroupPerm")),
            topic_perms=[str(x) for x in doc.get("topicPerms") or []],
            group_perms=[str(x) for x in doc.get("groupPerms") or []],
            allowed_from=address_matcher(white) if white else (lambda _a: True),
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


# --------------------------------------------------------------------------- the table

Kind = Literal["topic", "group", "stored", "heartbeat", "lock"]


@dataclass(frozen=True, slots=True)
class Need:
    """One resource a request touches and the permission it needs on it.

    ``kind``: a ``topic`` or a ``group`` whose name is in the ext field ``where``; ``stored``:
    the topic of the stored message whose commit-log offset is in the ext field ``where``
    (which must start a record; a half, delayed or timer message counts as its real topic);
    ``heartbeat`` and ``lock``: the groups and topics a HEART_BEAT or
    LOCK_BATCH_MQ/UNLOCK_BATCH_MQ body names. A topic
    ``%RETRY%<group>`` is that group's, and needs SUB on the group whatever ``perm`` says.
    An absent field refuses the request unless ``optional``.
    """

    kind: Kind
    where: str = ""
    perm: int = SUB
    optional: bool = False


@dataclass(frozen=True, slots=True)
class Rule:
    """What a request code needs besides a known account and a good signature."""

    admin: bool = False
    needs: tuple[Need, ...] = ()


def _topic(where: str, perm: int = SUB, *, optional: bool = False) -> Need:
    return Need("topic", where, perm, optional)


def _group(where: str, *, optional: bool = False) -> Need:
    return Need("group", where, SUB, optional)


OPEN = Rule()
ADMIN = Rule(admin=True)
_CONSUME = Rule(needs=(_topic("topic"), _group("consumerGroup")))
_READ_TOPIC = Rule(needs=(_topic("topic"),))
_LOCK = Rule(needs=(Need("lock"),))

# Every request code the broker serves, and what it needs; a code missing here is refused to
# every account but an admin (tests/broker/test_acl_table.py walks the broker's processor
# table against it). "4.9" is rocketmq-acl 4.9's PlainAccessValidator / Permission.ADMIN_CODE,
# "5.x" the auth module's DefaultAuthorizationContextBuilder and header annotations, where
# GET maps to SUB and UPDATE/CREATE/DELETE to admin. docs/operations.md lists where we are
# stricter than 4.9 ("stricter" below).
PERMISSIONS: Mapping[int, Rule] = {
    # --- produce
    RequestCode.SEND_MESSAGE: Rule(needs=(_topic("topic", PUB),)),  # 4.9
    RequestCode.SEND_MESSAGE_V2: Rule(needs=(_topic("b", PUB),)),  # 4.9
    RequestCode.SEND_BATCH_MESSAGE: Rule(needs=(_topic("b", PUB),)),  # 5.x; 4.9: none
    # stricter (4.9: none; 5.x: PUB on a topic field our header does not have): PUB on the
    # half message's real topic, so only its producers commit or roll it back
    RequestCode.END_TRANSACTION: Rule(needs=(Need("stored", "commitLogOffset", PUB),)),
    # --- consume
    RequestCode.PULL_MESSAGE: _CONSUME,  # 4.9
    RequestCode.POP_MESSAGE: _CONSUME,  # 5.x; 4.9: none (the pop read bypass)
    RequestCode.ACK_MESSAGE: _CONSUME,  # 5.x; 4.9: none
    RequestCode.CHANGE_MESSAGE_INVISIBLETIME: _CONSUME,  # 5.x; 4.9: none
    # 4.9: group SUB; stricter: SUB on the topic of the message sent back too, or any account
    # with a group could copy any message into its retry topic and pull it from there
    RequestCode.CONSUMER_SEND_MSG_BACK: Rule(needs=(_group("group"), Need("stored", "offset"))),
    RequestCode.HEART_BEAT: Rule(needs=(Need("heartbeat"),)),  # 4.9
    RequestCode.UNREGISTER_CLIENT: Rule(needs=(_group("consumerGroup", optional=True),)),  # 5.x
    RequestCode.CHECK_CLIENT_CONFIG: OPEN,  # 4.9, 5.x: parses a filter expression, no more
    RequestCode.GET_CONSUMER_LIST_BY_GROUP: Rule(needs=(_group("consumerGroup"),)),  # 4.9
    RequestCode.QUERY_CONSUMER_OFFSET: _CONSUME,  # 5.x; 4.9: none
    RequestCode.UPDATE_CONSUMER_OFFSET: _CONSUME,  # 4.9
    RequestCode.LOCK_BATCH_MQ: _LOCK,  # 5.x; 4.9: none (locks of any group)
    RequestCode.UNLOCK_BATCH_MQ: _LOCK,  # 5.x; 4.9: none
    RequestCode.GET_MAX_OFFSET: _READ_TOPIC,  # 5.x GET; 4.9: none
    RequestCode.GET_MIN_OFFSET: _READ_TOPIC,  # 5.x GET; 4.9: none
    RequestCode.SEARCH_OFFSET_BY_TIMESTAMP: _READ_TOPIC,  # 5.x GET; 4.9: none
    RequestCode.GET_EARLIEST_MSG_STORETIME: _READ_TOPIC,  # 5.x GET; 4.9: none
    # --- query
    RequestCode.QUERY_MESSAGE: _READ_TOPIC,  # 4.9
    # stricter (4.9: none, the view read bypass; 5.x: a topic field the client chooses): SUB
    # on the topic of the message actually stored at the offset
    RequestCode.VIEW_MESSAGE_BY_ID: Rule(needs=(Need("stored", "offset"),)),
    RequestCode.QUERY_CONSUME_QUEUE: Rule(
        needs=(_topic("topic"), _group("consumerGroup", optional=True))
    ),  # 5.x GET; 4.9: none
    RequestCode.GET_TOPIC_STATS_INFO: _READ_TOPIC,  # 5.x GET; 4.9: none
    RequestCode.GET_CONSUME_STATS: Rule(
        needs=(_group("consumerGroup"), _topic("topic", optional=True))
    ),  # 5.x GET; 4.9: none
    RequestCode.GET_CONSUMER_CONNECTION_LIST: Rule(needs=(_group("consumerGroup"),)),  # 5.x GET
    RequestCode.GET_CONSUMER_RUNNING_INFO: Rule(needs=(_group("consumerGroup"),)),  # 5.x GET
    RequestCode.CONSUME_MESSAGE_DIRECTLY: Rule(needs=(_group("consumerGroup"),)),  # 5.x SUB
    # 4.9, 5.x: none; our SDK reads it to pick its header encoding
    RequestCode.GET_BROKER_RUNTIME_INFO: OPEN,
    # --- admin: 4.9's ADMIN_CODE
    RequestCode.UPDATE_AND_CREATE_TOPIC: ADMIN,
    RequestCode.DELETE_TOPIC_IN_BROKER: ADMIN,
    RequestCode.UPDATE_BROKER_CONFIG: ADMIN,
    RequestCode.UPDATE_AND_CREATE_SUBSCRIPTIONGROUP: ADMIN,
    RequestCode.DELETE_SUBSCRIPTIONGROUP: ADMIN,
    # stricter: 4.9 none; 5.x UPDATE on the group, which a consumer's SUB does not give
    RequestCode.INVOKE_BROKER_TO_RESET_OFFSET: ADMIN,
    RequestCode.CLONE_GROUP_OFFSET: ADMIN,
    # stricter: 4.9 none (any account could rewrite plain_acl.yml); 5.x: cluster UPDATE
    RequestCode.UPDATE_AND_CREATE_ACL_CONFIG: ADMIN,
    RequestCode.DELETE_ACL_CONFIG: ADMIN,
    RequestCode.UPDATE_GLOBAL_WHITE_ADDRS_CONFIG: ADMIN,
    RequestCode.GET_BROKER_CLUSTER_ACL_INFO: ADMIN,
    # stricter: 4.9 none; they delete files or dump every topic's, group's or producer's data
    # (a slave's sync needs them: its address goes in globalWhiteRemoteAddresses)
    RequestCode.CLEAN_EXPIRED_CONSUMEQUEUE: ADMIN,
    RequestCode.DELETE_EXPIRED_COMMITLOG: ADMIN,
    RequestCode.GET_ALL_TOPIC_CONFIG: ADMIN,
    RequestCode.GET_TOPIC_NAME_LIST: ADMIN,
    RequestCode.GET_ALL_CONSUMER_OFFSET: ADMIN,
    RequestCode.GET_ALL_DELAY_OFFSET: ADMIN,
    RequestCode.GET_ALL_SUBSCRIPTIONGROUP_CONFIG: ADMIN,
    RequestCode.GET_PRODUCER_CONNECTION_LIST: ADMIN,
    RequestCode.GET_ALL_PRODUCER_INFO: ADMIN,
    RequestCode.GET_BROKER_CONFIG: ADMIN,
    # stricter: 4.9 none; every account's secret key
    RequestCode.GET_BROKER_CLUSTER_ACL_CONFIG: ADMIN,
    RequestCode.CLEAN_UNUSED_TOPIC: ADMIN,
    # stricter: 4.9 none; any topic's or group's traffic, every group's positions
    RequestCode.VIEW_BROKER_STATS_DATA: ADMIN,
    RequestCode.GET_BROKER_CONSUME_STATS: ADMIN,
    # 4.9 none; the groups reading a topic, to whoever may read the topic
    RequestCode.QUERY_TOPIC_CONSUME_BY_WHO: _READ_TOPIC,
    # stricter: 4.9 none; read by the exports, beside the whole topic table
    RequestCode.GET_SYSTEM_TOPIC_LIST_FROM_BROKER: ADMIN,
}

# Where delayed, timer and half messages wait; such a message belongs to its REAL_TOPIC.
_PARKING_TOPICS = frozenset({SCHEDULE_TOPIC, TIMER_TOPIC, TRANS_HALF_TOPIC})


def owner_topic(info: RecordInfo) -> str:
    """The topic a stored message belongs to: its REAL_TOPIC while it waits in a parking
    topic (delayed, timer, half), else the topic it is stored under."""
    if info.topic in _PARKING_TOPICS:
        real = decode_properties(info.properties).get(PROPERTY_REAL_TOPIC)
        if real:
            return real
    return info.topic


def admin_only_topic(topic: str) -> bool:
    """Whether only an admin account may name ``topic`` in a request: the broker's own topics
    clients may not send to (``send_forbidden``: the parking topics, transaction op and
    check topics, pop revive logs, TBW102, …). Holding SUB on them, as a defaultTopicPerm
    gives, would read other topics' delayed, timer and uncommitted messages. The trace topic
    stays open: trace readers hold SUB on it."""
    return send_forbidden(topic)


def resources_of(
    request: RemotingCommand, rule: Rule, stored_topic: Callable[[int], str | None]
) -> dict[str, int]:
    """The topics and groups (as ``%RETRY%<group>``) ``request`` touches under ``rule``, with
    the permission each needs (``PlainAccessValidator.parse``).

    Raises:
        NoPermissionError: a field the rule names is absent, or a body or stored message that
            cannot be read for its resources.
    """
    need: dict[str, int] = {}
    for n in rule.needs:
        if n.kind == "heartbeat":
            _heartbeat_resources(request, need)
        elif n.kind == "lock":
            _lock_resources(request, need)
        else:
            _field_resource(request, n, stored_topic, need)
    return need


def _add_topic(need: dict[str, int], name: str, perm: int) -> None:
    if name.startswith(RETRY_PREFIX):
        need[name] = need.get(name, 0) | SUB  # a retry topic is its group's
    elif not (name == TRACE_TOPIC and perm == PUB):  # 4.9: any account may write traces
        need[name] = need.get(name, 0) | perm


def _add_group(need: dict[str, int], name: str) -> None:
    key = RETRY_PREFIX + name
    need[key] = need.get(key, 0) | SUB


def _heartbeat_resources(request: RemotingCommand, need: dict[str, int]) -> None:
    """Every group a HEART_BEAT body names, and the topics its consumers subscribe to."""
    try:
        hb = HeartbeatData.decode(request.body_bytes or b"{}")
    except MALFORMED_BODY as exc:
        raise NoPermissionError(f"heartbeat body unreadable for the ACL check: {exc}") from None
    for consumer in hb.consumer_data_set:
        _add_group(need, consumer.group_name)
        for sub in consumer.subscription_data_set:
            _add_topic(need, sub.topic, SUB)


def _lock_resources(request: RemotingCommand, need: dict[str, int]) -> None:
    """The group of a LOCK_BATCH_MQ / UNLOCK_BATCH_MQ body and the topics of its queues."""
    try:
        body = LockBatchBody.decode(request.body_bytes)
    except MALFORMED_BODY as exc:
        raise NoPermissionError(f"lock body unreadable for the ACL check: {exc}") from None
    _add_group(need, body.consumer_group)
    for mq in body.mq_set:
        _add_topic(need, mq.topic, SUB)


def _field_resource(
    request: RemotingCommand,
    n: Need,
    stored_topic: Callable[[int], str | None],
    need: dict[str, int],
) -> None:
    """The topic or group an ext field names, or the topic of the stored message at the
    commit-log offset it holds."""
    value = request.ext_fields.get(n.where)
    if not value:
        if n.optional:
            return
        raise NoPermissionError(
            f"request code={request.code} has no {n.where} to check the permission of"
        )
    if n.kind == "topic":
        _add_topic(need, value, n.perm)
    elif n.kind == "group":
        _add_group(need, value)
    else:
        try:
            offset = int(value)
        except ValueError:
            raise NoPermissionError(f"{n.where}={value} is not a commit log offset") from None
        topic = stored_topic(offset)
        if topic is None:
            raise NoPermissionError(
                f"No message at commit log offset {offset} to check the permission of"
            )
        _add_topic(need, topic, n.perm)


class PlainAcl:
    """The rules of one ``plain_acl.yml``, re-read when the file changes (an RPC hook)."""

    def __init__(self, path: Path, messages: MessageStore | None = None) -> None:
        self.path = path
        self.messages = messages  # the stored messages some checks look at (by offset)
        self.rules = AclRules()
        self._mtime: float | None = None
        self.version = 0  # bumped on every (re)load, for GET_BROKER_CLUSTER_ACL_INFO
        self.loaded_ms = 0  # when it was last (re)loaded

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
        self.loaded_ms = int(time.time() * 1000)

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
        host = remote_addr.rsplit(":", 1)[0].strip("[]")
        if self.whitelisted(host):
            return
        ext = request.ext_fields
        ak = ext.get(ACCESS_KEY)
        # Always, whatever the address: a whitelisted account that skipped it (4.9) let
        # anyone who knew its access key in with any secret.
        content = signed_content(ext, request.body)
        given = ext.get(SIGNATURE, "").encode("utf-8", "replace")
        acct = self.authenticate(
            host,
            ak,
            lambda secret: hmac.compare_digest(signature(content, secret).encode("ascii"), given),
        )
        rule = PERMISSIONS.get(request.code, ADMIN)  # deny by default
        if rule.admin and not acct.admin:
            raise NoPermissionError(
                f"Need admin permission for request code={request.code}, but accessKey={ak} is not"
            )
        self.authorize(acct, resources_of(request, rule, self._stored_topic))

    def whitelisted(self, host: str) -> bool:
        """``host`` is in globalWhiteRemoteAddresses: it passes without an account."""
        return any(m(host) for m in self.rules.global_matchers)

    def authenticate(self, host: str, ak: str | None, signed: Callable[[str], bool]) -> Account:
        """The account ``ak`` names, once ``signed(secret)`` confirms its signature and
        ``host`` is within its whiteRemoteAddress (remoting and gRPC sign differently).

        Raises:
            NoPermissionError: no access key, an unknown one, a bad signature, a host the
                account may not connect from.
        """
        if ak is None:
            raise NoPermissionError("No accessKey is configured")
        acct = self.rules.accounts.get(ak)
        if acct is None:
            raise NoPermissionError(f"No acl config for {ak}")
        if not signed(acct.secret_key):
            raise NoPermissionError(f"Check signature failed for accessKey={ak}")
        if not acct.allowed_from(host):
            raise NoPermissionError(
                f"accessKey={ak} may not connect from {host}, outside its whiteRemoteAddress"
            )
        return acct

    @staticmethod
    def authorize(acct: Account, resources: Mapping[str, int]) -> None:
        """``acct`` holds every permission ``resources`` (topics, and groups as
        ``%RETRY%<group>``) needs.

        Raises:
            NoPermissionError: one it does not hold (named).
        """
        ak = acct.access_key
        if acct.admin and not acct.resources:
            return  # 4.9: an admin without topicPerms/groupPerms may touch anything
        for resource, perm in resources.items():
            is_group = resource.startswith(RETRY_PREFIX)
            if not is_group and not acct.admin and admin_only_topic(resource):
                why = f"Need admin permission for system topic={resource}"
                raise NoPermissionError(f"{why}, but accessKey={ak} is not")
            owned = acct.resources.get(resource)
            if owned is None:
                owned = acct.default_group_perm if is_group else acct.default_topic_perm
            if not check_permission(perm, owned):
                what = f"group={resource[len(RETRY_PREFIX) :]}" if is_group else f"topic={resource}"
                raise NoPermissionError(f"No default permission for {what}")

    def _stored_topic(self, commit_log_offset: int) -> str | None:
        """The topic the message at ``commit_log_offset`` (a client's word) belongs to, None
        unless a record starts there: a forged record inside a message body would name any
        topic its sender likes."""
        if self.messages is None:
            return None
        info = self.messages.record_at(commit_log_offset)
        return None if info is None else owner_topic(info)

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

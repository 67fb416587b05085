"""mqadmin's command registry and its output: tables, JSON, and Apache's text.

RocketMQ counterpart: ``MQAdminStartup``'s sub-command list, ``SubCommand``, and the
formatting the commands share (``UtilAll.frontStringAtLeast``, ``%.2f``, the date formats).
``client.admin_cli`` and ``client.admin_cli_ops`` register their commands here; ``main``
in ``client.admin_cli`` runs them.

Every command Apache's mqadmin has prints its exact ``printf`` text (``Out.text``), so
scripts written for Apache's mqadmin parse ours; ``--json`` is there for all. Apache's
formatting helpers are here: Java's ``%.2f``, ``frontStringAtLeast``, its date formats,
``MQVersion`` names, ``MessageExt.toString``.
"""

from __future__ import annotations

import argparse
import codecs
import json
import sys
import time
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass
from datetime import datetime
from decimal import ROUND_HALF_UP, Decimal
from typing import Any

from rich.console import Console
from rich.progress import Progress
from rich.table import Table

from client.admin import Admin, ClusterInfo, PulledBatch, require_cluster
from client.errors import ClientError, InvalidArgumentError
from client.message import MessageView, SendResult
from client.rebalance import message_queue_key
from codec.hashing import java_hashmap_order
from remoting.bodies import BUILTIN_GROUPS, SubscriptionGroupConfig, TopicConfig

TIME_FORMAT = "%Y-%m-%d#%H:%M:%S:%f"  # mqadmin's yyyy-MM-dd#HH:mm:ss:SSS
EXPORT_DIR = "/tmp/rocketmq/export"  # noqa: S108 - Apache's default, named by -f otherwise
RETRY_PREFIX, DLQ_PREFIX = "%RETRY%", "%DLQ%"


class UsageError(InvalidArgumentError):
    """A command line that cannot run; ``main`` exits 2 with the message (it never leaves
    ``main``; an ``InvalidArgumentError`` all the same, so nothing this module raises is
    outside the SDK's tree)."""


# ---------------------------------------------------------------------------- output


class Out:
    """Tables on a terminal, JSON for scripts."""

    def __init__(self, as_json: bool) -> None:
        self.as_json = as_json
        # A pipe gets a wide page: cutting an id short would make the output useless.
        wide = None if sys.stdout.isatty() else 240
        self.console = Console(highlight=False, width=wide)
        self.errors = Console(stderr=True, highlight=False)

    def table(
        self, title: str, headers: Sequence[str], rows: Sequence[Sequence[object]], doc: object
    ) -> None:
        if self.as_json:
            self.json(doc)
            return
        t = Table(title=title, title_justify="left", box=None, header_style="bold")
        for i, h in enumerate(headers):
            t.add_column(h, justify="left" if i == 0 else "right", overflow="fold")
        for row in rows:
            t.add_row(*(cell(c) for c in row))
        self.console.print(t)

    def line(self, text: str, doc: object) -> None:
        if self.as_json:
            self.json(doc)
        else:
            self.console.print(text)

    def json(self, doc: object) -> None:
        sys.stdout.write(json.dumps(doc, indent=2, ensure_ascii=False, default=str) + "\n")

    def text(self, text: str, doc: object) -> None:
        """Apache's exact text (``printf`` lines, trailing spaces and all), or ``doc``. Where
        Apache leaves the last line open, a terminal still gets a newline, so the prompt
        does not start behind the answer; a pipe gets Apache's bytes."""
        if self.as_json:
            self.json(doc)
            return
        sys.stdout.write(text)
        if text and not text.endswith("\n") and sys.stdout.isatty():
            sys.stdout.write("\n")

    def progress(self) -> Progress:
        return Progress(console=self.errors, transient=True, disable=not sys.stderr.isatty())


def cell(value: object) -> str:
    if isinstance(value, float):
        return f"{value:,.2f}"
    if isinstance(value, bool):
        return "true" if value else "false"
    return str(value)


def parse_time(text: str) -> int:
    """A time for mqadmin options: epoch ms, ``now``, or ``yyyy-MM-dd#HH:mm:ss:SSS``.

    Raises:
        UsageError: none of those.
    """
    if text == "now":
        return int(time.time() * 1000)
    if text.lstrip("-").isdigit():
        return int(text)
    try:
        return int(datetime.strptime(text, TIME_FORMAT).timestamp() * 1000)
    except ValueError:
        raise UsageError(
            f"time {text!r} is not epoch milliseconds, 'now' or yyyy-MM-dd#HH:mm:ss:SSS"
        ) from None


# -------------------------------------------------------------------------- registry

Handler = Callable[[Admin, argparse.Namespace, "Out"], Awaitable[None]]
COMMANDS: dict[str, Command] = {}


def command(
    name: str,
    help_text: str,
    options: Callable[[argparse.ArgumentParser], None],
    *,
    alias: str | None = None,
) -> Callable[[Handler], Handler]:
    def register(fn: Handler) -> Handler:
        COMMANDS[name] = Command(help_text, options, fn, alias)
        return fn

    return register


@dataclass(frozen=True, slots=True)
class Command:
    """One sub-command: its help line, its options, what it does, and the other name
    Apache's mqadmin also answers to (``commandAlias``)."""

    help_text: str
    options: Callable[[argparse.ArgumentParser], None]
    handler: Handler
    alias: str | None = None


def find_command(name: str) -> str | None:
    """``findSubCommand``: the command ``name`` names, case-insensitively, by its name or its
    alias; None when there is none."""
    wanted = name.lower()
    for known, cmd in COMMANDS.items():
        if known.lower() == wanted or (cmd.alias is not None and cmd.alias.lower() == wanted):
            return known
    return None


# ------------------------------------------------------------------- shared options


async def target_addrs(admin: Admin, a: argparse.Namespace, *, slaves: bool = False) -> list[str]:
    """The broker ``-b`` names, or the brokers of cluster ``-c`` (of every cluster when there
    is no ``-c``): masters only, or their slaves too, in the order Apache's ``CommandUtil``
    takes them (see ``_cluster_addrs``).

    Raises:
        ClientError: the cluster is unknown, or has no master when only masters are asked.
    """
    if a.broker_addr:
        return [a.broker_addr]
    info = await admin.cluster_info()
    if a.cluster is not None:
        require_cluster(info, a.cluster)
    addrs = _cluster_addrs(info, a.cluster, slaves=slaves)
    if not addrs and not slaves:
        raise ClientError(f"cluster {a.cluster!r} has no master broker")
    return addrs


def _cluster_addrs(info: ClusterInfo, cluster: str | None, *, slaves: bool = False) -> list[str]:
    """The addresses of a cluster's brokers (of every cluster with None), masters only unless
    ``slaves``, in the order Apache's ``CommandUtil`` collects them into a HashSet: broker
    names in HashSet order, each group's addresses by broker id."""
    clusters = [cluster] if cluster is not None else java_hashmap_order(info.clusters)
    found = []
    for c in clusters:
        for name in java_hashmap_order(info.clusters.get(c, [])):
            group = info.brokers.get(name)
            if group is None:
                continue
            for bid, addr in sorted(group.broker_addrs.items()):
                if addr and (bid == 0 or slaves):
                    found.append(addr)
    return java_hashmap_order(found)


async def on_masters(
    admin: Admin, a: argparse.Namespace, action: Callable[[str], Awaitable[object]]
) -> list[str]:
    """Run ``action`` on each of ``target_addrs``; the addresses it ran on."""
    addrs = await target_addrs(admin, a)
    for addr in addrs:
        await action(addr)
    return addrs


def target_opts(p: argparse.ArgumentParser, *, required: bool = True) -> None:
    """mqadmin's ``-b`` broker address / ``-c`` cluster pair."""
    g = p.add_mutually_exclusive_group(required=required)
    g.add_argument("-b", "--brokerAddr", dest="broker_addr", help="broker address host:port")
    g.add_argument("-c", "--clusterName", dest="cluster", help="every master of a cluster")


def topic_opt(p: argparse.ArgumentParser) -> None:
    p.add_argument("-t", "--topic", required=True)


def group_opt(p: argparse.ArgumentParser) -> None:
    p.add_argument("-g", "--consumerGroup", dest="group", required=True)


def java_bool(text: str) -> bool:
    """An option's ``true`` / ``false`` (any case), as the commands' ``Boolean`` options."""
    if text.lower() in ("true", "false"):
        return text.lower() == "true"
    raise argparse.ArgumentTypeError(f"{text!r} is not true or false")


def java_charset(name: str) -> str:
    """``-f bodyFormat``: a charset Java knows by that name (UTF-8, GBK, ISO-8859-1 …)."""
    try:
        return codecs.lookup(name.strip()).name
    except LookupError:
        raise argparse.ArgumentTypeError(f"unknown charset {name!r}") from None


async def user_topics(admin: Admin, addr: str, *, special: bool = False) -> dict[str, TopicConfig]:
    """``getUserTopicConfig``: the broker's topics less its system topics (and, unless
    ``special``, the retry and dead-letter topics)."""
    topics = await admin.topic_configs(addr)
    system = set(await admin.system_topics(addr))
    return {
        name: tc
        for name, tc in topics.items()
        if name not in system and (special or not name.startswith((RETRY_PREFIX, DLQ_PREFIX)))
    }


async def user_groups(admin: Admin, addr: str) -> dict[str, SubscriptionGroupConfig]:
    """``getUserSubscriptionGroup``: the broker's groups less RocketMQ's own."""
    groups = await admin.subscription_groups(addr)
    return {
        name: g
        for name, g in groups.items()
        if name not in BUILTIN_GROUPS and not name.startswith("CID_RMQ_SYS_")
    }


# ------------------------------------------------------------------- Apache's text


def java_f2(value: float) -> str:
    """Java's ``%.2f``: half-up on the shortest decimal form (2.675 -> 2.68, where Python's
    format gives 2.67); NaN as ``NaN``."""
    if value != value:  # noqa: PLR0124 - NaN
        return "NaN"
    return str(Decimal(repr(float(value))).quantize(Decimal("0.01"), ROUND_HALF_UP))


def front(text: str, n: int) -> str:
    """``UtilAll.frontStringAtLeast``: at most ``n`` characters (it cuts, despite its name)."""
    return text[:n]


def java_date(ms: int, pattern: str = "%Y-%m-%d %H:%M:%S") -> str:
    """``UtilAll.formatDate(new Date(ms), "yyyy-MM-dd HH:mm:ss")`` in the local zone."""
    return datetime.fromtimestamp(ms / 1000).strftime(pattern)


def java_human_time(ms: int) -> str:
    """``UtilAll.timeMillisToHumanString2``: ``2024-01-02 03:04:05,678`` in the local zone."""
    when = datetime.fromtimestamp(ms / 1000)
    return when.strftime("%Y-%m-%d %H:%M:%S,") + f"{when.microsecond // 1000:03d}"


# MQVersion.Version from 4.0.0 on is a grid: VX_Y_Z_SNAPSHOT, VX_Y_Z for every Z of every Y
# (10 x 10 per major), V4_0_0_SNAPSHOT being ordinal 212; V4_9_7 = 407, V5_1_0 = 433.
_GRID_START, _GRID_END = 212, 612


def version_desc(ordinal: int) -> str:
    """``MQVersion.getVersionDesc``: a client's version number as its name (``V4_9_7``)."""
    if ordinal > _GRID_END:
        return "HIGHER_VERSION"
    if ordinal < _GRID_START:
        return str(ordinal)  # a 3.x client: its name is not worth a table here
    step, snapshot = divmod(ordinal - _GRID_START, 2)
    major, rest = divmod(step, 100)
    name = f"V{major + 4}_{rest // 10}_{rest % 10}"
    return name if snapshot else name + "_SNAPSHOT"


def message_doc(m: MessageView, *, body: bool) -> dict[str, Any]:
    """A message as ``--json`` shows it."""
    doc: dict[str, Any] = {
        "topic": m.topic,
        "brokerName": m.broker_name,
        "queueId": m.queue_id,
        "queueOffset": m.queue_offset,
        "msgId": m.msg_id,
        "offsetMsgId": m.offset_msg_id,
        "tags": m.tags,
        "keys": " ".join(m.keys),
        "storeTime": m.store_timestamp,
        "bornHost": m.born_host,
        "storeHost": m.store_host,
        "reconsumeTimes": m.reconsume_times,
        "bodyBytes": len(m.body),
        "properties": dict(m.properties),
    }
    if body:
        doc["body"] = m.body.decode("utf-8", errors="replace")
    return doc


def java_message_text(m: MessageView, pulled: PulledBatch | None = None) -> str:
    """``MessageExt.toString()`` of a message as Apache's tools print it. A pull (``pulled``)
    adds ``MIN_OFFSET`` and ``MAX_OFFSET`` to its properties, printed in the order of the
    HashMap they are in; the transaction id is the unique key of a prepared message, as the
    Java client's ``processPullResult`` sets it."""
    props = dict(m.properties)
    if pulled is not None:
        props["MIN_OFFSET"] = str(pulled.min_offset)
        props["MAX_OFFSET"] = str(pulled.max_offset)
    shown = ", ".join(f"{k}={props[k]}" for k in java_hashmap_order(props))
    body = ", ".join(str(b - 256 if b > 127 else b) for b in m.body)
    tx = props.get("UNIQ_KEY", "null") if props.get("TRAN_MSG", "").lower() == "true" else "null"
    return (
        f"MessageExt [brokerName={m.broker_name}, queueId={m.queue_id}, "
        f"storeSize={m.store_size}, queueOffset={m.queue_offset}, sysFlag={m.sys_flag}, "
        f"bornTimestamp={m.born_timestamp}, bornHost=/{m.born_host}, "
        f"storeTimestamp={m.store_timestamp}, storeHost=/{m.store_host}, "
        f"msgId={m.offset_msg_id}, commitLogOffset={m.commit_log_offset}, "
        f"bodyCRC={m.body_crc}, reconsumeTimes={m.reconsume_times}, "
        f"preparedTransactionOffset={m.prepared_transaction_offset}, "
        f"toString()=Message{{topic='{m.topic}', flag={m.flag}, properties={{{shown}}}, "
        f"body=[{body}], transactionId='{tx}'}}]"
    )


def java_send_result(r: SendResult) -> str:
    """``SendResult.toString()`` of RocketMQ 4.x, as checkMsgSendRT and queryMsgById ``-s``
    print it."""
    return (
        f"SendResult [sendStatus={r.status.name}, msgId={r.msg_id}, "
        f"offsetMsgId={r.offset_msg_id}, messageQueue={message_queue_key(r.message_queue)}, "
        f"queueOffset={r.queue_offset}]"
    )


def first_rate(runtime: dict[str, str], key: str) -> float:
    """The 10-second figure of a runtime rate triplet (``putTps``: ``"<10 s> <60 s> <600 s>"``),
    as Apache's tools read it; 0 when absent or empty."""
    try:
        return float(runtime.get(key, "").split()[0])
    except (ValueError, IndexError):
        return 0.0

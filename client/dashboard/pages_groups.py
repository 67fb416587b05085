"""The console's consumer group pages: every group with its clients, TPS and lag; one group's
queues, clients and subscriptions; and the changes an operator makes to a group.

RocketMQ counterpart: rocketmq-dashboard's ``ConsumerController`` (``groupList.query``,
``queryTopicByConsumer.query``, ``consumerConnection.query``, ``createOrUpdate.do``,
``deleteSubGroup.do``) with the offset reset and backlog skip its topic page offers
(``/consumer/resetOffset.do``, ``/consumer/skipAccumulate.do``), here on the group's own page
as issue 24 asks. The list comes from the sampler's last round instead of a cache built on
the first request ("try again later"); lag and TPS follow ``/events``; a group's page adds a
per-queue lag heat map and the last hour of its lag. The brokers are asked what mqadmin asks
(``updateSubGroup``, ``deleteSubGroup -r true`` with its retry and dead-letter topics,
``resetOffsetByTime`` with its fallback for a group no broker has online,
``skipAccumulatedMessage``), and every input is checked here before any broker sees it.
"""

from __future__ import annotations

import asyncio
import math
import urllib.parse
from collections.abc import Awaitable, Iterable
from dataclasses import dataclass, field, replace
from typing import Any, TypeVar

from aiohttp import web

from client.admin import Admin
from client.admin_commands import DLQ_PREFIX, RETRY_PREFIX, version_desc
from client.dashboard.app import (
    MAX_EPOCH_MS,
    BadInput,
    checked_group,
    checked_topic,
    console_of,
    done,
    error_text,
    form_text,
    local_time_ms,
    render,
    shown,
    whole_number,
)
from client.dashboard.sampler import CLUSTER_FAILURES, GroupSample, is_system_group
from remoting.bodies import SubscriptionGroupConfig
from remoting.codes import RequestCode, ResponseCode
from remoting.errors import BrokerError
from remoting.route import MessageQueue

T = TypeVar("T")

CONCURRENCY = 8  # groups asked at once: a long list must not burst ahead of the clients
CONSUME_TYPES = {"CONSUME_PASSIVELY": "push", "CONSUME_ACTIVELY": "pull", "CONSUME_POP": "pop"}
SKIP_TO_END = -1  # the reset time RocketMQ's tools send for "every queue to its max offset"
JAVA_INT_MAX = 2**31 - 1
TRUE_WORDS = frozenset({"on", "true", "1", "yes"})
FALSE_WORDS = frozenset({"", "off", "false", "0", "no"})
GROUP_FLAGS = ("consumeEnable", "consumeMessageOrderly", "consumeBroadcastEnable")


def add_routes(router: web.UrlDispatcher) -> None:
    router.add_get("/groups", groups_list)
    router.add_post("/groups", save_group)
    router.add_get("/groups/{group}", group_detail)
    router.add_post("/groups/{group}/reset", reset_offsets)
    router.add_post("/groups/{group}/skip", skip_backlog)
    router.add_post("/groups/{group}/delete", delete_group)


# ------------------------------------------------------------------------ shared


def group_url(group: str) -> str:
    return "/groups/" + urllib.parse.quote(group, safe="")


def queue_key(group: str, mq: MessageQueue) -> str:
    """The live key the sampler pushes a queue's lag under."""
    return f"queue.{group}.{mq.topic}.{mq.broker_name}.{mq.queue_id}"


def heat_level(lag: int, top: int) -> int:
    """heat0..heat9 as console.js shades a heat map: the share of the largest lag, in
    ninths, rounded up (any lag at all is at least heat1)."""
    return min(9, math.ceil(lag / top * 9)) if top > 0 and lag > 0 else 0


def _group_of(request: web.Request) -> str:
    return checked_group(request.match_info["group"], consumer=True)


def _flag(form: Any, name: str) -> bool:
    """A checkbox: absent (unticked) is false; ``on`` (a browser's) or true/false words."""
    value = form_text(form, name).lower()
    if value in TRUE_WORDS:
        return True
    if value in FALSE_WORDS:
        return False
    raise BadInput(f"{name} must be ticked or not (on/true or off/false), not {shown(value)}")


async def _bounded(jobs: Iterable[Awaitable[T]]) -> list[T]:
    gate = asyncio.Semaphore(CONCURRENCY)

    async def one(job: Awaitable[T]) -> T:
        async with gate:
            return await job

    return list(await asyncio.gather(*(one(j) for j in jobs)))


async def _masters(admin: Admin) -> list[str]:
    masters = await admin.all_masters()
    if not masters:
        raise BadInput("no master broker is registered with the name server")
    return masters


# ---------------------------------------------------------------------- clients


@dataclass(slots=True)
class Clients:
    """A group's online clients as GET_CONSUMER_CONNECTION_LIST lists them, or why none
    are listed (no client online is a normal state, not a failure)."""

    connections: list[dict[str, Any]] = field(default_factory=list)
    subscriptions: list[dict[str, Any]] = field(default_factory=list)
    raw_type: str = ""
    model: str = "-"
    from_where: str = "-"
    note: str | None = None

    @property
    def count(self) -> int:
        return len(self.connections)

    @property
    def consume_type(self) -> str:
        return CONSUME_TYPES.get(self.raw_type, self.raw_type or "-")

    @property
    def version(self) -> str:
        """The oldest client's version (the dashboard's "Version"), by its name."""
        versions = [c["versionNumber"] for c in self.connections]
        return version_desc(min(versions)) if versions else "-"

    @property
    def topics(self) -> list[str]:
        return [s["topic"] for s in self.subscriptions]


def _number(value: object) -> int:
    try:
        return int(str(value))
    except ValueError:
        return 0


async def group_clients(admin: Admin, group: str) -> Clients:
    try:
        doc = await admin.consumer_connection(group)
    except CLUSTER_FAILURES as exc:
        offline = (
            isinstance(exc, BrokerError) and exc.response_code == ResponseCode.CONSUMER_NOT_ONLINE
        )
        return Clients(note="no client online" if offline else error_text(exc))
    connections = [
        {
            "clientId": str(c.get("clientId", "-")),
            "clientAddr": str(c.get("clientAddr", "-")),
            "language": str(c.get("language", "-")),
            "versionNumber": _number(c.get("version")),
            "version": version_desc(_number(c.get("version"))),
        }
        for c in doc.get("connectionSet") or []
    ]
    subscriptions = [
        {
            "topic": str(topic),
            "expression": str(sub.get("subString") or "*"),
            "type": str(sub.get("expressionType") or "TAG"),
            "tags": ", ".join(str(t) for t in sub.get("tagsSet") or []),
            "version": sub.get("subVersion", "-"),
        }
        for topic, sub in sorted((doc.get("subscriptionTable") or {}).items())
        if isinstance(sub, dict)
    ]
    return Clients(
        connections=sorted(connections, key=lambda c: c["clientId"]),
        subscriptions=subscriptions,
        raw_type=str(doc.get("consumeType") or ""),
        model=str(doc.get("messageModel") or "-"),
        from_where=str(doc.get("consumeFromWhere") or "-"),
        note=None if connections else "no client online",
    )


async def group_progress(admin: Admin, group: str) -> GroupSample:
    """The group's position in every queue it reads, asked now (GET_CONSUME_STATS of every
    master), in the sampler's shape."""
    tps, table = await admin.consume_stats(group)
    queues = {mq: (w.broker_offset, w.consumer_offset, w.last_timestamp) for mq, w in table.items()}
    return GroupSample(group, tps, queues)


async def _sampled_now(admin: Admin, group: str) -> GroupSample:
    try:
        return await group_progress(admin, group)
    except CLUSTER_FAILURES as exc:
        return GroupSample(group, error=error_text(exc))


# --------------------------------------------------------------------- the list


@dataclass(slots=True)
class GroupRow:
    name: str
    system: bool
    sample: GroupSample
    clients: Clients


async def _system_samples(admin: Admin, known: set[str]) -> dict[str, GroupSample]:
    """The system groups the sampler leaves out, asked now: the masters' subscription
    group tables name them."""
    names: set[str] = set()
    for addr in await admin.all_masters():
        names.update(await admin.subscription_groups(addr))
    wanted = sorted(n for n in names if n not in known and is_system_group(n))
    samples = await _bounded(_sampled_now(admin, n) for n in wanted)
    return {s.group: s for s in samples}


async def groups_list(request: web.Request) -> web.Response:
    console = console_of(request)
    sampler, admin = console.sampler, console.admin
    await sampler.ensure_sampled()
    wanted = request.query.get("q", "").strip()
    show_system = bool(request.query.get("system"))
    samples = dict(sampler.groups)
    if show_system and sampler.error is None:
        samples.update(await _system_samples(admin, set(samples)))
    hidden = 0 if show_system else len(sampler.system_groups)
    names = [
        n
        for n in sorted(samples, key=lambda n: (is_system_group(n), n.lower(), n))
        if (show_system or not is_system_group(n)) and wanted.lower() in n.lower()
    ]
    clients = await _bounded(group_clients(admin, n) for n in names)
    rows = [
        GroupRow(n, is_system_group(n), samples[n], c) for n, c in zip(names, clients, strict=True)
    ]
    return render(
        request,
        "groups.html",
        {
            "sampler": sampler,
            "rows": rows,
            "q": wanted,
            "show_system": show_system,
            "hidden": hidden,
            "total": len(samples),
        },
    )


# ------------------------------------------------------------- create / update


def _group_config(
    existing: SubscriptionGroupConfig | None,
    group: str,
    retry_max: int,
    flags: dict[str, bool],
) -> SubscriptionGroupConfig:
    """A broker's config of the group with the form's fields changed; a new group gets
    mqadmin updateSubGroup's defaults for the rest (RocketMQ's, but consumeFromMinEnable
    off; broadcast comes from the form)."""
    base = existing or SubscriptionGroupConfig(group, consume_from_min_enable=False)
    return replace(
        base,
        retry_max_times=retry_max,
        consume_enable=flags["consumeEnable"],
        consume_message_orderly=flags["consumeMessageOrderly"],
        consume_broadcast_enable=flags["consumeBroadcastEnable"],
    )


def _retry_max(text: str) -> int:
    if not text:
        return 16  # RocketMQ's default
    value = whole_number(text, JAVA_INT_MAX)
    if value is None:
        raise BadInput(
            f"retryMaxTimes must be a whole number from 0 to {JAVA_INT_MAX}: {shown(text)}"
        )
    return value


async def save_group(request: web.Request) -> web.StreamResponse:
    """Create the group, or change its settings, on every master (mqadmin updateSubGroup
    -c for every cluster)."""
    admin = console_of(request).admin
    form = await request.post()
    group = checked_group(form_text(form, "groupName"), consumer=True)
    retry_max = _retry_max(form_text(form, "retryMaxTimes"))
    flags = {name: _flag(form, name) for name in GROUP_FLAGS}
    masters = await _masters(admin)
    tables = await asyncio.gather(*(admin.subscription_groups(a) for a in masters))
    existed = any(group in t for t in tables)
    for addr, table in zip(masters, tables, strict=True):
        config = _group_config(table.get(group), group, retry_max, flags)
        await admin.create_subscription_group(addr, config)
    verb = "updated" if existed else "created"
    return done(
        request, f"Consumer group {group} {verb} on {', '.join(masters)}.", group_url(group)
    )


# ------------------------------------------------------------------- one group


@dataclass(slots=True)
class QueueRow:
    mq: MessageQueue
    broker_offset: int
    consumer_offset: int
    last_timestamp: int
    key: str

    @property
    def lag(self) -> int:
        return max(0, self.broker_offset - self.consumer_offset)


@dataclass(slots=True)
class HeatRow:
    """One topic on one broker: a cell per queue id, None where it has no such queue."""

    topic: str
    broker: str
    cells: list[tuple[QueueRow, int] | None]


def queue_rows(sample: GroupSample) -> dict[str, list[QueueRow]]:
    by_topic: dict[str, list[QueueRow]] = {}
    for mq, (broker, consumer, last) in sorted(sample.queues.items()):
        row = QueueRow(mq, broker, consumer, last, queue_key(sample.group, mq))
        by_topic.setdefault(mq.topic, []).append(row)
    return by_topic


def heat_map(by_topic: dict[str, list[QueueRow]]) -> tuple[list[int], list[HeatRow]]:
    """Queue ids across, topic@broker down; each cell's level from the largest lag."""
    rows = [r for topic_rows in by_topic.values() for r in topic_rows]
    if not rows:
        return [], []
    top = max(r.lag for r in rows)
    width = max(r.mq.queue_id for r in rows) + 1
    lines: dict[tuple[str, str], list[tuple[QueueRow, int] | None]] = {}
    for r in rows:
        cells = lines.setdefault((r.mq.topic, r.mq.broker_name), [None] * width)
        cells[r.mq.queue_id] = (r, heat_level(r.lag, top))
    return list(range(width)), [HeatRow(t, b, cells) for (t, b), cells in lines.items()]


async def group_configs(admin: Admin, group: str) -> list[tuple[str, SubscriptionGroupConfig]]:
    """The group's subscription group config on each master that has one."""
    masters = await admin.all_masters()
    tables = await asyncio.gather(*(admin.subscription_groups(a) for a in masters))
    return [(a, t[group]) for a, t in zip(masters, tables, strict=True) if group in t]


def reset_choices(sample: GroupSample, clients: Clients) -> list[str]:
    """The topics a reset can name: those the group has offsets in or subscribes to."""
    return sorted({mq.topic for mq in sample.queues} | set(clients.topics))


async def group_detail(request: web.Request) -> web.Response:
    console = console_of(request)
    admin = console.admin
    group = _group_of(request)
    sample, clients, configs = await asyncio.gather(
        group_progress(admin, group), group_clients(admin, group), group_configs(admin, group)
    )
    if not configs and not sample.queues and not clients.connections:
        text = (
            f"No consumer group {group}: no broker has it among its subscription groups, "
            "none has offsets of it, and no client of it is online."
        )
        return render(
            request, "message.html", {"title": "No such group", "text": text, "back": "/groups"},
            status=404,
        )  # fmt: skip
    by_topic = queue_rows(sample)
    columns, heat_rows = heat_map(by_topic)
    return render(
        request,
        "group.html",
        {
            "group": group,
            "url": group_url(group),
            "system": is_system_group(group),
            "sample": sample,
            "clients": clients,
            "configs": configs,
            "config": configs[0][1] if configs else None,
            "by_topic": by_topic,
            "heat_columns": columns,
            "heat_rows": heat_rows,
            "topics": reset_choices(sample, clients),
            "sampler": console.sampler,
        },
    )


# ---------------------------------------------------------------- reset / skip


@dataclass(slots=True)
class ResetRow:
    broker: str
    queue_id: int
    offset: int
    broker_offset: int | None = None
    consumer_offset: int | None = None
    at_time: int | None = None


@dataclass(slots=True)
class ResetOutcome:
    """One topic's reset: where each queue now is, or why it was not reset. ``offline``:
    the brokers would not reset a group none of them has online (RocketMQ 4.x), so the
    console committed each queue's offset itself, as mqadmin does."""

    topic: str
    rows: list[ResetRow] = field(default_factory=list)
    offline: bool = False
    error: str | None = None


def reset_time(at: str, ms: str) -> int:
    """The form's time as epoch ms: a ``datetime-local`` value (the browser sends the
    user's local time without a zone, so it is read as this machine's local time) or epoch
    milliseconds. Any time is allowed, as RocketMQ allows it; one after the last message
    moves each queue to its end."""
    if at and ms:
        raise BadInput("give either a date and time or epoch milliseconds, not both")
    if ms:
        value = whole_number(ms, MAX_EPOCH_MS)
        if value is None:
            raise BadInput(
                f"epoch milliseconds must be a whole number from 0 to {MAX_EPOCH_MS}: {shown(ms)}"
            )
        return value
    if not at:
        raise BadInput("say when to reset to: a date and time, or epoch milliseconds")
    return local_time_ms(at, "reset to")


async def _reset_topics(admin: Admin, group: str, topic: str) -> list[str]:
    """The named topic, or every topic of the group but its retry and dead-letter ones."""
    if topic:
        return [checked_topic(topic)]
    sample, clients = await asyncio.gather(
        group_progress(admin, group), group_clients(admin, group)
    )
    topics = [
        t for t in reset_choices(sample, clients) if not t.startswith((RETRY_PREFIX, DLQ_PREFIX))
    ]
    if not topics:
        raise BadInput(f"group {group} has no offsets and no subscription: name a topic")
    return topics


async def reset_offline(
    admin: Admin, group: str, topic: str, timestamp: int, *, force: bool
) -> list[ResetRow]:
    """mqadmin resetOffsetByTime's fallback (``ResetOffsetByTimeOldCommand``): per queue of
    the topic the group has an offset in on each broker (every queue of the topic on a
    broker where it has none, from its first message), the offset at ``timestamp`` (the
    end for -1) is committed for the group when ``force`` or when it is not ahead of what
    the group consumed. The offset at a time is the first message stored at or after it,
    as the brokers' own reset finds it."""
    route = await admin.topic_route(topic)
    stats = await admin.topic_stats(topic)
    rows: list[ResetRow] = []
    for bd in route.broker_datas:
        addr = bd.master_addr or next(iter(bd.broker_addrs.values()), None)
        if addr is None:
            continue
        table = await admin.consume_stats_at(addr, group)
        positions = [
            (mq, w.broker_offset, w.consumer_offset) for mq, w in table.items() if mq.topic == topic
        ]
        if not positions:  # never consumed there: from each queue's first message
            positions = [
                (mq, s.max_offset, s.min_offset)
                for mq, s in stats.items()
                if mq.broker_name == bd.broker_name
            ]
        for mq, broker_offset, consumer_offset in sorted(positions):
            if timestamp == SKIP_TO_END:
                at = await admin.queue_offset(mq, RequestCode.GET_MAX_OFFSET)
            else:
                at = await admin.offset_for_time(mq, timestamp)
            rollback = consumer_offset
            if force or at <= consumer_offset:
                rollback = at
                await admin.commit_consumer_offset(mq, group, rollback)
            rows.append(
                ResetRow(mq.broker_name, mq.queue_id, rollback, broker_offset, consumer_offset, at)
            )
    return rows


async def reset_topic(
    admin: Admin, group: str, topic: str, timestamp: int, *, force: bool
) -> ResetOutcome:
    """mqadmin resetOffsetByTime / skipAccumulatedMessage on one topic: the brokers move
    the offsets and tell the group's online clients; a broker that will not reset a group
    with no client online gets the fallback."""
    try:
        try:
            table = await admin.reset_offset_by_time(group, topic, timestamp, force=force)
        except BrokerError as exc:
            if exc.response_code != ResponseCode.CONSUMER_NOT_ONLINE:
                raise
            rows = await reset_offline(admin, group, topic, timestamp, force=force)
            return ResetOutcome(topic, rows, offline=True)
    except CLUSTER_FAILURES as exc:
        return ResetOutcome(topic, error=error_text(exc))
    rows = [ResetRow(mq.broker_name, mq.queue_id, offset) for mq, offset in sorted(table.items())]
    return ResetOutcome(topic, rows)


async def _reset(
    request: web.Request, group: str, topic: str, timestamp: int, *, force: bool, title: str
) -> web.Response:
    admin = console_of(request).admin
    topics = await _reset_topics(admin, group, topic)
    outcomes = [await reset_topic(admin, group, t, timestamp, force=force) for t in topics]
    failed = any(o.error for o in outcomes)
    return render(
        request,
        "group_reset.html",
        {
            "title": title,
            "group": group,
            "url": group_url(group),
            "timestamp": timestamp,
            "force": force,
            "outcomes": outcomes,
        },
        status=422 if failed else 200,
    )


async def reset_offsets(request: web.Request) -> web.Response:
    """Every queue of a topic (or of each of the group's topics) to the first message
    stored at or after a time. The page shows where each queue now is: a reset is the same
    reset if the browser sends it again, so the result is shown instead of redirected."""
    group = _group_of(request)
    form = await request.post()
    timestamp = reset_time(form_text(form, "at"), form_text(form, "ms"))
    force = _flag(form, "force")
    title = f"Offsets of {group} reset"
    return await _reset(
        request, group, form_text(form, "topic"), timestamp, force=force, title=title
    )


async def skip_backlog(request: web.Request) -> web.Response:
    """Every queue to its max offset: RocketMQ's skipAccumulate (reset time -1, forced)."""
    group = _group_of(request)
    form = await request.post()
    title = f"Backlog of {group} skipped"
    topic = form_text(form, "topic")
    return await _reset(request, group, topic, SKIP_TO_END, force=True, title=title)


# ---------------------------------------------------------------------- delete


async def _delete_group_topics(admin: Admin, group: str) -> list[str]:
    """The group's retry and dead-letter topics, from every cluster that has them (as
    mqadmin deleteSubGroup -c and the dashboard do)."""
    existing = set(await admin.topic_list())
    info = await admin.cluster_info()
    clusters = [
        c
        for c, names in sorted(info.clusters.items())
        if any(n in info.brokers and info.brokers[n].master_addr for n in names)
    ]
    deleted = []
    for topic in (RETRY_PREFIX + group, DLQ_PREFIX + group):
        if topic in existing:
            for cluster in clusters:
                await admin.delete_topic(topic, cluster)
            deleted.append(topic)
    return deleted


async def delete_group(request: web.Request) -> web.StreamResponse:
    """The group and its offsets from every master (mqadmin deleteSubGroup -r true), and
    unless unticked its retry and dead-letter topics; the form asks for the group's name."""
    console = console_of(request)
    admin = console.admin
    group = _group_of(request)
    form = await request.post()
    if form_text(form, "confirm") != group:
        raise BadInput(f"to delete the group, type its name ({group}) in the confirmation box")
    with_topics = _flag(form, "topics")
    masters = await _masters(admin)
    configs, sample, clients = await asyncio.gather(
        group_configs(admin, group), group_progress(admin, group), group_clients(admin, group)
    )
    if not configs and not sample.queues:
        raise BadInput(f"no broker has a consumer group {group} or offsets of it")
    for addr in masters:
        await admin.delete_subscription_group(addr, group, remove_offset=True)
    topics = await _delete_group_topics(admin, group) if with_topics else []
    console.sampler.groups.pop(group, None)  # gone from the list before the next round
    text = f"Consumer group {group} deleted from {', '.join(masters)}"
    text += f", with {' and '.join(topics)}." if topics else "."
    if clients.count:
        text += (
            f" {clients.count} of its clients are still online: the brokers create the group "
            "again at their next heartbeat unless autoCreateSubscriptionGroup is false."
        )
    return done(request, text, "/groups", kind="info" if clients.count else "ok")

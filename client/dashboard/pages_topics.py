"""The console's topic pages: every topic by kind, one topic's queues, route and consuming
groups, and creating, updating, deleting and test-sending.

RocketMQ counterpart: rocketmq-dashboard's ``TopicController`` — ``list.queryTopicType``
(the list and its kinds), ``stats.query``, ``route.query``, ``queryConsumerByTopic.query``,
``examineTopicConfig.query``, ``createOrUpdate.do``, ``deleteTopic.do`` and
``sendTopicMessage.do`` — with ``mqadmin updateTopic`` / ``deleteTopic`` doing the writes the
same way (UPDATE_AND_CREATE_TOPIC on each chosen master, the order config in the name
server's KV store; DELETE_TOPIC_IN_BROKER on every master of the topic's clusters, then
DELETE_TOPIC_IN_NAMESRV). Unlike the dashboard, the console checks names, queue counts and
permissions before any broker is asked, asks for the topic's name to be typed before
deleting it, and refuses to send to a topic the name server does not know (a producer would
otherwise create it from TBW102). System topics are shown read only, as there.
"""

from __future__ import annotations

import asyncio
import urllib.parse
import uuid
from collections import Counter
from collections.abc import Iterable, Set
from dataclasses import dataclass, field
from typing import Any

from aiohttp import web
from multidict import MultiMapping

from client.admin import Admin, ClusterInfo
from client.admin_commands import DLQ_PREFIX, RETRY_PREFIX
from client.dashboard.app import (
    BadInput,
    checked_topic,
    console_of,
    done,
    form_text,
    metric_url,
    render,
    shown,
    whole_number,
)
from client.dashboard.sampler import CLUSTER_FAILURES
from client.errors import InvalidArgumentError, NoRouteError
from client.message import Message, SendResult
from client.producer import Producer
from remoting.bodies import SYSTEM_TOPICS, OffsetWrapper, TopicConfig, TopicOffset
from remoting.route import MessageQueue, TopicRouteData

KINDS = ("normal", "retry", "dlq", "system")
DEFAULT_KINDS = frozenset({"normal"})  # the dashboard's first view: NORMAL ticked, the rest not
PERMS = ((6, "RW"), (4, "R"), (2, "W"))  # PermName: 2 write, 4 read
MAX_QUEUES = 1024  # the broker refuses more read or write queues than this
DEFAULT_QUEUES = 8  # mqadmin updateTopic's -r / -w
SELF_TEST_GROUP = "SELF_TEST_P_GROUP"  # the dashboard's producer group for test messages
SYSTEM_PREFIX = "rmq_sys_"  # compared case-folded: RMQ_SYS_TRACE_TOPIC and rmq_sys_wheel_timer
# Topics a broker keeps for itself (remoting's SYSTEM_TOPICS and the dashboard's extra
# name); a broker also reports its own through GET_SYSTEM_TOPIC_LIST_FROM_BROKER, and every
# cluster and broker name (and ``<cluster>_REPLY_TOPIC``) is a topic of its own.
SYSTEM_NAMES = SYSTEM_TOPICS | {"DefaultHeartBeatSyncerTopic"}  # and 5.x's heartbeat syncer
MAX_PARALLEL_GROUPS = 8  # consume-stats requests in flight for one page


def add_routes(router: web.UrlDispatcher) -> None:
    router.add_get("/topics", topics)
    router.add_post("/topics", save_topic)
    router.add_get("/topics/{topic}", topic_detail)
    router.add_post("/topics/{topic}/delete", delete_topic)
    router.add_post("/topics/{topic}/send", send_message)


# --------------------------------------------------------------------------- the model


def topic_kind(topic: str, system: Set[str]) -> str:
    """normal, retry, dlq or system, as the dashboard's ``list.queryTopicType`` sorts them
    (a retry or dead-letter prefix first, then the system names)."""
    if topic.startswith(RETRY_PREFIX):
        return "retry"
    if topic.startswith(DLQ_PREFIX):
        return "dlq"
    if topic in system or topic.casefold().startswith(SYSTEM_PREFIX):
        return "system"
    return "normal"


def perm_label(perm: int) -> str:
    """R, W and X (inherit) as set; ``-`` for none."""
    text = ("R" if perm & 4 else "") + ("W" if perm & 2 else "") + ("X" if perm & 1 else "")
    return text or "-"


def topic_url(topic: str) -> str:
    return "/topics/" + urllib.parse.quote(topic, safe="")


def offset_metric(topic: str, broker: str) -> str:
    """The exporter's series of a topic's summed max offsets on one broker: retry and
    dead-letter topics have families of their own (the latter labelled by group)."""
    if topic.startswith(RETRY_PREFIX):
        return metric_url("rocketmq_topic_retry_offset", topic=topic, broker=broker)
    if topic.startswith(DLQ_PREFIX):
        return metric_url(
            "rocketmq_topic_dlq_offset", group=topic.removeprefix(DLQ_PREFIX), broker=broker
        )
    return metric_url("rocketmq_producer_offset", topic=topic, broker=broker)


@dataclass(slots=True)
class TopicRow:
    """One topic as the list shows it: its kind and its config on each master."""

    topic: str
    kind: str
    configs: dict[str, TopicConfig] = field(default_factory=dict)  # broker name → config

    @property
    def url(self) -> str:
        return topic_url(self.topic)

    @property
    def read_queues(self) -> int:
        return sum(c.read_queue_nums for c in self.configs.values())

    @property
    def write_queues(self) -> int:
        return sum(c.write_queue_nums for c in self.configs.values())

    @property
    def perm(self) -> str:
        return " / ".join(sorted({perm_label(c.perm) for c in self.configs.values()})) or "-"

    @property
    def brokers(self) -> list[str]:
        return sorted(self.configs)


@dataclass(slots=True)
class Survey:
    """What the masters say: each one's topic configs, and the names that are system topics
    (theirs, the well-known ones, and every cluster and broker name)."""

    info: ClusterInfo
    masters: dict[str, str]  # broker name → master address
    configs: dict[str, dict[str, TopicConfig]] = field(default_factory=dict)
    system: set[str] = field(default_factory=set)
    failures: list[str] = field(default_factory=list)  # masters that did not answer, and why


async def survey(admin: Admin, only: Iterable[str] | None = None) -> Survey:
    """Ask every master (or the masters of the broker names ``only``) for its topic configs
    and its system topics; a master that does not answer is named in ``failures``."""
    info = await admin.cluster_info()
    chosen = set(only) if only is not None else set(info.brokers)
    masters = {
        name: bd.master_addr
        for name, bd in sorted(info.brokers.items())
        if name in chosen and bd.master_addr
    }
    found = Survey(info, masters, system=set(SYSTEM_NAMES))
    for cluster, names in info.clusters.items():
        found.system.update((cluster, f"{cluster}_REPLY_TOPIC", *names))

    async def ask(name: str, addr: str) -> None:
        try:
            configs, system = await asyncio.gather(
                admin.topic_configs(addr), admin.system_topics(addr)
            )
        except CLUSTER_FAILURES as exc:
            found.failures.append(f"{name} ({addr}) did not answer: {exc}")
            return
        found.configs[name] = configs
        found.system.update(system)

    await asyncio.gather(*(ask(n, a) for n, a in masters.items()))
    return found


def topic_rows(names: Iterable[str], found: Survey) -> list[TopicRow]:
    """Every topic the name server lists or a master holds (one just created may not be
    registered yet), with its kind and per-broker configs, by name."""
    rows = {t: TopicRow(t, topic_kind(t, found.system)) for t in names}
    for broker, configs in found.configs.items():
        for topic, config in configs.items():
            row = rows.get(topic)
            if row is None:
                row = rows[topic] = TopicRow(topic, topic_kind(topic, found.system))
            row.configs[broker] = config
    return sorted(rows.values(), key=lambda r: (r.topic.casefold(), r.topic))


@dataclass(slots=True)
class Consumption:
    """One group's position in each queue of the topic (the dashboard's Consumer Manage)."""

    group: str
    queues: list[tuple[MessageQueue, OffsetWrapper]] = field(default_factory=list)
    tps: float = 0.0
    error: str | None = None

    @property
    def lag(self) -> int:
        return sum(max(0, w.broker_offset - w.consumer_offset) for _, w in self.queues)

    @property
    def last_consumed(self) -> int:
        return max((w.last_timestamp for _, w in self.queues), default=0)


async def consumers_of(admin: Admin, topic: str) -> tuple[list[Consumption], str | None]:
    """The groups consuming ``topic`` with their positions in it, and why the list is
    missing when the brokers would not say."""
    try:
        groups = await admin.topic_consumed_by(topic)
    except CLUSTER_FAILURES as exc:
        return [], f"The brokers did not say which groups consume {topic}: {exc}"
    limit = asyncio.Semaphore(MAX_PARALLEL_GROUPS)

    async def ask(group: str) -> Consumption:
        seen = Consumption(group)
        async with limit:
            try:
                seen.tps, table = await admin.consume_stats(group, topic)
            except CLUSTER_FAILURES as exc:
                seen.error = str(exc)
                return seen
        seen.queues = sorted((mq, w) for mq, w in table.items() if mq.topic == topic)
        return seen

    return list(await asyncio.gather(*(ask(g) for g in sorted(set(groups))))), None


# ------------------------------------------------------------------------ input checks


def _queue_count(form: MultiMapping[Any], name: str, label: str) -> int:
    text = form_text(form, name)
    count = whole_number(text, MAX_QUEUES)
    if not count:
        raise BadInput(f"{label} must be a whole number from 1 to {MAX_QUEUES}, not {shown(text)}")
    return count


def _perm(form: MultiMapping[Any]) -> int:
    text = form_text(form, "perm")
    named = {label: perm for perm, label in PERMS}
    perm = named.get(text.upper()) or (int(text) if text in ("2", "4", "6") else None)
    if perm is None:
        raise BadInput(f"perm must be W (2), R (4) or RW (6), not {text!r}")
    return perm


@dataclass(frozen=True, slots=True)
class TopicSpec:
    """A create or update form, checked."""

    config: TopicConfig
    cluster: str
    brokers: tuple[str, ...]


def topic_spec(form: MultiMapping[Any]) -> TopicSpec:
    topic = checked_topic(form_text(form, "topic"))
    write = _queue_count(form, "writeQueueNums", "writeQueueNums")
    read = _queue_count(form, "readQueueNums", "readQueueNums")
    perm = _perm(form)
    order = form_text(form, "order") in ("on", "true", "1")
    brokers = tuple(v.strip() for v in form.getall("broker", []) if isinstance(v, str) and v)
    config = TopicConfig(topic, read, write, perm, "SINGLE_TAG", 0, order)
    return TopicSpec(config, form_text(form, "cluster"), brokers)


def target_masters(info: ClusterInfo, cluster: str, brokers: Iterable[str]) -> dict[str, str]:
    """Broker name → master address of every broker of ``cluster`` and every named broker
    (the dashboard's ``clusterNameList`` and ``brokerNameList``, united)."""
    names: set[str] = set()
    if cluster:
        if cluster not in info.clusters:
            known = ", ".join(sorted(info.clusters)) or "none"
            raise BadInput(f"no cluster {cluster!r} is registered (known: {known})")
        names.update(info.clusters[cluster])
    for name in brokers:
        if name not in info.brokers:
            raise BadInput(f"no broker {name!r} is registered with the name server")
        names.add(name)
    if not names:
        raise BadInput("choose a cluster or at least one broker to put the topic on")
    masters = {n: info.brokers[n].master_addr for n in sorted(names) if n in info.brokers}
    down = sorted(n for n, addr in masters.items() if not addr) + sorted(names - set(masters))
    if down:
        raise BadInput(f"{', '.join(down)} has no master now: nothing was changed")
    return {n: addr for n, addr in masters.items() if addr}


def _refuse_system(topic: str, found: Survey) -> None:
    if topic_kind(topic, found.system) == "system":
        raise BadInput(f"{topic} is a system topic: the console shows it read only")


async def route_of(admin: Admin, topic: str) -> TopicRouteData:
    try:
        return await admin.topic_route(topic)
    except NoRouteError:
        raise BadInput(f"no topic {topic!r}: the name server has no route for it") from None


def _path_topic(request: web.Request) -> str:
    return checked_topic(request.match_info["topic"])


# --------------------------------------------------------------------------- the list


def _kinds(values: list[str]) -> frozenset[str]:
    chosen = frozenset(v.strip().lower() for v in values if v.strip())
    unknown = sorted(chosen - set(KINDS))
    if unknown:
        raise BadInput(f"unknown topic kind {unknown[0]!r}: choose from {', '.join(KINDS)}")
    return chosen or DEFAULT_KINDS


async def topics(request: web.Request) -> web.Response:
    """Every topic, filtered by kind and by a case-insensitive part of its name."""
    admin = console_of(request).admin
    kinds = _kinds(request.query.getall("kind", []))
    needle = request.query.get("q", "").strip()
    names, found = await asyncio.gather(admin.topic_list(), survey(admin))
    rows = topic_rows(names, found)
    shown = [r for r in rows if r.kind in kinds and needle.casefold() in r.topic.casefold()]
    return render(
        request,
        "topics.html",
        {
            "rows": shown,
            "total": len(rows),
            "counts": Counter(r.kind for r in rows),
            "kinds": KINDS,
            "chosen": kinds,
            "q": needle,
            "failures": found.failures,
            "form": _form_values(found.info),
            **_choices(found.info),
        },
    )


def _choices(info: ClusterInfo) -> dict[str, Any]:
    """What the create and update forms offer: the clusters, the brokers with their masters,
    and the permissions."""
    cluster_of = {n: c for c, names in info.clusters.items() for n in names}
    return {
        "clusters": sorted(info.clusters),
        "broker_choices": [
            (name, bd.master_addr or "no master", cluster_of.get(name, bd.cluster))
            for name, bd in sorted(info.brokers.items())
        ],
        "perms": PERMS,
    }


def _form_values(
    info: ClusterInfo, topic: str = "", config: TopicConfig | None = None, on: Iterable[str] = ()
) -> dict[str, Any]:
    """The create form's defaults (mqadmin's: 8 queues, RW, one cluster preselected when
    there is only one), or an existing topic's settings and brokers."""
    lone = next(iter(info.clusters)) if len(info.clusters) == 1 else ""
    return {
        "topic": topic,
        "fixed": bool(topic),
        "read": config.read_queue_nums if config else DEFAULT_QUEUES,
        "write": config.write_queue_nums if config else DEFAULT_QUEUES,
        "perm": (config.perm & 6) if config else 6,
        "order": config.order if config else False,
        "cluster": "" if topic else lone,
        "brokers": sorted(on),
    }


async def save_topic(request: web.Request) -> web.StreamResponse:
    """Create a topic or change its queues, perm and order flag, on the chosen masters."""
    admin = console_of(request).admin
    spec = topic_spec(await request.post())
    topic = spec.config.topic_name
    info = await admin.cluster_info()
    masters = target_masters(info, spec.cluster, spec.brokers)
    found, existing = await asyncio.gather(survey(admin, masters), admin.topic_list())
    _refuse_system(topic, found)
    for addr in masters.values():
        await admin.create_topic(addr, spec.config)
    if spec.config.order:
        queues = spec.config.write_queue_nums
        await admin.merge_order_conf(topic, {b: f"{b}:{queues}" for b in masters})
    c = spec.config
    verb = "updated" if topic in existing else "created"
    return done(
        request,
        f"Topic {topic} {verb} on {', '.join(masters)}: {c.write_queue_nums} write and "
        f"{c.read_queue_nums} read queues, perm {perm_label(c.perm)}"
        + (", ordered" if c.order else ""),
        topic_url(topic),
    )


# ------------------------------------------------------------------------ one topic


async def topic_detail(request: web.Request) -> web.Response:
    """A topic's queues (min/max offset, last update), route, consuming groups with their
    lag on it, and — for a topic that is not a system topic — its forms."""
    console = console_of(request)
    admin = console.admin
    topic = _path_topic(request)
    route = await route_of(admin, topic)
    names = [bd.broker_name for bd in route.broker_datas]
    found, stats, (consumers, consumers_error) = await asyncio.gather(
        survey(admin, names), admin.topic_stats(topic), consumers_of(admin, topic)
    )
    configs = {n: c[topic] for n, c in found.configs.items() if topic in c}
    first = next(iter(configs.values()), None)
    kind = topic_kind(topic, found.system)
    return render(
        request,
        "topic.html",
        {
            "topic": topic,
            "url": topic_url(topic),
            "kind": kind,
            "route": route,
            "configs": configs,
            "queues": _queue_rows(stats),
            "consumers": consumers,
            "consumers_error": consumers_error,
            "failures": found.failures,
            "offset_metric": offset_metric,
            "perm_label": perm_label,
            "form": _form_values(found.info, topic, first or _route_config(topic, route), names),
            **_choices(found.info),
        },
    )


def _route_config(topic: str, route: TopicRouteData) -> TopicConfig | None:
    """The settings the route carries, for a topic whose master did not answer."""
    qd = next(iter(route.queue_datas), None)
    if qd is None:
        return None
    return TopicConfig(topic, qd.read_queue_nums, qd.write_queue_nums, qd.perm)


def _queue_rows(stats: dict[MessageQueue, TopicOffset]) -> dict[str, Any]:
    rows = sorted(stats.items(), key=lambda kv: (kv[0].broker_name, kv[0].queue_id))
    return {
        "rows": rows,
        "min": sum(o.min_offset for _, o in rows),
        "max": sum(o.max_offset for _, o in rows),
        "stored": sum(max(0, o.max_offset - o.min_offset) for _, o in rows),
        "last": max((o.last_update_timestamp for _, o in rows), default=0),
    }


async def _changeable(admin: Admin, topic: str) -> TopicRouteData:
    """The route of a topic the console may change: known, and not a system topic."""
    route = await route_of(admin, topic)
    _refuse_system(topic, await survey(admin, [bd.broker_name for bd in route.broker_datas]))
    return route


async def delete_topic(request: web.Request) -> web.StreamResponse:
    """Delete the topic from every master of each cluster it is on, then from the name
    servers (mqadmin ``deleteTopic -c`` per cluster). The name must be typed to confirm."""
    admin = console_of(request).admin
    topic = _path_topic(request)
    form = await request.post()
    if form_text(form, "confirm") != topic:
        raise BadInput(f"type the topic name to confirm: {topic} was not deleted")
    route = await _changeable(admin, topic)
    info = await admin.cluster_info()
    cluster_of = {n: c for c, names in info.clusters.items() for n in names}
    clusters = sorted(
        {cluster_of.get(bd.broker_name) or bd.cluster for bd in route.broker_datas} - {""}
    )
    if not clusters:
        raise BadInput(f"no cluster holds {topic} now: nothing was deleted")
    brokers: list[str] = []
    for cluster in clusters:
        brokers += await admin.delete_topic(topic, cluster)
    return done(
        request,
        f"Topic {topic} deleted from {', '.join(brokers)} and from the name server",
        "/topics",
    )


async def send_message(request: web.Request) -> web.StreamResponse:
    """Send one message to the topic as producer group SELF_TEST_P_GROUP and show where it
    landed (the dashboard's Send Message)."""
    console = console_of(request)
    topic = checked_topic(request.match_info["topic"], to_send=True)
    form = await request.post()
    body = form.get("body", "")
    if not isinstance(body, str) or not body:
        raise BadInput("a test message needs a body")
    await _changeable(console.admin, topic)
    msg = Message(
        topic,
        body.encode(),
        tags=form_text(form, "tag") or None,
        keys=form_text(form, "keys") or None,
    )
    result = await _send_once(console.admin, msg)
    mq = result.message_queue
    return done(
        request,
        f"Sent to {topic}: {result.status.value} on {mq.broker_name} queue {mq.queue_id} at "
        f"offset {result.queue_offset}; msgId {result.msg_id}, "
        f"offsetMsgId {result.offset_msg_id}",
        topic_url(topic),
    )


async def _send_once(admin: Admin, msg: Message) -> SendResult:
    """A producer of its own client instance for this one message: two sends at once must
    not register the same group twice in one instance, and the console keeps no producer
    between them (the dashboard starts and stops one per message too)."""
    producer = Producer(
        SELF_TEST_GROUP,
        admin.namesrv,
        instance_name=f"dashboard-self-test-{uuid.uuid4().hex[:12]}",
        tls=admin.tls,
        credentials=admin.credentials,
        auto_batch=False,
    )
    await producer.start()
    try:
        return await producer.send(msg)
    except InvalidArgumentError as exc:  # the message's own fault (tag, keys, size)
        raise BadInput(str(exc)) from None
    finally:
        await producer.shutdown()

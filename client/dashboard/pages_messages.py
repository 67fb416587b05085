"""The console's message pages: search a topic (by time range, key or id), one message in
detail with its consume status per group and its trace, resend to a group or have one of its
online clients consume it, and each group's dead letters.

RocketMQ counterpart: rocketmq-dashboard's ``MessageController`` (queryMessageByTopic,
queryMessageByTopicAndKey, viewMessage with messageTrackDetail, consumeMessageDirectly) and
``DlqMessageController``. Two ways to give a message to a group again. "Consume on a client"
is the dashboard's: an online client takes it now (CONSUME_MESSAGE_DIRECTLY) and says how its
listener did; nothing is stored, and with no client online it cannot be done. "Resend"
re-drives it: a copy goes to the group's retry topic ``%RETRY%<group>`` with its first topic
in ``RETRY_TOPIC``, as a consumer's send-back does, so the group gets it (under its first
topic) whenever one of its consumers runs, and no other group sees it. An id is either kind
the dashboard meets: the id a producer gave (UNIQ_KEY, the index is asked) or an offset id
(the broker's position, read directly).
"""

from __future__ import annotations

import asyncio
import json
import time
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from aiohttp import web

from client.admin import Admin, MessageTrack, decode_offset_msg_id
from client.admin_commands import DLQ_PREFIX, RETRY_PREFIX
from client.dashboard.app import (
    BadInput,
    checked_group,
    checked_topic,
    console_of,
    epoch_ms,
    form_text,
    render,
    see_other,
)
from client.dashboard.sampler import CLUSTER_FAILURES, is_system_group
from client.errors import NoRouteError
from client.message import MessageView
from client.trace import TraceView
from codec import PROPERTY_RETRY_TOPIC
from remoting.errors import BrokerError, ConsumerNotOnlineError
from remoting.route import MessageQueue

SEARCH_LIMIT = 2000  # messages a time search shows at the most (newest first)
PAGE_SIZE = 50
BODY_SHOWN = 64 << 10  # of a larger body, this much is shown (the rest is said)
HEX_SHOWN = 8 << 10
TIME_FORMAT = "%Y-%m-%dT%H:%M"


def add_routes(router: web.UrlDispatcher) -> None:
    router.add_get("/messages", search)
    router.add_get("/messages/view", view)
    router.add_post("/messages/resend", resend)
    router.add_post("/messages/consume", consume_on_client)
    router.add_get("/dlq", dead_letters)
    router.add_post("/dlq/resend", resend_dead_letters)


# ------------------------------------------------------------------------ input


def _text(request: web.Request, name: str) -> str:
    return form_text(request.query, name)


def _time(value: str, what: str, default_ms: int) -> int:
    return epoch_ms(value, what) if value else default_ms


def _range(request: web.Request, default_span_ms: int) -> tuple[int, int]:
    now = int(time.time() * 1000)
    begin = _time(_text(request, "begin"), "begin", now - default_span_ms)
    end = _time(_text(request, "end"), "end", now)
    if end < begin:
        raise BadInput("the end of the time range is before its beginning")
    return begin, end


def _local(ms: int) -> str:
    return datetime.fromtimestamp(ms / 1000).strftime(TIME_FORMAT)


# ------------------------------------------------------------------------ finding


async def messages_between(
    admin: Admin, topic: str, begin_ms: int, end_ms: int, limit: int = SEARCH_LIMIT
) -> tuple[list[MessageView], bool]:
    """The messages of ``topic`` stored within [begin, end], newest first, at most
    ``limit`` (and whether there were more): the last ``limit`` of each queue's range are
    read, so a search costs the same however long the range."""
    route = await admin.topic_route(topic)
    queues = [
        MessageQueue(topic, qd.broker_name, qid)
        for qd in route.queue_datas
        for qid in range(qd.read_queue_nums)
    ]

    async def one(mq: MessageQueue) -> tuple[list[MessageView], bool]:
        lo = await admin.offset_for_time(mq, begin_ms)
        hi = await admin.offset_for_time(mq, end_ms, side="first_after")
        start = max(lo, hi - limit)
        found: list[MessageView] = []
        offset = start
        while offset < hi:
            pulled = await admin.pull_batch(mq, offset, 32)
            found += [m for m in pulled.messages if m.queue_offset < hi]
            if pulled.next_offset <= offset:
                break
            offset = pulled.next_offset
        return found, start > lo

    parts = await asyncio.gather(*(one(mq) for mq in queues))
    found = [m for msgs, _ in parts for m in msgs]
    found.sort(key=lambda m: (m.store_timestamp, m.queue_offset), reverse=True)
    return found[:limit], len(found) > limit or any(more for _, more in parts)


def _id_kind(msg_id: str) -> str:
    if (
        not msg_id
        or len(msg_id) not in (32, 56)
        or not all(c in "0123456789abcdefABCDEF" for c in msg_id)
    ):
        raise BadInput(
            f"message id {msg_id!r}: a RocketMQ message id is 32 hex digits (56 for IPv6), "
            "the id a producer got (msgId) or the broker's offset id (offsetMsgId)"
        )
    return msg_id.upper()


async def find_message(admin: Admin, topic: str, msg_id: str) -> MessageView:
    """The message of ``topic`` with either kind of id: the producer's (UNIQ_KEY, asked of
    the index) first, as ``viewMessage`` does, then the broker's offset id. An offset id
    names an address; it is read only when that address is one of the topic's brokers, so
    a link can never make the console dial anywhere else."""
    wanted = _id_kind(msg_id)
    found = await admin.query_by_unique_key(topic, wanted)
    if found is not None:
        return found
    m = None
    try:
        addr, _offset = decode_offset_msg_id(wanted)
        route = await admin.topic_route(topic)
        if any(addr in bd.broker_addrs.values() for bd in route.broker_datas):
            m = await admin.view_message(wanted)
    except CLUSTER_FAILURES:
        m = None
    if m is None or m.topic != topic:
        raise BadInput(f"no message {msg_id} in topic {topic}")
    return m


# ------------------------------------------------------------------------ pages


async def search(request: web.Request) -> web.Response:
    """``by=time`` (topic, begin, end, page), ``by=key`` (topic, key) or ``by=id``."""
    by = _text(request, "by") or "time"
    if by not in ("time", "key", "id"):
        raise BadInput(f"search by {by!r}: by time, key or id")
    admin = console_of(request).admin
    now = int(time.time() * 1000)
    context: dict[str, Any] = {
        "by": by,
        "topic": _text(request, "topic"),
        "key": _text(request, "key"),
        "msg_id": _text(request, "id"),
        "begin": _text(request, "begin") or _local(now - 3600_000),
        "end": _text(request, "end") or _local(now),
        "results": None,
        "more": False,
        "page": 1,
        "pages": 1,
    }
    if context["topic"]:
        topic = checked_topic(context["topic"])
        if by == "id" and context["msg_id"]:
            m = await find_message(admin, topic, context["msg_id"])
            return see_other(f"/messages/view?topic={topic}&id={m.msg_id}")
        if by == "key" and context["key"]:
            context["results"] = list(
                reversed(await admin.query_by_key(topic, context["key"], max_num=64))
            )
        elif by == "time":
            await _time_page(request, admin, topic, context)
    return render(request, "msg_search.html", context)


async def _time_page(
    request: web.Request, admin: Admin, topic: str, context: dict[str, Any]
) -> None:
    begin, end = _range(request, 3600_000)
    found, more = await messages_between(admin, topic, begin, end)
    pages = max(1, -(-len(found) // PAGE_SIZE))
    try:
        page = min(max(1, int(_text(request, "page") or "1")), pages)
    except ValueError:
        raise BadInput("page must be a number") from None
    context.update(
        results=found[(page - 1) * PAGE_SIZE : page * PAGE_SIZE],
        total=len(found),
        more=more,
        page=page,
        pages=pages,
    )


@dataclass
class Body:
    """A message body as the detail page shows it: text, hex or JSON."""

    size: int
    text: str
    hex: str
    json: str | None  # pretty-printed when it parses as JSON
    truncated: bool


def _body(raw: bytes) -> Body:
    shown = raw[:BODY_SHOWN]
    try:
        pretty: str | None = json.dumps(json.loads(raw), indent=2, ensure_ascii=False)
    except (ValueError, UnicodeDecodeError, RecursionError):
        pretty = None
    hexed = " ".join(raw[i : i + 16].hex(" ") for i in range(0, min(len(raw), HEX_SHOWN), 16))
    return Body(
        len(raw),
        shown.decode("utf-8", "replace"),
        hexed,
        pretty,
        len(raw) > BODY_SHOWN,
    )


async def view(request: web.Request) -> web.Response:
    console = console_of(request)
    admin = console.admin
    topic = checked_topic(_text(request, "topic"))
    m = await find_message(admin, topic, _text(request, "id"))
    tracks: list[MessageTrack] = []
    traces: list[TraceView] = []
    trace_error = ""
    try:
        tracks = await admin.message_tracks(m)
    except CLUSTER_FAILURES as exc:
        trace_error = str(exc)
    try:
        traces = await admin.query_trace(m.msg_id)
    except NoRouteError:
        pass  # no trace topic: nothing traced in this cluster
    except CLUSTER_FAILURES as exc:
        trace_error = str(exc)
    shown = _text(request, "as") or "text"
    if shown not in ("text", "hex", "json"):
        raise BadInput("show the body as text, hex or json")
    groups = _resend_groups(m, tracks)
    return render(
        request,
        "msg_view.html",
        {
            "m": m,
            "body": _body(bytes(m.body)),
            "shown": shown,
            "tracks": tracks,
            "traces": traces,
            "trace_error": trace_error,
            "groups": groups,
            "origin_topic": m.properties.get(PROPERTY_RETRY_TOPIC, topic),
        },
    )


def _resend_groups(m: MessageView, tracks: list[MessageTrack]) -> list[str]:
    """The groups a message can be resent to: those that read its topic, and for a dead
    letter (or a retry) the group its topic names."""
    groups = {t.group for t in tracks}
    for prefix in (DLQ_PREFIX, RETRY_PREFIX):
        if m.topic.startswith(prefix):
            groups.add(m.topic.removeprefix(prefix))
    return sorted(groups)


async def _resend(request: web.Request, topic: str, ids: list[str], group: str) -> list[str]:
    """Each message (by id, of ``topic``) re-driven to ``group`` (``Admin.redrive``): the
    copies' ids. Every id is found before any copy is sent."""
    admin = console_of(request).admin
    found = [await find_message(admin, topic, i) for i in ids]
    return [await admin.redrive(m, group) for m in found]


async def resend(request: web.Request) -> web.StreamResponse:
    form = await request.post()
    topic = checked_topic(form_text(form, "topic"))
    msg_id = form_text(form, "id")
    group = checked_group(form_text(form, "group"), consumer=True)
    (new_id,) = await _resend(request, topic, [msg_id], group)
    return render(
        request,
        "msg_resent.html",
        {
            "group": group,
            "resent": [(msg_id, new_id)],
            "back": f"/messages/view?topic={topic}&id={msg_id}",
        },
    )


async def consume_on_client(request: web.Request) -> web.Response:
    """rocketmq-dashboard's resend: an online push consumer of the group (the one named, else
    the first of the group's clients that takes it) consumes the message now, through its
    broker (CONSUME_MESSAGE_DIRECTLY), and its listener's outcome is shown. Nothing is
    stored; the group's offsets stay where they are."""
    form = await request.post()
    topic = checked_topic(form_text(form, "topic"))
    msg_id = form_text(form, "id")
    group = checked_group(form_text(form, "group"), consumer=True)
    client = form_text(form, "client")
    admin = console_of(request).admin
    m = await find_message(admin, topic, msg_id)
    if client:
        clients = [client]
    else:
        try:
            conns = await admin.consumer_connection(group)
        except ConsumerNotOnlineError:
            raise BadInput(
                f"no client of {group} is online to consume it now; a resend reaches the group "
                "whenever one of its consumers runs"
            ) from None
        clients = [str(c.get("clientId", "")) for c in conns.get("connectionSet", [])]
    refusals: list[str] = []
    for cid in clients:
        try:
            result = await admin.consume_message_directly(group, cid, m.offset_msg_id)
        except BrokerError as exc:  # a pull consumer, or one gone since: the next one
            refusals.append(f"{cid}: {exc.remark or exc}")
            continue
        return render(
            request,
            "msg_consumed.html",
            {"m": m, "group": group, "client": cid, "result": result, "refusals": refusals},
        )
    raise BadInput(f"no client of {group} could consume it: " + "; ".join(refusals))


async def dead_letters(request: web.Request) -> web.Response:
    console = console_of(request)
    groups = sorted(g for g in console.sampler.groups if not is_system_group(g))
    group = _text(request, "group")
    now = int(time.time() * 1000)
    context: dict[str, Any] = {
        "groups": groups,
        "group": group,
        "begin": _text(request, "begin") or _local(now - 3 * 3600_000),
        "end": _text(request, "end") or _local(now),
        "results": None,
        "more": False,
        "missing": False,
    }
    if group:
        checked_group(group, consumer=True)
        begin, end = _range(request, 3 * 3600_000)
        try:
            found, more = await messages_between(console.admin, DLQ_PREFIX + group, begin, end)
        except NoRouteError:
            context["missing"] = True  # never a dead letter: RocketMQ makes the topic then
        else:
            context.update(results=found, more=more)
    return render(request, "dlq.html", context)


async def resend_dead_letters(request: web.Request) -> web.Response:
    form = await request.post()
    group = checked_group(form_text(form, "group"), consumer=True)
    ids = [str(v).strip() for v in form.getall("id", []) if str(v).strip()]
    if not ids:
        raise BadInput("tick the dead letters to resend")
    if len(ids) > SEARCH_LIMIT:
        raise BadInput(f"at most {SEARCH_LIMIT} at once")
    new_ids = await _resend(request, DLQ_PREFIX + group, ids, group)
    return render(
        request,
        "msg_resent.html",
        {
            "group": group,
            "resent": list(zip(ids, new_ids, strict=True)),
            "back": f"/dlq?group={group}",
        },
    )

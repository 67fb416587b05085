"""mqadmin's commands over queues, messages and offsets, in Apache's words.

RocketMQ counterpart: ``tools/command`` — ``message/PrintMessageSubCommand`` (printMsg),
``SendMessageCommand`` (sendMessage), ``ConsumeMessageCommand`` (consumeMessage),
``topic/AllocateMQSubCommand`` (allocateMQ), ``queue/QueryConsumeQueueCommand`` (queryCq),
``offset/ResetOffsetByTimeCommand`` with ``ResetOffsetByTimeOldCommand`` (resetOffsetByTime),
``SkipAccumulationSubCommand`` (skipAccumulatedMessage) and ``consumer/
ConsumerStatusSubCommand`` with ``ConsumerRunningInfo.formatString`` (consumerStatus).

Their text is Apache's ``printf`` output: the queues in the order Apache's ``HashSet`` /
``HashMap`` of ``MessageQueue`` iterates (``MessageQueue.hashCode``), ``MessageExt.toString``
for each message, the ``print msg finished`` lines, the rollback tables. ``--json`` gives the
same data as JSON.
"""

from __future__ import annotations

import argparse
import json
import time
from collections.abc import Iterable
from datetime import datetime
from pathlib import Path
from typing import Any

from client.admin import Admin, PulledBatch
from client.admin_commands import (
    Out,
    UsageError,
    command,
    front,
    group_opt,
    java_bool,
    java_f2,
    java_message_text,
    message_doc,
    parse_time,
    topic_opt,
    version_desc,
)
from client.errors import ClientError
from client.message import Message, MessageView
from client.producer import Producer
from client.rebalance import allocate_averagely, message_queue_key
from client.trace import java_str
from codec.hashing import (
    java_hashmap_order,
    java_hashmap_order_by,
    java_properties_order,
    java_putall_capacity,
    message_queue_hash,
)
from remoting.codes import RequestCode, ResponseCode
from remoting.errors import BrokerError
from remoting.route import MessageQueue, TopicRouteData

RULE = "-" * 56 + "\n"  # printMsg's line after each queue
CQ_RULE = "=" * 38 + "\n"  # queryCq's
MIN, MAX, SEARCH = (
    RequestCode.GET_MIN_OFFSET,
    RequestCode.GET_MAX_OFFSET,
    RequestCode.SEARCH_OFFSET_BY_TIMESTAMP,
)


def mq_hash(mq: MessageQueue) -> int:
    return message_queue_hash(mq.topic, mq.broker_name, mq.queue_id)


def mq_set(mqs: Iterable[MessageQueue], capacity: int = 16) -> list[MessageQueue]:
    """``mqs`` in the order a Java ``HashSet<MessageQueue>`` filled with them iterates."""
    return java_hashmap_order_by(list(mqs), mq_hash, capacity)


def subscribe_queues(route: TopicRouteData, topic: str) -> list[MessageQueue]:
    """``topicRouteData2TopicSubscribeInfo``: every readable queue, in HashSet order (what
    ``fetchSubscribeMessageQueues`` hands Apache's tools)."""
    return mq_set(route.readable_queues(topic))


def message_line(m: MessageView, pulled: PulledBatch, charset: str | None) -> str | None:
    """``PrintMessageByQueueCommand.printMessage``'s line; None when the body cannot be
    read in ``charset`` (Apache skips such a message)."""
    if charset is None:
        body = "NOT PRINT BODY"
    else:
        try:
            body = m.body.decode(charset, errors="replace")
        except LookupError:
            return None
    return f"MSGID: {m.msg_id} {java_message_text(m, pulled)} BODY: {body}\n"


async def queue_bounds(
    admin: Admin, mq: MessageQueue, begin: int | None, end: int | None
) -> tuple[int, int]:
    """The offsets a command reads between: the queue's min and max, or the broker's
    ``searchOffset`` of the times given."""
    lo = await admin.queue_offset(mq, SEARCH, begin) if begin else await admin.queue_offset(mq, MIN)
    hi = await admin.queue_offset(mq, SEARCH, end) if end else await admin.queue_offset(mq, MAX)
    return lo, hi


# -------------------------------------------------------------------------- printMsg


def _print_opts(p: argparse.ArgumentParser) -> None:
    topic_opt(p)
    p.add_argument("-c", "--charsetName", dest="charset", default="UTF-8",
                   help="CharsetName(eg: UTF-8,GBK)")  # fmt: skip
    p.add_argument("-s", "--subExpression", dest="tags", default="*",
                   help="Subscribe Expression(eg: TagA || TagB)")  # fmt: skip
    p.add_argument("-b", "--beginTimestamp", dest="begin",
                   help="Begin timestamp[currentTimeMillis|yyyy-MM-dd#HH:mm:ss:SSS]")  # fmt: skip
    p.add_argument("-e", "--endTimestamp", dest="end",
                   help="End timestamp[currentTimeMillis|yyyy-MM-dd#HH:mm:ss:SSS]")  # fmt: skip
    p.add_argument("-d", "--printBody", dest="body", type=java_bool, default=True,
                   help="print body")  # fmt: skip


@command("printMsg", "print a topic's messages in a time range", _print_opts)
async def print_msg(admin: Admin, a: argparse.Namespace, out: Out) -> None:
    mqs = subscribe_queues(await admin.topic_route(a.topic), a.topic)
    begin = parse_time(a.begin) if a.begin else None
    end = parse_time(a.end) if a.end else None
    if begin is not None and end is not None and end < begin:
        raise UsageError(f"the end time {a.end!r} is before the begin time {a.begin!r}")
    text: list[str] = []
    docs: list[dict[str, Any]] = []
    with out.progress() as progress:
        task = progress.add_task(f"reading {a.topic}", total=len(mqs))
        for mq in mqs:
            # Both ends inclusive, exactly: from the first message stored at or after begin
            # to the last stored at or before end (Apache's tool takes the broker's nearest
            # message for each and prints whole pulls past the end).
            lo = (
                await admin.offset_for_time(mq, begin)
                if begin is not None
                else await admin.queue_offset(mq, MIN)
            )
            hi = (
                await admin.offset_for_time(mq, end, side="first_after")
                if end is not None
                else await admin.queue_offset(mq, MAX)
            )
            key = message_queue_key(mq)
            text.append(f"minOffset={lo}, maxOffset={hi}, {key}\n")
            offset = lo
            while offset < hi:
                pulled = await admin.pull_batch(mq, offset, 32, expression=a.tags)
                if pulled.status == "FOUND":
                    for m in pulled.messages:
                        if m.queue_offset >= hi:
                            break
                        line = message_line(m, pulled, a.charset if a.body else None)
                        if line is not None:
                            text.append(line)
                            docs.append(message_doc(m, body=a.body))
                elif pulled.status == "NO_MATCHED_MSG":
                    at = pulled.next_offset
                    text.append(f"{key} no matched msg. status=NO_MATCHED_MSG, offset={at}\n")
                else:
                    text.append(
                        f"{key} print msg finished. status={pulled.status}, "
                        f"offset={pulled.next_offset}\n"
                    )
                    break
                if pulled.next_offset <= offset:
                    break  # a broker that does not move on would keep us here
                offset = pulled.next_offset
            text.append(RULE)
            progress.advance(task)
    out.text("".join(text), docs)


# ----------------------------------------------------------------------- sendMessage


def _send_opts(p: argparse.ArgumentParser) -> None:
    topic_opt(p)
    p.add_argument("-p", "--body", required=True, help="UTF-8 string format of the message body")
    p.add_argument("-k", "--key", help="Message keys")
    p.add_argument("-c", "--tags", help="Message tags")
    p.add_argument("-b", "--broker", dest="broker_name", help="Send message to target broker")
    p.add_argument("-i", "--qid", dest="queue_id", type=int, help="Send message to target queue")
    p.add_argument("-m", "--msgTraceEnable", dest="trace", type=java_bool, default=False,
                   help="Message Trace Enable, Default: false")  # fmt: skip


SEND_ROW = "{:<32}  {:<4}  {:<20}    {}\n"


@command("sendMessage", "send one message", _send_opts)
async def send_message(admin: Admin, a: argparse.Namespace, out: Out) -> None:
    if a.queue_id is not None and a.broker_name is None:
        raise UsageError("Broker name must be set if the queue is chosen!")
    msg = Message(a.topic, a.body.strip().encode(), tags=a.tags, keys=a.key)
    group = str(int(time.time() * 1000))  # Apache's: the time, so no two runs share a group
    async with Producer(
        group, admin.namesrv, credentials=admin.credentials, trace=a.trace
    ) as producer:
        if a.broker_name is None:
            result = await producer.send(msg)
        else:

            def pick(mqs: list[MessageQueue], _m: Message, _arg: object) -> MessageQueue:
                # -b alone: any queue of that broker (Apache's tool ignores a lone -b).
                mine = [q for q in mqs if q.broker_name == a.broker_name]
                if a.queue_id is not None:
                    mine = [q for q in mine if q.queue_id == a.queue_id]
                if not mine:
                    where = a.broker_name + ("" if a.queue_id is None else f" queue {a.queue_id}")
                    raise ClientError(f"{where} has no writable queue of {a.topic}")
                return mine[0] if a.queue_id is not None else mine[int(group) % len(mine)]

            result = await producer.send_orderly(msg, selector=pick)
    mq = result.message_queue
    doc = {
        "brokerName": mq.broker_name,
        "queueId": mq.queue_id,
        "queueOffset": result.queue_offset,
        "sendStatus": result.status.name,
        "msgId": result.msg_id,
        "offsetMsgId": result.offset_msg_id,
    }
    out.text(
        SEND_ROW.format("#Broker Name", "#QID", "#Send Result", "#MsgId")
        + SEND_ROW.format(mq.broker_name, mq.queue_id, result.status.name, result.msg_id),
        doc,
    )


# -------------------------------------------------------------------- consumeMessage


def _consume_opts(p: argparse.ArgumentParser) -> None:
    topic_opt(p)
    p.add_argument("-b", "--brokerName", dest="broker_name", help="Broker name")
    p.add_argument("-i", "--queueId", dest="queue_id", type=int, help="Queue Id")
    p.add_argument("-o", "--offset", type=int, help="Queue offset")
    p.add_argument("-g", "--consumerGroup", dest="group", help="Consumer group name")
    p.add_argument("-s", "--beginTimestamp", dest="begin",
                   help="Begin timestamp[currentTimeMillis|yyyy-MM-dd#HH:mm:ss:SSS]")  # fmt: skip
    p.add_argument("-e", "--endTimestamp", dest="end",
                   help="End timestamp[currentTimeMillis|yyyy-MM-dd#HH:mm:ss:SSS]")  # fmt: skip
    p.add_argument("-c", "--MessageNumber", dest="count", type=int, default=128,
                   help="Number of message to be consumed")  # fmt: skip


def _consume_refusal(a: argparse.Namespace, now: int) -> str | None:
    """Apache's checks, in its order, with its words (it prints them and stops)."""
    begin = parse_time(a.begin) if a.begin else -1
    end = parse_time(a.end) if a.end else -1
    checks = [
        (a.count <= 0, "Please input a positive messageNumber!"),
        (a.queue_id is not None and a.broker_name is None,
         "Please set the brokerName before queueId!"),
        (a.offset is not None and a.queue_id is None, "Please set queueId before offset!"),
        (begin > now, "Please set the beginTimestamp before now!"),
        (end > now, "Please set the endTimestamp before now!"),
        (-1 not in (begin, end) and begin > end,
         "Please make sure that the beginTimestamp is less than or equal to the endTimestamp"),
    ]  # fmt: skip
    return next((said for failed, said in checks if failed), None)


@command("consumeMessage", "read messages of a topic (or one queue) from an offset", _consume_opts)
async def consume_message(admin: Admin, a: argparse.Namespace, out: Out) -> None:
    refusal = _consume_refusal(a, int(time.time() * 1000))
    if refusal is not None:
        raise UsageError(refusal)
    begin = parse_time(a.begin) if a.begin else None
    end = parse_time(a.end) if a.end else None
    group = a.group or "TOOLS_CONSUMER"
    text: list[str] = []
    docs: list[dict[str, Any]] = []

    if a.queue_id is None:
        left = a.count
        for mq in subscribe_queues(await admin.topic_route(a.topic), a.topic):
            if left == 0:
                break
            lo, hi = await queue_bounds(admin, mq, begin, end)
            if hi - lo > left:
                text.append(
                    f"The older {left} message of the {mq.queue_id} queue will be provided\n"
                )
                hi, left = lo + left - 1, 0
            else:
                left -= hi - lo + 1  # Apache's count: it can go below zero, then every queue
            await _pull_range(admin, mq, (lo, hi), group, text=text, docs=docs)
    else:
        mq = MessageQueue(a.topic, a.broker_name, a.queue_id)
        lo, hi = await queue_bounds(admin, mq, begin, end)
        offset = a.offset or 0
        if offset > hi:
            text.append(f"{message_queue_key(mq)} no matched msg, offset={offset}\n")
        else:
            lo = max(lo, offset)
            if hi - lo > a.count:
                text.append(f"The oldler {a.count} message will be provided\n")
                hi = lo + a.count - 1
            await _pull_range(admin, mq, (lo, hi), group, text=text, docs=docs)
    out.text("".join(text), docs)


async def _pull_range(
    admin: Admin,
    mq: MessageQueue,
    span: tuple[int, int],
    group: str,
    *,
    text: list[str],
    docs: list[dict[str, Any]],
) -> None:
    """``ConsumeMessageCommand.pullMessageByQueue``: ``lo`` to ``hi`` inclusive, so the last
    pull at the queue's end says it is finished."""
    key = message_queue_key(mq)
    offset, hi = span
    while offset <= hi:
        pulled = await admin.pull_batch(mq, offset, min(32, hi - offset + 1), group)
        moved_on = pulled.next_offset > offset
        offset = pulled.next_offset
        if pulled.status == "FOUND":
            text.append("Consume ok\n")
            for m in pulled.messages:
                text.append(message_line(m, pulled, "UTF-8") or "")
                docs.append(message_doc(m, body=True))
        elif pulled.status == "NO_MATCHED_MSG":
            text.append(f"{key} no matched msg. status=NO_MATCHED_MSG, offset={offset}\n")
        else:
            text.append(f"{key} print msg finished. status={pulled.status}, offset={offset}\n")
            return
        if not moved_on:
            return


# ------------------------------------------------------------------------ allocateMQ


def _allocate_opts(p: argparse.ArgumentParser) -> None:
    topic_opt(p)
    p.add_argument("-i", "--ipList", dest="ips", required=True, help="ipList")


@command(
    "allocateMQ", "how the average strategy spreads a topic's queues over clients", _allocate_opts
)
async def allocate_mq(admin: Admin, a: argparse.Namespace, out: Out) -> None:
    route = await admin.topic_route(a.topic)
    mqs = subscribe_queues(route, a.topic)
    ips = a.ips.strip().split(",")
    if not mqs:
        raise ClientError(f"topic {a.topic} has no readable queue")
    result: dict[str, list[dict[str, Any]]] = {}
    for ip in ips:  # a repeated ip is one key, its share computed at its first place
        result[ip] = [m.to_json() for m in allocate_averagely("aa", ip, mqs, ips)]
    ordered = {ip: result[ip] for ip in java_hashmap_order(result)}
    doc = {"result": ordered}
    out.text(json.dumps(doc, separators=(",", ":"), ensure_ascii=False) + "\n", doc)


# --------------------------------------------------------------------------- queryCq


def _query_cq_opts(p: argparse.ArgumentParser) -> None:
    topic_opt(p)
    p.add_argument("-q", "--queue", dest="queue_id", type=int, required=True,
                   help="queue num, ie. 1")  # fmt: skip
    p.add_argument("-i", "--index", type=int, required=True, help="start queue index.")
    p.add_argument("-c", "--count", type=int, default=10, help="how many.")
    p.add_argument("-b", "--broker", dest="broker_addr", help="broker addr.")
    p.add_argument("-g", "--consumer", dest="group", help="consumer group.")


def fastjson_pretty(doc: dict[str, Any]) -> str:
    """fastjson's ``toJSONString(o, true)`` of a flat bean: tab-indented, keys sorted, lists
    inline without spaces."""
    q = json.dumps
    rows = [
        f"\t{q(k)}:"
        + (
            "[" + ",".join(q(x, ensure_ascii=False) for x in v) + "]"
            if isinstance(v, list)
            else q(v, ensure_ascii=False)
        )
        for k, v in sorted(doc.items())
    ]
    return "{\n" + ",\n".join(rows) + "\n}"


def _subscription_text(sub: dict[str, Any]) -> str:
    """The SubscriptionData of queryCq's answer as Apache prints it: its sets in the order
    Java's HashSets iterate."""
    shown = dict(sub)
    shown["tagsSet"] = java_hashmap_order(str(t) for t in sub.get("tagsSet") or [])
    shown["codeSet"] = java_hashmap_order_by([int(c) for c in sub.get("codeSet") or []], int)
    return fastjson_pretty(shown)


def _cq_entry_text(e: dict[str, Any]) -> str:
    """``ConsumeQueueData.toString()``."""

    s = java_str
    return (
        f"ConsumeQueueData{{physicOffset={e.get('physicOffset', 0)}, "
        f"physicSize={e.get('physicSize', 0)}, tagsCode={e.get('tagsCode', 0)}, "
        f"extendDataJson='{s(e.get('extendDataJson'))}', bitMap='{s(e.get('bitMap'))}', "
        f"eval={s(bool(e.get('eval')))}, msg='{s(e.get('msg'))}'}}"
    )


@command("queryCq", "raw ConsumeQueue entries of a queue", _query_cq_opts)
async def query_cq(admin: Admin, a: argparse.Namespace, out: Out) -> None:
    addr = a.broker_addr
    route = await admin.topic_route(a.topic)
    if addr is None:
        masters = [bd.master_addr for bd in route.broker_datas if bd.master_addr]
        if not masters:
            raise ClientError(f"topic {a.topic} has no route data")
        addr = route.broker_datas[0].master_addr or masters[0]
    name = await admin.broker_name_of(addr)
    mq = MessageQueue(a.topic, name, a.queue_id)
    doc = await admin.query_consume_queue(mq, a.index, a.count, a.group, addr=addr)
    text = ""
    if doc.get("subscriptionData") is not None:
        text += f"Subscription data: \n{_subscription_text(doc['subscriptionData'])}\n{CQ_RULE}"
    if doc.get("filterData") is not None:
        text += f"Filter data: \n{doc['filterData']}\n{CQ_RULE}"
    text += (
        f"Queue data: \nmax: {doc.get('maxQueueIndex', 0)}, min: {doc.get('minQueueIndex', 0)}\n"
        + CQ_RULE
    )
    for i, e in enumerate(doc.get("queueData") or []):
        text += f"idx: {a.index + i}\n{_cq_entry_text(e)}\n{CQ_RULE}"
    out.text(text, doc)


# ------------------------------------------------------------------------- offsets


def _reset_opts(p: argparse.ArgumentParser) -> None:
    p.add_argument("-g", "--group", dest="group", required=True, help="set the consumer group")
    p.add_argument("-t", "--topic", required=True, help="set the topic")
    p.add_argument(
        "-s",
        "--timestamp",
        required=True,
        help="set the timestamp[now|currentTimeMillis|yyyy-MM-dd#HH:mm:ss:SSS]",
    )
    p.add_argument("-f", "--force", type=java_bool, default=True,
                   help="set the force rollback by timestamp switch[true|false]")  # fmt: skip
    p.add_argument("-c", "--cplus", action="store_true", help="reset c++ client offset")


OFFSET_ROW = "{:<40}  {:<40}  {:<40}\n"
OLD_ROW = "{:<20}  {:<20}  {:<20}  {:<20}  {:<20}  {:<20}\n"


def java_offset_table_order(table: dict[MessageQueue, int]) -> list[MessageQueue]:
    """The order Apache's tool prints a reset's offsets in: each broker's answer is a
    HashMap (filled in the answer's order), ``putAll`` into one empty HashMap, which takes
    its table size from the first broker's answer."""
    runs: list[list[MessageQueue]] = []
    for mq in table:
        if runs and runs[-1][0].broker_name == mq.broker_name:
            runs[-1].append(mq)
        else:
            runs.append([mq])
    merged = [q for run in runs for q in mq_set(run)]
    return mq_set(merged, java_putall_capacity(len(runs[0]))) if runs else []


async def _reset(
    admin: Admin, a: argparse.Namespace, timestamp: int, title: bool, out: Out
) -> None:
    """resetOffsetByTime and skipAccumulatedMessage: the brokers move the group's offsets
    and tell its online consumers; a group with none online falls back to Apache's old
    way (each queue's offset committed by this tool) and its six-column table."""
    shown = a.timestamp if title else "-1"
    head = (
        f"rollback consumer offset by specified group[{a.group}], topic[{a.topic}], "
        f"force[{java_str(a.force)}], timestamp(string)[{shown}], timestamp(long)[{timestamp}]\n"
    )
    try:
        with out.progress() as progress:
            task = progress.add_task(f"resetting {a.group} on {a.topic}", total=None)
            table = await admin.reset_offset_by_time(a.group, a.topic, timestamp, force=a.force)
            progress.update(task, completed=1, total=1)
    except BrokerError as exc:
        if exc.response_code != ResponseCode.CONSUMER_NOT_ONLINE:
            raise
        await _reset_offline(
            admin, a, timestamp, head.replace("group[", "consumerGroup[", 1) if title else "", out
        )
        return
    text = head if title else ""
    text += OFFSET_ROW.format("#brokerName", "#queueId", "#offset")
    order = java_offset_table_order(table)
    text += "".join(
        OFFSET_ROW.format(front(mq.broker_name, 32), mq.queue_id, table[mq]) for mq in order
    )
    doc = [
        {"brokerName": mq.broker_name, "queueId": mq.queue_id, "offset": table[mq]} for mq in order
    ]
    out.text(text, doc)


async def _reset_offline(
    admin: Admin, a: argparse.Namespace, timestamp: int, head: str, out: Out
) -> None:
    """``ResetOffsetByTimeOldCommand.resetOffset``: per queue of the topic the group has an
    offset in (each broker's, in its answer's HashMap order; every queue of the topic where
    it has none), the offset at ``timestamp`` (the end for -1) is committed for the group
    when ``force`` or when it is not ahead of what the group consumed."""
    route = await admin.topic_route(a.topic)
    rows: list[dict[str, Any]] = []
    queue_count = route.queue_datas[-1].read_queue_nums if route.queue_datas else 0
    for bd in route.broker_datas:
        addr = bd.master_addr or next(iter(bd.broker_addrs.values()), None)
        if addr is None:
            continue
        table = await admin.consume_stats_at(addr, a.group)
        positions = [
            (mq, table[mq].broker_offset, table[mq].consumer_offset)
            for mq in mq_set(table)
            if mq.topic == a.topic
        ]
        if not positions:  # never consumed here: from each queue's first message
            stats = await admin.topic_stats(a.topic)
            positions = [
                (mq, stats[mq].max_offset, stats[mq].min_offset)
                for mq in (MessageQueue(a.topic, bd.broker_name, i) for i in range(queue_count))
                if mq in stats
            ]
        for mq, broker_offset, consumer_offset in positions:
            at = await admin.queue_offset(mq, MAX if timestamp == -1 else SEARCH, timestamp)
            rollback = consumer_offset
            if a.force or at <= consumer_offset:
                rollback = at
                await admin.commit_consumer_offset(mq, a.group, rollback)
            rows.append(
                {
                    "brokerName": mq.broker_name, "queueId": mq.queue_id,
                    "brokerOffset": broker_offset, "consumerOffset": consumer_offset,
                    "timestampOffset": at, "rollbackOffset": rollback,
                }
            )  # fmt: skip
    text = head + OLD_ROW.format(
        "#brokerName", "#queueId", "#brokerOffset", "#consumerOffset", "#timestampOffset",
        "#rollbackOffset",
    )  # fmt: skip
    text += "".join(OLD_ROW.format(front(r["brokerName"], 32), *list(r.values())[1:]) for r in rows)
    out.text(text, rows)


@command("resetOffsetByTime", "move a group's offsets to a time, clients online", _reset_opts)
async def reset_offset_by_time(admin: Admin, a: argparse.Namespace, out: Out) -> None:
    # "now" is -1, as RocketMQ 4.9's mqadmin sends it: each broker takes its queues' max
    # offsets as of now, so the backlog is skipped and nothing consumed comes again.
    now = a.timestamp.strip() == "now"
    await _reset(admin, a, -1 if now else parse_time(a.timestamp), True, out)


def _skip_opts(p: argparse.ArgumentParser) -> None:
    p.add_argument("-g", "--group", dest="group", required=True, help="set the consumer group")
    p.add_argument("-t", "--topic", required=True, help="set the topic")
    p.add_argument("-f", "--force", type=java_bool, default=True,
                   help="set the force rollback by timestamp switch[true|false]")  # fmt: skip


@command("skipAccumulatedMessage", "move a group's offsets to the end of a topic", _skip_opts)
async def skip_accumulated_message(admin: Admin, a: argparse.Namespace, out: Out) -> None:
    await _reset(admin, a, -1, False, out)


# -------------------------------------------------------------------- consumerStatus


def _consumer_status_opts(p: argparse.ArgumentParser) -> None:
    group_opt(p)
    p.add_argument("-i", "--clientId", dest="client_id", help="The consumer's client id")
    p.add_argument("-b", "--brokerAddr", dest="broker_addr", help="broker address")
    p.add_argument("-s", "--jstack", action="store_true",
                   help="Run jstack command in the consumer progress")  # fmt: skip


def _mq_order(q: dict[str, Any]) -> tuple[str, str, int]:
    """A TreeMap keyed by MessageQueue: topic, broker name, queue id."""
    return (str(q["topic"]), str(q["brokerName"]), int(q["queueId"]))


def human_ms(ms: int) -> str:
    """``UtilAll.timeMillisToHumanString``: ``yyyyMMddHHmmssSSS`` in the local zone."""
    when = datetime.fromtimestamp(ms / 1000)
    return when.strftime("%Y%m%d%H%M%S") + f"{when.microsecond // 1000:03d}"


def _pq_text(q: dict[str, Any]) -> str:
    """``ProcessQueueInfo.toString()``."""

    def n(key: str) -> int:
        return int(q.get(key) or 0)

    def b(key: str) -> str:
        return java_str(bool(q.get(key)))

    return (
        f"ProcessQueueInfo [commitOffset={n('commitOffset')}, "
        f"cachedMsgMinOffset={n('cachedMsgMinOffset')}, "
        f"cachedMsgMaxOffset={n('cachedMsgMaxOffset')}, cachedMsgCount={n('cachedMsgCount')}, "
        f"cachedMsgSizeInMiB={n('cachedMsgSizeInMiB')}, "
        f"transactionMsgMinOffset={n('transactionMsgMinOffset')}, "
        f"transactionMsgMaxOffset={n('transactionMsgMaxOffset')}, "
        f"transactionMsgCount={n('transactionMsgCount')}, locked={b('locked')}, "
        f"tryUnlockTimes={n('tryUnlockTimes')}, "
        f"lastLockTimestamp={human_ms(n('lastLockTimestamp'))}, droped={b('droped')}, "
        f"lastPullTimestamp={human_ms(n('lastPullTimestamp'))}, "
        f"lastConsumeTimestamp={human_ms(n('lastConsumeTimestamp'))}]"
    )


RT_KEYS = ("pullRT", "pullTPS", "consumeRT", "consumeOKTPS", "consumeFailedTPS")
STATUS_ROW = "{:<10} {:<40} {:<20} {}\n"


def running_info_text(info: dict[str, Any]) -> str:
    """``ConsumerRunningInfo.formatString()``."""
    props = {str(k): str(v) for k, v in (info.get("properties") or {}).items()}
    text = "#Consumer Properties#\n"
    text += "".join(f"{k:<40}: {props[k]}\n" for k in java_properties_order(props))
    text += "\n\n#Consumer Subscription#\n"
    subs = sorted(
        info.get("subscriptionSet") or [],
        key=lambda s: f"{s.get('topic')}@{s.get('subString')}",
    )
    for i, s in enumerate(subs, 1):
        mode = java_str(bool(s.get("classFilterMode")))
        text += f"{i:03d} Topic: {s.get('topic'):<40} ClassFilter: {mode:<8} "
        text += f"SubExpression: {s.get('subString')}\n"
    queues = sorted(info.get("mqTable") or [], key=_mq_order)
    text += "\n\n#Consumer Offset#\n"
    text += f"{'#Topic':<64}  {'#Broker Name':<32}  {'#QID':<4}  {'#Consumer Offset':<20}\n"
    for q in queues:
        offset = int(q.get("commitOffset") or 0)
        text += f"{q['topic']:<32}  {q['brokerName']:<32}  {q['queueId']:<4}  {offset:<20}\n"
    text += "\n\n#Consumer MQ Detail#\n"
    text += f"{'#Topic':<64}  {'#Broker Name':<32}  {'#QID':<4}  {'#ProcessQueueInfo':<20}\n"
    for q in queues:
        text += f"{q['topic']:<64}  {q['brokerName']:<32}  {q['queueId']:<4}  {_pq_text(q)}\n"
    text += "\n\n#Consumer RT&TPS#\n"
    text += (
        f"{'#Topic':<64}  {'#Pull RT':>14} {'#Pull TPS':>14} {'#Consume RT':>14} "
        f"{'#ConsumeOK TPS':>14} {'#ConsumeFailed TPS':>18} {'#ConsumeFailedMsgsInHour':>25}\n"
    )
    for topic, st in sorted((info.get("statusTable") or {}).items()):
        f = [java_f2(float(st.get(k) or 0)) for k in RT_KEYS]
        failed = int(st.get("consumeFailedMsgs") or 0)
        text += (
            f"{topic:<32}  {f[0]:>14} {f[1]:>14} {f[2]:>14} {f[3]:>14} {f[4]:>18} {failed:>25}\n"
        )
    if info.get("jstack"):
        text += "\n\n#Consumer jstack#\n" + str(info["jstack"])
    return text


@command(
    "consumerStatus", "what each consumer of a group holds, in its own words", _consumer_status_opts
)
async def consumer_status(admin: Admin, a: argparse.Namespace, out: Out) -> None:
    conns = (await admin.consumer_connection(a.group)).get("connectionSet") or []
    if a.client_id:
        info = await admin.consumer_running_info(a.group, a.client_id)
        out.text(running_info_text(info), info)
        return
    now = int(time.time() * 1000)
    text = "{:<10} {:<40} {:<20} {}\n".format(
        "#Index", "#ClientId", "#Version", "#ConsumerRunningInfoFile"
    )
    infos: dict[str, dict[str, Any]] = {}
    for i, c in enumerate(conns, 1):
        cid = str(c.get("clientId"))
        infos[cid] = await admin.consumer_running_info(a.group, cid)
        if not out.as_json:  # Apache's files, relative to where the tool runs
            path = Path(str(now)) / cid
            path.parent.mkdir(parents=True, exist_ok=True)
            path.write_text(running_info_text(infos[cid]), encoding="utf-8")
        text += "{:<10} {:<40} {:<20} {}\n".format(
            i, cid, version_desc(int(c.get("version") or 0)), f"{now}/{cid}"
        )
    if infos:
        text += _analysis(infos)
    out.text(text, infos)


def _analysis(infos: dict[str, dict[str, Any]]) -> str:
    """``analyzeSubscription`` / ``analyzeProcessQueue``: the same subscriptions in every
    client, and each client's queues that look stuck."""
    subs = {
        json.dumps(sorted(i.get("subscriptionSet") or [], key=json.dumps), sort_keys=True)
        for i in infos.values()
    }
    if len(subs) > 1:
        return "\n\nWARN: Different subscription in the same group of consumer!!!"
    text = "\n\nSame subscription in the same group of consumer\n\nRebalance OK\n"
    now = int(time.time() * 1000)
    for cid in sorted(infos):
        info = infos[cid]
        orderly = str((info.get("properties") or {}).get("PROP_CONSUMEORDERLY")).lower() == "true"
        for q in sorted(
            info.get("mqTable") or [], key=lambda q: (q["topic"], q["brokerName"], q["queueId"])
        ):
            mq = message_queue_key(MessageQueue(q["topic"], q["brokerName"], int(q["queueId"])))
            if orderly and not q.get("locked"):
                since = now - int(q.get("lastLockTimestamp") or 0)
                text += f"{cid} {mq} can't lock for a while, {since}ms\n"
            elif orderly and q.get("droped") and int(q.get("tryUnlockTimes") or 0) > 0:
                text += f"{cid} {mq} unlock {q['tryUnlockTimes']} times, still failed\n"
            elif not orderly:
                idle = now - int(q.get("lastConsumeTimestamp") or 0)
                if idle > 60_000 and int(q.get("cachedMsgCount") or 0) > 0:
                    text += f"{cid} {mq} can't consume for a while, maybe blocked, {idle}ms\n"
    return text

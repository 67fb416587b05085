"""``aerolite admin <command>`` (also installed as ``mqadmin``): RocketMQ's admin tool.

RocketMQ counterpart: ``org.apache.rocketmq.tools.command.MQAdminStartup`` and its
``SubCommand`` classes. Commands keep mqadmin's names and option letters (``-n`` name
servers, ``-t`` topic, ``-g`` group, ``-c`` cluster, ``-b`` broker …) and speak only the
remoting protocol, so they work against Apache RocketMQ clusters too. Every command Apache
has prints Apache's exact text (decodeMessageId, ours alone, an aligned table); ``--json``
gives JSON for scripts. This module has the reads of topics, groups, clusters and messages
and the ACL commands; the configuration commands are in ``client.admin_cli_config``, the
queue and offset ones in ``client.admin_cli_queues``, Apache's later operations commands in
``client.admin_cli_ops``, the registry in ``client.admin_commands``. A long run (printMsg
over many messages, resetOffsetByTime) shows progress on stderr when it is a terminal. Every
error says what failed and where, and exits 1; a usage error exits 2.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import logging
import os
import sys
import time
from collections.abc import Sequence
from datetime import datetime
from pathlib import Path
from typing import Any

import codec
from client.admin import Admin, decode_offset_msg_id
from client.admin_commands import (
    COMMANDS,
    Out,
    UsageError,
    command,
    find_command,
    first_rate,
    front,
    group_opt,
    java_bool,
    java_charset,
    java_date,
    java_f2,
    java_human_time,
    java_send_result,
    message_doc,
    parse_time,
    target_addrs,
    target_opts,
    topic_opt,
    version_desc,
)
from client.errors import ClientError
from client.message import Message, MessageView
from client.producer import Producer
from client.trace import TRACE_TOPIC, format_trace, java_str
from codec.hashing import java_hashmap_order
from remoting.acl import SessionCredentials
from remoting.bodies import ConsumeType
from remoting.errors import RocketMQError
from remoting.headers import CreateAccessConfigRequestHeader
from remoting.route import MessageQueue, TopicRouteData

PRINT_BATCH = 32


def _json_messages(out: Out, msgs: list[MessageView], *, body: bool) -> None:
    out.json([message_doc(m, body=body) for m in msgs])


BODY_DIR = Path("/tmp/rocketmq/msgbodys")  # noqa: S108 - Apache's, where it saves bodies


async def _tracks(admin: Admin, m: MessageView) -> list[str]:
    """``messageTrackDetail`` in Apache's words: one ``MessageTrack [...]`` per group."""
    return [
        f"MessageTrack [consumerGroup={t.group}, trackType={t.track_type}, "
        f"exceptionDesc={t.exception_desc}]"
        for t in await admin.message_tracks(m)
    ]


def _save_body(m: MessageView) -> Path:
    BODY_DIR.mkdir(parents=True, exist_ok=True)
    path = BODY_DIR / m.msg_id
    path.write_bytes(m.body)
    return path


async def _detail(
    admin: Admin,
    m: MessageView,
    *,
    offset_id: bool = True,
    extra: dict[str, str] | None = None,
    charset: str | None = None,
) -> str:
    """Apache's message block (``QueryMsgByIdSubCommand.printMsg``): each field at column
    21, the properties in java.util.HashMap order, the body saved to
    ``/tmp/rocketmq/msgbodys/<msgId>``, then each consumer group's track (no newline at the
    end, as Apache's)."""
    path = _save_body(m)
    props = {**m.properties, **(extra or {})}
    shown = ", ".join(f"{k}={props[k]}" for k in java_hashmap_order(props))
    fields: list[tuple[str, object]] = [("OffsetID:", m.offset_msg_id)] if offset_id else []
    fields += [
        ("Topic:", m.topic),
        ("Tags:", f"[{m.tags}]" if m.tags is not None else "[null]"),
        ("Keys:", f"[{props['KEYS']}]" if "KEYS" in props else "[null]"),
        ("Queue ID:", m.queue_id),
        ("Queue Offset:", m.queue_offset),
        ("CommitLog Offset:", m.commit_log_offset),
        ("Reconsume Times:", m.reconsume_times),
        ("Born Timestamp:", java_human_time(m.born_timestamp)),
        ("Store Timestamp:", java_human_time(m.store_timestamp)),
        ("Born Host:", m.born_host),
        ("Store Host:", m.store_host),
        ("System Flag:", m.sys_flag),
        ("Properties:", "{" + shown + "}"),
        ("Message Body Path:", str(path)),
    ]
    if charset is not None:  # -f: the body itself, decoded as Java's new String(body, cs)
        fields.append(("Message Body:", m.body.decode(charset, errors="replace")))
    text = "".join(f"{label:<20} {value}\n" for label, value in fields)
    tracks = await _tracks(admin, m)
    return text + ("\n\n" + "".join(tracks) if tracks else "\n\nWARN: No Consumer")


# -------------------------------------------------------------------------- commands


# ---- topics


def _topic_list_opts(p: argparse.ArgumentParser) -> None:
    p.add_argument("-c", "--clusterModel", dest="cluster_model", action="store_true")


@command("topicList", "list every topic (-c: with its cluster)", _topic_list_opts)
async def topic_list(admin: Admin, a: argparse.Namespace, out: Out) -> None:
    # Apache prints the name server's set in java.util.HashSet order; so do we.
    topics = java_hashmap_order(await admin.topic_list())
    if not a.cluster_model:
        out.text("".join(f"{t}\n" for t in topics), topics)
        return
    info = await admin.cluster_info()
    cluster_of = {n: c for c, names in info.clusters.items() for n in names}
    # Apache's header is 48 wide per column where its rows are 64: kept, for scripts.
    lines = [f"{'#Cluster Name':<20}  {'#Topic':<48}  {'#Consumer Group':<48}\n"]
    docs = []
    for t in topics:
        if t.startswith(("%RETRY%", "%DLQ%")):
            continue
        cluster, groups = "", [""]
        try:
            route = await admin.topic_route(t)
            first = route.broker_datas[0].broker_name if route.broker_datas else ""
            cluster = cluster_of.get(first, "null")
            groups = java_hashmap_order(await admin.topic_consumed_by(t)) or [""]
        except RocketMQError:  # gone since the listing, or its route cannot be read
            pass
        for g in groups:
            docs.append({"cluster": cluster, "topic": t, "group": g})
            lines.append(f"{cluster[:20]:<20}  {t[:64]:<64}  {g[:64]:<64}\n")
    out.text("".join(lines), docs)


def _route_opts(p: argparse.ArgumentParser) -> None:
    p.add_argument("-t", "--topic", required=True)
    p.add_argument("-l", "--list", dest="as_list", action="store_true", help="a table")


def _pretty_route(route: TopicRouteData) -> str:
    """``TopicRouteData.toJson(true)``: fastjson's pretty JSON, tab-indented, fields in
    alphabetical order, the broker ids unquoted on the map's first line (as fastjson writes
    a map with Long keys)."""
    q = json.dumps
    brokers = []
    for bd in route.broker_datas:
        addrs = ",".join(f"{bid}:{q(addr)}" for bid, addr in sorted(bd.broker_addrs.items()))
        brokers.append(
            f'\t\t{{\n\t\t\t"brokerAddrs":{{{addrs}\n\t\t\t}},\n'
            f'\t\t\t"brokerName":{q(bd.broker_name)},\n\t\t\t"cluster":{q(bd.cluster)}\n\t\t}}'
        )
    queues = [
        "\t\t{\n"
        f'\t\t\t"brokerName":{q(qd.broker_name)},\n\t\t\t"perm":{qd.perm},\n'
        f'\t\t\t"readQueueNums":{qd.read_queue_nums},\n'
        f'\t\t\t"topicSysFlag":{qd.topic_sys_flag},\n'
        f'\t\t\t"writeQueueNums":{qd.write_queue_nums}\n\t\t}}'
        for qd in route.queue_datas
    ]
    servers = route.filter_server_table
    fields = [
        '\t"brokerDatas":' + ("[\n" + ",\n".join(brokers) + "\n\t]" if brokers else "[]"),
        '\t"filterServerTable":'
        + (
            "{\n"
            + ",\n".join(
                f"\t\t{q(k)}:[\n" + ",\n".join(f"\t\t\t{q(x)}" for x in v) + "\n\t\t]"
                for k, v in servers.items()
            )
            + "\n\t}"
            if servers
            else "{}"
        ),
    ]
    if route.order_topic_conf:
        fields.append(f'\t"orderTopicConf":{q(route.order_topic_conf)}')
    fields.append('\t"queueDatas":' + ("[\n" + ",\n".join(queues) + "\n\t]" if queues else "[]"))
    return "{\n" + ",\n".join(fields) + "\n}\n"


ROUTE_ROW = "{:<45} {:<32} {:<50} {:<10} {:<11} {:<5}\n"


def _route_table(route: TopicRouteData) -> str:
    """``topicRoute -l``: one row per broker name, a 158-dash rule and the totals (the
    number of brokers in the broker-name column, as Apache's)."""
    by_name = {qd.broker_name: qd for qd in route.queue_datas}
    lines = [ROUTE_ROW.format(
        "#ClusterName", "#BrokerName", "#BrokerAddrs", "#ReadQueue", "#WriteQueue", "#Perm"
    )]  # fmt: skip
    reads = writes = 0
    for bd in sorted(route.broker_datas, key=lambda b: b.broker_name):
        qd = by_name.get(bd.broker_name)
        if qd is None:
            continue
        reads, writes = reads + qd.read_queue_nums, writes + qd.write_queue_nums
        addrs = "{" + ", ".join(f"{i}={ad}" for i, ad in sorted(bd.broker_addrs.items())) + "}"
        lines.append(ROUTE_ROW.format(
            bd.cluster, bd.broker_name, addrs, qd.read_queue_nums, qd.write_queue_nums, qd.perm
        ))  # fmt: skip
    lines.append("-" * 158 + "\n")
    lines.append(ROUTE_ROW.format("Total:", len(by_name), "", reads, writes, ""))
    return "".join(lines)


@command("topicRoute", "a topic's route: brokers and queues", _route_opts)
async def topic_route(admin: Admin, a: argparse.Namespace, out: Out) -> None:
    route = await admin.topic_route(a.topic)
    text = _route_table(route) if a.as_list else _pretty_route(route)
    out.text(text, route.to_json())


@command("topicStatus", "min/max offset and last update of every queue", topic_opt)
async def topic_status(admin: Admin, a: argparse.Namespace, out: Out) -> None:
    stats = await admin.topic_stats(a.topic)
    doc = [
        {"brokerName": mq.broker_name, "queueId": mq.queue_id, **s.to_json()}
        for mq, s in stats.items()
    ]
    head = ("#Broker Name", "#QID", "#Min Offset", "#Max Offset")
    lines = ["{:<32}  {:<4}  {:<20}  {:<20}    #Last Updated\n".format(*head)]
    for mq in sorted(stats):
        s = stats[mq]
        when = java_human_time(s.last_update_timestamp) if s.last_update_timestamp > 0 else ""
        lines.append(
            f"{mq.broker_name[:32]:<32}  {mq.queue_id:<4}  {s.min_offset:<20}  "
            f"{s.max_offset:<20}    {when}\n"
        )
    out.text("".join(lines), doc)


@command("topicClusterList", "the clusters holding a topic", topic_opt)
async def topic_cluster_list(admin: Admin, a: argparse.Namespace, out: Out) -> None:
    route = await admin.topic_route(a.topic)
    info = await admin.cluster_info()
    # As Apache's getTopicClusterList: the clusters holding the route's first broker, in
    # HashSet order, one per line.
    first = route.broker_datas[0].broker_name if route.broker_datas else None
    clusters = java_hashmap_order(c for c, names in info.clusters.items() if first in names)
    out.text("".join(f"{c}\n" for c in clusters), clusters)


# ---- subscription groups


PROGRESS_ROW = "{:<64}  {:<32}  {:<4}  {:<20}  {:<20}  {:<20}  {}\n"


def _progress_opts(p: argparse.ArgumentParser) -> None:
    p.add_argument("-g", "--groupName", dest="group", help="one group (default: every group)")
    p.add_argument("-t", "--topicName", dest="topic", help="only this topic")


async def _group_progress(admin: Admin, a: argparse.Namespace, out: Out) -> None:
    """consumerProgress -g: one group's queues, Apache's table and footer."""
    tps, table = await admin.consume_stats(a.group, a.topic)
    docs: list[dict[str, Any]] = []
    total = 0
    for mq, w in table.items():
        lag = max(0, w.broker_offset - w.consumer_offset)
        total += lag
        docs.append(
            {
                "topic": mq.topic,
                "brokerName": mq.broker_name,
                "queueId": mq.queue_id,
                "brokerOffset": w.broker_offset,
                "consumerOffset": w.consumer_offset,
                "diff": lag,
                "lastTimestamp": w.last_timestamp,
            }
        )
    doc = {"group": a.group, "consumeTps": tps, "diffTotal": total, "queues": docs}
    lines = [PROGRESS_ROW.format(
        "#Topic", "#Broker Name", "#QID", "#Broker Offset", "#Consumer Offset", "#Diff",
        "#LastTime",
    )]  # fmt: skip
    diff_total = 0
    for mq, w in table.items():  # sorted by queue (topic, broker, id), as Apache's
        diff = w.broker_offset - w.consumer_offset
        diff_total += diff
        last = java_date(w.last_timestamp) if w.last_timestamp else "N/A"
        lines.append(PROGRESS_ROW.format(
            mq.topic[:64], mq.broker_name[:32], mq.queue_id, w.broker_offset,
            w.consumer_offset, diff, last,
        ))  # fmt: skip
    lines.append(f"\nConsume TPS: {java_f2(tps)}\nDiff Total: {diff_total}\n")
    out.text("".join(lines), doc)


@command(
    "consumerProgress", "per-queue offsets and lag of a group (or every group)", _progress_opts
)
async def consumer_progress(admin: Admin, a: argparse.Namespace, out: Out) -> None:
    if a.group:
        await _group_progress(admin, a, out)
        return
    # As Apache's: one row per group with a retry topic, in the topic list's HashSet order.
    text = GROUPS_ROW.format(
        "#Group", "#Count", "#Version", "#Type", "#Model", "#TPS", "#Diff Total"
    )
    docs = []
    for topic in java_hashmap_order(await admin.topic_list()):
        if not topic.startswith("%RETRY%"):
            continue
        g = topic.removeprefix("%RETRY%")
        try:
            tps, table = await admin.consume_stats(g)
        except RocketMQError:
            tps, table = 0.0, {}
        diff = sum(w.broker_offset - w.consumer_offset for w in table.values())
        try:
            conn = await admin.consumer_connection(g)
        except RocketMQError:
            conn = {}
        clients = conn.get("connectionSet") or []
        online = len(clients) > 0
        version = (
            version_desc(min(int(c.get("version") or 0) for c in clients)) if online else "OFFLINE"
        )
        push = conn.get("consumeType") != "CONSUME_ACTIVELY"
        kind = ("PUSH" if push else "PULL") if online else ""
        model = str(conn.get("messageModel") or "") if online and push else ""
        text += GROUPS_ROW.format(front(g, 64), len(clients), version, kind, model, int(tps), diff)
        docs.append(
            {
                "group": g, "count": len(clients), "version": version, "type": kind,
                "model": model, "consumeTps": tps, "diffTotal": diff,
            }
        )  # fmt: skip
    out.text(text, docs)


GROUPS_ROW = "{:<64}  {:<6}  {:<24} {:<5}  {:<14}  {:<7}  {}\n"


@command("consumerConnection", "a group's online clients and subscriptions", group_opt)
async def consumer_connection(admin: Admin, a: argparse.Namespace, out: Out) -> None:
    doc = await admin.consumer_connection(a.group)
    lines = [
        "{:<36} {:<22} {:<10} {}\n".format("#ClientId", "#ClientAddr", "#Language", "#Version")
    ]
    lines += [
        "{:<36} {:<22} {:<10} {}\n".format(
            c.get("clientId"), c.get("clientAddr"), c.get("language"),
            version_desc(int(c.get("version") or 0)),
        )
        for c in doc.get("connectionSet") or []
    ]  # fmt: skip
    lines += ["\nBelow is subscription:\n", "{:<20} {}\n".format("#Topic", "#SubExpression")]
    subs = doc.get("subscriptionTable") or {}
    lines += [f"{t:<20} {s.get('subString')}\n" for t, s in subs.items()]
    lines += [
        "\n",
        f"ConsumeType: {doc.get('consumeType')}\n",
        f"MessageModel: {doc.get('messageModel')}\n",
        f"ConsumeFromWhere: {doc.get('consumeFromWhere')}\n",
    ]
    out.text("".join(lines), doc)


def _producer_connection_opts(p: argparse.ArgumentParser) -> None:
    p.add_argument("-g", "--producerGroup", dest="group", required=True)
    topic_opt(p)


@command("producerConnection", "a producer group's connections", _producer_connection_opts)
async def producer_connection(admin: Admin, a: argparse.Namespace, out: Out) -> None:
    conns = await admin.producer_connection(a.group, a.topic)
    lines = [
        "{:04d}  {:<32} {:<22} {:<8} {}\n".format(
            i, c.get("clientId"), c.get("clientAddr"), c.get("language"),
            version_desc(int(c.get("version") or 0)),
        )
        for i, c in enumerate(conns, 1)
    ]  # fmt: skip
    out.text("".join(lines), conns)


def _producer_opts(p: argparse.ArgumentParser) -> None:
    p.add_argument("-b", "--broker", dest="broker_addr", required=True, help="broker address")


@command("producer", "every producer group's instances on a broker", _producer_opts)
async def producer(admin: Admin, a: argparse.Namespace, out: Out) -> None:
    table = await admin.all_producer_info(a.broker_addr)
    text = ""
    for group in java_hashmap_order(table):
        if not table[group]:
            text += f"producer group ({group}) instances are empty\n"
        for p in table[group]:  # ProducerInfo.toString
            text += (
                f"producer group ({group}) instance : clientId={p.get('clientId')},"
                f"remoteIP={p.get('remoteIP')}, language={p.get('language')}, "
                f"version={p.get('version')}, lastUpdateTimestamp={p.get('lastUpdateTimestamp')}\n"
            )
    out.text(text, table)


# ---- cluster and brokers


def _cluster_list_opts(p: argparse.ArgumentParser) -> None:
    p.add_argument("-m", "--moreStats", dest="more", action="store_true")


CLUSTER_ROW = "{:<16}  {:<22}  {:<4}  {:<22} {:<16} {:>19} {:>19} {:>10} {:>5} {:>6}\n"
CLUSTER_MORE_ROW = "{:<16}  {:<32} {:>14} {:>14} {:>14} {:>14}\n"


def _count(rt: dict[str, str], key: str) -> int:
    try:
        return int(rt.get(key, "0"))
    except ValueError:
        return 0


def _load(rt: dict[str, str], rate: str, lane: str) -> str:
    """Apache's ``%9.2f(<queued>,<head wait>ms)``."""
    queued = rt.get(f"{lane}ThreadPoolQueueSize", "")
    waited = rt.get(f"{lane}ThreadPoolQueueHeadWaitTimeMills", "")
    return f"{java_f2(first_rate(rt, rate)):>9}({queued},{waited}ms)"


def _cluster_row(cluster: str, name: str, bid: int, addr: str, rt: dict[str, str]) -> str:
    """One line of Apache's clusterList: its TPS in and out with the send and pull queues'
    sizes and head waits, the page cache lock time, the oldest message's age in hours and
    the disk's used fraction."""
    earliest = rt.get("earliestMessageTimeStamp")
    hours = (time.time() * 1000 - int(earliest)) / 3_600_000 if earliest else 0.0
    try:
        space = float(rt.get("commitLogDiskRatio", "0"))
    except ValueError:
        space = 0.0
    return CLUSTER_ROW.format(
        cluster, name, bid, addr, rt.get("brokerVersionDesc", ""),
        _load(rt, "putTps", "send"), _load(rt, "getTransferedTps", "pull"),
        rt.get("pageCacheLockTimeMills", ""), java_f2(hours), f"{space:.4f}",
    )  # fmt: skip


@command("clusterList", "clusters, brokers, versions and throughput", _cluster_list_opts)
async def cluster_list(admin: Admin, a: argparse.Namespace, out: Out) -> None:
    info = await admin.cluster_info()
    docs = []
    if a.more:
        lines = [CLUSTER_MORE_ROW.format(
            "#Cluster Name", "#Broker Name", "#InTotalYest", "#OutTotalYest", "#InTotalToday",
            "#OutTotalToday",
        )]  # fmt: skip
    else:
        lines = [CLUSTER_ROW.format(
            "#Cluster Name", "#Broker Name", "#BID", "#Addr", "#Version", "#InTPS(LOAD)",
            "#OutTPS(LOAD)", "#PCWait(ms)", "#Hour", "#SPACE",
        )]  # fmt: skip
    # Apache walks the clusters in java.util.HashMap order and each one's brokers sorted.
    for cluster in java_hashmap_order(info.clusters):
        for name in sorted(info.clusters[cluster]):
            bd = info.brokers.get(name)
            if bd is None:
                continue
            for bid, addr in sorted(bd.broker_addrs.items()):
                try:
                    rt = await admin.runtime_info(addr)
                except RocketMQError as exc:  # one broker down or refusing: still list it
                    rt = {"error": str(exc)}
                docs.append(
                    {"cluster": cluster, "brokerName": name, "brokerId": bid, "addr": addr, **rt}
                )
                if not a.more:
                    lines.append(_cluster_row(cluster, name, bid, addr, rt))
                    continue
                put, got = "msgPutTotal", "msgGetTotal"
                lines.append(CLUSTER_MORE_ROW.format(
                    cluster, name,
                    _count(rt, f"{put}TodayMorning") - _count(rt, f"{put}YesterdayMorning"),
                    _count(rt, f"{got}TodayMorning") - _count(rt, f"{got}YesterdayMorning"),
                    _count(rt, f"{put}TodayNow") - _count(rt, f"{put}TodayMorning"),
                    _count(rt, f"{got}TodayNow") - _count(rt, f"{got}TodayMorning"),
                ))  # fmt: skip
    out.text("".join(lines), docs)


@command("brokerStatus", "a broker's runtime statistics", target_opts)
async def broker_status(admin: Admin, a: argparse.Namespace, out: Out) -> None:
    docs = {}
    lines = []
    for addr in await admin.masters(cluster=a.cluster, broker_addr=a.broker_addr):
        rt = await admin.runtime_info(addr)
        docs[addr] = rt
        for key in sorted(rt):  # Apache: a TreeMap, sorted by key
            if a.broker_addr:
                lines.append(f"{key:<32}: {rt[key]}\n")
            else:
                lines.append(f"{addr:<24} {key:<32}: {rt[key]}\n")
    out.text("".join(lines), docs)


# ---- name servers


# ---- offsets


# ---- messages


def _json_body_opt(p: argparse.ArgumentParser) -> None:
    p.add_argument("--printBody", dest="body", type=java_bool, default=True,
                   help="with --json: include each body (default true)")  # fmt: skip


def _push_opts(p: argparse.ArgumentParser) -> None:
    p.add_argument("-g", "--consumerGroup", dest="group", help="consumer group name")
    p.add_argument("-d", "--clientId", dest="client_id", help="The consumer's client id")


def _id_opt(p: argparse.ArgumentParser) -> None:
    p.add_argument("-i", "--msgId", dest="msg_id", required=True, help="Message Id")
    _push_opts(p)
    p.add_argument("-s", "--sendMessage", dest="resend", type=java_bool, help="resend message")
    p.add_argument("-u", "--unitName", dest="unit_name", help="unit name")
    p.add_argument("-f", "--bodyFormat", dest="charset", type=java_charset,
                   help="print message body by the specified format")  # fmt: skip
    _json_body_opt(p)


@command("queryMsgById", "a message by its offset message id", _id_opt)
async def query_msg_by_id(admin: Admin, a: argparse.Namespace, out: Out) -> None:
    ids = [i.strip() for i in a.msg_id.split(",") if i.strip()]
    # Apache's order: -g with -d hands the messages to a client, else -s resends them
    # (-s false does nothing), else they are printed.
    if a.group and a.client_id:
        await _consume_on_client(admin, out, a.group, a.client_id, [(None, i) for i in ids])
        return
    if a.resend is not None:
        if a.resend:
            await _resend(admin, out, ids, a.unit_name)
        return
    msgs = [await admin.view_message(i) for i in ids]
    if out.as_json:
        _json_messages(out, msgs, body=a.body)
        return
    out.text("".join([await _detail(admin, m, charset=a.charset) for m in msgs]), None)


async def _consume_on_client(
    admin: Admin, out: Out, group: str, client_id: str, ids: list[tuple[str | None, str]]
) -> None:
    """``pushMsg``: each (topic, id) handed to the push consumer ``client_id`` of ``group``
    (CONSUME_MESSAGE_DIRECTLY), and its ``ConsumeMessageDirectlyResult`` printed."""
    info = await admin.consumer_running_info(group, client_id)
    if info.get("properties", {}).get("PROP_CONSUME_TYPE") != ConsumeType.CONSUME_PASSIVELY.name:
        out.text(f"this {client_id} client is not push consumer ,not support direct push \n", [])
        return
    results = [
        await admin.consume_message_directly(group, client_id, msg_id, topic)
        for topic, msg_id in ids
    ]
    docs = [
        {"msgId": msg_id, "order": r.order, "autoCommit": r.auto_commit,
         "consumeResult": r.consume_result, "remark": r.remark, "spentTimeMills": r.spent_ms}
        for (_topic, msg_id), r in zip(ids, results, strict=True)
    ]  # fmt: skip
    out.text("".join(r.java_text() for r in results), docs)


async def _resend(admin: Admin, out: Out, ids: list[str], unit_name: str | None) -> None:
    """``sendMsg``: each message sent again to its topic by a producer of group
    ReSendMsgById, as it was (body, tags, keys, user properties, flag)."""
    instance = str(int(time.time() * 1000)) + (f"@{unit_name}" if unit_name else "")
    lines, docs = [], []
    async with Producer(
        "ReSendMsgById", admin.namesrv, credentials=admin.credentials, instance_name=instance
    ) as producer:
        for msg_id in ids:
            m = await admin.view_message(msg_id)
            copy = Message(m.topic, bytes(m.body), tags=m.tags, keys=list(m.keys) or None,
                           properties=dict(m.user_properties), flag=m.flag)  # fmt: skip
            result = await producer.send(copy)
            lines.append(f"prepare resend msg. originalMsgId={msg_id}{java_send_result(result)}")
            docs.append({"originalMsgId": msg_id, "sendStatus": result.status.name,
                         "msgId": result.msg_id, "offsetMsgId": result.offset_msg_id})  # fmt: skip
    out.text("".join(lines), docs)


def _key_opts(p: argparse.ArgumentParser) -> None:
    topic_opt(p)
    p.add_argument("-k", "--msgKey", dest="key", required=True)
    p.add_argument("-b", "--beginTimestamp", dest="begin", default="0")
    p.add_argument("-e", "--endTimestamp", dest="end")
    p.add_argument("-c", "--maxNum", dest="max_num", type=int, default=32)


@command("queryMsgByKey", "messages by business key", _key_opts)
async def query_msg_by_key(admin: Admin, a: argparse.Namespace, out: Out) -> None:
    end = parse_time(a.end) if a.end else None
    msgs = await admin.query_by_key(
        a.topic, a.key, max_num=a.max_num, begin_ms=parse_time(a.begin), end_ms=end
    )
    if out.as_json:
        _json_messages(out, msgs, body=False)
        return
    lines = ["{:<50} {:>4} {:>40}\n".format("#Message ID", "#QID", "#Offset")]
    lines += [f"{m.msg_id:<50} {m.queue_id:>4} {m.queue_offset:>40}\n" for m in msgs]
    out.text("".join(lines), None)


def _trace_opts(p: argparse.ArgumentParser) -> None:
    p.add_argument("-i", "--msgId", dest="msg_id", required=True, type=str.strip)
    p.add_argument("-t", "--traceTopic", dest="trace_topic", default=TRACE_TOPIC)
    # 5.1's additions: a time range and a cap on the trace messages read per broker
    p.add_argument("-b", "--beginTimestamp", dest="begin", default="0")
    p.add_argument("-e", "--endTimestamp", dest="end", default=None)
    p.add_argument("-c", "--maxNum", dest="max_num", type=int, default=64)


@command("queryMsgTraceById", "a message's trace: its sends and each group's consumes", _trace_opts)
async def query_msg_trace_by_id(admin: Admin, a: argparse.Namespace, out: Out) -> None:
    end = parse_time(a.end) if a.end else None
    views = await admin.query_trace(
        a.msg_id, a.trace_topic, max_num=a.max_num, begin_ms=parse_time(a.begin), end_ms=end
    )
    if not views:
        raise ClientError(
            f"no trace of message {a.msg_id} in {a.trace_topic}: was it sent or consumed by a "
            "client with tracing on (and does the broker have that trace topic)?"
        )
    if out.as_json:
        out.json([
            {"type": str(v.trace_type), "group": v.group, "clientHost": v.client_host,
             "timestamp": v.context.time_ms, "costTime": v.context.cost_ms, "status": v.status,
             "requestId": v.context.request_id or None}
            for v in views
        ])  # fmt: skip
        return
    # Written as is, not through rich: the columns and spaces are RocketMQ's, for scripts.
    sys.stdout.write(format_trace(views))


def _unique_opts(p: argparse.ArgumentParser) -> None:
    topic_opt(p)
    p.add_argument("-i", "--msgId", dest="msg_id", required=True, help="Message Id")
    _push_opts(p)
    _json_body_opt(p)


@command("queryMsgByUniqueKey", "a message by the id its producer gave it", _unique_opts)
async def query_msg_by_unique_key(admin: Admin, a: argparse.Namespace, out: Out) -> None:
    if a.group and a.client_id:
        await _consume_on_client(admin, out, a.group, a.client_id, [(a.topic, a.msg_id.strip())])
        return
    msg = await admin.query_by_unique_key(a.topic, a.msg_id)
    if msg is None:
        raise ClientError(f"no message {a.msg_id} in topic {a.topic} on any broker")
    if out.as_json:
        _json_messages(out, [msg], body=a.body)
        return
    out.text(await _detail(admin, msg, offset_id=False), None)


def _by_offset_opts(p: argparse.ArgumentParser) -> None:
    topic_opt(p)
    p.add_argument("-b", "--brokerName", dest="broker_name", required=True)
    p.add_argument("-i", "--queueId", dest="queue_id", type=int, required=True)
    p.add_argument("-o", "--offset", type=int, required=True)
    p.add_argument("-f", "--bodyFormat", dest="charset", type=java_charset,
                   help="print message body by the specified format")  # fmt: skip
    _json_body_opt(p)


@command("queryMsgByOffset", "the message at a queue offset", _by_offset_opts)
async def query_msg_by_offset(admin: Admin, a: argparse.Namespace, out: Out) -> None:
    mq = MessageQueue(a.topic, a.broker_name, a.queue_id)
    pulled = await admin.pull_batch(mq, a.offset, 1)
    msgs = pulled.messages
    if not msgs or msgs[0].queue_offset != a.offset:
        raise ClientError(
            f"no message at offset {a.offset} of {mq} (max offset {pulled.max_offset})"
        )
    if out.as_json:
        _json_messages(out, msgs[:1], body=a.body)
        return
    # A pulled message carries its queue's bounds, as the Java client adds them.
    bounds = {"MIN_OFFSET": str(pulled.min_offset), "MAX_OFFSET": str(pulled.max_offset)}
    out.text(await _detail(admin, msgs[0], extra=bounds, charset=a.charset), None)


def _decode_id_opts(p: argparse.ArgumentParser) -> None:
    p.add_argument("-i", "--messageId", dest="msg_id", required=True, help="a message id")


@command(
    "decodeMessageId",
    "what a message id says: an offset id's broker and commit-log offset, or a unique id's "
    "client address, pid and time",
    _decode_id_opts,
)
async def decode_message_id(admin: Admin, a: argparse.Namespace, out: Out) -> None:
    msg_id = a.msg_id.strip()
    if codec.looks_like_offset_msg_id(msg_id):
        addr, offset = decode_offset_msg_id(msg_id)
        doc: dict[str, object] = {"kind": "offset", "addr": addr, "offset": offset}
        out.table("Offset message id", ["broker", "commit-log offset"], [[addr, offset]], doc)
        return
    try:
        ip, pid, when = codec.decode_uniq_msg_id(msg_id)
    except ValueError as exc:
        raise UsageError(str(exc)) from None
    date = datetime.fromtimestamp(when / 1000).strftime("%Y-%m-%d#%H:%M:%S:%f")[:-3]
    doc = {"kind": "unique", "ip": ip, "pid": pid, "time": when, "date": date}
    out.table("Unique message id (UNIQ_KEY)", ["ip", "pid", "date"], [[ip, pid, date]], doc)


# ---- ACL


def _acl_update_opts(p: argparse.ArgumentParser) -> None:
    target_opts(p)
    p.add_argument("-a", "--accessKey", dest="access_key", required=True)
    p.add_argument("-s", "--secretKey", dest="secret_key")
    p.add_argument("-w", "--whiteRemoteAddress", dest="white")
    p.add_argument("-i", "--defaultTopicPerm", dest="topic_perm")
    p.add_argument("-u", "--defaultGroupPerm", dest="group_perm")
    p.add_argument("-t", "--topicPerms", dest="topic_perms", help="topicA=DENY,topicB=PUB|SUB")
    p.add_argument("-g", "--groupPerms", dest="group_perms", help="groupA=DENY,groupB=SUB")
    p.add_argument("-m", "--admin", type=java_bool)


def _acl_list(text: str | None) -> str:
    return "[" + ", ".join(p for p in (text or "").split(",") if p) + "]"


@command("updateAclConfig", "create or update an ACL account on brokers", _acl_update_opts)
async def update_acl_config(admin: Admin, a: argparse.Namespace, out: Out) -> None:
    fields = CreateAccessConfigRequestHeader(
        access_key=a.access_key,
        secret_key=a.secret_key,
        white_remote_address=a.white,
        default_topic_perm=a.topic_perm,
        default_group_perm=a.group_perm,
        topic_perms=a.topic_perms,
        group_perms=a.group_perms,
        admin=a.admin,
    ).to_ext_fields()
    addrs = await target_addrs(admin, a, slaves=True)  # each broker holds its own ACL file
    text = ""
    for addr in addrs:
        await admin.update_acl_config(addr, fields)
        text += f"create or update plain access config to {addr} success.\n"
    # RocketMQ 5's PlainAccessConfig.toString (4.9's has none and prints an object id).
    text += (
        f"PlainAccessConfig{{accessKey='{a.access_key}', whiteRemoteAddress='{a.white}', "
        f"admin={java_str(bool(a.admin))}, defaultTopicPerm='{a.topic_perm}', "
        f"defaultGroupPerm='{a.group_perm}', topicPerms={_acl_list(a.topic_perms)}, "
        f"groupPerms={_acl_list(a.group_perms)}}}"
    )
    out.text(text, {"accessKey": a.access_key, "brokers": addrs})


def _acl_delete_opts(p: argparse.ArgumentParser) -> None:
    target_opts(p)
    p.add_argument("-a", "--accessKey", dest="access_key", required=True)


@command("deleteAclConfig", "delete an ACL account", _acl_delete_opts, alias="deleteAccessConfig")
async def delete_acl_config(admin: Admin, a: argparse.Namespace, out: Out) -> None:
    addrs = await target_addrs(admin, a, slaves=True)  # each broker holds its own ACL file
    text = ""
    for addr in addrs:
        await admin.delete_acl_config(addr, a.access_key)
        text += f"delete plain access config account from {addr} success.\n"
    out.text(
        text + f"account's accesskey is:{a.access_key}",
        {"accessKey": a.access_key, "brokers": addrs},
    )


ACL_VERSION_ROW = "{:<16}  {:<22}  {:<22}  {:<20}  {:<22}  {:<22}\n"


@command("clusterAclConfigVersion", "the ACL file's version on each broker", target_opts)
async def cluster_acl_config_version(admin: Admin, a: argparse.Namespace, out: Out) -> None:
    infos = {addr: await admin.acl_info(addr) for addr in await target_addrs(admin, a)}
    text = "" if a.broker_addr else ACL_VERSION_ROW.format(
        "#Cluster Name", "#Broker Name", "#Broker Addr", "#AclFilePath", "#AclConfigVersionNum",
        "#AclLastUpdateTime",
    )  # fmt: skip
    for i in infos.values():
        files = json.loads(i.get("allAclFileVersion") or "{}")
        for path in java_hashmap_order(files):
            version = files[path]
            when = java_date(int(version.get("timestamp") or 0))
            text += ACL_VERSION_ROW.format(
                str(i.get("clusterName")), str(i.get("brokerName")), str(i.get("brokerAddr")),
                path, str(version.get("counter")), when,
            )  # fmt: skip
    kind = "broker" if a.broker_addr else "cluster"
    out.text(text + f"get {kind}'s plain access config version success.\n", infos)


def _white_opts(p: argparse.ArgumentParser) -> None:
    target_opts(p)
    p.add_argument("-g", "--globalWhiteRemoteAddresses", dest="addresses", required=True)


@command("updateGlobalWhiteAddr", "replace the ACL's global IP whitelist", _white_opts)
async def update_global_white_addr(admin: Admin, a: argparse.Namespace, out: Out) -> None:
    addrs = await target_addrs(admin, a, slaves=True)  # each broker holds its own ACL file
    text = ""
    for addr in addrs:
        await admin.update_global_white_addrs(addr, a.addresses)
        text += f"update global white remote addresses to {addr} success.\n"
    out.text(text, {"globalWhiteAddrs": a.addresses, "brokers": addrs})


# ------------------------------------------------------------------------------- main


def add_common_options(p: argparse.ArgumentParser) -> None:
    """What every command takes: the name servers, ``--json`` and the ACL account."""
    p.add_argument(
        "-n", "--namesrvAddr", dest="namesrv", help='"h1:9876;h2:9876" (default NAMESRV_ADDR)'
    )
    p.add_argument("--json", action="store_true", help="JSON for scripts instead of tables")
    p.add_argument(
        "--ak",
        dest="ak",
        default=os.environ.get("AEROLITE_ACCESS_KEY"),
        help="ACL account to sign with (default AEROLITE_ACCESS_KEY)",
    )
    p.add_argument(
        "--sk",
        dest="sk",
        default=os.environ.get("AEROLITE_SECRET_KEY"),
        help="its secret (default AEROLITE_SECRET_KEY)",
    )


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="aerolite admin",
        description="mqadmin for Aerolite and Apache RocketMQ clusters.",
    )
    sub = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")
    for name, cmd in sorted(COMMANDS.items()):
        p = sub.add_parser(name, help=cmd.help_text, description=cmd.help_text)
        add_common_options(p)
        cmd.options(p)
    return parser


# Apache's own order for ``mqadmin`` alone (MQAdminStartup.initCommand); ours that it does
# not have follow, by name.
_APACHE_ORDER = """
updateTopic deleteTopic updateSubGroup deleteSubGroup updateBrokerConfig updateTopicPerm
topicRoute topicStatus topicClusterList brokerStatus queryMsgById queryMsgByKey
queryMsgByUniqueKey queryMsgByOffset queryMsgTraceById printMsg printMsgByQueue sendMsgStatus
brokerConsumeStats producerConnection consumerConnection consumerProgress consumerStatus
cloneGroupOffset producer clusterList topicList updateKvConfig deleteKvConfig wipeWritePerm
addWritePerm resetOffsetByTime skipAccumulatedMessage updateOrderConf cleanExpiredCQ
deleteExpiredCommitLog cleanUnusedTopic startMonitoring statsAll allocateMQ checkMsgSendRT
clusterRT getNamesrvConfig updateNamesrvConfig getBrokerConfig getConsumerConfig queryCq
sendMessage consumeMessage updateAclConfig deleteAclConfig clusterAclConfigVersion
updateGlobalWhiteAddr getAclConfig exportMetadata exportConfigs exportMetrics
"""
APACHE_ORDER = tuple(_APACHE_ORDER.split())


def command_list() -> str:
    """``mqadmin`` alone: every command and what it does, in Apache's format."""
    known = [n for n in APACHE_ORDER if n in COMMANDS]
    names = known + sorted(set(COMMANDS) - set(known))
    lines = ["The most commonly used mqadmin commands are:"]
    lines += [f"   {n:<20} {COMMANDS[n].help_text}" for n in names]
    lines += ["", "See 'mqadmin help <command>' for more information on a specific command."]
    return "\n".join(lines) + "\n"


async def _run(args: argparse.Namespace) -> None:
    handler = COMMANDS[args.command].handler
    out = Out(args.json)
    if (args.ak is None) != (args.sk is None):
        raise UsageError("--ak and --sk go together")
    creds = SessionCredentials(args.ak, args.sk) if args.ak is not None else None
    async with Admin(args.namesrv, credentials=creds) as admin:
        await handler(admin, args, out)


def _resolve(argv: list[str]) -> list[str] | int:
    """Apache's conventions before parsing: no command lists them all; ``help <command>``
    explains one; a command is found by name or alias in any case. The argv to parse, or
    the exit code when nothing is left to run."""
    parser = build_parser()
    if not argv:
        sys.stdout.write(command_list())
        return 0
    if argv[0] == "help" and len(argv) == 2:
        name = find_command(argv[1])
        if name is None:
            print(f"The sub command {argv[1]} not exist.", file=sys.stderr)
            return 2
        parser.parse_args([name, "-h"])  # prints the command's help and exits 0
    if argv[0].startswith("-"):
        return argv  # argparse's own -h / usage
    name = find_command(argv[0])
    if name is None:
        print(f"The sub command {argv[0]} not exist.", file=sys.stderr)
        print("Run 'mqadmin' alone for the list of commands.", file=sys.stderr)
        return 2
    return [name, *argv[1:]]


def main(argv: Sequence[str] | None = None) -> int:
    resolved = _resolve(list(sys.argv[1:] if argv is None else argv))
    if isinstance(resolved, int):
        return resolved
    args = build_parser().parse_args(resolved)
    # The SDK's own log lines are for services; a command shows only warnings, on stderr,
    # so that stdout (tables or --json) stays clean. (A no-op when logging is set up already.)
    logging.basicConfig(
        level=logging.WARNING, stream=sys.stderr, format="%(levelname)s %(name)s %(message)s"
    )
    try:
        asyncio.run(_run(args))
    except UsageError as exc:
        print(f"mqadmin {args.command}: {exc}", file=sys.stderr)
        return 2
    except (ClientError, RocketMQError, OSError, ValueError) as exc:
        print(f"mqadmin {args.command}: {exc}", file=sys.stderr)
        return 1
    return 0


# The commands of Apache's later additions register themselves on import.
import client.admin_cli_config  # noqa: E402 - registers its commands
import client.admin_cli_ops  # noqa: E402 - registers its commands
import client.admin_cli_queues  # noqa: E402, F401 - registers its commands

if __name__ == "__main__":
    sys.exit(main())

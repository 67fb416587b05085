"""mqadmin's operations commands, with Apache's names, options and text.

RocketMQ counterpart: ``tools/command`` — ``stats/StatsAllSubCommand`` (statsAll),
``broker/BrokerConsumeStatsSubCommad`` (brokerConsumeStats), ``message/
PrintMessageByQueueCommand`` (printMsgByQueue), ``broker/SendMsgStatusCommand``
(sendMsgStatus), ``message/CheckMsgSendRTCommand`` (checkMsgSendRT), ``cluster/
CLusterSendMsgRTCommand`` (clusterRT), ``broker/CleanUnusedTopicCommand`` (cleanUnusedTopic),
``acl/GetAccessConfigSubCommand`` (getAclConfig), ``export/ExportConfigsCommand`` and
``ExportMetricsCommand`` (exportConfigs, exportMetrics) and ``consumer/
StartMonitoringSubCommand`` (startMonitoring, ``tools/monitor/MonitorService``).

Their text is Apache's ``printf`` output, byte for byte where the data allow (headers,
widths, trailing spaces, Java's ``%.2f`` rounding, the missing newlines Apache leaves), so
scripts that parse Apache's mqadmin parse ours; ``--json`` gives the same data as JSON. Where
Apache's command never ends (clusterRT, startMonitoring), ours runs until Ctrl-C as well,
and ``--rounds`` bounds it.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import json
import logging
import sys
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from client.admin import Admin
from client.admin_commands import (
    DLQ_PREFIX,
    EXPORT_DIR,
    RETRY_PREFIX,
    Out,
    UsageError,
    command,
    first_rate,
    front,
    java_date,
    java_f2,
    java_message_text,
    java_send_result,
    parse_time,
    user_groups,
    user_topics,
)
from client.errors import ClientError
from client.message import Message, MessageView
from client.producer import Producer
from client.push_consumer import PushConsumer
from remoting.bodies import BrokerStatsData
from remoting.codes import RequestCode
from remoting.errors import RocketMQError
from remoting.route import MessageQueue

log = logging.getLogger("client.admin_cli")

TLOG_TIME = "%Y-%m-%d %H:%M:%S"
SEARCH = RequestCode.SEARCH_OFFSET_BY_TIMESTAMP
# Apache's exportConfigs copies these broker settings (all strings) per master.
EXPORTED_CONFIG_KEYS = (
    "brokerClusterName",
    "brokerId",
    "brokerName",
    "brokerRole",
    "fileReservedTime",
    "filterServerNums",
    "flushDiskType",
    "maxMessageSize",
    "messageDelayLevel",
    "msgTraceTopicName",
    "slaveReadEnable",
    "traceOn",
    "traceTopicEnable",
    "useTLS",
    "autoCreateTopicEnable",
    "autoCreateSubscriptionGroup",
)


def _java_bool(text: str | None) -> bool:
    """``Boolean.parseBoolean(v.trim())``: true only for ``true`` in any case."""
    return text is not None and text.strip().lower() == "true"


def _positive(text: str, option: str) -> int:
    try:
        value = int(text)
    except ValueError:
        raise UsageError(f"{option} {text!r} is not a number") from None
    if value <= 0:
        raise UsageError(f"{option} must be at least 1, not {value}")
    return value


def _cluster_or_broker(p: argparse.ArgumentParser, what: str) -> None:
    g = p.add_mutually_exclusive_group(required=True)
    g.add_argument("-b", "--brokerAddr", dest="broker_addr", help=f"{what} for which broker")
    g.add_argument("-c", "--clusterName", dest="cluster", help=f"{what} for specified cluster")


# ------------------------------------------------------------------------------ statsAll


def _stats_all_opts(p: argparse.ArgumentParser) -> None:
    p.add_argument(
        "-a", "--activeTopic", dest="active", action="store_true", help="print active topic only"
    )
    p.add_argument("-t", "--topic", dest="topic", help="print select topic only")


STATS_ALL_HEAD = "{:<64}  {:<64} {:>12} {:>11} {:>11} {:>14} {:>14}\n"


@command("statsAll", "Topic and Consumer tps stats", _stats_all_opts)
async def stats_all(admin: Admin, a: argparse.Namespace, out: Out) -> None:
    lines = [
        STATS_ALL_HEAD.format(
            "#Topic",
            "#Consumer Group",
            "#Accumulation",
            "#InTPS",
            "#OutTPS",
            "#InMsg24Hour",
            "#OutMsg24Hour",
        )
    ]
    docs: list[dict[str, Any]] = []
    for topic in await admin.topic_list():
        if topic.startswith((RETRY_PREFIX, DLQ_PREFIX)) or (a.topic and topic != a.topic):
            continue
        try:
            rows = await _topic_stats(admin, topic)
        except (ClientError, RocketMQError) as exc:  # as Apache: a topic it cannot read is left out
            log.info("stats_all_topic_skipped topic=%s error=%s", topic, exc)
            continue
        for row in rows:
            if a.active and not (row["inMsg24Hour"] > 0 or row.get("outMsg24Hour", 0) > 0):
                continue
            docs.append(row)
            if row["group"] is None:
                lines.append(
                    "{:<64}  {:<64} {:>12} {:>11} {:>11} {:>14} {:>14}\n".format(
                        front(topic, 64),
                        "",
                        0,
                        java_f2(row["inTps"]),
                        "",
                        row["inMsg24Hour"],
                        "NO_CONSUMER",
                    )
                )
            else:
                lines.append(
                    STATS_ALL_HEAD.format(
                        front(topic, 64),
                        front(row["group"], 64),
                        row["accumulation"],
                        java_f2(row["inTps"]),
                        java_f2(row["outTps"]),
                        row["inMsg24Hour"],
                        row["outMsg24Hour"],
                    )
                )
    out.text("".join(lines), docs)


async def _topic_stats(admin: Admin, topic: str) -> list[dict[str, Any]]:
    """statsAll's rows of one topic: its traffic in, and per consumer group the traffic out
    and the backlog (``printTopicDetail``)."""
    route = await admin.topic_route(topic)
    groups = await admin.topic_consumed_by(topic)
    masters = [bd.master_addr for bd in route.broker_datas if bd.master_addr]
    in_tps, in_24h = 0.0, 0
    for addr in masters:
        data = await admin.broker_stats(addr, "TOPIC_PUT_NUMS", topic)
        if data is not None:
            in_tps += data.minute.tps
            in_24h += data.sum_24h()
    if not groups:
        return [{"topic": topic, "group": None, "inTps": in_tps, "inMsg24Hour": in_24h}]
    rows = []
    for group in groups:
        out_tps, out_24h = 0.0, 0
        for addr in masters:
            data = await admin.broker_stats(addr, "GROUP_GET_NUMS", f"{topic}@{group}")
            if data is not None:
                out_tps += data.minute.tps
                out_24h += data.sum_24h()
        try:
            _tps, table = await admin.consume_stats(group, topic)
            backlog = max(0, sum(w.broker_offset - w.consumer_offset for w in table.values()))
        except (ClientError, RocketMQError):
            backlog = 0
        rows.append(
            {
                "topic": topic,
                "group": group,
                "accumulation": backlog,
                "inTps": in_tps,
                "outTps": out_tps,
                "inMsg24Hour": in_24h,
                "outMsg24Hour": out_24h,
            }
        )
    return rows


# --------------------------------------------------------------------- brokerConsumeStats


def _broker_consume_stats_opts(p: argparse.ArgumentParser) -> None:
    p.add_argument("-b", "--brokerAddr", dest="broker_addr", required=True, help="Broker address")
    p.add_argument(
        "-t", "--timeoutMillis", dest="timeout_ms", default="50000", help="request timeout Millis"
    )
    p.add_argument("-l", "--level", dest="level", default="0", help="threshold of print diff")
    p.add_argument("-o", "--order", dest="order", default="false", help="order topic")


BCS_ROW = "{:<64}  {:<64}  {:<32}  {:<4}  {:<20}  {:<20}  {:<20}  {}\n"


@command("brokerConsumeStats", "Fetch broker consume stats data", _broker_consume_stats_opts)
async def broker_consume_stats(admin: Admin, a: argparse.Namespace, out: Out) -> None:
    try:
        level = int(a.level)
    except ValueError:
        raise UsageError(f"-l {a.level!r} is not a number") from None
    groups, total = await admin.broker_consume_stats(a.broker_addr, is_order=_java_bool(a.order))
    lines = [
        BCS_ROW.format(
            "#Topic",
            "#Group",
            "#Broker Name",
            "#QID",
            "#Broker Offset",
            "#Consumer Offset",
            "#Diff",
            "#LastTime",
        )
    ]
    docs = []
    for group, stats in groups:
        for cs in stats:
            for mq in sorted(cs.offset_table):
                w = cs.offset_table[mq]
                diff = w.broker_offset - w.consumer_offset
                docs.append(
                    {
                        "topic": mq.topic,
                        "group": group,
                        "brokerName": mq.broker_name,
                        "queueId": mq.queue_id,
                        "brokerOffset": w.broker_offset,
                        "consumerOffset": w.consumer_offset,
                        "diff": diff,
                        "lastTimestamp": w.last_timestamp,
                    }
                )
                # Apache prints only queues at or over the level, and only those consumed
                # from at least once (a last timestamp).
                if diff < level or w.last_timestamp <= 0:
                    continue
                lines.append(
                    BCS_ROW.format(
                        front(mq.topic, 64),
                        group,
                        front(mq.broker_name, 32),
                        mq.queue_id,
                        w.broker_offset,
                        w.consumer_offset,
                        diff,
                        java_date(w.last_timestamp),
                    )
                )
    lines.append(f"\nDiff Total: {total}\n")
    out.text("".join(lines), {"queues": docs, "totalDiff": total})


# ------------------------------------------------------------------------ printMsgByQueue


def _print_by_queue_opts(p: argparse.ArgumentParser) -> None:
    p.add_argument("-t", "--topic", dest="topic", required=True, help="topic name")
    p.add_argument("-a", "--brokerName", dest="broker_name", required=True, help="broker name")
    p.add_argument("-i", "--queueId", dest="queue_id", required=True, type=int, help="queue id")
    p.add_argument(
        "-c", "--charsetName", dest="charset", default="UTF-8", help="CharsetName(eg: UTF-8,GBK)"
    )
    p.add_argument(
        "-s",
        "--subExpression",
        dest="expression",
        default="*",
        help="Subscribe Expression(eg: TagA || TagB)",
    )
    p.add_argument(
        "-b",
        "--beginTimestamp",
        dest="begin",
        help="Begin timestamp[currentTimeMillis|yyyy-MM-dd#HH:mm:ss:SSS]",
    )
    p.add_argument(
        "-e",
        "--endTimestamp",
        dest="end",
        help="End timestamp[currentTimeMillis|yyyy-MM-dd#HH:mm:ss:SSS]",
    )
    p.add_argument(
        "-p", "--printMsg", dest="print_msg", help="print msg. eg: true | false(default)"
    )
    p.add_argument(
        "-d", "--printBody", dest="print_body", help="print body. eg: true | false(default)"
    )
    p.add_argument(
        "-f", "--calculate", dest="calculate", help="calculate by tag. eg: true | false(default)"
    )


@command("printMsgByQueue", "Print Message Detail", _print_by_queue_opts)
async def print_msg_by_queue(admin: Admin, a: argparse.Namespace, out: Out) -> None:
    mq = MessageQueue(a.topic, a.broker_name, a.queue_id)
    start = await admin.queue_offset(mq, RequestCode.GET_MIN_OFFSET)
    end = await admin.queue_offset(mq, RequestCode.GET_MAX_OFFSET)
    if a.begin is not None:
        start = await admin.queue_offset(
            mq, RequestCode.SEARCH_OFFSET_BY_TIMESTAMP, parse_time(a.begin)
        )
    if a.end is not None:
        end = await admin.queue_offset(
            mq, RequestCode.SEARCH_OFFSET_BY_TIMESTAMP, parse_time(a.end)
        )
    print_msg, print_body = _java_bool(a.print_msg), _java_bool(a.print_body)
    lines: list[str] = []
    docs: list[dict[str, Any]] = []
    tags: dict[str, int] = {}
    offset = start
    while offset < end:
        batch = await admin.pull_batch(mq, offset, 32, expression=a.expression)
        if not batch.messages:
            break
        for m in batch.messages:
            if m.tags:
                tags[m.tags] = tags.get(m.tags, 0) + 1
            body = m.body.decode(a.charset, errors="replace") if print_body else None
            docs.append(
                {
                    "msgId": m.msg_id,
                    "queueOffset": m.queue_offset,
                    "tags": m.tags,
                    "storeTimestamp": m.store_timestamp,
                    "body": body,
                }
            )
            if print_msg:
                shown = body if body is not None else "NOT PRINT BODY"
                lines.append(f"MSGID: {m.msg_id} {java_message_text(m, batch)} BODY: {shown}\n")
        offset = batch.next_offset
    counted = sorted(tags.items(), key=lambda kv: -kv[1])  # stable: ties keep first-seen order
    if _java_bool(a.calculate):
        lines += [f"Tag: {tag:<30} Count: {n}\n" for tag, n in counted]
    out.text("".join(lines), {"messages": docs, "tags": dict(counted)})


# -------------------------------------------------------------- sendMsgStatus, RT commands


def _send_status_opts(p: argparse.ArgumentParser) -> None:
    p.add_argument("-b", "--brokerName", dest="broker_name", required=True, help="Broker Name")
    p.add_argument(
        "-s", "--messageSize", dest="size", default="128", help="Message Size, Default: 128"
    )
    p.add_argument(
        "-c", "--count", dest="count", default="50", help="send message count, Default: 50"
    )


def _hello_body(size: int) -> bytes:
    """Apache's sendMsgStatus body: "hello jodie" once per 11 bytes asked for."""
    return ("hello jodie" * ((size + 10) // 11)).encode()


@command("sendMsgStatus", "send msg to broker.", _send_status_opts)
async def send_msg_status(admin: Admin, a: argparse.Namespace, out: Out) -> None:
    size, count = _positive(a.size, "-s"), _positive(a.count, "-c")
    docs = []
    # The broker's own topic, named after it (every broker has one).
    async with Producer(
        "PID_SMSC",
        admin.namesrv,
        instance_name=f"PID_SMSC_{time.time_ns()}",
        credentials=admin.credentials,
    ) as producer:
        await producer.send(Message(a.broker_name, _hello_body(16)))  # warm-up, not shown
        for _ in range(count):
            began = time.monotonic()
            r = await producer.send(Message(a.broker_name, _hello_body(size)))
            rt = int((time.monotonic() - began) * 1000)
            mq = r.message_queue
            doc = {
                "rt": rt,
                "sendStatus": r.status.name,
                "msgId": r.msg_id,
                "offsetMsgId": r.offset_msg_id,
                "brokerName": mq.broker_name,
                "queueId": mq.queue_id,
                "queueOffset": r.queue_offset,
            }
            docs.append(doc)
            if not out.as_json:
                sys.stdout.write(f"rt={rt}ms, SendResult={java_send_result(r)}\n")
    if out.as_json:
        out.json(docs)


def _check_rt_opts(p: argparse.ArgumentParser) -> None:
    p.add_argument("-t", "--topic", dest="topic", required=True, help="topic name")
    p.add_argument(
        "-a", "--amount", dest="amount", default="100", help="message amount | default 100"
    )
    p.add_argument(
        "-s", "--size", dest="size", default="128", help="message size | default 128 Byte"
    )


RT_ROW = "{:<32}  {:<4}  {:<20}    {}\n"


@command("checkMsgSendRT", "check message send response time", _check_rt_opts)
async def check_msg_send_rt(admin: Admin, a: argparse.Namespace, out: Out) -> None:
    amount, size = _positive(a.amount, "-a"), _positive(a.size, "-s")
    msg = Message(a.topic, b"a" * size)
    chosen = ["", 0]  # Apache keeps the last queue chosen when a send fails before choosing

    def selector(mqs: Sequence[MessageQueue], _msg: Message, arg: object) -> MessageQueue:
        mq = mqs[int(arg) % len(mqs)]  # type: ignore[call-overload]
        chosen[:] = [mq.broker_name, mq.queue_id]
        return mq

    if not out.as_json:
        sys.stdout.write(RT_ROW.format("#Broker Name", "#QID", "#Send Result", "#RT"))
    rows, elapsed = [], 0
    async with Producer(
        str(int(time.time() * 1000)), admin.namesrv, credentials=admin.credentials
    ) as producer:
        for i in range(amount):
            began = time.monotonic()
            try:
                await producer.send_orderly(msg, selector=selector, arg=i)
                ok = True
            except (ClientError, RocketMQError):
                ok = False
            rt = int((time.monotonic() - began) * 1000)
            if i != 0:
                elapsed += rt  # the first send warms the route up: not counted
            rows.append({"brokerName": chosen[0], "queueId": chosen[1], "success": ok, "rt": rt})
            if not out.as_json:
                sys.stdout.write(RT_ROW.format(chosen[0], chosen[1], "true" if ok else "false", rt))
    avg = elapsed / (amount - 1) if amount > 1 else float("nan")
    if out.as_json:
        out.json({"sends": rows, "avgRt": None if amount == 1 else avg})
    else:
        sys.stdout.write(f"Avg RT: {java_f2(avg)}\n")


def _cluster_rt_opts(p: argparse.ArgumentParser) -> None:
    p.add_argument(
        "-a", "--amount", dest="amount", default="100", help="message amount | default 100"
    )
    p.add_argument(
        "-s", "--size", dest="size", default="128", help="message size | default 128 Byte"
    )
    p.add_argument(
        "-c", "--cluster", dest="cluster", help="cluster name | default display all cluster"
    )
    p.add_argument(
        "-p", "--printLog", dest="print_log", default="false", help="print as tlog | default false"
    )
    p.add_argument(
        "-m",
        "--machineRoom",
        dest="machine_room",
        default="noname",
        help="machine room name | default noname",
    )
    p.add_argument(
        "-i",
        "--interval",
        dest="interval",
        default="10",
        help="print interval | default 10 seconds",
    )
    p.add_argument(
        "--rounds",
        dest="rounds",
        type=int,
        default=0,
        help="stop after this many rounds (default 0: until Ctrl-C)",
    )


async def _send_rt(
    producer: Producer, topic: str, amount: int, size: int
) -> tuple[float, int, int]:
    """``amount`` sends of ``size`` bytes to ``topic``: the mean round trip in ms (the
    first send, which warms the route up, left out), successes, failures."""
    ok, failed, elapsed = 0, 0, 0
    for i in range(amount):
        began = time.monotonic()
        try:
            await producer.send(Message(topic, b"a" * size))
            ok += 1
        except (ClientError, RocketMQError):
            failed += 1
        if i != 0:
            elapsed += int((time.monotonic() - began) * 1000)
    return (elapsed / (amount - 1) if amount > 1 else float("nan")), ok, failed


def _rt_line(a: argparse.Namespace, cluster: str, name: str, result: tuple[float, int, int]) -> str:
    rt, ok, bad = result
    if _java_bool(a.print_log):
        # Apache's tlog time is GMT+8 whatever the machine's zone
        now = time.strftime(TLOG_TIME, time.gmtime(time.time() + 8 * 3600))
        rounded = "NaN" if rt != rt else str(int(rt + 0.5))  # noqa: PLR0124 - NaN
        return f"{now}|{a.machine_room}|{cluster}|{name}|{rounded}\n"
    return f"{cluster:<24}  {name:<24}  {java_f2(rt):<8}  {ok:<16}  {bad:<16}\n"


@command("clusterRT", "List All clusters Message Send RT", _cluster_rt_opts)
async def cluster_rt(admin: Admin, a: argparse.Namespace, out: Out) -> None:
    amount, size = _positive(a.amount, "-a"), _positive(a.size, "-s")
    interval = _positive(a.interval, "-i")
    info = await admin.cluster_info()
    clusters = [a.cluster] if a.cluster else sorted(info.clusters)
    if not _java_bool(a.print_log) and not out.as_json:
        head = ("#Cluster Name", "#Broker Name", "#RT", "#successCount", "#failCount")
        sys.stdout.write("{:<24}  {:<24}  {:<4}  {:<8}  {:<8}\n".format(*head))
    rounds = 0
    group = str(int(time.time() * 1000))
    async with Producer(group, admin.namesrv, credentials=admin.credentials) as producer:
        while True:
            docs = []
            for cluster in clusters:
                names = info.clusters.get(cluster)
                if names is None:
                    if not out.as_json:
                        sys.stdout.write(f"cluster [{cluster}] not exist")
                    break
                for name in names:
                    result = await _send_rt(producer, name, amount, size)
                    rt, ok, bad = result
                    docs.append({"cluster": cluster, "brokerName": name, "rt": rt,
                                 "successCount": ok, "failCount": bad})  # fmt: skip
                    if not out.as_json:
                        sys.stdout.write(_rt_line(a, cluster, name, result))
            if out.as_json:
                out.json(docs)
            sys.stdout.flush()
            rounds += 1
            if a.rounds and rounds >= a.rounds:
                return
            await asyncio.sleep(interval)


# ----------------------------------------------------------------------- cleanUnusedTopic


def _clean_unused_opts(p: argparse.ArgumentParser) -> None:
    p.add_argument("-b", "--brokerAddr", dest="broker_addr", help="Broker address")
    p.add_argument("-c", "--cluster", dest="cluster", help="cluster name")


@command("cleanUnusedTopic", "Clean unused topic on broker.", _clean_unused_opts)
async def clean_unused_topic(admin: Admin, a: argparse.Namespace, out: Out) -> None:
    if a.broker_addr:
        addrs = [a.broker_addr]
    else:
        # Every broker, masters and slaves, of the cluster (or of every cluster).
        info = await admin.cluster_info()
        wanted = [a.cluster.strip()] if a.cluster and a.cluster.strip() else sorted(info.clusters)
        addrs = sorted(
            addr
            for c in wanted
            for name in info.clusters.get(c, [])
            if name in info.brokers
            for addr in info.brokers[name].broker_addrs.values()
        )
    for addr in addrs:
        await admin.clean_unused_topic(addr)
    done = bool(addrs)
    out.text("success" if done else "false", {"brokers": addrs, "success": done})


# --------------------------------------------------------------------------- getAclConfig


def _acl_config_opts(p: argparse.ArgumentParser) -> None:
    _cluster_or_broker(p, "query acl config version")


@command(
    "getAclConfig",
    "List all of acl config information in cluster",
    _acl_config_opts,
    alias="getAccessConfigSubCommand",
)
async def get_acl_config(admin: Admin, a: argparse.Namespace, out: Out) -> None:
    addrs = await admin.masters(cluster=a.cluster, broker_addr=a.broker_addr)
    text: list[str] = []
    docs = {}
    for addr in addrs:
        body = await admin.acl_config(addr)
        docs[addr] = {
            "globalWhiteAddrs": body.global_white_addrs,
            "plainAccessConfigs": [acc.to_json() for acc in body.accounts],
        }
        white = "[" + ", ".join(body.global_white_addrs) + "]"
        text += ["\n", f"{'globalWhiteRemoteAddresses':<20}: {white}\n", "\n", "accounts:\n"]
        for acc in body.accounts:
            fields = (
                ("accessKey", acc.access_key),
                ("secretKey", acc.secret_key),
                ("whiteRemoteAddress", acc.white_remote_address or ""),
                ("admin", "true" if acc.admin else "false"),
                ("defaultTopicPerm", acc.default_topic_perm or ""),
                ("defaultGroupPerm", acc.default_group_perm or ""),
                ("topicPerms", "[" + ", ".join(acc.topic_perms) + "]"),
                ("groupPerms", "[" + ", ".join(acc.group_perms) + "]"),
            )
            text += [f"  {name:<18}: {value}\n" for name, value in fields]
            text.append("\n")
    out.text("".join(text), docs)


# ---------------------------------------------------------------- exportConfigs / Metrics


def _export_opts(what: str) -> Any:
    def options(p: argparse.ArgumentParser) -> None:
        p.add_argument(
            "-c", "--clusterName", dest="cluster", required=True, help="choose a cluster to export"
        )
        p.add_argument(
            "-f",
            "--filePath",
            dest="path",
            default=EXPORT_DIR,
            help=f"export {what}.json path | default {EXPORT_DIR}",
        )

    return options


def _fastjson(doc: object) -> str:
    """``JSON.toJSONString(obj, true)``: tab-indented, no space after the colon."""
    return json.dumps(doc, indent="\t", separators=(",", ":"), ensure_ascii=False)


def _write_export(directory: str, name: str, doc: object) -> str:
    path = Path(directory.strip()) / name
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(_fastjson(doc), encoding="utf-8")  # no newline at the end, as Apache
    return str(path)


async def _cluster_brokers(admin: Admin, cluster: str) -> dict[str, tuple[str, list[str]]]:
    """broker name -> (master address, slave addresses) of ``cluster``."""
    info = await admin.cluster_info()
    if cluster not in info.clusters:
        known = ", ".join(sorted(info.clusters)) or "none"
        raise ClientError(f"cluster {cluster!r} is not known to the name server (known: {known})")
    out = {}
    for name in info.clusters[cluster]:
        bd = info.brokers.get(name)
        if bd is None or bd.master_addr is None:
            continue
        slaves = [addr for bid, addr in sorted(bd.broker_addrs.items()) if bid != 0]
        out[name] = (bd.master_addr, slaves)
    return out


@command("exportConfigs", "export configs", _export_opts("configs"))
async def export_configs(admin: Admin, a: argparse.Namespace, out: Out) -> None:
    brokers = await _cluster_brokers(admin, a.cluster)
    configs = {}
    for name, (master, _slaves) in sorted(brokers.items()):
        config = await admin.broker_config(master)
        configs[name] = {k: config[k] for k in EXPORTED_CONFIG_KEYS if k in config}
    doc = {
        "brokerConfigs": configs,
        "clusterScale": {
            "namesrvSize": len([n for n in (admin.namesrv or "").split(";") if n.strip()]),
            "masterBrokerSize": len(brokers),
            "slaveBrokerSize": sum(len(slaves) for _m, slaves in brokers.values()),
        },
    }
    path = _write_export(a.path, "configs.json", doc)
    out.text(f"export {path} success", {"path": path, **doc})


def _per_day(runtime: dict[str, str], key: str) -> int:
    """Yesterday's count: this morning's total less yesterday morning's."""
    try:
        return int(runtime.get(f"{key}TodayMorning", "0")) - int(
            runtime.get(f"{key}YesterdayMorning", "0")
        )
    except ValueError:
        return 0


async def _broker_report(admin: Admin, master: str) -> dict[str, Any]:
    """exportMetrics' ``evaluateReport`` entry of one master: its environment, rates, one
    day's counts, sizes and the versions of its consumers' clients."""
    runtime = await admin.runtime_info(master)
    config = await admin.broker_config(master)
    groups = list(await user_groups(admin, master))
    topics = list(await user_topics(admin, master))
    trans = await admin.broker_stats(master, "TOPIC_PUT_NUMS", "RMQ_SYS_TRANS_HALF_TOPIC")
    schedule = await admin.broker_stats(master, "TOPIC_PUT_NUMS", "SCHEDULE_TOPIC_XXXX")
    clients: set[str] = set()
    for group in groups:
        with contextlib.suppress(ClientError, RocketMQError):
            conns = await admin.consumer_connection(group)
            clients |= {
                f"{c.get('language')}%{c.get('versionDesc', c.get('version'))}"
                for c in conns.get("connectionSet") or []
            }

    def stat(data: BrokerStatsData | None) -> tuple[float, int]:
        return (data.minute.tps, data.sum_24h()) if data is not None else (0.0, 0)

    out_tps = first_rate(runtime, "getTransferedTps") or first_rate(runtime, "getTransferredTps")
    return {
        "runtimeEnv": {"cpuNum": config.get("clientCallbackExecutorThreads", "")},
        "runtimeQuota": {
            "diskRatio": {
                "commitLogDiskRatio": runtime.get("commitLogDiskRatio", ""),
                "consumeQueueDiskRatio": runtime.get("consumeQueueDiskRatio", ""),
            },
            "tps": {
                "normalInTps": first_rate(runtime, "putTps"),
                "normalOutTps": out_tps,
                "transInTps": stat(trans)[0],
                "scheduleInTps": stat(schedule)[0],
            },
            "oneDayNum": {
                "normalOneDayInNum": _per_day(runtime, "msgPutTotal"),
                "normalOneDayOutNum": _per_day(runtime, "msgGetTotal"),
                "transOneDayInNum": stat(trans)[1],
                "scheduleOneDayInNum": stat(schedule)[1],
            },
            "messageAverageSize": runtime.get("putMessageAverageSize", ""),
            "topicSize": len(topics),
            "groupSize": len(groups),
        },
        "runtimeVersion": {
            "rocketmqVersion": runtime.get("brokerVersionDesc", ""),
            "clientInfo": sorted(clients),
        },
    }


@command("exportMetrics", "export metrics", _export_opts("metrics"))
async def export_metrics(admin: Admin, a: argparse.Namespace, out: Out) -> None:
    brokers = await _cluster_brokers(admin, a.cluster)
    report = {
        name: await _broker_report(admin, master) for name, (master, _s) in sorted(brokers.items())
    }
    totals = {"totalNormalInTps": 0.0, "totalNormalOutTps": 0.0, "totalTransInTps": 0.0,
              "totalScheduleInTps": 0.0}  # fmt: skip
    day = {"normalOneDayInNum": 0, "normalOneDayOutNum": 0, "transOneDayInNum": 0,
           "scheduleOneDayInNum": 0}  # fmt: skip
    for entry in report.values():
        quota = entry["runtimeQuota"]
        for key, value in quota["tps"].items():
            totals["total" + key[0].upper() + key[1:]] += value
        for key, n in quota["oneDayNum"].items():
            day[key] += n
    doc = {"evaluateReport": report, "totalData": {"totalTps": totals, "totalOneDayNum": day}}
    path = _write_export(a.path, "metrics.json", doc)
    out.text(f"export {path} success", {"path": path, **doc})


# ------------------------------------------------------------------------ startMonitoring


def _monitor_opts(p: argparse.ArgumentParser) -> None:
    p.add_argument(
        "--rounds",
        dest="rounds",
        type=int,
        default=0,
        help="stop after this many rounds (default 0: until Ctrl-C)",
    )
    p.add_argument(
        "--interval",
        dest="interval",
        type=float,
        default=60.0,
        help="seconds between rounds (default 60; the first after 20)",
    )


@command("startMonitoring", "Start Monitoring", _monitor_opts)
async def start_monitoring(admin: Admin, a: argparse.Namespace, out: Out) -> None:
    """MonitorService: each round, for every consumer group (its %RETRY% topic), the
    messages it has not consumed yet (total, the largest queue's, how long the oldest has
    waited) and whether its clients' subscriptions agree; offsets moved by the broker
    (OFFSET_MOVED_EVENT) as they happen. Reported as ``[MONITOR]`` lines on stderr."""
    monitor = logging.getLogger("client.monitor")
    if not monitor.handlers:
        handler = logging.StreamHandler(sys.stderr)
        handler.setFormatter(logging.Formatter("%(asctime)s %(message)s"))
        monitor.addHandler(handler)
        monitor.setLevel(logging.INFO)
        monitor.propagate = False
    consumer = PushConsumer(
        "__MONITOR_CONSUMER", admin.namesrv, credentials=admin.credentials, consume_concurrency=1
    )

    @consumer.subscribe("OFFSET_MOVED_EVENT")
    async def moved(msg: MessageView) -> None:
        event = msg.body.decode("utf-8", "replace")
        monitor.info(
            "[MONITOR] reportDeleteMsgsEvent: DeleteMsgsEvent [offsetMovedEvent=%s, "
            "eventTimestamp=%s]",
            event,
            msg.store_timestamp,
        )

    async with consumer:
        await asyncio.sleep(min(20.0, a.interval))
        rounds = 0
        while True:
            began = time.monotonic()
            monitor.info("[MONITOR] =========================================beginRound")
            for topic in await admin.topic_list():
                if topic.startswith(RETRY_PREFIX):
                    await _report_group(admin, topic[len(RETRY_PREFIX) :], monitor)
            monitor.info("[MONITOR] =========================================endRound")
            monitor.info(
                "Execute one round monitor work, spent timemills: %d",
                int((time.monotonic() - began) * 1000),
            )
            rounds += 1
            if a.rounds and rounds >= a.rounds:
                return
            await asyncio.sleep(a.interval)


async def _report_group(admin: Admin, group: str, monitor: logging.Logger) -> None:
    """``reportUndoneMsgs`` and ``reportConsumerRunningInfo`` for one group."""
    try:
        _tps, table = await admin.consume_stats(group)
        conns = await admin.consumer_connection(group)
    except (ClientError, RocketMQError):
        return  # no positions or nobody online: nothing to say, as Apache says nothing
    by_topic: dict[str, list[int]] = {}
    delays: dict[str, int] = {}
    for mq, w in table.items():
        diff = w.broker_offset - w.consumer_offset
        by_topic.setdefault(mq.topic, []).append(diff)
        if w.last_timestamp > 0 and diff > 0:
            with contextlib.suppress(ClientError, RocketMQError):
                newest = await admin.pull_batch(mq, w.broker_offset - 1, 1)
                if newest.messages:
                    waited = newest.messages[-1].store_timestamp - w.last_timestamp
                    delays[mq.topic] = max(delays.get(mq.topic, 0), waited)
    for topic, diffs in sorted(by_topic.items()):
        monitor.info(
            "[MONITOR] reportUndoneMsgs: UndoneMsgs [consumerGroup=%s, topic=%s, "
            "undoneMsgsTotal=%d, undoneMsgsSingleMQ=%d, undoneMsgsDelayTimeMills=%d]",
            group,
            topic,
            sum(d for d in diffs if d > 0),
            max(diffs),
            delays.get(topic, 0),
        )
    subscriptions: set[str] = set()
    for c in conns.get("connectionSet") or []:
        with contextlib.suppress(ClientError, RocketMQError):
            info = await admin.consumer_running_info(group, str(c.get("clientId")))
            subscriptions.add(json.dumps(info.get("subscriptionSet"), sort_keys=True))
    if len(subscriptions) > 1:
        monitor.info(
            "[MONITOR]  [NOTIFY] reportConsumerRunningInfo: ConsumerGroup: %s, "
            "Subscription different",
            group,
        )

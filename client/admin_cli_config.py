"""mqadmin's commands that change or read configuration, in Apache's words.

RocketMQ counterpart: ``tools/command`` — ``topic/UpdateTopicSubCommand``,
``DeleteTopicSubCommand``, ``UpdateOrderConfCommand``; ``consumer/UpdateSubGroupSubCommand``,
``DeleteSubscriptionGroupCommand``, ``GetConsumerConfigSubCommand``; ``broker/
UpdateBrokerConfigSubCommand``, ``GetBrokerConfigCommand``, ``CleanExpiredCQSubCommand``,
``DeleteExpiredCommitLogSubCommand``; ``namesrv/`` ``UpdateKvConfigCommand``,
``DeleteKvConfigCommand``, ``WipeWritePermSubCommand``, ``AddWritePermSubCommand``,
``GetNamesrvConfigCommand``, ``UpdateNamesrvConfigCommand``; ``offset/
CloneGroupOffsetCommand``; ``export/ExportMetadataCommand``.

What they print is Apache's ``printf`` text, byte for byte: the ``... success.`` lines
scripts grep for, ``TopicConfig [...]`` and ``SubscriptionGroupConfig [...]`` as Java's
``toString`` writes them, the ``key=  value`` lists in the order a Java ``Properties``
iterates, and the answers Apache leaves without a newline (a terminal gets one, so the
prompt starts on its own line). ``--json`` gives the same facts as JSON. Unlike Apache's
tool, a failure (an unknown cluster, a refused request) goes to stderr with exit 1, never a
``success`` line after it.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import time
from pathlib import Path
from typing import Any

from client.admin import ORDER_NS, Admin, require_cluster
from client.admin_commands import (
    DLQ_PREFIX,
    EXPORT_DIR,
    RETRY_PREFIX,
    Out,
    UsageError,
    command,
    group_opt,
    java_bool,
    on_masters,
    target_addrs,
    target_opts,
    topic_opt,
    user_groups,
    user_topics,
)
from client.errors import ClientError
from client.trace import java_str
from codec.hashing import java_hashmap_order, java_properties_order
from remoting.bodies import SubscriptionGroupConfig, TopicConfig


def perm_text(perm: int) -> str:
    """``PermName.perm2String``: R, W and X (inherit) in their places, ``-`` where unset."""
    return ("R" if perm & 4 else "-") + ("W" if perm & 2 else "-") + ("X" if perm & 1 else "-")


def topic_config_text(c: TopicConfig) -> str:
    """``TopicConfig.toString()`` of RocketMQ 4.9."""
    return (
        f"TopicConfig [topicName={c.topic_name}, readQueueNums={c.read_queue_nums}, "
        f"writeQueueNums={c.write_queue_nums}, perm={perm_text(c.perm)}, "
        f"topicFilterType={c.topic_filter_type}, topicSysFlag={c.topic_sys_flag}, "
        f"order={java_str(c.order)}]"
    )


def group_fields(g: SubscriptionGroupConfig) -> list[tuple[str, str]]:
    """RocketMQ 4.9's ``SubscriptionGroupConfig`` fields in declaration order, as
    ``toString`` and getConsumerConfig print them."""
    return [
        ("groupName", g.group_name),
        ("consumeEnable", java_str(g.consume_enable)),
        ("consumeFromMinEnable", java_str(g.consume_from_min_enable)),
        ("consumeBroadcastEnable", java_str(g.consume_broadcast_enable)),
        ("retryQueueNums", str(g.retry_queue_nums)),
        ("retryMaxTimes", str(g.retry_max_times)),
        ("brokerId", str(g.broker_id)),
        ("whichBrokerWhenConsumeSlowly", str(g.which_broker_when_consume_slowly)),
        ("notifyConsumerIdsChangedEnable", java_str(g.notify_consumer_ids_changed_enable)),
    ]


def group_config_text(g: SubscriptionGroupConfig) -> str:
    """``SubscriptionGroupConfig.toString()`` of RocketMQ 4.9."""
    return f"SubscriptionGroupConfig [{', '.join(f'{k}={v}' for k, v in group_fields(g))}]"


def properties_text(props: dict[str, str]) -> str:
    """A Java ``Properties`` printed ``%-50s=  %s\\n`` per entry, in its iteration order
    (Java 9 and later: a ConcurrentHashMap filled in the body's line order)."""
    return "".join(f"{k:<50}=  {props[k]}\n" for k in java_properties_order(props))


# ---------------------------------------------------------------------------- topics


def _update_topic_opts(p: argparse.ArgumentParser) -> None:
    target_opts(p)
    topic_opt(p)
    p.add_argument("-r", "--readQueueNums", dest="read", type=int, default=8)
    p.add_argument("-w", "--writeQueueNums", dest="write", type=int, default=8)
    p.add_argument("-p", "--perm", type=int, default=6, help="2 write, 4 read, 6 both")
    p.add_argument("-o", "--order", type=java_bool, default=False)
    p.add_argument("-s", "--hasUnitSub", dest="unit_sub", type=java_bool, default=False)
    p.add_argument("-u", "--unit", type=java_bool, default=False)
    p.add_argument(
        "-a",
        "--attributes",
        help="RocketMQ 5 attributes: +message.type=NORMAL|FIFO|DELAY|TRANSACTION|MIXED, -key",
    )


@command(
    "updateTopic", "create or update a topic on a broker or a whole cluster", _update_topic_opts
)
async def update_topic(admin: Admin, a: argparse.Namespace, out: Out) -> None:
    if a.perm not in (2, 4, 6):
        raise UsageError(f"perm {a.perm} must be 2 (write), 4 (read) or 6 (read and write)")
    sys_flag = (0x1 if a.unit else 0) | (0x2 if a.unit_sub else 0)
    config = TopicConfig(a.topic, a.read, a.write, a.perm, "SINGLE_TAG", sys_flag, a.order)
    text = ""
    if a.broker_addr:
        await admin.create_topic(a.broker_addr, config, attributes=a.attributes)
        addrs = [a.broker_addr]
        if a.order:
            name = await admin.broker_name_of(a.broker_addr)
            conf = f"{name}:{a.write}"
            await admin.merge_order_conf(a.topic, {name: conf})
            text += f"set broker orderConf. isOrder=true, orderConf=[{conf}]"
        text += f"create topic to {a.broker_addr} success.\n"
    else:
        addrs = await on_masters(
            admin, a, lambda addr: admin.create_topic(addr, config, attributes=a.attributes)
        )
        text += "".join(f"create topic to {addr} success.\n" for addr in addrs)
        if a.order:
            names = java_hashmap_order((await admin.cluster_info()).clusters[a.cluster])
            conf = ";".join(f"{n}:{a.write}" for n in names)
            await admin.put_kv(ORDER_NS, a.topic, conf)
            text += f"set cluster orderConf. isOrder=true, orderConf=[{conf}]"
    doc = {"topic": a.topic, "brokers": addrs, "config": config.to_json()}
    out.text(text + topic_config_text(config), doc)


def _delete_topic_opts(p: argparse.ArgumentParser) -> None:
    topic_opt(p)
    p.add_argument("-c", "--clusterName", dest="cluster", required=True)


@command(
    "deleteTopic",
    "delete a topic from a cluster's brokers and the name servers",
    _delete_topic_opts,
)
async def delete_topic(admin: Admin, a: argparse.Namespace, out: Out) -> None:
    addrs = await admin.delete_topic(a.topic, a.cluster)
    out.text(
        _deleted_topic_text(a.topic, a.cluster),
        {"topic": a.topic, "cluster": a.cluster, "brokers": addrs},
    )


def _deleted_topic_text(topic: str, cluster: str) -> str:
    return (
        f"delete topic [{topic}] from cluster [{cluster}] success.\n"
        f"delete topic [{topic}] from NameServer success.\n"
    )


def _topic_perm_opts(p: argparse.ArgumentParser) -> None:
    target_opts(p)
    topic_opt(p)
    p.add_argument("-p", "--perm", type=int, required=True, help="2 write, 4 read, 6 both")


@command("updateTopicPerm", "change a topic's read/write permission", _topic_perm_opts)
async def update_topic_perm(admin: Admin, a: argparse.Namespace, out: Out) -> None:
    if a.perm not in (2, 4, 6):
        raise UsageError(f"perm {a.perm} must be 2 (write), 4 (read) or 6 (read and write)")
    # Each broker's own config is the base (Apache takes the route's first queue data for
    # every broker, which can carry another broker's queue counts over).
    addrs = await target_addrs(admin, a)
    text = ""
    changed = []
    for addr in addrs:
        current = (await admin.topic_configs(addr)).get(a.topic)
        if current is None:
            raise ClientError(f"topic {a.topic} does not exist on {addr}")
        old = current.perm
        if a.broker_addr and old == a.perm:
            text += "new perm equals to the old one!\n"
            break
        current.perm = a.perm
        await admin.create_topic(addr, current)
        changed.append(addr)
        text += f"update topic perm from {old} to {a.perm} in {addr} success.\n"
        if a.broker_addr:
            text += f"{topic_config_text(current)}.\n"
    out.text(text, {"topic": a.topic, "perm": a.perm, "brokers": changed})


def _order_conf_opts(p: argparse.ArgumentParser) -> None:
    topic_opt(p)
    p.add_argument("-v", "--orderConf", dest="conf", help='"broker-a:4;broker-b:4"')
    p.add_argument("-m", "--method", choices=["get", "put", "delete"], required=True)


@command("updateOrderConf", "get, put or delete a topic's ordered-queue config", _order_conf_opts)
async def update_order_conf(admin: Admin, a: argparse.Namespace, out: Out) -> None:
    if a.method == "get":
        value = await admin.get_kv(ORDER_NS, a.topic)
        if value is None:
            raise ClientError(f"topic {a.topic} has no orderConf on the name server")
        out.text(
            f"get orderConf success. topic=[{a.topic}], orderConf=[{value}] ",
            {"topic": a.topic, "orderConf": value},
        )
        return
    if a.method == "put":
        if not a.conf or not a.conf.strip():
            raise UsageError("please set orderConf with option -v (e.g. broker-a:4;broker-b:4)")
        for part in a.conf.split(";"):
            name, _, count = part.partition(":")
            if not name or not count.isdigit():
                raise UsageError(f"orderConf entry {part!r} is not brokerName:queueNums")
        await admin.put_kv(ORDER_NS, a.topic, a.conf)
        text = f"update orderConf success. topic=[{a.topic}], orderConf=[{a.conf}]"
    else:
        await admin.delete_kv(ORDER_NS, a.topic)
        text = f"delete orderConf success. topic=[{a.topic}]"
    out.text(text, {"topic": a.topic, "method": a.method})


# ------------------------------------------------------------------ subscription groups


def _update_sub_group_opts(p: argparse.ArgumentParser) -> None:
    target_opts(p)
    group_opt(p)
    add = p.add_argument
    add("-s", "--consumeEnable", dest="consume_enable", type=java_bool, default=True)
    add("-m", "--consumeFromMinEnable", dest="from_min", type=java_bool, default=False)
    add("-d", "--consumeBroadcastEnable", dest="broadcast", type=java_bool, default=False)
    add("-q", "--retryQueueNums", dest="retry_queues", type=int, default=1)
    add("-r", "--retryMaxTimes", dest="retry_max", type=int, default=16)
    add("-i", "--brokerId", dest="broker_id", type=int, default=0)
    add("-w", "--whichBrokerWhenConsumeSlowly", dest="slow_broker", type=int, default=1)
    add("-a", "--notifyConsumerIdsChanged", dest="notify", type=java_bool, default=True)
    add(
        "-o",
        "--consumeMessageOrderly",
        dest="orderly",
        type=java_bool,
        default=False,
        help="RocketMQ 5: a FIFO group (5.x consumers receive its queues in order)",
    )


@command("updateSubGroup", "create or update a subscription group", _update_sub_group_opts)
async def update_sub_group(admin: Admin, a: argparse.Namespace, out: Out) -> None:
    config = SubscriptionGroupConfig(
        a.group,
        consume_enable=a.consume_enable,
        consume_from_min_enable=a.from_min,
        consume_broadcast_enable=a.broadcast,
        retry_queue_nums=a.retry_queues,
        retry_max_times=a.retry_max,
        broker_id=a.broker_id,
        which_broker_when_consume_slowly=a.slow_broker,
        notify_consumer_ids_changed_enable=a.notify,
        consume_message_orderly=a.orderly,
    )
    addrs = await on_masters(admin, a, lambda addr: admin.create_subscription_group(addr, config))
    text = "".join(f"create subscription group to {addr} success.\n" for addr in addrs)
    out.text(
        text + group_config_text(config),
        {"group": a.group, "brokers": addrs, "config": config.to_json()},
    )


def _delete_sub_group_opts(p: argparse.ArgumentParser) -> None:
    target_opts(p)
    group_opt(p)
    p.add_argument(
        "-r", "--removeOffset", dest="remove_offset", type=java_bool, default=False,
        help="drop the group's committed offsets too",
    )  # fmt: skip


@command("deleteSubGroup", "delete a subscription group", _delete_sub_group_opts)
async def delete_sub_group(admin: Admin, a: argparse.Namespace, out: Out) -> None:
    addrs = await on_masters(
        admin,
        a,
        lambda addr: admin.delete_subscription_group(addr, a.group, remove_offset=a.remove_offset),
    )
    doc: dict[str, Any] = {"group": a.group, "brokers": addrs}
    if a.broker_addr:
        text = f"delete subscription group [{a.group}] from broker [{a.broker_addr}] success.\n"
    else:
        # As Apache's tool: from a whole cluster, the group's retry and dead-letter topics go too.
        text = "".join(
            f"delete subscription group [{a.group}] from broker [{addr}] "
            f"in cluster [{a.cluster}] success.\n"
            for addr in addrs
        )
        doc["topics"] = [RETRY_PREFIX + a.group, DLQ_PREFIX + a.group]
        for topic in doc["topics"]:
            await admin.delete_topic(topic, a.cluster)
            text += _deleted_topic_text(topic, a.cluster)
    out.text(text, doc)


def _group_name_opt(p: argparse.ArgumentParser) -> None:
    p.add_argument("-g", "--groupName", dest="group", required=True)


@command("getConsumerConfig", "a subscription group's settings on each broker", _group_name_opt)
async def get_consumer_config(admin: Admin, a: argparse.Namespace, out: Out) -> None:
    info = await admin.cluster_info()
    found: dict[str, Any] = {}
    text = ""
    for name in java_hashmap_order(info.brokers):
        addrs = info.brokers[name].broker_addrs
        addr = addrs.get(0) or next(iter(sorted(addrs.items())), (0, ""))[1]
        group = (await admin.subscription_groups(addr)).get(a.group) if addr else None
        if group is None:
            continue
        cluster = next(
            (c for c in java_hashmap_order(info.clusters) if name in info.clusters[c]), "null"
        )
        found[addr] = group.to_json()
        text += f"{'=' * 29}{cluster}:{name}{'=' * 29}\n"
        text += "".join(f"{k:<40}=  {v}\n" for k, v in group_fields(group))
    if not found:
        raise ClientError(f"subscription group {a.group} exists on no broker")
    out.text(text, found)


# ---------------------------------------------------------------------------- brokers


@command("getBrokerConfig", "a broker's configuration", target_opts)
async def get_broker_config(admin: Admin, a: argparse.Namespace, out: Out) -> None:
    docs: dict[str, dict[str, str]] = {}
    text = ""
    if a.broker_addr:
        docs[a.broker_addr] = await admin.broker_config(a.broker_addr)
        text = f"============{a.broker_addr}============\n{properties_text(docs[a.broker_addr])}\n"
    else:
        info = await admin.cluster_info()
        require_cluster(info, a.cluster)
        names = java_hashmap_order(info.clusters[a.cluster])  # Apache's HashSet of names
        groups = [info.brokers[n].broker_addrs for n in names if n in info.brokers]
        masters = {g.get(0, "null"): [v for k, v in sorted(g.items()) if k != 0] for g in groups}
        for master in java_hashmap_order(masters):
            if master != "null":
                docs[master] = await admin.broker_config(master)
                text += f"============Master: {master}============\n"
                text += properties_text(docs[master]) + "\n"
            for slave in masters[master]:
                docs[slave] = await admin.broker_config(slave)
                text += f"============My Master: {master}=====Slave: {slave}============\n"
                text += properties_text(docs[slave]) + "\n"
    out.text(text, docs)


def _update_broker_config_opts(p: argparse.ArgumentParser) -> None:
    target_opts(p)
    p.add_argument("-k", "--key", required=True)
    p.add_argument("-v", "--value", required=True)


@command("updateBrokerConfig", "change a broker config key at runtime", _update_broker_config_opts)
async def update_broker_config(admin: Admin, a: argparse.Namespace, out: Out) -> None:
    addrs = await on_masters(
        admin, a, lambda addr: admin.update_broker_config(addr, {a.key: a.value})
    )
    out.text(
        "".join(f"update broker config success, {addr}\n" for addr in addrs),
        {"key": a.key, "value": a.value, "brokers": addrs},
    )


def _every_broker_opts(p: argparse.ArgumentParser) -> None:
    p.add_argument("-b", "--brokerAddr", dest="broker_addr", help="broker address host:port")
    p.add_argument("-c", "--cluster", dest="cluster", help="every broker of a cluster")


@command(
    "cleanExpiredCQ", "remove consume queues that point at deleted commit log", _every_broker_opts
)
async def clean_expired_cq(admin: Admin, a: argparse.Namespace, out: Out) -> None:
    addrs = await target_addrs(admin, a, slaves=True)
    for addr in addrs:
        await admin.clean_expired_consume_queue(addr)
    out.text("success" if addrs else "false", {"brokers": addrs, "success": bool(addrs)})


@command("deleteExpiredCommitLog", "delete expired commit-log files now", _every_broker_opts)
async def delete_expired_commit_log(admin: Admin, a: argparse.Namespace, out: Out) -> None:
    addrs = await target_addrs(admin, a, slaves=True)
    for addr in addrs:
        await admin.delete_expired_commit_log(addr)
    out.text("success" if addrs else "false", {"brokers": addrs, "success": bool(addrs)})


# ------------------------------------------------------------------------ name servers


def _kv_update_opts(p: argparse.ArgumentParser) -> None:
    p.add_argument("-s", "--namespace", required=True)
    p.add_argument("-k", "--key", required=True)
    p.add_argument("-v", "--value", required=True)


@command(
    "updateKvConfig", "create or update a namespaced KV entry on the name servers", _kv_update_opts
)
async def update_kv_config(admin: Admin, a: argparse.Namespace, out: Out) -> None:
    addrs = await admin.put_kv(a.namespace, a.key, a.value)
    out.text(
        "create or update kv config to namespace success.\n",
        {"namespace": a.namespace, "key": a.key, "namesrv": addrs},
    )


def _kv_delete_opts(p: argparse.ArgumentParser) -> None:
    p.add_argument("-s", "--namespace", required=True)
    p.add_argument("-k", "--key", required=True)


@command("deleteKvConfig", "delete a namespaced KV entry", _kv_delete_opts)
async def delete_kv_config(admin: Admin, a: argparse.Namespace, out: Out) -> None:
    addrs = await admin.delete_kv(a.namespace, a.key)
    out.text(
        "delete kv config from namespace success.\n",
        {"namespace": a.namespace, "key": a.key, "namesrv": addrs},
    )


def _broker_name_opt(p: argparse.ArgumentParser) -> None:
    p.add_argument("-b", "--brokerName", dest="broker_name", required=True)


async def _write_perm(admin: Admin, a: argparse.Namespace, out: Out, *, wipe: bool) -> None:
    counts = await admin.write_perm(a.broker_name, wipe=wipe)
    verb = "wipe" if wipe else "add"
    out.text(
        "".join(
            f"{verb} write perm of broker[{a.broker_name}] in name server[{ns}] OK, {n}\n"
            for ns, n in counts.items()
        ),
        counts,
    )


@command(
    "wipeWritePerm", "take a broker's write permission away on every name server", _broker_name_opt
)
async def wipe_write_perm(admin: Admin, a: argparse.Namespace, out: Out) -> None:
    await _write_perm(admin, a, out, wipe=True)


@command(
    "addWritePerm", "give a broker its write permission back on every name server", _broker_name_opt
)
async def add_write_perm(admin: Admin, a: argparse.Namespace, out: Out) -> None:
    await _write_perm(admin, a, out, wipe=False)


@command("getNamesrvConfig", "every name server's configuration", lambda p: None)
async def get_namesrv_config(admin: Admin, a: argparse.Namespace, out: Out) -> None:
    configs = await admin.namesrv_config()
    text = "".join(
        f"============{addr}============\n{properties_text(configs[addr])}"
        for addr in java_hashmap_order(configs)
    )
    out.text(text, configs)


def _kv_opts(p: argparse.ArgumentParser) -> None:
    p.add_argument("-k", "--key", required=True)
    p.add_argument("-v", "--value", required=True)


@command("updateNamesrvConfig", "change a name server config key at runtime", _kv_opts)
async def update_namesrv_config(admin: Admin, a: argparse.Namespace, out: Out) -> None:
    addrs = await admin.update_namesrv_config({a.key: a.value})
    # Apache prints the -n list as Java's List.toString, nothing when -n was not given.
    listed = f"[{', '.join(a.namesrv.strip().split(';'))}]" if a.namesrv else ""
    out.text(
        f"update name server config success!{listed}\n{a.key} : {a.value}\n",
        {"key": a.key, "value": a.value, "namesrv": addrs},
    )


# ---------------------------------------------------------------------------- offsets


def _clone_opts(p: argparse.ArgumentParser) -> None:
    p.add_argument("-s", "--srcGroup", dest="src", required=True)
    p.add_argument("-d", "--destGroup", dest="dest", required=True)
    topic_opt(p)
    p.add_argument("-o", "--offline", type=java_bool, default=False)


@command("cloneGroupOffset", "copy a group's offsets to another group", _clone_opts)
async def clone_group_offset(admin: Admin, a: argparse.Namespace, out: Out) -> None:
    brokers = await admin.clone_group_offset(a.src, a.dest, a.topic)
    out.text(
        f"clone group offset success. srcGroup[{a.src}], destGroup=[{a.dest}], topic[{a.topic}]",
        {"src": a.src, "dest": a.dest, "topic": a.topic, "brokers": brokers},
    )


# ---------------------------------------------------------------------------- export


def _export_opts(p: argparse.ArgumentParser) -> None:
    target_opts(p)
    p.add_argument(
        "-f", "--filePath", dest="dir", default=EXPORT_DIR,
        help=f"the directory to write metadata.json (topic.json, subscriptionGroup.json) in "
        f"(default {EXPORT_DIR})",
    )  # fmt: skip
    p.add_argument("-t", "--topic", dest="topics_only", action="store_true",
                   help="only the topics")  # fmt: skip
    p.add_argument("-g", "--subscriptionGroup", dest="groups_only", action="store_true",
                   help="only the subscription groups")  # fmt: skip
    p.add_argument("-s", "--specialTopic", dest="special", action="store_true",
                   help="with the retry and dead-letter topics")  # fmt: skip


@command("exportMetadata", "topics and subscription groups of brokers, as JSON", _export_opts)
async def export_metadata(admin: Admin, a: argparse.Namespace, out: Out) -> None:
    if a.broker_addr and not (a.topics_only or a.groups_only):
        raise UsageError("with -b, choose -t (topics) or -g (subscription groups)")
    kind = "topic" if a.topics_only else "subscriptionGroup" if a.groups_only else "metadata"
    doc: dict[str, Any] = {}
    if a.topics_only or not a.groups_only:
        doc["topicConfigTable"] = {}
    if a.groups_only or not a.topics_only:
        doc["subscriptionGroupTable"] = {}
    for addr in await admin.masters(cluster=a.cluster, broker_addr=a.broker_addr):
        if "topicConfigTable" in doc:
            _merge_topics(
                doc["topicConfigTable"], await user_topics(admin, addr, special=a.special)
            )
        if "subscriptionGroupTable" in doc:
            _merge_groups(doc["subscriptionGroupTable"], await user_groups(admin, addr))
    doc["exportTime"] = int(time.time() * 1000)
    path = Path(a.dir) / f"{kind}.json"
    text = json.dumps(doc, indent=2, ensure_ascii=False)

    def write() -> None:
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text, encoding="utf-8")

    await asyncio.to_thread(write)
    topics, groups = (
        len(doc.get("topicConfigTable", ())),
        len(doc.get("subscriptionGroupTable", ())),
    )
    newline = "" if a.broker_addr else "\n"  # Apache's -b branch leaves it out
    out.text(
        f"export {path} success{newline}", {"file": str(path), "topics": topics, "groups": groups}
    )


def _merge_topics(table: dict[str, Any], topics: dict[str, TopicConfig]) -> None:
    """A topic on several masters is one entry with their queues summed, as Apache's."""
    for name, tc in topics.items():
        doc = tc.to_json()
        seen = table.get(name)
        if seen is not None:
            doc["readQueueNums"] += seen["readQueueNums"]
            doc["writeQueueNums"] += seen["writeQueueNums"]
        table[name] = doc


def _merge_groups(table: dict[str, Any], groups: dict[str, SubscriptionGroupConfig]) -> None:
    for name, g in groups.items():
        doc = g.to_json()
        seen = table.get(name)
        if seen is not None:
            doc["retryQueueNums"] += seen["retryQueueNums"]
        table[name] = doc

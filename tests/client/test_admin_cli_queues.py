"""mqadmin's commands over queues, messages and offsets print Apache's text: printMsg's
``minOffset=`` lines, ``MSGID:`` lines with ``MessageExt.toString`` and the dash rule;
sendMessage's table; consumeMessage's checks and ``print msg finished`` lines; allocateMQ's
compact JSON; queryCq's blocks; the rollback tables of resetOffsetByTime and
skipAccumulatedMessage; consumerStatus's list, files and ``formatString``. The queues come in
the order Java's HashSet / HashMap of MessageQueue gives (tests/codec/test_java_orders.py
holds that order against Java's own). Real processes against a live broker.
"""

from __future__ import annotations

import asyncio
import json
from pathlib import Path

from broker.broker import Broker
from broker.namesrv.server import NameServer
from client import ConsumeFromWhere, Message, MessageView, Producer, PushConsumer
from client.admin_cli_queues import java_offset_table_order, mq_set
from client.rebalance import allocate_averagely, message_queue_key
from codec.hashing import java_hashmap_order
from remoting.route import MessageQueue
from tests.client.conftest import create_topic, raw_pull, stored
from tests.client.test_admin_cli import mqadmin, mqadmin_text, run_cli
from tests.support import wait_dispatched, wait_until

TOPIC = "TopicQueues"


async def fill(namesrv: NameServer, broker: Broker, topic: str = TOPIC) -> list[MessageView]:
    await create_topic(broker, topic, queues=4)
    async with Producer("pg-queues", namesrv.address, auto_batch=False) as producer:
        for n in range(6):
            tags = "TagA" if n % 2 else "TagB"
            await producer.send(Message(topic, f"body-{n}".encode(), tags=tags, keys=[f"k{n}"]))
    await wait_dispatched(broker)
    return await stored(broker, topic, range(4))


def queues(topic: str = TOPIC, broker: str = "broker-a", n: int = 4) -> list[MessageQueue]:
    return mq_set(MessageQueue(topic, broker, i) for i in range(n))


async def test_print_msg_prints_each_queue_in_hash_set_order(
    namesrv: NameServer, broker: Broker
) -> None:
    msgs = await fill(namesrv, broker)
    text = await mqadmin_text(namesrv, "printMsg", "-t", TOPIC)
    heads = [line for line in text.splitlines() if line.startswith("minOffset=")]
    ends = {q: broker.store.get_max_offset(TOPIC, q) for q in range(4)}
    assert heads == [
        f"minOffset=0, maxOffset={ends[mq.queue_id]}, {message_queue_key(mq)}" for mq in queues()
    ]
    assert text.count("-" * 56 + "\n") == 4 and text.endswith("-" * 56 + "\n")
    lines = [line for line in text.splitlines() if line.startswith("MSGID: ")]
    assert len(lines) == 6
    first = next(m for m in msgs if m.queue_id == 0 and m.queue_offset == 0)
    (line,) = [line for line in lines if f"msgId={first.offset_msg_id}," in line]
    record_size = int.from_bytes((await raw_pull(broker, TOPIC, 0))[:4], "big")
    assert line.startswith(f"MSGID: {first.msg_id} MessageExt [brokerName=broker-a, queueId=0, ")
    assert f", storeSize={record_size}, queueOffset=0, " in line
    assert f"bornHost=/{first.born_host}, " in line and "preparedTransactionOffset=0, " in line
    assert f"toString()=Message{{topic='{TOPIC}', flag=0, properties={{" in line
    # The properties as the HashMap they are in, with the pull's MIN_OFFSET and MAX_OFFSET.
    props = line.split("properties={", 1)[1].split("}, body=", 1)[0]
    keys = [kv.split("=", 1)[0] for kv in props.split(", ")]
    assert keys == java_hashmap_order(keys) and {"MIN_OFFSET", "MAX_OFFSET", "UNIQ_KEY"} <= set(
        keys
    )
    body = ", ".join(str(b) for b in first.body)
    assert line.endswith(f"body=[{body}], transactionId='null'}}] BODY: {first.body.decode()}")

    tagged = await mqadmin_text(namesrv, "printMsg", "-t", TOPIC, "-s", "TagA", "-d", "false")
    shown = [line for line in tagged.splitlines() if line.startswith("MSGID: ")]
    assert len(shown) == 3 and all(line.endswith(" BODY: NOT PRINT BODY") for line in shown)


async def test_send_message_prints_apaches_table(namesrv: NameServer, broker: Broker) -> None:
    await create_topic(broker, TOPIC, queues=4)
    text = await mqadmin_text(
        namesrv, "sendMessage", "-t", TOPIC, "-p", "  hello  ", "-b", "broker-a", "-i", "2"
    )
    head, row, end = text.split("\n")
    assert head == f"{'#Broker Name':<32}  {'#QID':<4}  {'#Send Result':<20}    #MsgId"
    assert end == ""
    name, qid, status, msg_id = row.split()
    assert (name, qid, status) == ("broker-a", "2", "SEND_OK")
    (sent,) = await stored(broker, TOPIC, [2])
    assert sent.msg_id == msg_id and sent.body == b"hello"  # Apache trims the body too
    code, _, err = await run_cli("sendMessage", "-n", namesrv.address, "-t", TOPIC, "-p", "x",
                                 "-i", "1")  # fmt: skip
    assert code == 2 and "Broker name must be set if the queue is chosen!" in err


async def test_consume_message_checks_and_reads_as_apaches(
    namesrv: NameServer, broker: Broker
) -> None:
    msgs = await fill(namesrv, broker)
    for args, said in [
        (("-c", "0"), "Please input a positive messageNumber!"),
        (("-i", "1"), "Please set the brokerName before queueId!"),
        (("-b", "broker-a", "-o", "1"), "Please set queueId before offset!"),
        (("-s", "2999-01-01#00:00:00:000"), "Please set the beginTimestamp before now!"),
    ]:
        code, _, err = await run_cli("consumeMessage", "-n", namesrv.address, "-t", TOPIC, *args)
        assert code == 2 and said in err, args

    mq = MessageQueue(TOPIC, "broker-a", 1)
    end = broker.store.get_max_offset(TOPIC, 1)
    text = await mqadmin_text(
        namesrv, "consumeMessage", "-t", TOPIC, "-b", "broker-a", "-i", "1", "-o", "0"
    )
    assert text.startswith("Consume ok\nMSGID: ")
    assert text.endswith(f"{message_queue_key(mq)} print msg finished. status=NO_NEW_MSG, "
                         f"offset={end}\n")  # fmt: skip
    assert text.count("MSGID: ") == sum(1 for m in msgs if m.queue_id == 1)
    past = await mqadmin_text(
        namesrv, "consumeMessage", "-t", TOPIC, "-b", "broker-a", "-i", "1", "-o", "99"
    )
    assert past == f"{message_queue_key(mq)} no matched msg, offset=99\n"


async def test_allocate_mq_is_apaches_compact_json(namesrv: NameServer, broker: Broker) -> None:
    await create_topic(broker, TOPIC, queues=4)
    text = await mqadmin_text(namesrv, "allocateMQ", "-t", TOPIC, "-i", "10.0.0.2,10.0.0.1,x")
    ips = ["10.0.0.2", "10.0.0.1", "x"]
    mqs = queues()
    want = {
        ip: [m.to_json() for m in allocate_averagely("aa", ip, mqs, ips)]
        for ip in java_hashmap_order(ips)
    }
    assert text == json.dumps({"result": want}, separators=(",", ":")) + "\n"
    assert text.startswith('{"result":{') and ", " not in text


async def test_query_cq_prints_apaches_blocks(namesrv: NameServer, broker: Broker) -> None:
    msgs = await fill(namesrv, broker)
    in_q0 = sorted((m for m in msgs if m.queue_id == 0), key=lambda m: m.queue_offset)
    text = await mqadmin_text(namesrv, "queryCq", "-t", TOPIC, "-q", "0", "-i", "0", "-c", "2")
    rule = "=" * 38
    blocks = text.split(rule + "\n")
    assert blocks[0] == f"Queue data: \nmax: {len(in_q0)}, min: 0\n"
    first = blocks[1].splitlines()
    assert first[0] == "idx: 0"
    assert first[1].startswith(f"ConsumeQueueData{{physicOffset={in_q0[0].commit_log_offset}, ")
    assert first[1].endswith(", extendDataJson='null', bitMap='null', eval=false, msg='null'}")

    consumer = PushConsumer(
        "cg-cq", namesrv.address, consume_from_where=ConsumeFromWhere.CONSUME_FROM_FIRST_OFFSET
    )
    consumer.subscribe(TOPIC, "TagA || TagB")(lambda m: None)
    async with consumer:
        await wait_until(lambda: bool(broker.consumers.get("cg-cq")), "the consumer online")
        text = await mqadmin_text(
            namesrv, "queryCq", "-t", TOPIC, "-q", "0", "-i", "0", "-g", "cg-cq",
            "-b", broker.address,
        )  # fmt: skip
    assert text.startswith('Subscription data: \n{\n\t"classFilterMode":false,\n\t"codeSet":[')
    tags = java_hashmap_order(["TagA", "TagB"])
    assert f'\t"tagsSet":["{tags[0]}","{tags[1]}"],\n\t"topic":"{TOPIC}"\n}}\n{rule}\n' in text


async def test_reset_offsets_print_apaches_rollback_tables(
    namesrv: NameServer, broker: Broker
) -> None:
    await fill(namesrv, broker)
    group = "cg-rollback"
    for q in range(4):
        broker.offsets.commit(group, TOPIC, q, 0)
    text = await mqadmin_text(namesrv, "resetOffsetByTime", "-g", group, "-t", TOPIC, "-s", "now")
    head, columns, *rows, end = text.split("\n")
    assert head == (
        f"rollback consumer offset by specified group[{group}], topic[{TOPIC}], force[true], "
        "timestamp(string)[now], timestamp(long)[-1]"
    )
    assert columns == f"{'#brokerName':<40}  {'#queueId':<40}  {'#offset':<40}" and end == ""
    ends = {q: broker.store.get_max_offset(TOPIC, q) for q in range(4)}
    table = {MessageQueue(TOPIC, "broker-a", q): ends[q] for q in range(4)}
    assert rows == [
        f"{'broker-a':<40}  {mq.queue_id:<40}  {ends[mq.queue_id]:<40}"
        for mq in java_offset_table_order(table)
    ]
    assert {q: broker.offsets.query(group, TOPIC, q) for q in range(4)} == ends

    skipped = await mqadmin_text(namesrv, "skipAccumulatedMessage", "-g", group, "-t", TOPIC)
    assert skipped.split("\n")[0] == columns  # no title line


async def test_consumer_status_lists_clients_and_writes_their_files(
    namesrv: NameServer, broker: Broker, tmp_path: Path
) -> None:
    await fill(namesrv, broker)
    consumer = PushConsumer(
        "cg-status", namesrv.address, consume_from_where=ConsumeFromWhere.CONSUME_FROM_FIRST_OFFSET
    )
    seen: list[str] = []
    consumer.subscribe(TOPIC)(lambda m: seen.append(m.msg_id))
    async with consumer:
        await wait_until(lambda: len(seen) == 6, "six consumed")
        await asyncio.sleep(0.2)
        code, text, err = await run_cli(
            "consumerStatus", "-n", namesrv.address, "-g", "cg-status", cwd=tmp_path
        )
        assert code == 0, err
        head, row, *rest = text.split("\n")
        assert head == f"{'#Index':<10} {'#ClientId':<40} {'#Version':<20} #ConsumerRunningInfoFile"
        index, client_id, version, path = row.split()
        conns = await mqadmin(namesrv, "consumerConnection", "-g", "cg-status")
        assert index == "1" and client_id == conns["connectionSet"][0]["clientId"]
        assert version.startswith("V") and path.endswith(f"/{client_id}")
        assert "\n".join(rest).startswith(
            "\n\nSame subscription in the same group of consumer\n\nRebalance OK\n"
        )
        saved = (tmp_path / path).read_text()
        single = await mqadmin_text(namesrv, "consumerStatus", "-g", "cg-status", "-i", client_id)
    assert saved.split("#Consumer MQ Detail#")[0] == single.split("#Consumer MQ Detail#")[0]
    sections = [line for line in single.splitlines() if line.startswith("#Consumer ")]
    assert sections == [
        "#Consumer Properties#", "#Consumer Subscription#", "#Consumer Offset#",
        "#Consumer MQ Detail#", "#Consumer RT&TPS#",
    ]  # fmt: skip
    offsets = single.split("#Consumer Offset#\n", 1)[1].split("\n\n", 1)[0].splitlines()
    assert offsets[0] == f"{'#Topic':<64}  {'#Broker Name':<32}  {'#QID':<4}  #Consumer Offset    "
    mine = [line for line in offsets[1:] if line.startswith(TOPIC)]
    assert [line.split()[2] for line in mine] == ["0", "1", "2", "3"]  # a TreeMap: sorted
    assert "ProcessQueueInfo [commitOffset=" in single

"""CONSUME_MESSAGE_DIRECTLY: a stored message handed by an operator to one online push
consumer, whose listener's outcome comes back (RocketMQ ``ClientRemotingProcessor
.consumeMessageDirectly``; mqadmin queryMsgById / queryMsgByUniqueKey ``-g -d``). Real
brokers, real consumers, the admin client and the ``mqadmin`` process."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from broker.broker import Broker
from broker.namesrv.server import NameServer
from client import (
    ConsumeFromWhere,
    ConsumeResult,
    Message,
    MessageView,
    Producer,
    PullConsumer,
    PushConsumer,
)
from client.admin import Admin
from client.errors import ClientError
from remoting.errors import BrokerError
from tests.client.conftest import Received, create_topic
from tests.client.test_admin_cli import CliError, mqadmin, mqadmin_text, run_cli
from tests.support import wait_until

TOPIC = "TopicDirect"
NO_TAG = "TagNobodySends"
JAVA_RESULT = re.compile(
    r"ConsumeMessageDirectlyResult \[order=(true|false), autoCommit=true, "
    r"consumeResult=(CR_\w+), remark=(.*?), spentTimeMills=(\d+)\]"
)


async def _send(namesrv: NameServer, *bodies: bytes) -> list[tuple[str, str]]:
    """(unique id, offset id) of each message sent to TOPIC."""
    async with Producer("pg-direct", namesrv.address) as producer:
        results = [
            await producer.send(Message(TOPIC, b, tags="TagX", keys=["k-direct"])) for b in bodies
        ]
    return [(r.msg_id, r.offset_msg_id) for r in results]


async def _client_id(admin: Admin, group: str) -> str:
    conn = await admin.consumer_connection(group)
    (client,) = conn["connectionSet"]
    return str(client["clientId"])


@pytest.fixture
async def topic(broker: Broker) -> str:
    await create_topic(broker, TOPIC, queues=2)
    return TOPIC


async def test_the_listener_gets_the_message_and_its_outcome_comes_back(
    namesrv: NameServer, broker: Broker, topic: str
) -> None:
    consumer = PushConsumer("cg-direct", namesrv.address)
    seen = Received()
    outcomes = iter([None, ConsumeResult.RECONSUME_LATER])

    def listener(m: MessageView) -> ConsumeResult | None:
        seen.add(m)
        if m.body == b"boom":
            raise RuntimeError("the listener broke")
        return next(outcomes)

    # A tag nothing carries: only the operator's hand gives the listener these messages
    # (a direct consume is not filtered, as in Java).
    consumer.subscribe(topic, NO_TAG)(listener)
    async with consumer, Admin(namesrv.address) as admin:
        (ok_ids, later_ids, boom_ids) = await _send(namesrv, b"first", b"later", b"boom")
        client_id = await _client_id(admin, "cg-direct")
        done = await admin.consume_message_directly("cg-direct", client_id, ok_ids[1])
        assert done.consume_result == "CR_SUCCESS" and done.remark is None
        assert (done.order, done.auto_commit) == (False, True)
        (got,) = seen.messages
        assert (got.body, got.topic, got.tags, got.msg_id) == (b"first", topic, "TagX", ok_ids[0])
        assert got.broker_name == broker.config.broker_name

        # By unique id with the topic, as queryMsgByUniqueKey -g -d asks.
        later = await admin.consume_message_directly("cg-direct", client_id, later_ids[0], topic)
        assert later.consume_result == "CR_LATER"
        boom = await admin.consume_message_directly("cg-direct", client_id, boom_ids[1])
        assert boom.consume_result == "CR_THROW_EXCEPTION"
        assert boom.remark == "RuntimeError: the listener broke"
        assert JAVA_RESULT.fullmatch(boom.java_text())
        assert seen.bodies() == [b"first", b"later", b"boom"]
    # Nothing was sent back for the CR_LATER or the exception.
    assert broker.store.get_max_offset("%RETRY%cg-direct", 0) <= 0


async def test_who_cannot_take_it_says_why(namesrv: NameServer, broker: Broker, topic: str) -> None:
    ((_, offset_id),) = await _send(namesrv, b"nobody")
    pusher = PushConsumer("cg-other-topic", namesrv.address)
    await create_topic(broker, "TopicElsewhere", queues=1)
    pusher.subscribe("TopicElsewhere")(lambda m: None)
    puller = PullConsumer("cg-puller", namesrv.address)
    puller.subscribe(topic)
    async with pusher, puller, Admin(namesrv.address) as admin:
        with pytest.raises(BrokerError, match="not online"):
            await admin.consume_message_directly("cg-other-topic", "10.0.0.1@nobody", offset_id)
        cid = await _client_id(admin, "cg-other-topic")
        with pytest.raises(BrokerError, match=f"does not subscribe topic {topic}"):
            await admin.consume_message_directly("cg-other-topic", cid, offset_id)
        cid = await _client_id(admin, "cg-puller")
        with pytest.raises(BrokerError, match="pull consumer of group cg-puller has no listener"):
            await admin.consume_message_directly("cg-puller", cid, offset_id)
        with pytest.raises(ClientError, match="no message 0A0B"):
            await admin.consume_message_directly("cg-puller", cid, "0A0B" * 8, topic)


async def test_an_orderly_consumer_says_order_true_and_a_dead_letter_goes_to_its_first_topic(
    namesrv: NameServer, broker: Broker, topic: str
) -> None:
    ((_, offset_id),) = await _send(namesrv, b"poison")
    first = ConsumeFromWhere.CONSUME_FROM_FIRST_OFFSET
    failing = PushConsumer("cg-dead-direct", namesrv.address, consume_from_where=first,
                           max_reconsume_times=1)  # fmt: skip
    failing.subscribe(topic)(lambda m: ConsumeResult.RECONSUME_LATER)
    dlq = "%DLQ%cg-dead-direct"
    async with failing:
        await wait_until(lambda: broker.store.get_max_offset(dlq, 0) >= 1, "a dead letter", 20)
    healed = Received()
    orderly = PushConsumer("cg-dead-direct", namesrv.address, orderly=True)
    orderly.subscribe(topic, NO_TAG)(healed.add)
    async with orderly, Admin(namesrv.address) as admin:
        stats = await admin.topic_stats(dlq)
        assert sum(o.max_offset for o in stats.values()) == 1
        batch = await admin.pull_batch(next(iter(stats)), 0, 1)
        (letter,) = batch.messages
        assert letter.topic == dlq
        cid = await _client_id(admin, "cg-dead-direct")
        result = await admin.consume_message_directly("cg-dead-direct", cid, letter.offset_msg_id)
    assert (result.order, result.consume_result) == (True, "CR_SUCCESS")
    (got,) = healed.messages
    assert (got.topic, got.body) == (topic, b"poison")
    assert offset_id != letter.offset_msg_id  # a copy, stored in %DLQ%


async def test_mqadmin_hands_a_message_to_a_client_resends_and_prints_the_body(
    namesrv: NameServer, broker: Broker, topic: str, tmp_path: Path
) -> None:
    consumer = PushConsumer("cg-cli-direct", namesrv.address)
    seen = Received()
    consumer.subscribe(topic, NO_TAG)(seen.add)
    ((unique_id, offset_id),) = await _send(namesrv, "grüße".encode())
    async with consumer, Admin(namesrv.address) as admin:
        cid = await _client_id(admin, "cg-cli-direct")
        text = await mqadmin_text(
            namesrv, "queryMsgById", "-i", offset_id, "-g", "cg-cli-direct", "-d", cid
        )
        match = JAVA_RESULT.fullmatch(text)
        assert match and match.group(1, 2, 3) == ("false", "CR_SUCCESS", "null"), text
        text = await mqadmin_text(
            namesrv, "queryMsgByUniqueKey", "-t", topic, "-i", unique_id,
            "-g", "cg-cli-direct", "-d", cid,
        )  # fmt: skip
        assert JAVA_RESULT.fullmatch(text), text
        assert seen.bodies() == ["grüße".encode()] * 2
        docs = await mqadmin(namesrv, "queryMsgById", "-i", offset_id, "-g", "cg-cli-direct",
                             "-d", cid)  # fmt: skip
        assert docs[0]["consumeResult"] == "CR_SUCCESS" and docs[0]["msgId"] == offset_id

        # -s true: sent again to its topic, as it was.
        text = await mqadmin_text(namesrv, "queryMsgById", "-i", offset_id, "-s", "true")
        assert text.startswith(f"prepare resend msg. originalMsgId={offset_id}SendResult [")
        assert "sendStatus=SEND_OK" in text and f"topic={topic}" in text
        sent = re.search(r", msgId=(\w+),", text)
        assert sent and sent.group(1) != unique_id
        copy = await admin.query_by_unique_key(topic, sent.group(1))
        assert copy is not None
        assert (copy.body, copy.tags, copy.keys) == ("grüße".encode(), "TagX", ["k-direct"])
        # -s false: Apache's tool does nothing then.
        assert await mqadmin_text(namesrv, "queryMsgById", "-i", offset_id, "-s", "false") == ""

    # -f: the body itself, decoded in that charset, after the body file's path.
    text = await mqadmin_text(namesrv, "queryMsgById", "-i", offset_id, "-f", "UTF-8")
    assert "\nMessage Body:        grüße\n" in text
    assert "Message Body:" not in await mqadmin_text(namesrv, "queryMsgById", "-i", offset_id)
    with pytest.raises(CliError) as refused:
        await mqadmin_text(namesrv, "queryMsgById", "-i", offset_id, "-f", "NO-SUCH-CHARSET")
    assert refused.value.code == 2 and "unknown charset 'NO-SUCH-CHARSET'" in refused.value.stderr


async def test_a_client_that_is_not_a_push_consumer_is_named(
    namesrv: NameServer, broker: Broker, topic: str
) -> None:
    ((_, offset_id),) = await _send(namesrv, b"pulled")
    puller = PullConsumer("cg-cli-pull", namesrv.address)
    puller.subscribe(topic)
    async with puller, Admin(namesrv.address) as admin:
        cid = await _client_id(admin, "cg-cli-pull")
        code, out, _err = await run_cli(
            "queryMsgById", "-n", namesrv.address, "-i", offset_id, "-g", "cg-cli-pull", "-d", cid
        )
    assert code == 0
    assert out == f"this {cid} client is not push consumer ,not support direct push \n"

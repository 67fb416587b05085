"""RocketMQ 5's topic attributes: ``message.type`` set by UPDATE_AND_CREATE_TOPIC (mqadmin
``updateTopic -a +message.type=FIFO``), kept in topics.json, and enforced for 5.x clients:
QueryRoute's queues accept that type only and a SendMessage of another type is refused
with MESSAGE_PROPERTY_CONFLICT_WITH_TYPE, as RocketMQ 5's proxy does. A topic without the
attribute (every topic a 4.x path creates) takes every type."""

from __future__ import annotations

import json
import uuid

import pytest

from broker.broker import Broker
from broker.proxy.apis import definition_pb2 as pb
from broker.topics import altered_attributes
from client.admin import Admin
from client.errors import BrokerError
from remoting.bodies import TopicConfig
from tests.proxy.grpc_raw import RawClient, message


def test_altered_attributes_sets_removes_and_refuses_what_it_does_not_know() -> None:
    assert altered_attributes({}, "+message.type=fifo") == {"message.type": "FIFO"}
    assert altered_attributes({"message.type": "FIFO"}, None) == {"message.type": "FIFO"}
    assert altered_attributes({"message.type": "FIFO"}, "-message.type") == {}
    assert altered_attributes({"message.type": "FIFO"}, " , +message.type=MIXED") == {
        "message.type": "MIXED"
    }
    for bad, why in (
        ("message.type=FIFO", "neither"),
        ("+message.type", "neither"),
        ("-message.type=FIFO", "neither"),
        ("+queue.type=x", "unsupported attribute key"),
        ("+message.type=ORDERED", "none of"),
    ):
        with pytest.raises(ValueError, match=why):
            altered_attributes({}, bad)


async def test_create_topic_with_a_message_type_keeps_it_until_removed(broker: Broker) -> None:
    topic = f"typed_{uuid.uuid4().hex[:8]}"
    async with Admin(broker.config.namesrv_addr or "") as admin:
        config = TopicConfig(topic, 4, 4)
        await admin.create_topic(broker.address, config, attributes="+message.type=FIFO")
        assert broker.topics.get(topic).attributes == {"message.type": "FIFO"}  # type: ignore[union-attr]
        await admin.create_topic(broker.address, TopicConfig(topic, 8, 8))  # an update
        tc = broker.topics.get(topic)
        assert tc is not None and tc.read_queue_nums == 8
        assert tc.attributes == {"message.type": "FIFO"}
        await broker.topics.file.flush()  # the table's own write of the change
        on_disk = json.loads((broker.config.store.root_dir / "config" / "topics.json").read_text())
        assert on_disk["topicConfigTable"][topic]["attributes"] == {"message.type": "FIFO"}
        with pytest.raises(BrokerError, match="ORDERED"):
            await admin.create_topic(broker.address, config, attributes="+message.type=ORDERED")
        await admin.create_topic(broker.address, config, attributes="-message.type")
        assert broker.topics.get(topic).attributes == {}  # type: ignore[union-attr]
        assert "attributes" not in broker.topics.get(topic).to_json()  # type: ignore[union-attr]


def _message(topic: str, *, group: str = "") -> pb.Message:
    """A message a 5.x producer sends: NORMAL, or FIFO with a message group."""
    msg = message(topic, b"typed")
    if group:
        msg.system_properties.message_type = pb.FIFO
        msg.system_properties.message_group = group
    return msg


async def test_a_fifo_topic_takes_fifo_messages_only_over_grpc(broker: Broker) -> None:
    fifo, plain = (f"{kind}_{uuid.uuid4().hex[:8]}" for kind in ("fifo", "plain"))
    async with Admin(broker.config.namesrv_addr or "") as admin:
        await admin.create_topic(
            broker.address, TopicConfig(fifo, 2, 2), attributes="+message.type=FIFO"
        )
        await admin.create_topic(broker.address, TopicConfig(plain, 2, 2))
    async with RawClient(broker.grpc.port) as five:
        route = await five.query_route(fifo)
        assert route.status.code == pb.OK, route.status
        assert {tuple(q.accept_message_types) for q in route.message_queues} == {(pb.FIFO,)}
        route = await five.query_route(plain)
        assert set(route.message_queues[0].accept_message_types) == {
            pb.NORMAL,
            pb.FIFO,
            pb.DELAY,
            pb.TRANSACTION,
        }

        refused = await five.send(_message(fifo))
        assert refused.status.code == pb.MESSAGE_PROPERTY_CONFLICT_WITH_TYPE, refused.status
        assert "expected type is FIFO, but actual type is NORMAL" in refused.status.message
        sent = await five.send(_message(fifo, group="g1"))
        assert sent.status.code == pb.OK, sent.status
        sent = await five.send(_message(plain, group="g1"), _message(plain))
        assert sent.status.code == pb.OK, sent.status  # an untyped topic takes any

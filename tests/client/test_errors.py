"""What the SDK raises: one tree importable from ``client``, classes that fit the cause, and
texts that say which request failed, where, and why.

RocketMQ counterpart: ``MQClientException`` / ``MQBrokerException`` /
``RemotingTimeoutException`` and their messages ("wait response on the channel <addr>
timeout, <n>(ms)"), here with the request's name.
"""

from __future__ import annotations

import asyncio
import contextlib
import re
from collections.abc import AsyncIterator

import pytest

import client
from broker.broker import Broker
from broker.namesrv.server import NameServer
from client import Message, Producer, PushConsumer, SimpleConsumer
from remoting.bodies import PERM_READ, PERM_WRITE
from remoting.client import ClientConfig, RemotingClient
from remoting.codes import RequestCode
from remoting.command import RemotingCommand
from remoting.headers import GetRouteInfoRequestHeader
from tests.client.conftest import create_topic
from tests.support import LOOPBACK


@pytest.fixture
async def silent_listener() -> AsyncIterator[str]:
    """A TCP listener on loopback that reads whatever comes and never answers."""
    readers: list[asyncio.Task[None]] = []

    async def swallow(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        with contextlib.suppress(ConnectionError):
            while await reader.read(65536):
                pass
        writer.close()

    async def on_connect(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        readers.append(asyncio.current_task())  # type: ignore[arg-type]  # always in a task
        await swallow(reader, writer)

    server = await asyncio.start_server(on_connect, LOOPBACK, 0)
    port = server.sockets[0].getsockname()[1]
    try:
        yield f"{LOOPBACK}:{port}"
    finally:
        server.close()
        for task in readers:
            task.cancel()
        await server.wait_closed()


def route_request(topic: str) -> RemotingCommand:
    return RemotingCommand.request(
        RequestCode.GET_ROUTEINFO_BY_TOPIC, GetRouteInfoRequestHeader(topic=topic).to_ext_fields()
    )


# ---------------------------------------------------------------------------- the tree


def test_the_base_class_carries_code_and_retriable() -> None:
    bad = client.InvalidArgumentError("x")
    assert (bad.code, bad.retriable) == (None, False)
    refused = client.BrokerError.for_code(17, "topic[T] not exist")
    assert isinstance(refused, client.TopicNotExistError)
    assert (refused.code, refused.retriable) == (17, True)
    unregistered = client.BrokerError.for_code(999, "odd")
    assert type(unregistered) is client.BrokerError
    assert unregistered.code == 999
    timeout = client.RemotingTimeoutError("127.0.0.1:9876", 105, 2, 3.0)
    assert (timeout.code, timeout.request_code, timeout.retriable) == (None, 105, True)
    assert client.NoRouteError("T", "why").retriable


# ------------------------------------------------------------------------------- cases


async def test_a_bad_group_is_an_invalid_argument_not_a_message(namesrv: NameServer) -> None:
    for make in (
        lambda: Producer("bad group", namesrv.address),
        lambda: PushConsumer("bad group", namesrv.address),
        lambda: SimpleConsumer("bad group", namesrv.address),
    ):
        with pytest.raises(client.InvalidArgumentError) as caught:
            make()
        assert not isinstance(caught.value, client.InvalidMessageError)
        assert isinstance(caught.value, ValueError)
        assert str(caught.value) == (
            "the specified group[bad group] contains illegal characters, "
            "allowing only ^[%|a-zA-Z0-9_-]+$"
        )
    consumer = PushConsumer("cg", namesrv.address)
    with pytest.raises(client.InvalidArgumentError, match=r"topic\[bad topic\]") as caught:
        consumer.subscribe("bad topic")
    assert not isinstance(caught.value, client.InvalidMessageError)
    # A topic inside a message is still the message's fault.
    with pytest.raises(client.InvalidMessageError, match=r"topic\[bad topic\]"):
        Message("bad topic", b"x").validate()


async def test_an_unknown_topic_refusal_names_the_request_broker_and_topic(
    namesrv: NameServer, broker: Broker
) -> None:
    # TBW102 without the inherit bit: producers still find it, the broker creates nothing.
    await create_topic(broker, "TBW102", queues=1, perm=PERM_READ | PERM_WRITE)
    async with Producer("pg-unknown", namesrv.address, retry_times_when_send_failed=0) as p:
        with pytest.raises(client.TopicNotExistError) as caught:
            await p.send(Message("NoSuchTopic", b"x"))
    exc = caught.value
    assert isinstance(exc, client.BrokerError)
    assert (exc.code, exc.response_code) == (17, 17)
    assert exc.remark.startswith("topic[NoSuchTopic] not exist, apply first please!")
    assert (exc.request_code, exc.addr, exc.topic) == (
        RequestCode.SEND_MESSAGE_V2,
        broker.address,
        "NoSuchTopic",
    )
    assert str(exc).startswith(
        f"SEND_MESSAGE_V2 (310) to {broker.address}, topic NoSuchTopic: "
        "refused with TOPIC_NOT_EXIST (17): topic[NoSuchTopic] not exist, apply first please!"
    )


async def test_a_timeout_names_the_request_the_address_and_the_wait(silent_listener: str) -> None:
    async with RemotingClient(ClientConfig()) as rc:
        with pytest.raises(client.RemotingTimeoutError) as caught:
            await rc.invoke(silent_listener, route_request("T"), timeout_s=0.5)
    assert str(caught.value) == (
        f"GET_ROUTEINFO_BY_TOPIC (105) to {silent_listener}: no response after 0.5 s"
    )
    assert caught.value.addr == silent_listener
    assert caught.value.timeout_s == 0.5


async def test_the_sdk_surfaces_a_name_server_timeout_as_is(silent_listener: str) -> None:
    async with Producer("pg-silent", silent_listener) as p:
        with pytest.raises(client.RemotingTimeoutError) as caught:
            await p.send(Message("SomeTopic", b"x"))
    assert re.fullmatch(
        rf"GET_ROUTEINFO_BY_TOPIC \(105\) to {re.escape(silent_listener)}: "
        r"no response after 3\.0 s",
        str(caught.value),
    )


async def test_an_unregistered_request_code_is_named_by_number(silent_listener: str) -> None:
    async with RemotingClient(ClientConfig()) as rc:
        with pytest.raises(client.RemotingTimeoutError) as caught:
            await rc.invoke(silent_listener, RemotingCommand.request(31999), timeout_s=0.2)
    assert str(caught.value) == f"request code 31999 to {silent_listener}: no response after 0.2 s"

"""A topic the broker creates is on the name server by the time the creating request is answered.

RocketMQ registers a topic created on first send, on send-back or at heartbeat
(``TopicConfigManager.createTopicInSendMessageMethod`` / ``createTopicInSendMessageBackMethod``
→ ``registerBrokerAll``) and one created by UPDATE_AND_CREATE_TOPIC
(``registerIncrementBrokerData``) before it replies, so a client that asks the name server for
the route right after the answer finds it (rocketmq-client-go's push consumer refuses to start
on TOPIC_NOT_EXIST). Each test asks the name server in the same task, with no sleep, right
after the broker's answer. Real name server and broker on 127.0.0.1:0; a name server that is
refused or never answers shows the wait is bounded.
"""

from __future__ import annotations

import asyncio
import contextlib
import socket
from collections.abc import AsyncIterator
from typing import Any

import pytest

from broker.broker import Broker
from broker.namesrv.server import NameServer
from remoting.client import RemotingClient
from remoting.codes import RequestCode, ResponseCode
from remoting.command import RemotingCommand, response_to
from remoting.connection import Connection
from remoting.dispatch import Lane, ProcessorTable
from remoting.headers import (
    ConsumerSendMsgBackRequestHeader,
    CreateTopicRequestHeader,
)
from remoting.route import TopicRouteData
from remoting.server import RemotingServer, ServerConfig
from tests.broker.conftest import heartbeat
from tests.support import LOOPBACK, BrokerFactory, call, send_ok, wait_until

FRESH = 20
# The client's own send timeout is 3 s; a name server that never answers may cost a first
# send no more than the broker's bounded wait (1 s), so 2.5 s leaves room for a busy machine
# while still failing a send that waited for the name server's full 6 s timeout.
PROMPT_S = 2.5


async def send(
    client: RemotingClient, broker: Broker, topic: str, body: bytes = b"hello", **header: Any
) -> RemotingCommand:
    """``send_ok`` to ``broker`` through TBW102, as a Java producer sends it (a consumer's
    own re-send carries reconsume_times and max_reconsume_times)."""
    return await send_ok(client, broker.address, topic, body, **header)


async def route(client: RemotingClient, namesrv: NameServer, topic: str) -> RemotingCommand:
    return await call(client, namesrv.address, RequestCode.GET_ROUTEINFO_BY_TOPIC, {"topic": topic})


async def assert_routed(
    client: RemotingClient, namesrv: NameServer, broker: Broker, topic: str
) -> None:
    response = await route(client, namesrv, topic)
    assert response.code == ResponseCode.SUCCESS, f"{topic}: {response.code} {response.remark}"
    data = TopicRouteData.decode(response.body_bytes)
    assert [qd.broker_name for qd in data.queue_datas] == [broker.config.broker_name]


async def dial(client: RemotingClient, namesrv: NameServer, broker: Broker) -> None:
    """Open the client's connections first, so no dial delays the route query behind a send."""
    await route(client, namesrv, "TBW102")
    await call(client, broker.address, RequestCode.GET_BROKER_RUNTIME_INFO)


class RegisterCounter:
    """An RPC hook on the name server counting the REGISTER_BROKER requests it handles."""

    def __init__(self) -> None:
        self.registers = 0

    def before_request(self, remote_addr: str, request: RemotingCommand) -> None:
        if request.code == RequestCode.REGISTER_BROKER:
            self.registers += 1

    def after_response(
        self, remote_addr: str, request: RemotingCommand, response: RemotingCommand | None
    ) -> None:
        return None


# -------------------------------------------------------------------------- first send


async def test_auto_created_topics_are_routed_when_their_send_returns(
    namesrv: NameServer, broker: Broker, client: RemotingClient
) -> None:
    await dial(client, namesrv, broker)
    for i in range(FRESH):
        topic = f"FreshTopic{i}"
        await send(client, broker, topic)
        await assert_routed(client, namesrv, broker, topic)


async def test_concurrent_first_sends_share_one_registration(
    namesrv: NameServer, broker: Broker, client: RemotingClient
) -> None:
    await dial(client, namesrv, broker)
    counter = RegisterCounter()
    namesrv.processors.hooks.append(counter)
    concurrent = 4

    async def send_then_route(topic: str, n: int) -> int:
        await send(client, broker, topic, f"m{n}".encode())
        return (await route(client, namesrv, topic)).code

    for i in range(FRESH):
        topic = f"FreshShared{i}"
        codes = await asyncio.gather(*(send_then_route(topic, n) for n in range(concurrent)))
        assert codes == [ResponseCode.SUCCESS] * concurrent, topic
    # One registration per new topic, not one per send; a few more only if the broker's
    # periodic round (10 s after start, then every 30 s) fell inside the test.
    assert FRESH <= counter.registers <= FRESH + 2


async def test_retry_topic_at_its_max_reconsume_routes_the_dead_letter_topic(
    namesrv: NameServer, broker: Broker, client: RemotingClient
) -> None:
    """A consumer's own re-send to ``%RETRY%group`` creates that topic; once reconsumed
    enough times the message goes to ``%DLQ%group``, created there too."""
    await dial(client, namesrv, broker)
    group = "cg-resend"
    await send(client, broker, f"%RETRY%{group}", max_reconsume_times=3)
    await assert_routed(client, namesrv, broker, f"%RETRY%{group}")
    await send(client, broker, f"%RETRY%{group}", reconsume_times=3, max_reconsume_times=3)
    await assert_routed(client, namesrv, broker, f"%DLQ%{group}")


# --------------------------------------------------------------------------- heartbeat


async def test_retry_topic_of_a_new_group_is_routed_when_the_heartbeat_returns(
    namesrv: NameServer, broker: Broker, client: RemotingClient
) -> None:
    await dial(client, namesrv, broker)
    await send(client, broker, "HeartbeatTopic")
    for i in range(FRESH):
        group = f"cg-fresh-{i}"
        await heartbeat(client, broker.address, f"client-{i}", group, {"HeartbeatTopic": "*"})
        await assert_routed(client, namesrv, broker, f"%RETRY%{group}")


# --------------------------------------------------------------------------- send back


async def test_send_back_routes_the_retry_and_dead_letter_topics_it_creates(
    namesrv: NameServer, broker: Broker, client: RemotingClient
) -> None:
    await dial(client, namesrv, broker)
    stored = await send(client, broker, "SendBackTopic")
    commit_log_offset = int(stored.ext_fields["msgId"][16:], 16)
    for group, delay_level, created in (
        ("cg-back-retry", 0, "%RETRY%cg-back-retry"),
        ("cg-back-dlq", -1, "%DLQ%cg-back-dlq"),
    ):
        header = ConsumerSendMsgBackRequestHeader(
            offset=commit_log_offset,
            group=group,
            delay_level=delay_level,
            origin_topic="SendBackTopic",
            max_reconsume_times=16,
        )
        response = await call(
            client, broker.address, RequestCode.CONSUMER_SEND_MSG_BACK, header.to_ext_fields()
        )
        assert response.code == ResponseCode.SUCCESS, response
        await assert_routed(client, namesrv, broker, created)


# ------------------------------------------------------------------------------- admin


async def test_topic_created_by_admin_is_routed_when_the_reply_returns(
    namesrv: NameServer, broker: Broker, client: RemotingClient
) -> None:
    await dial(client, namesrv, broker)
    for i in range(FRESH):
        topic = f"AdminTopic{i}"
        header = CreateTopicRequestHeader(
            topic=topic,
            default_topic="TBW102",
            read_queue_nums=2,
            write_queue_nums=2,
            perm=6,
            topic_filter_type="SINGLE_TAG",
        )
        response = await call(
            client, broker.address, RequestCode.UPDATE_AND_CREATE_TOPIC, header.to_ext_fields()
        )
        assert response.code == ResponseCode.SUCCESS, response
        await assert_routed(client, namesrv, broker, topic)


# ------------------------------------------------------------- name servers that fail


def refused_address() -> str:
    """A loopback port nothing listens on (bound, then closed)."""
    with socket.socket() as s:
        s.bind((LOOPBACK, 0))
        port = s.getsockname()[1]
    return f"{LOOPBACK}:{port}"


class SilentNameServer:
    """A name server that answers REGISTER_BROKER while ``answering`` is set and holds the
    request unanswered otherwise (a stalled peer: connected, never replying)."""

    def __init__(self) -> None:
        self.answering = asyncio.Event()
        self.answering.set()
        self.held = 0
        table = ProcessorTable()
        lane = Lane("silent", workers=64, capacity=1_000)
        table.register(RequestCode.REGISTER_BROKER, self._register, lane)
        table.register(RequestCode.UNREGISTER_BROKER, self._unregister, lane)
        self.server = RemotingServer(
            ServerConfig(host=LOOPBACK, port=0, shutdown_grace_s=1.0), table, name="silent"
        )

    async def _register(self, conn: Connection, request: RemotingCommand) -> RemotingCommand:
        if not self.answering.is_set():
            self.held += 1
        await self.answering.wait()
        return response_to(request, ResponseCode.SUCCESS)

    async def _unregister(self, conn: Connection, request: RemotingCommand) -> RemotingCommand:
        return response_to(request, ResponseCode.SUCCESS)  # the broker's shutdown stays quick


@pytest.fixture
async def silent_namesrv() -> AsyncIterator[SilentNameServer]:
    silent = SilentNameServer()
    await silent.server.start()
    try:
        yield silent
    finally:
        silent.answering.set()
        with contextlib.suppress(TimeoutError):
            async with asyncio.timeout(10.0):
                await silent.server.shutdown()


async def test_refused_name_server_does_not_stall_a_first_send(
    namesrv: NameServer, start_broker: BrokerFactory, client: RemotingClient
) -> None:
    broker = await start_broker(namesrv_addr=f"{refused_address()};{namesrv.address}")
    await dial(client, namesrv, broker)
    for i in range(3):
        topic = f"FreshBesideRefused{i}"
        await send(client, broker, topic, timeout_s=PROMPT_S)
        await assert_routed(client, namesrv, broker, topic)


async def test_silent_name_server_bounds_the_wait_of_a_first_send(
    silent_namesrv: SilentNameServer,
    namesrv: NameServer,
    start_broker: BrokerFactory,
    client: RemotingClient,
) -> None:
    broker = await start_broker(namesrv_addr=f"{silent_namesrv.server.address};{namesrv.address}")
    await dial(client, namesrv, broker)
    silent_namesrv.answering.clear()  # registered at start; from now on it never answers
    for i in range(3):
        topic = f"FreshBesideSilent{i}"
        # A send that waited for the silent name server's full registration timeout (6 s)
        # would fail here with a client-side timeout.
        await send(client, broker, topic, timeout_s=PROMPT_S)
        await assert_routed(client, namesrv, broker, topic)
    assert silent_namesrv.held >= 1  # the broker did try the silent one
    silent_namesrv.answering.set()


async def test_a_stalled_announcement_holds_no_lane_worker(
    silent_namesrv: SilentNameServer, start_broker: BrokerFactory, client: RemotingClient
) -> None:
    """Requests about new topics that wait for a name server that never answers leave the
    lanes free: a send to a topic that exists and a heartbeat of a group that exists are
    answered while every one of those is still waiting. (Handlers that awaited the
    announcement held a worker each: 80 first sends filled the send lane's 64 workers for
    the whole bounded wait and the next send got SYSTEM_BUSY, and the heartbeat lane's one
    worker served new groups' heartbeats one wait after another.)

    The send queue's wait limit is raised: 80 sends arriving at once on a loaded machine
    (CI's asyncio debug run) can sit past the default 200 ms in the queue and be answered
    SYSTEM_BUSY, which is flow control, not a held worker."""
    broker = await start_broker(
        namesrv_addr=silent_namesrv.server.address, wait_time_mills_in_send_queue=10_000
    )
    await send(client, broker, "ExistingTopic")
    await heartbeat(client, broker.address, "client-old", "cg-existing", {"ExistingTopic": "*"})
    silent_namesrv.answering.clear()
    waiting = [asyncio.create_task(send(client, broker, f"Stalled{i}")) for i in range(80)]
    waiting += [
        asyncio.create_task(
            heartbeat(
                client, broker.address, f"client-{i}", f"cg-stalled-{i}", {"ExistingTopic": "*"}
            )
        )
        for i in range(3)
    ]
    await wait_until(lambda: silent_namesrv.held >= 1, "the first announcement to be held")
    await send(client, broker, "ExistingTopic")
    await heartbeat(client, broker.address, "client-old", "cg-existing", {"ExistingTopic": "*"})
    assert not any(task.done() for task in waiting), "a request about a new topic was answered"
    await asyncio.gather(*waiting)  # each answered once its bounded wait is over
    silent_namesrv.answering.set()

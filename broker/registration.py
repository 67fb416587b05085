"""``Registration``: the broker tells every name server what it serves.

RocketMQ counterpart: ``BrokerController.registerBrokerAll`` / ``BrokerOuterAPI``: a
REGISTER_BROKER (103) to each address of ``namesrvAddr`` at start-up, then every
``registerNameServerPeriod`` (30 s; the first tick 10 s after start) and soon after any topic
change; UNREGISTER_BROKER (104) at shutdown. The body carries the topic table and its
DataVersion, with a CRC32 the name server checks. A name server that is down is logged and
retried on the next round; registration never stops the broker.

A topic the broker creates or changes while serving is announced at once, not at the next
round: RocketMQ's ``createTopicInSendMessageMethod`` calls ``registerBrokerAll`` (and
UPDATE_AND_CREATE_TOPIC ``registerIncrementBrokerData``) before the request is answered, so a
client asking the name server right after its first send finds the route. Here the request
that created the topic is answered through ``reply_when_routed``: once the announcement round
has been answered by every name server, or has failed, or ``ANNOUNCE_TIMEOUT_S`` has passed
(dial included). The answer is sent from the round's completion, not by a handler waiting
for it, so the lane worker is free meanwhile: a stalled name server never holds requests for
topics that already exist. Java sends a oneway
request and waits only for the write, which races the client's own query on its other
connection (about 1 send in 13 finds no route on 4.9.7); awaiting the answer closes that race,
and the short timeout keeps a stalled name server from holding sends for long.

Every round carries the whole table, because the name server drops the topics a master's
registration leaves out. An older table must not land after a newer one, and it does not:
rounds build their bodies in the order they start, their requests are written in that order
on the one connection per name server (tasks run in creation order; a shared dial wakes its
waiters in order), and the name server handles REGISTER_BROKER on one worker.
"""

from __future__ import annotations

import asyncio
import zlib
from collections.abc import Callable

import structlog

from remoting.bodies import RegisterBrokerBody, TopicConfigWrapper
from remoting.client import RemotingClient
from remoting.codes import RequestCode, ResponseCode
from remoting.command import RemotingCommand
from remoting.connection import Connection
from remoting.dispatch import send_response
from remoting.errors import RocketMQError
from remoting.headers import (
    RegisterBrokerRequestHeader,
    RegisterBrokerResponseHeader,
    UnregisterBrokerRequestHeader,
)
from remoting.lifecycle import Periodic, TaskGroup

log = structlog.get_logger(__name__)

REGISTER_TIMEOUT_S = 6.0  # registerBrokerTimeoutMills
FIRST_PERIODIC_DELAY_S = 10.0
# How long a request that created a topic waits for the name servers to take it: well under
# a client's 3 s send timeout, long enough for a busy name server on a loaded machine.
ANNOUNCE_TIMEOUT_S = 1.0


class Registration:
    def __init__(
        self,
        client: RemotingClient,
        namesrv_addrs: list[str],
        *,
        cluster: str,
        broker_name: str,
        broker_id: int,
        broker_addr: Callable[[], str],
        ha_server_addr: Callable[[], str],
        topics: Callable[[], TopicConfigWrapper],
        period_s: float,
    ) -> None:
        self.client = client
        self.namesrv_addrs = namesrv_addrs
        self.cluster = cluster
        self.broker_name = broker_name
        self.broker_id = broker_id
        self._broker_addr = broker_addr
        self._ha_server_addr = ha_server_addr
        self._topics = topics
        self.period_s = period_s
        self.master_addr: str | None = None
        self.master_ha_addr: str | None = None
        self._loop = Periodic(
            "broker-registration",
            self.register_all,
            period_s,
            first_delay_s=FIRST_PERIODIC_DELAY_S,
            failure_event="register_round_failed",
        )
        self._serving = False
        # Topic → the announcement round that carries it, until that round is over. Requests
        # look a topic up here; an empty dict costs the common path one truthiness test.
        self.unsettled: dict[str, asyncio.Future[None]] = {}
        # The round created but not yet started: topics changed before it starts join it.
        self._next_round: asyncio.Future[None] | None = None
        self._rounds = TaskGroup("broker-registration")

    def request(self) -> None:
        """Register again soon (the broker's permission changed); bursts share one round."""
        self._loop.wake()

    def topic_changed(self, topic: str) -> None:
        """Announce ``topic`` to every name server now; ``reply_when_routed`` answers
        requests about it once that is over.

        Topics changed before the round starts share it, so concurrent first sends of one
        topic (or of many) cost one registration, not one each. Before ``start`` (nothing to
        register yet: the port may still be 0) and after ``shutdown`` this only asks for the
        next periodic round.
        """
        if not self._serving or not self.namesrv_addrs:
            self._loop.wake()
            return
        done = self._next_round
        if done is None:
            done = self._next_round = asyncio.get_running_loop().create_future()
            self._rounds.spawn(self._announce(done), name="broker-announce")
        self.unsettled[topic] = done

    def reply_when_routed(
        self,
        conn: Connection,
        request: RemotingCommand,
        response: RemotingCommand,
        *topics: str,
    ) -> RemotingCommand | None:
        """``response`` as it is when none of ``topics`` is being announced; otherwise None,
        and ``response`` goes out once every announcement of them is over (the handler
        returns at once: its lane worker serves other requests meanwhile)."""
        rounds = {done for topic in topics if (done := self.unsettled.get(topic)) is not None}
        if not rounds:
            return response
        over = rounds.pop() if len(rounds) == 1 else asyncio.gather(*rounds)
        over.add_done_callback(lambda _over: send_response(conn, request, response))
        return None

    async def _announce(self, done: asyncio.Future[None]) -> None:
        # The body is built now, in this task's first step: every topic that joined this
        # round before it started is in it.
        self._next_round = None
        try:
            # One deadline for the whole round: the dial to a name server is inside it.
            async with asyncio.timeout(ANNOUNCE_TIMEOUT_S):
                await self.register_all(timeout_s=ANNOUNCE_TIMEOUT_S)
        except TimeoutError:
            log.warning("announce_round_timed_out", timeout_s=ANNOUNCE_TIMEOUT_S)
        except Exception:
            log.exception("announce_round_failed")
        finally:
            self._settle(done)

    def _settle(self, done: asyncio.Future[None]) -> None:
        if not done.done():
            done.set_result(None)
        for topic in [t for t, f in self.unsettled.items() if f is done]:
            del self.unsettled[topic]

    async def register_all(self, *, timeout_s: float = REGISTER_TIMEOUT_S) -> int:
        """One round to every name server; returns how many accepted within ``timeout_s``."""
        body = RegisterBrokerBody(self._topics()).encode()
        header = RegisterBrokerRequestHeader(
            broker_name=self.broker_name,
            broker_addr=self._broker_addr(),
            cluster_name=self.cluster,
            ha_server_addr=self._ha_server_addr(),
            broker_id=self.broker_id,
            compressed=False,
            body_crc32=zlib.crc32(body) & 0x7FFFFFFF,
        ).to_ext_fields()
        results = await asyncio.gather(
            *(self._register_one(addr, header, body, timeout_s) for addr in self.namesrv_addrs)
        )
        return sum(results)

    async def _register_one(
        self, addr: str, header: dict[str, str], body: bytes, timeout_s: float
    ) -> bool:
        request = RemotingCommand.request(RequestCode.REGISTER_BROKER, dict(header), body)
        try:
            response = await self.client.invoke(addr, request, timeout_s)
        except RocketMQError as exc:
            log.warning("register_broker_failed", namesrv=addr, error=str(exc))
            return False
        if response.code != ResponseCode.SUCCESS:
            log.warning(
                "register_broker_refused", namesrv=addr, code=response.code, remark=response.remark
            )
            return False
        answer = RegisterBrokerResponseHeader.from_ext_fields(response.ext_fields)
        if answer.master_addr:
            self.master_addr = answer.master_addr
        if answer.ha_server_addr:
            self.master_ha_addr = answer.ha_server_addr  # where a slave replicates from
        return True

    async def unregister_all(self) -> None:
        header = UnregisterBrokerRequestHeader(
            broker_name=self.broker_name,
            broker_addr=self._broker_addr(),
            cluster_name=self.cluster,
            broker_id=self.broker_id,
        ).to_ext_fields()
        for addr in self.namesrv_addrs:
            request = RemotingCommand.request(RequestCode.UNREGISTER_BROKER, dict(header))
            try:
                await self.client.invoke(addr, request, REGISTER_TIMEOUT_S)
            except RocketMQError as exc:
                log.warning("unregister_broker_failed", namesrv=addr, error=str(exc))

    async def start(self) -> None:
        """Register once now (so routes exist when start returns), then keep registering."""
        # Serving from here: a topic created while the first round is under way is announced
        # (and waited for) too; the port is bound by now.
        self._serving = True
        if self.namesrv_addrs:
            accepted = await self.register_all()
            log.info(
                "broker_registration",
                namesrv=";".join(self.namesrv_addrs),
                accepted=accepted,
            )
        self._loop.start()

    async def shutdown(self) -> None:
        self._serving = False
        self._next_round = None
        await self._rounds.close()
        for done in set(self.unsettled.values()):
            self._settle(done)  # no request waits on a round that will not run
        await self._loop.stop()
        if self.namesrv_addrs:
            await self.unregister_all()

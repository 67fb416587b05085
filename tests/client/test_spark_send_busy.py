"""The Spark sink's sends outlast the broker's flow control.

A broker whose send queue waits longer than ``waitTimeMillsInSendQueue`` answers SYSTEM_BUSY
without storing the message (RocketMQ's ``cleanExpiredRequest``). The sink sends a task's
rows with many in flight, so under load (a slow loop, a busy machine) some are refused that
way; each is sent again with a jittered backoff instead of failing the whole Spark task.
"""

from __future__ import annotations

import asyncio

from broker.broker import Broker
from broker.namesrv.server import NameServer
from client import Message
from client.spark.session import BrokerSession
from tests.support import BrokerFactory

TOPIC = "SparkBusy"


async def test_sends_refused_as_busy_are_sent_again_until_stored(
    namesrv: NameServer, start_broker: BrokerFactory
) -> None:
    # 1 ms in the send queue: a burst of 1,500 single sends is partly refused as busy.
    broker: Broker = await start_broker(wait_time_mills_in_send_queue=1)
    session = BrokerSession(namesrv.address, None)
    rows: list[tuple[Message, int | None]] = [
        (Message(TOPIC, f"m{i}".encode()), i % 4) for i in range(1500)
    ]
    results = await asyncio.to_thread(session.send_all, "spark-busy-producer", rows)
    assert broker.send_lane.expired > 0, "no send was refused: the test proves nothing"
    assert len(results) == len(rows)
    assert [r.message_queue.queue_id for r in results] == [q for _m, q in rows]
    stored = sum(broker.store.get_max_offset(TOPIC, q) for q in range(4))
    assert stored == len(rows)  # each stored once: a refused send had stored nothing

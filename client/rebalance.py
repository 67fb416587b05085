"""Queue allocation strategies: which of a topic's queues this consumer pulls from.

RocketMQ counterpart: ``org.apache.rocketmq.client.consumer.rebalance`` (4.9):
``AllocateMessageQueueAveragely`` ("AVG"), ``AllocateMessageQueueAveragelyByCircle``
("AVG_BY_CIRCLE"), ``AllocateMessageQueueConsistentHash`` ("CONSISTENT_HASH", over
``common.consistenthash.ConsistentHashRouter`` and its default MD5 hash) and
``AllocateMessageQueueByConfig`` ("CONFIG"), with the argument checks of
``AbstractAllocateMessageQueueStrategy``.

Every consumer of a group runs the same strategy on the same inputs and keeps only its own
share, so the strategies must be deterministic and must agree with the Java client's byte for
byte: a group that mixes Java and Python consumers would otherwise pull some queues twice and
others never. The functions are pure; ``instance.py`` drives them from its rebalance loop.

Like ``RebalanceImpl.rebalanceByTopic``, the *caller* sorts ``mq_all`` (by topic, broker name,
queue id: ``MessageQueue``'s field order, as Java's ``compareTo``) and ``cid_all`` (client ids as
strings) before calling; the strategies index into the lists as given and do not sort again.
"""

from __future__ import annotations

import bisect
import hashlib
import logging
from collections.abc import Sequence
from typing import Protocol

from client.errors import InvalidArgumentError
from remoting.route import MessageQueue

log = logging.getLogger(__name__)

__all__ = [
    "STRATEGIES",
    "AllocateStrategy",
    "allocate_averagely",
    "allocate_averagely_by_circle",
    "allocate_by_config",
    "allocate_consistent_hash",
    "message_queue_key",
]


class AllocateStrategy(Protocol):
    """A queue allocation strategy (RocketMQ ``AllocateMessageQueueStrategy.allocate``)."""

    def __call__(
        self,
        consumer_group: str,
        current_cid: str,
        mq_all: Sequence[MessageQueue],
        cid_all: Sequence[str],
    ) -> list[MessageQueue]:
        """Return the queues of ``mq_all`` that ``current_cid`` should consume."""
        ...


def _check(
    consumer_group: str, current_cid: str, mq_all: Sequence[MessageQueue], cid_all: Sequence[str]
) -> bool:
    """``AbstractAllocateMessageQueueStrategy.check``: raise on empty input, False if not a member.

    Raises:
        InvalidArgumentError: ``current_cid``, ``mq_all`` or ``cid_all`` is empty (Java's
            IllegalArgumentException, same messages, same order of checks; a ValueError).
    """
    if not current_cid:
        raise InvalidArgumentError("currentCID is empty")
    if not mq_all:
        raise InvalidArgumentError("mqAll is null or mqAll empty")
    if not cid_all:
        raise InvalidArgumentError("cidAll is null or cidAll empty")
    if current_cid not in cid_all:
        # Java logs this at info with a "[BUG]" prefix and allocates nothing: the consumer list
        # fetched from the broker does not yet (or no longer) include us, which heals on the
        # next rebalance, so it is not worth an exception.
        log.info(
            "consumer_not_in_cid_all consumer_group=%s current_cid=%s cid_all=%s",
            consumer_group,
            current_cid,
            list(cid_all),
        )
        return False
    return True


def allocate_averagely(
    consumer_group: str,
    current_cid: str,
    mq_all: Sequence[MessageQueue],
    cid_all: Sequence[str],
) -> list[MessageQueue]:
    """Give each consumer one contiguous run of queues (RocketMQ ``AllocateMessageQueueAveragely``).

    With ``q`` queues and ``c`` consumers, the first ``q % c`` consumers take ``q // c + 1``
    queues and the rest ``q // c``; with more consumers than queues, the first ``q`` consumers
    take one queue each and the others none. 8 queues over 3 consumers: [0,1,2], [3,4,5], [6,7].

    Args:
        consumer_group: The group, for the log line only.
        current_cid: This consumer's client id.
        mq_all: Every queue of the topic, sorted.
        cid_all: Every client id of the group, sorted.

    Returns:
        This consumer's queues, in ``mq_all`` order; empty if ``current_cid`` is not in
        ``cid_all``.

    Raises:
        InvalidArgumentError: an argument is empty (a ValueError).
    """
    if not _check(consumer_group, current_cid, mq_all, cid_all):
        return []
    index = cid_all.index(current_cid)
    mq_count, cid_count = len(mq_all), len(cid_all)
    mod = mq_count % cid_count
    # Transcribed from Java rather than simplified, so a reader can diff the two.
    if mq_count <= cid_count:
        average_size = 1
    elif mod > 0 and index < mod:
        average_size = mq_count // cid_count + 1
    else:
        average_size = mq_count // cid_count
    start_index = index * average_size if mod > 0 and index < mod else index * average_size + mod
    # Negative once start_index passes the end (surplus consumers): range() then yields nothing.
    span = min(average_size, mq_count - start_index)
    return [mq_all[start_index + i] for i in range(span)]


def allocate_averagely_by_circle(
    consumer_group: str,
    current_cid: str,
    mq_all: Sequence[MessageQueue],
    cid_all: Sequence[str],
) -> list[MessageQueue]:
    """Deal queues round-robin (RocketMQ ``AllocateMessageQueueAveragelyByCircle``).

    Consumer ``i`` takes queues ``i``, ``i + c``, ``i + 2c``, ... 8 queues over 3 consumers:
    [0,3,6], [1,4,7], [2,5]. Arguments, result and errors as for `allocate_averagely`.
    """
    if not _check(consumer_group, current_cid, mq_all, cid_all):
        return []
    index = cid_all.index(current_cid)
    return list(mq_all[index :: len(cid_all)])


def message_queue_key(mq: MessageQueue) -> str:
    """Java's ``MessageQueue.toString()``: what the consistent-hash strategy hashes, and
    what the admin tools print."""
    return f"MessageQueue [topic={mq.topic}, brokerName={mq.broker_name}, queueId={mq.queue_id}]"


def _md5_hash(key: str) -> int:
    """``ConsistentHashRouter.MD5Hash.hash``: the first 4 digest bytes as a big-endian unsigned int.

    Java ORs each byte masked with 0xFF into a ``long``, so the value is in [0, 2**32) and
    never negative. ``key.getBytes()`` uses the JVM's default charset: UTF-8 on any modern
    deployment (and the only default from Java 18), identical to ASCII for the usual ids.
    """
    digest = hashlib.md5(key.encode("utf-8"), usedforsecurity=False).digest()
    return int.from_bytes(digest[:4], "big")


def allocate_consistent_hash(
    consumer_group: str,
    current_cid: str,
    mq_all: Sequence[MessageQueue],
    cid_all: Sequence[str],
    virtual_node_count: int = 10,
) -> list[MessageQueue]:
    """Route each queue to the next consumer on an MD5 hash ring.

    RocketMQ counterpart: ``AllocateMessageQueueConsistentHash`` with the default
    ``ConsistentHashRouter``. Each client id ``cid`` puts ``virtual_node_count`` points on the
    ring at ``md5("{cid}-{i}")``; a queue goes to the owner of the first point at or after
    ``md5(str(queue))`` (wrapping to the smallest). Adding or removing a consumer moves only the
    queues next to its points, where the averaging strategies reshuffle nearly everything.

    Args:
        consumer_group: The group, for the log line only.
        current_cid: This consumer's client id.
        mq_all: Every queue of the topic, sorted.
        cid_all: Every client id of the group, sorted.
        virtual_node_count: Ring points per consumer (Java's ``virtualNodeCnt``, default 10).
            Every consumer of the group must use the same value.

    Returns:
        This consumer's queues, in ``mq_all`` order; empty if ``current_cid`` is not in
        ``cid_all`` or ``virtual_node_count`` is 0 (an empty ring routes nowhere).

    Raises:
        InvalidArgumentError: an argument is empty, or ``virtual_node_count`` is negative.
    """
    if virtual_node_count < 0:
        # Java rejects this in the strategy's constructor, before any allocation.
        raise InvalidArgumentError(f"illegal virtualNodeCnt :{virtual_node_count}")
    if not _check(consumer_group, current_cid, mq_all, cid_all):
        return []
    ring = _hash_ring(cid_all, virtual_node_count)
    if not ring:
        return []
    points = sorted(ring)
    result = []
    for mq in mq_all:
        # tailMap(hash).firstKey(), else ring.firstKey(): the first point >= hash, wrapping.
        at = bisect.bisect_left(points, _md5_hash(message_queue_key(mq)))
        owner = ring[points[at % len(points)]]
        if owner == current_cid:
            result.append(mq)
    return result


def _hash_ring(cid_all: Sequence[str], virtual_node_count: int) -> dict[int, str]:
    """Point on the ring -> the client id that owns it, ``virtual_node_count`` points per id
    at ``md5("{cid}-{i}")``."""
    # The ring is Java's TreeMap<Long, VirtualNode>: a later point with the same hash replaces
    # the earlier one (dict assignment does the same). A client id listed twice gets replica
    # indexes continuing after the points it still owns (getExistingReplicas), so keep a live
    # count per id, decremented when a collision takes a point away.
    ring: dict[int, str] = {}
    points_owned: dict[str, int] = {}
    for cid in cid_all:
        existing = points_owned.get(cid, 0)
        for i in range(virtual_node_count):
            point = _md5_hash(f"{cid}-{i + existing}")
            displaced = ring.get(point)
            if displaced is not None:
                points_owned[displaced] -= 1
            ring[point] = cid
            points_owned[cid] = points_owned.get(cid, 0) + 1
    return ring


def allocate_by_config(queues: Sequence[MessageQueue]) -> AllocateStrategy:
    """A strategy that always answers ``queues`` (RocketMQ ``AllocateMessageQueueByConfig``).

    Like Java's, it ignores its arguments entirely (no emptiness checks, no membership test):
    the operator has pinned this consumer to fixed queues. Each call returns a fresh list, so a
    caller mutating its result cannot change the configuration.
    """
    fixed = tuple(queues)

    def allocate(
        consumer_group: str,
        current_cid: str,
        mq_all: Sequence[MessageQueue],
        cid_all: Sequence[str],
    ) -> list[MessageQueue]:
        return list(fixed)

    return allocate


# Keyed by Java's getName(), the value the consumer config names a strategy by. "CONFIG" is
# absent: it needs its queue list, so build it with allocate_by_config().
STRATEGIES: dict[str, AllocateStrategy] = {
    "AVG": allocate_averagely,
    "AVG_BY_CIRCLE": allocate_averagely_by_circle,
    "CONSISTENT_HASH": allocate_consistent_hash,
}

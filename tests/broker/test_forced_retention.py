"""Forced retention names what it took (issue 19, item 6).

Above ``diskSpaceCleanForciblyRatio`` (85 %) retention deletes commit-log segments before their
retention time, unconsumed messages and all, as RocketMQ's ``CleanCommitLogService`` does.
RocketMQ says nothing; we log each such deletion with the topics and groups whose unconsumed
messages went, and count both in the metrics. The disk's usage is faked the way
tests/store/test_retention.py fakes it (we do not own the file system); everything else is a
real broker, real sends and real committed offsets.
"""

from __future__ import annotations

from collections import Counter

from structlog.testing import capture_logs

from broker.broker import Broker
from remoting.client import RemotingClient
from remoting.codes import RequestCode, ResponseCode
from tests.broker.test_metrics import scrape, value
from tests.support import call, send_ok, wait_dispatched

TOPIC = "Forced"
BODY = b"m" * 2000  # 30 records to a 64 KiB segment
Key = tuple[str, str, int]  # (topic, group, queue id)


async def commit(client: RemotingClient, broker: Broker, key: Key, offset: int) -> None:
    topic, group, q = key
    response = await call(
        client,
        broker.address,
        RequestCode.UPDATE_CONSUMER_OFFSET,
        {"consumerGroup": group, "topic": topic, "queueId": str(q), "commitOffset": str(offset)},
    )
    assert response.code == ResponseCode.SUCCESS, response


def expected_losses(
    broker: Broker, below: int, committed: dict[Key, int]
) -> Counter[tuple[str, str]]:
    """Per (topic, group): the queue's messages stored below ``below`` at or past the group's
    committed offset, counted entry by entry."""
    out: Counter[tuple[str, str]] = Counter()
    for (topic, group, q), offset in committed.items():
        cq = broker.store.queues.get(topic, q)
        assert cq is not None
        for k in range(max(offset, cq.min_offset), cq.max_offset):
            entry = cq.entry(k)
            assert entry is not None
            if entry[0] < below:
                out[(topic, group)] += 1
    return +out


async def test_a_forced_deletion_names_the_topics_and_groups_it_took_messages_from(
    broker: Broker, client: RemotingClient
) -> None:
    for n in range(100):
        await send_ok(client, broker.address, TOPIC, BODY, queue_id=n % 2)
        if n % 10 == 0:
            await send_ok(client, broker.address, "Consumed", BODY)
    await wait_dispatched(broker)
    committed = {
        (TOPIC, "cg-idle", 0): 0,  # a group that consumed nothing
        (TOPIC, "cg-idle", 1): 0,
        (TOPIC, "cg-half", 0): 20,
        ("Consumed", "cg-done", 0): broker.store.get_max_offset("Consumed", 0),
    }
    for key, offset in committed.items():
        await commit(client, broker, key, offset)
    files = broker.store.commit_log.files.files
    assert len(files) >= 4
    expected = expected_losses(broker, files[-1].start_offset, committed)
    assert set(expected) == {(TOPIC, "cg-idle"), (TOPIC, "cg-half")}

    retention = broker.store.retention
    measure = retention.disk_used_ratio
    retention.disk_used_ratio = lambda: 0.87  # over 85 %, under the 90 % that stops writes
    try:
        with capture_logs() as logs:
            report = retention.run_once()
    finally:
        retention.disk_used_ratio = measure
    deleted = len(files) - 1
    assert len(report.commit_log_segments) == deleted  # all but the newest, though young
    assert broker.store.get_min_offset(TOPIC, 0) > 0

    events = [e for e in logs if e["event"] == "commit_log_forced_deletion"]
    assert [e["segment"] for e in events] == report.commit_log_segments
    assert all(e["log_level"] == "warning" and e["disk_used_ratio"] == 0.87 for e in events)
    lost: Counter[tuple[str, str]] = Counter()
    for e in events:
        for loss in e["losses"]:
            lost[(loss["topic"], loss["consumer_group"])] += loss["messages"]
        assert e["unconsumed_messages"] == sum(x["messages"] for x in e["losses"])
    assert lost == expected
    assert {t for e in events for t in e["topics"]} == {TOPIC}
    assert {g for e in events for g in e["consumer_groups"]} == {"cg-idle", "cg-half"}

    s = await scrape(broker.metrics_port)
    assert value(s, "rocketmq_storage_forced_deletions_total") == deleted
    for (topic, group), n in expected.items():
        name = "rocketmq_storage_forced_deletion_unconsumed_messages_total"
        assert value(s, name, topic=topic, consumer_group=group) == n
    # The group that had consumed everything lost nothing.
    assert ("Consumed", "cg-done") not in retention.unconsumed_deleted
    assert report.forced_commit_log_segments == report.commit_log_segments

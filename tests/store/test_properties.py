"""Property tests: whatever is put comes back, byte for byte, before and after a reopen.

Random interleavings of single and batch puts over several topics and queues, with body sizes
chosen so that records land right at segment ends (store-format.md §2.1: a record of length L
fits R remaining bytes only if L + 8 <= R), are read back through ``get_messages`` and checked
against the commit-log files on disk. (The properties codec itself is checked in
tests/codec/test_properties.py.)
"""

from __future__ import annotations

import tempfile
from dataclasses import dataclass
from pathlib import Path

from hypothesis import event, given, settings
from hypothesis import strategies as st

from codec import MessageBatch, MessageInner
from store.message_store import MessageStore
from store.results import PutMessageStatus
from tests.store.conftest import drain, parse_record, tiny_config, walk_commit_log
from tests.support import BORN_HOST, STORE_HOST, batch_body, wait_dispatched

SEGMENT = 4096
TOPICS = ["A", "TopicB", "t" * 60]
QUEUES = 3
MAX_BODY = 1500

# Property text with the separators in it: the store keeps the bytes as given.
_PROP_TEXT = st.text(alphabet="ab=é日\U0001f600\x01\x02 ", max_size=24)


@dataclass(frozen=True)
class Put:
    """One put: a single message (``batch_props`` None) or a batch of ``entries``.
    ``fill_slack`` set: the single body is sized at run time so the record's L + 8 equals
    the bytes left in the segment plus the slack."""

    topic: str
    queue_id: int
    entries: tuple[tuple[int, str], ...]  # (body size, own properties)
    batch_props: str | None = None
    fill_slack: int | None = None


_topic = st.sampled_from(TOPICS)
_queue = st.integers(0, QUEUES - 1)
_single = st.builds(
    Put,
    _topic,
    _queue,
    st.tuples(st.tuples(st.integers(0, MAX_BODY), _PROP_TEXT)),
)
_fill = st.builds(
    Put,
    _topic,
    _queue,
    st.tuples(st.tuples(st.just(0), _PROP_TEXT)),
    fill_slack=st.integers(-2, 2),
)
_batch = st.builds(
    Put,
    _topic,
    _queue,
    st.lists(st.tuples(st.integers(0, 300), _PROP_TEXT), min_size=1, max_size=4).map(tuple),
    batch_props=st.sampled_from(["", "CLUSTER\x01DefaultCluster", "X\x01y\x02"]),
)
_ops = st.lists(st.one_of(_single, _fill, _batch), min_size=1, max_size=20)


def _body(index: int, size: int) -> bytes:
    return (f"<{index}>".encode() * (size // 3 + 1))[:size]


def _stored_props(own: str, batch_props: str | None) -> str:
    """What the store must write: a batch appends its properties, inserting \\x02 only
    when the message's own string is non-empty and does not end with one (4.9.8)."""
    if not batch_props:
        return own
    if own and not own.endswith("\x02"):
        return f"{own}\x02{batch_props}"
    return own + batch_props


Expected = dict[tuple[str, int], list[tuple[bytes, str]]]


async def _apply(
    store: MessageStore, ops: list[Put], expected: Expected, units: list[list[int]]
) -> None:
    for op in ops:
        key = (op.topic, op.queue_id)
        queue = expected.setdefault(key, [])
        topic_bytes = len(op.topic.encode())
        if op.batch_props is None:
            size, props = op.entries[0]
            if op.fill_slack is not None:
                remaining = SEGMENT - store.commit_log.max_offset % SEGMENT
                overhead = 91 + topic_bytes + len(props.encode())
                size = min(max(0, remaining - 8 + op.fill_slack - overhead), MAX_BODY)
            body = _body(len(units), size)
            result = await store.put_message(
                MessageInner(
                    op.topic,
                    op.queue_id,
                    body,
                    props,
                    born_host=BORN_HOST,
                    store_host=STORE_HOST,
                )
            )
            stored = [(body, props)]
        else:
            bodies = [(_body(len(units) * 10 + i, n), p) for i, (n, p) in enumerate(op.entries)]
            result = await store.put_messages(
                MessageBatch(
                    op.topic,
                    op.queue_id,
                    batch_body((0, b, p.encode()) for b, p in bodies),
                    op.batch_props,
                    born_host=BORN_HOST,
                    store_host=STORE_HOST,
                )
            )
            stored = [(b, _stored_props(p, op.batch_props)) for b, p in bodies]
        assert result.status is PutMessageStatus.PUT_OK, result
        assert result.append is not None
        assert result.append.queue_offset == len(queue)
        assert result.append.msg_num == len(stored)
        queue.extend(stored)
        units.append([91 + len(b) + topic_bytes + len(p.encode()) for b, p in stored])


def _check_queues(store: MessageStore, expected: Expected) -> None:
    for (topic, queue_id), messages in expected.items():
        assert store.get_min_offset(topic, queue_id) == 0
        assert store.get_max_offset(topic, queue_id) == len(messages)
        records = [parse_record(raw) for raw in drain(store, topic, queue_id)]
        assert [(r.body, r.properties) for r in records] == messages
        assert [r.queue_offset for r in records] == list(range(len(messages)))
        assert {(r.topic, r.queue_id) for r in records} <= {(topic, queue_id)}


def _check_disk(store: MessageStore, units: list[list[int]]) -> None:
    """The files hold every unit in put order; a blank closes a segment only where the
    next unit (a batch is one unit) did not fit, and records never span segments."""
    walked = list(walk_commit_log(store.config))
    i = 0
    for unit in units:
        total = sum(unit)
        offset, rec, size = walked[i]
        left = SEGMENT - offset % SEGMENT
        if rec is None:
            assert total + 8 > size == left
            event(f"blank of {size} bytes" if size <= 10 else "blank")
            i += 1
            offset, rec, size = walked[i]
            assert offset % SEGMENT == 0
            left = SEGMENT
        assert total + 8 <= left
        if total + 8 - left >= -2:
            event(f"unit fits with {left - total - 8} bytes to spare")
        for length in unit:
            offset, rec, size = walked[i]
            assert rec is not None
            assert size == length == rec.total_size
            assert rec.physical_offset == offset
            i += 1
    assert i == len(walked)


@settings(max_examples=100, deadline=None)
@given(ops=_ops)
async def test_puts_read_back_exactly_and_after_reopen(ops: list[Put]) -> None:
    with tempfile.TemporaryDirectory() as tmp:
        config = tiny_config(Path(tmp))
        expected: Expected = {}
        units: list[list[int]] = []
        async with MessageStore(config) as store:
            await _apply(store, ops, expected, units)
            await wait_dispatched(store)
            _check_queues(store, expected)
            _check_disk(store, units)
            end = store.commit_log.max_offset
        async with MessageStore(config) as store:
            assert store.commit_log.max_offset == end
            _check_queues(store, expected)
            # offsets continue where they were
            more = [Put(topic, queue_id, ((5, "again\x01yes"),)) for topic, queue_id in expected]
            await _apply(store, more, expected, units)
            await wait_dispatched(store)
            _check_queues(store, expected)
            _check_disk(store, units)

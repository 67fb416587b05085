"""A batch: the body a producer sends (protocol.md §10) and the records the broker makes of it.

``split_batch`` reads back bodies packed field by field, ``encode_batch_entry`` writes them,
and ``encode_batch_records`` (one pass over a batch) writes exactly the records
``encode_record`` + ``patch_append_fields`` make one message at a time. Each function runs in
every implementation there is (tests/codec/conftest.py).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from codec import (
    EncodedBatch,
    Host,
    MessageBatch,
    PropertiesTooLongError,
    RecordError,
    record_sys_flag,
)
from tests.codec.conftest import HOST_PAIRS, over, pure
from tests.support import BORN_TIMESTAMP, MALFORMED_BATCHES, batch_body

Split = Callable[[bytes | memoryview], list[tuple[int, memoryview, bytes]]]
EncodeRecords = Callable[..., EncodedBatch]

# The references: the plain record path and the batch helpers.
encode_record = pure("record", "encode_record")
patch_append_fields = pure("record", "patch_append_fields")
patch_physical_offsets = pure("record", "patch_physical_offsets")
split_batch: Split = pure("batch", "split_batch")
join_batch_properties: Callable[[bytes, bytes], bytes] = pure("batch", "join_batch_properties")

# Property text with the separators and non-ASCII in it.
_TEXT = st.text(alphabet="ab=é\x01\x02 KEYSTAGUNIQ_", max_size=30)
_ENTRIES = st.lists(
    st.tuples(st.integers(-(2**31), 2**31 - 1), st.binary(max_size=50), st.binary(max_size=30)),
    min_size=1,
    max_size=6,
)


# ---------------------------------------------------------------------------- batch body


@over("batch", "split_batch")
@settings(max_examples=100)
@given(_ENTRIES)
def test_batch_body_split(impl: Split, entries: list[tuple[int, bytes, bytes]]) -> None:
    got = impl(batch_body(entries))
    assert [(flag, bytes(body), props) for flag, body, props in got] == entries
    assert [(f, bytes(b), p) for f, b, p in impl(memoryview(batch_body(entries)))] == entries


@over("batch", "encode_batch_entry")
@settings(max_examples=100)
@given(_ENTRIES)
def test_batch_entries_encode_as_packed_by_hand(
    impl: Callable[[int, bytes, bytes], bytes], entries: list[tuple[int, bytes, bytes]]
) -> None:
    assert b"".join(impl(*entry) for entry in entries) == batch_body(entries)


MALFORMED_IDS = [name for name, _body in MALFORMED_BATCHES]


@over("batch", "split_batch")
@pytest.mark.parametrize(("name", "body"), MALFORMED_BATCHES, ids=MALFORMED_IDS)
def test_malformed_batch_does_not_split(impl: Split, name: str, body: bytes) -> None:
    with pytest.raises(RecordError):
        impl(body)


@over("batch", "split_batch")
def test_batch_cut_at_every_byte_does_not_split(impl: Split) -> None:
    body = batch_body([(1, b"hello", b"TAGS\x01a"), (2, b"", b""), (3, b"x" * 40, b"K\x01v")])
    ends = {0}
    for entry in ([(1, b"hello", b"TAGS\x01a")], [(1, b"hello", b"TAGS\x01a"), (2, b"", b"")]):
        ends.add(len(batch_body(entry)))
    for cut in range(len(body)):
        if cut in ends - {0}:
            assert len(impl(body[:cut])) == len([e for e in ends if 0 < e <= cut])
            continue
        with pytest.raises(RecordError):
            impl(body[:cut])


@over("batch", "join_batch_properties")
@pytest.mark.parametrize(
    ("own", "batch", "stored"),
    [
        (b"TAGS\x01a", b"CLUSTER\x01c", b"TAGS\x01a\x02CLUSTER\x01c"),
        (b"TAGS\x01a\x02", b"CLUSTER\x01c", b"TAGS\x01a\x02CLUSTER\x01c"),
        (b"", b"CLUSTER\x01c", b"CLUSTER\x01c"),
        (b"TAGS\x01a", b"", b"TAGS\x01a"),
        (b"", b"", b""),
        (b"\x02", b"X\x01y", b"\x02X\x01y"),
    ],
)
def test_batch_properties_joined_with_a_separator_only_when_needed(
    impl: Callable[[bytes, bytes], bytes], own: bytes, batch: bytes, stored: bytes
) -> None:
    assert impl(own, batch) == stored


# ------------------------------------------------------------------------- batch records


def _plain_batch_records(
    batch: MessageBatch, queue_offset: int, start: int, now: int
) -> tuple[bytes, list[int]]:
    """The records of a batch the way single records are made: encode, then patch."""
    out = bytearray()
    sizes = []
    for flag, body, own in split_batch(batch.body):
        record = bytearray(
            encode_record(
                topic=batch.topic.encode(),
                queue_id=batch.queue_id,
                body=body,
                flag=flag,
                properties=join_batch_properties(own, batch.properties.encode()),
                sys_flag=batch.sys_flag,
                born_timestamp=batch.born_timestamp,
                born_host=batch.born_host,
                store_host=batch.store_host,
            )
        )
        patch_append_fields(
            record,
            0,
            queue_offset=queue_offset,
            commit_log_offset=start + len(out),
            store_timestamp=now,
            sys_flag=int.from_bytes(record[36:40], "big", signed=True),
        )
        sizes.append(len(record))
        out += record
        queue_offset += 1
    return bytes(out), sizes


@over("batch", "encode_batch_records")
@settings(max_examples=150, deadline=None)
@given(
    entries=st.lists(
        st.tuples(
            st.integers(-(2**31), 2**31 - 1),
            st.binary(max_size=300),
            _TEXT.map(lambda t: t.encode()),
        ),
        min_size=1,
        max_size=6,
    ),
    batch_props=st.sampled_from(["", "CLUSTER\x01C", "TAGS\x01t\x02", "\x02"]),
    hosts=st.sampled_from(HOST_PAIRS),
    sys_flag=st.sampled_from([0, 1, 2, 0x30]),
    topic=st.sampled_from(["T", "TopicTest", "t" * 127, "日本"]),
)
def test_batch_records_are_the_plain_records(
    impl: EncodeRecords,
    *,
    entries: list[tuple[int, bytes, bytes]],
    batch_props: str,
    hosts: tuple[Host, Host],
    sys_flag: int,
    topic: str,
) -> None:
    batch = MessageBatch(
        topic=topic,
        queue_id=3,
        body=batch_body(entries),
        properties=batch_props,
        sys_flag=sys_flag,
        born_timestamp=BORN_TIMESTAMP,
        born_host=hosts[0],
        store_host=hosts[1],
    )
    expected, sizes = _plain_batch_records(batch, 41, 123_456, 1_700_000_000_999)
    flag = record_sys_flag(sys_flag, *hosts)
    for room in (len(expected) + 10, 7):  # the buffer given, or a larger one
        encoded = impl(
            bytearray(room), memoryview(batch.body), batch_props.encode(), topic.encode(), 3,
            flag, BORN_TIMESTAMP, hosts[0], hosts[1], 41, 123_456, 1_700_000_000_999,
        )  # fmt: skip
        assert encoded.sizes == sizes
        assert encoded.total_bytes == len(expected)
        assert bytes(encoded.buf[: encoded.total_bytes]) == expected
        assert encoded.properties == [
            join_batch_properties(own, batch_props.encode())
            for _f, _b, own in split_batch(batch.body)
        ]
    moved, _sizes = _plain_batch_records(batch, 41, 9_000_000, 1_700_000_000_999)
    patch_physical_offsets(encoded.buf, encoded.sizes, 9_000_000)
    assert bytes(encoded.buf[: encoded.total_bytes]) == moved


def _encode_records(impl: EncodeRecords, body: bytes, batch_props: bytes = b"") -> Any:
    hosts = HOST_PAIRS[0]
    return impl(
        bytearray(64), body, batch_props, b"T", 0, 0, BORN_TIMESTAMP, hosts[0], hosts[1], 0, 0, 1
    )


@over("batch", "encode_batch_records")
@pytest.mark.parametrize(("name", "body"), MALFORMED_BATCHES, ids=MALFORMED_IDS)
def test_malformed_batch_makes_no_records(impl: EncodeRecords, name: str, body: bytes) -> None:
    with pytest.raises(RecordError):
        _encode_records(impl, body)


@over("batch", "encode_batch_records")
def test_batch_records_with_properties_too_long(impl: EncodeRecords) -> None:
    """Properties over 32,767 bytes once joined with the batch ones: the first such length
    is reported, but only for a batch that otherwise parses."""
    long = b"K\x01" + b"v" * 32_700
    props = b"X\x01" + b"y" * 100
    body = batch_body([(0, b"a", b""), (0, b"b", long), (0, b"c", long[:-9])])
    with pytest.raises(PropertiesTooLongError) as raised:
        _encode_records(impl, body, props)
    assert raised.value.length == 32_805
    with pytest.raises(RecordError):
        _encode_records(impl, body + b"\x00\x00\x00", props)
    # exactly 32,767 bytes joined is allowed
    fits = b"K\x01" + b"v" * (32_767 - 2 - 1 - len(props))
    encoded = _encode_records(impl, batch_body([(0, b"b", fits)]), props)
    assert [len(p) for p in encoded.properties] == [32_767]

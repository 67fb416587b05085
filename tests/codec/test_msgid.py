"""Message ids: the broker's offset id (store host + commit-log offset, protocol.md §11) and
the client's UNIQ_KEY (RocketMQ ``MessageClientIDSetter``)."""

from __future__ import annotations

import itertools
import os
import socket
import struct
import time
from collections.abc import Callable
from datetime import datetime

import pytest

from codec import Host, UniqIdGenerator, decode_offset_msg_id
from tests.codec.conftest import over, pure
from tests.support import STORE_HOST, STORE_HOST_V6

# ------------------------------------------------------------------------- offset msg ids


@over("msgid", "offset_msg_id")
def test_offset_msg_id_ipv4_example(impl: Callable[[Host, int], str]) -> None:
    assert impl(STORE_HOST, 0) == "7F00000100002A9F0000000000000000"
    assert decode_offset_msg_id("7F00000100002A9F0000000000000000") == (STORE_HOST, 0)


@over("msgid", "offset_msg_id")
def test_offset_msg_id_ipv6_has_56_hex_digits(impl: Callable[[Host, int], str]) -> None:
    msg_id = impl(STORE_HOST_V6, 0x0102030405060708)
    assert msg_id == "00000000000000000000000000000001" + "00002A9F" + "0102030405060708"
    assert len(msg_id) == 56
    assert decode_offset_msg_id(msg_id) == (STORE_HOST_V6, 0x0102030405060708)


@pytest.mark.parametrize("msg_id", ["", "7F000001", "7F00000100002A9F000000000000000", "G" * 32])
def test_decode_offset_msg_id_refuses_what_is_not_one(msg_id: str) -> None:
    with pytest.raises(ValueError, match="offset message id"):
        decode_offset_msg_id(msg_id)


@over("msgid", "offset_msg_ids")
@pytest.mark.parametrize("host", [STORE_HOST, STORE_HOST_V6], ids=["v4", "v6"])
def test_offset_msg_ids(impl: Callable[[str, list[int]], list[str]], host: Host) -> None:
    offsets = [0, 1, 4095, 2**40 + 17, 2**63 - 1]
    prefix = pure("msgid", "offset_msg_id_prefix")(host)
    offset_msg_id = pure("msgid", "offset_msg_id")
    assert impl(prefix, offsets) == [offset_msg_id(host, o) for o in offsets]
    assert impl(prefix, []) == []


# ------------------------------------------------------------------------------ UNIQ_KEY


def test_uniq_ids_format_and_uniqueness() -> None:
    gen = UniqIdGenerator(bytes([127, 0, 0, 1]))
    ids = [gen.next_id() for _ in range(66_000)]
    assert len(set(ids)) == len(ids)
    for msg_id in ids[:100]:
        assert len(msg_id) == 32
        assert msg_id == msg_id.upper()
        int(msg_id, 16)
    # Fixed prefix: IPv4, pid (15 bits), 4 random bytes; the same for every id of a process.
    assert len({i[:20] for i in ids}) == 1
    raw = bytes.fromhex(ids[0])
    socket.inet_ntoa(raw[:4])  # a valid IPv4
    assert struct.unpack(">h", raw[4:6])[0] == os.getpid() & 0x7FFF
    # A 16-bit counter in the last 4 hex digits, one step per id, wrapping.
    counters = [int(i[-4:], 16) for i in ids]
    assert all((b - a) % 0x10000 == 1 for a, b in itertools.pairwise(counters))
    assert any(b < a for a, b in itertools.pairwise(counters))  # wrapped once


def test_uniq_id_time_is_ms_since_month_start() -> None:
    before = int(time.time() * 1000)
    msg_id = UniqIdGenerator(bytes([127, 0, 0, 1])).next_id()
    after = int(time.time() * 1000)
    # unsigned, as Java's getNearlyTimeFromID reads it: a month has more ms than an int
    (since_month,) = struct.unpack(">I", bytes.fromhex(msg_id)[10:14])
    now = datetime.now()
    month_start = now.replace(day=1, hour=0, minute=0, second=0, microsecond=0).timestamp()
    start_ms = int(month_start * 1000)
    assert before - start_ms - 1000 <= since_month <= after - start_ms + 1000


def test_uniq_id_time_keeps_the_top_bit_late_in_a_month() -> None:
    """Past 2**31 ms (24.8 days) into a month the span's top bit is set: Java's int cast
    keeps it, and readers take the 4 bytes unsigned, so it must not be masked away."""
    gen = UniqIdGenerator(bytes([127, 0, 0, 1]))
    now_ms = int(time.time() * 1000)
    gen.next_id()  # sets the month
    late = 2**31 + 12_345
    gen._month_start_ms = now_ms - late  # as if 24.8 days had passed
    gen._last_ms = -1
    msg_id = gen.next_id()
    (span,) = struct.unpack(">I", bytes.fromhex(msg_id)[10:14])
    assert late <= span <= late + 5_000


def test_two_generators_differ_in_prefix() -> None:
    a, b = UniqIdGenerator(bytes([127, 0, 0, 1])), UniqIdGenerator(bytes([127, 0, 0, 1]))
    assert a.next_id()[:20] != b.next_id()[:20]


def test_uniq_id_prefix_from_the_arguments() -> None:
    msg_id = UniqIdGenerator(bytes([10, 0, 0, 7]), pid=0x12345, salt=b"\xde\xad\xbe\xef").next_id()
    assert msg_id[:20] == "0A000007" + "2345" + "DEADBEEF"  # the pid's low 15 bits
    with pytest.raises(ValueError, match="4-byte"):
        UniqIdGenerator(bytes(16))

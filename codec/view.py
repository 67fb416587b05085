"""Stored records as a reader receives them: the body of a pull or query reply.

RocketMQ counterpart: ``MessageDecoder.decodesBatch`` / ``decode`` on the client side
(store-format.md §2), which builds one ``MessageExt`` per record: its fields, the
properties parsed, the body inflated, the offset message id built from the store host.
"""

from __future__ import annotations

import functools
import socket
import struct
import zlib
from collections.abc import Callable
from typing import TypeVar

from codec.properties import PROPERTY_KEYS, PROPERTY_TAGS, PROPERTY_UNIQ_KEY, decode_properties
from codec.record import RecordError
from codec.sysflag import (
    BORNHOST_V6_FLAG,
    COMPRESSED_FLAG,
    COMPRESSION_MASK,
    COMPRESSION_ZLIB,
    STOREHOSTADDRESS_V6_FLAG,
    V6_FLAGS,
)

T = TypeVar("T")

_HEAD = struct.Struct(">iiiiiqqiq")  # TOTALSIZE .. BORNTIMESTAMP (48 bytes)
_INT = struct.Struct(">i")
_LONG = struct.Struct(">q")
_SHORT = struct.Struct(">h")
_TAIL = struct.Struct(">iq")  # RECONSUMETIMES, PREPAREDTRANSACTIONOFFSET
# Both hosts IPv4 (the usual case): TOTALSIZE .. BODYLENGTH in one unpack.
_HEAD_V4 = struct.Struct(">iiiiiqqiq8sq8siqi")
assert _HEAD.size == 48 and _TAIL.size == 12 and _HEAD_V4.size == 88


@functools.lru_cache(maxsize=1024)
def _host_text(raw: bytes) -> str:
    """``ip:port`` of a stored host field (address bytes + port); few distinct per process."""
    v6 = len(raw) == 20
    ip = socket.inet_ntop(socket.AF_INET6 if v6 else socket.AF_INET, raw[:-4])
    (port,) = _INT.unpack_from(raw, len(raw) - 4)
    return f"[{ip}]:{port}" if v6 else f"{ip}:{port}"


# host field → (ip:port, upper-case hex); a process talks to a handful of brokers, so this
# stays tiny, and a plain dict lookup is what the per-message path can afford.
_HOSTS: dict[bytes, tuple[str, str]] = {}


def _host_info(raw: bytes) -> tuple[str, str]:
    info = _HOSTS.get(raw)
    if info is None:
        if len(_HOSTS) > 1024:
            _HOSTS.clear()
        info = _HOSTS[raw] = (_host_text(raw), raw.hex().upper())
    return info


def decode_records(body: bytes | memoryview, broker_name: str, make: Callable[..., T]) -> list[T]:
    """The records of a pull (or query) reply, bodies inflated: ``make`` is called with
    (topic, body, tags, keys, properties, msg_id, offset_msg_id, queue_id, queue_offset,
    commit_log_offset, born_timestamp, store_timestamp, born_host, store_host,
    reconsume_times, sys_flag, flag, broker_name, body_crc) for each.

    Raises:
        RecordError: the body is truncated or not in the record layout.
    """
    data = body if isinstance(body, bytes) else bytes(body)
    out: list[T] = []
    append = out.append
    pos = 0
    end = len(data)
    while pos < end:
        try:
            view, total = _decode_one(data, pos, end, broker_name, make)
        except (struct.error, IndexError, ValueError, OSError) as exc:
            if isinstance(exc, RecordError):
                raise
            raise RecordError(f"record at byte {pos} is malformed: {exc}") from None
        append(view)
        pos += total
    return out


def _decode_one(
    data: bytes, pos: int, end: int, broker_name: str, make: Callable[..., T]
) -> tuple[T, int]:
    """One record at ``pos``; every inner length is checked against TOTALSIZE."""
    if end - pos < _HEAD.size:
        raise RecordError(f"truncated record header at byte {pos}")
    if not data[pos + 39] & V6_FLAGS and end - pos >= _HEAD_V4.size:  # SYSFLAG's low byte
        (
            total,
            _magic,
            body_crc,
            queue_id,
            flag,
            queue_offset,
            commit_log_offset,
            sys_flag,
            born_ts,
            born_raw,
            store_ts,
            store_raw,
            reconsume_times,
            _prepared,
            body_len,
        ) = _HEAD_V4.unpack_from(data, pos)
        p = pos + _HEAD_V4.size
        record_end = pos + total
        if total < _HEAD_V4.size or record_end > end:
            raise RecordError(f"record at byte {pos} claims {total} bytes")
    else:
        (
            total,
            _magic,
            body_crc,
            queue_id,
            flag,
            queue_offset,
            commit_log_offset,
            sys_flag,
            born_ts,
        ) = _HEAD.unpack_from(data, pos)
        record_end = pos + total
        if total < _HEAD.size or record_end > end:
            raise RecordError(f"record at byte {pos} claims {total} bytes")
        p = pos + _HEAD.size
        born_len = 20 if sys_flag & BORNHOST_V6_FLAG else 8
        born_raw = data[p : p + born_len]
        p += born_len
        (store_ts,) = _LONG.unpack_from(data, p)
        p += 8
        store_len = 20 if sys_flag & STOREHOSTADDRESS_V6_FLAG else 8
        store_raw = data[p : p + store_len]
        p += store_len
        reconsume_times, _prepared = _TAIL.unpack_from(data, p)
        p += _TAIL.size
        (body_len,) = _INT.unpack_from(data, p)
        p += 4
    if body_len < 0 or p + body_len + 3 > record_end:
        raise RecordError(f"record at byte {pos}: body length {body_len} overruns it")
    payload = data[p : p + body_len]
    p += body_len
    topic_len = data[p]
    if p + 1 + topic_len + 2 > record_end:
        raise RecordError(f"record at byte {pos}: topic length overruns it")
    topic = data[p + 1 : p + 1 + topic_len].decode("utf-8", "replace")
    p += 1 + topic_len
    props_len = (data[p] << 8) | data[p + 1]
    p += 2
    if props_len > 0x7FFF or p + props_len > record_end:
        raise RecordError(f"record at byte {pos}: properties length overruns it")
    props = decode_properties(data[p : p + props_len].decode("utf-8", "replace"))
    if sys_flag & COMPRESSED_FLAG:
        payload = inflate_body(payload, sys_flag)
    born_host = _host_info(born_raw)[0]
    store_host, store_hex = _host_info(store_raw)
    offset_id = f"{store_hex}{commit_log_offset:016X}"
    keys = props.get(PROPERTY_KEYS)
    return (
        make(
            topic,
            payload,
            props.get(PROPERTY_TAGS),
            [k for k in keys.split(" ") if k] if keys else [],
            props,
            props.get(PROPERTY_UNIQ_KEY) or offset_id,
            offset_id,
            queue_id,
            queue_offset,
            commit_log_offset,
            born_ts,
            store_ts,
            born_host,
            store_host,
            reconsume_times,
            sys_flag,
            flag,
            broker_name,
            body_crc,
        ),
        total,
    )


def inflate_body(payload: bytes, sys_flag: int) -> bytes:
    """A COMPRESSED body inflated; bytes zlib cannot read are handed over as stored."""
    kind = sys_flag & COMPRESSION_MASK
    if kind not in (0, COMPRESSION_ZLIB):
        # LZ4/ZSTD (types 1 and 2) come from RocketMQ 5 clients; hand the bytes over as
        # stored rather than drop the message.
        return payload
    try:
        return zlib.decompress(payload)
    except zlib.error:
        return payload


def compress_body(body: bytes, level: int = 5) -> bytes:
    """A body to send with COMPRESSED_FLAG | COMPRESSION_ZLIB (``compressMsgBodyOverHowmuch``)."""
    return zlib.compress(body, level)

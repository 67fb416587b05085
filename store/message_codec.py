"""The commit-log record layout, byte by byte, and the helpers that read and write it.

RocketMQ counterpart: ``CommitLog.MessageExtEncoder``/``MessageExtBatchEncoder``,
``MessageDecoder`` and ``MessageSysFlag``. docs/store-format.md §2 is the reference.

Record (all integers big-endian; offsets for IPv4 born and store hosts)::

    0   TOTALSIZE                    int   length of the whole record
    4   MAGICCODE                    int   0xDAA320A7 (BLANK 0xCBD43194 ends a segment)
    8   BODYCRC                      int   CRC32 of the stored body & 0x7FFFFFFF
    12  QUEUEID                      int
    16  FLAG                         int   user flag
    20  QUEUEOFFSET                  long  logical offset in the consume queue   (append)
    28  PHYSICALOFFSET               long  commit-log offset of this record      (append)
    36  SYSFLAG                      int   MessageSysFlag
    40  BORNTIMESTAMP                long
    48  BORNHOST                     4+4   IPv4 + port (16+4 with BORNHOST_V6)
    56  STORETIMESTAMP               long                                       (append)
    64  STOREHOST                    4+4   IPv4 + port (16+4 with STOREHOSTADDRESS_V6)
    72  RECONSUMETIMES               int   (4 bytes, not 8)
    76  PREPARED TRANSACTION OFFSET  long
    84  BODYLENGTH                   int   then BODY
        TOPICLENGTH                  byte  then TOPIC (UTF-8, 1..127 bytes)
        PROPERTIESLENGTH             short then PROPERTIES (0..32767 bytes)

A single message is encoded before the append, which then only copies it and packs the three
fields marked "append" (RocketMQ's ``doAppend`` does the same). A batch is encoded at the
append, record by record with everything packed at once (``encode_batch_records``).
"""

from __future__ import annotations

import functools
import operator
import socket
import struct
import zlib
from collections.abc import Callable
from dataclasses import dataclass
from typing import NamedTuple

MESSAGE_MAGIC_CODE = -626843481  # 0xDAA320A7
BLANK_MAGIC_CODE = -875286124  # 0xCBD43194

# MessageSysFlag bits
COMPRESSED_FLAG = 0x1
MULTI_TAGS_FLAG = 0x2
TRANSACTION_NOT_TYPE = 0x0
TRANSACTION_PREPARED_TYPE = 0x4
TRANSACTION_COMMIT_TYPE = 0x8
TRANSACTION_ROLLBACK_TYPE = 0xC
TRANSACTION_TYPE_MASK = 0xC
BORNHOST_V6_FLAG = 0x10
STOREHOSTADDRESS_V6_FLAG = 0x20

MAX_TOPIC_BYTES = 127
MAX_PROPERTIES_BYTES = 32767

SCHEDULE_TOPIC = "SCHEDULE_TOPIC_XXXX"  # delayed messages wait here (tags code = deliver time)
PROPERTY_DELAY = "DELAY"
PROPERTY_REAL_TOPIC = "REAL_TOPIC"
PROPERTY_REAL_QUEUE_ID = "REAL_QID"

NAME_VALUE_SEPARATOR = "\x01"
PROPERTY_SEPARATOR = "\x02"

# Offsets of the fields the store reads back or patches.
POS_TOTAL_SIZE = 0
POS_MAGIC = 4
POS_BODY_CRC = 8
POS_QUEUE_ID = 12
POS_FLAG = 16
POS_QUEUE_OFFSET = 20
POS_PHYSICAL_OFFSET = 28
POS_SYS_FLAG = 36
POS_BORN_TIMESTAMP = 40
POS_BORN_HOST = 48

_HEADER_V4 = struct.Struct(
    ">"
    "i"  # 0  TOTALSIZE
    "i"  # 4  MAGICCODE
    "i"  # 8  BODYCRC
    "i"  # 12 QUEUEID
    "i"  # 16 FLAG
    "q"  # 20 QUEUEOFFSET
    "q"  # 28 PHYSICALOFFSET
    "i"  # 36 SYSFLAG
    "q"  # 40 BORNTIMESTAMP
    "4s"  # 48 BORNHOST address
    "i"  # 52 BORNHOST port
    "q"  # 56 STORETIMESTAMP
    "4s"  # 64 STOREHOST address
    "i"  # 68 STOREHOST port
    "i"  # 72 RECONSUMETIMES
    "q"  # 76 PREPARED TRANSACTION OFFSET
    "i"  # 84 BODYLENGTH
)
assert _HEADER_V4.size == 88

_INT = struct.Struct(">i")
_LONG = struct.Struct(">q")
_SHORT = struct.Struct(">h")
# TOTALSIZE, MAGICCODE: how every record starts, a blank END-OF-FILE record included
RECORD_HEAD = struct.Struct(">ii")
_APPEND_FIELDS = struct.Struct(">qq")  # QUEUEOFFSET, PHYSICALOFFSET (adjacent at 20)
assert _INT.size == 4 and _LONG.size == 8 and _SHORT.size == 2
assert RECORD_HEAD.size == 8 and _APPEND_FIELDS.size == 16

Host = tuple[bytes, int]  # (4- or 16-byte address, port)


def host_of(addr: str, port: int) -> Host:
    """A textual IPv4/IPv6 address and port as stored in a record."""
    try:
        return socket.inet_pton(socket.AF_INET, addr), port
    except OSError:
        return socket.inet_pton(socket.AF_INET6, addr), port


def host_text(host: Host) -> str:
    raw, port = host
    if len(raw) == 4:
        return f"{socket.inet_ntop(socket.AF_INET, raw)}:{port}"
    return f"[{socket.inet_ntop(socket.AF_INET6, raw)}]:{port}"


def host_bytes(sys_flag: int, flag_bit: int) -> int:
    """Bytes a host field takes in a record: 8 (IPv4) or 20 (IPv6)."""
    return 20 if sys_flag & flag_bit else 8


def store_timestamp_pos(sys_flag: int) -> int:
    """Where STORETIMESTAMP sits: after BORNHOST, whose width depends on BORNHOST_V6."""
    return POS_BORN_HOST + host_bytes(sys_flag, BORNHOST_V6_FLAG)


def record_length(
    body_bytes: int, topic_bytes: int, properties_bytes: int, sys_flag: int = 0
) -> int:
    """TOTALSIZE for these parts (RocketMQ ``calMsgLength``)."""
    return (
        91
        + body_bytes
        + topic_bytes
        + properties_bytes
        + (12 if sys_flag & BORNHOST_V6_FLAG else 0)
        + (12 if sys_flag & STOREHOSTADDRESS_V6_FLAG else 0)
    )


def body_crc(body: bytes | bytearray | memoryview) -> int:
    """Java's ``UtilAll.crc32``: CRC32 of the body, sign bit cleared."""
    return zlib.crc32(body) & 0x7FFFFFFF


# ------------------------------------------------------------------------------- hashing


_HASH_MASK = 0xFFFFFFFF
_POWERS_OF_31: dict[int, tuple[int, ...]] = {}


def _powers_of_31(length: int) -> tuple[int, ...]:
    """31^(n-1) .. 31^0 modulo 2^32, so a hash is one C-level sum of products."""
    powers = _POWERS_OF_31.get(length)
    if powers is None:
        powers = tuple(pow(31, length - 1 - i, 1 << 32) for i in range(length))
        if length <= 1024:  # keys and tags; longer strings are rare and not worth keeping
            _POWERS_OF_31[length] = powers
    return powers


@functools.lru_cache(maxsize=4096)
def java_hash(text: str) -> int:
    """Java ``String.hashCode``: over UTF-16 code units, wrapped to a signed 32-bit int.

    Computed as sum(unit * 31^(n-1-i)) mod 2^32 with ``map`` over precomputed powers:
    1.9 us for a 43-character key against 2.9 us for the per-character loop (dispatch
    hashes every key of every message for the index, and the cache cannot help UNIQ_KEYs).
    """
    if text.isascii():
        units: bytes | tuple[int, ...] = text.encode("ascii")
    else:
        raw = text.encode("utf-16-be")
        units = struct.unpack(f">{len(raw) // 2}H", raw)
    h: int = sum(map(operator.mul, units, _powers_of_31(len(units)))) & _HASH_MASK
    return h - (1 << 32) if h & 0x80000000 else h


def tags_code(tags: str | None) -> int:
    """The consume-queue tag code: hashCode of the tag, 0 without one (sign-extended)."""
    return java_hash(tags) if tags else 0


# Java hashes of ASCII keys, fast. hash(head + tail) = hash(head) * 31^len(tail) + hash(tail),
# so a key whose head was hashed before costs a few multiplications. Index keys are
# ``topic#UNIQ_KEY`` with UNIQ_KEY RocketMQ's client message id: 20 hex digits fixed per
# producer, 8 of time, 4 of a counter (``MessageClientIDSetter``), so the messages of a batch
# share all but the last 4 digits and those of a producer all but the last 12. Heads without
# the last 4 bytes are cached, and heads of those without 8 more: 0.4 us for a 43-byte key
# against 2 us. Bounded by clearing: a miss only costs a hash.
_HEAD_HASHES: dict[bytes, int] = {}
_HEAD_HASHES_MAX = 1 << 14
_TAIL_BYTES = 4  # hashed on every call
_MID_BYTES = 8  # hashed when the head is not cached
_SHORT_KEY_BYTES = 16  # hashed whole
_TAIL_POWERS = _powers_of_31(_TAIL_BYTES)
_MID_POWERS = _powers_of_31(_MID_BYTES)
_POW31_TAIL = pow(31, _TAIL_BYTES, 1 << 32)
_POW31_MID = pow(31, _MID_BYTES, 1 << 32)
_POW31 = tuple(pow(31, n, 1 << 32) for n in range(1024))  # 31^n mod 2^32
_MUL: Callable[[int, int], int] = operator.mul


def _head_hash(head: bytes) -> int:
    """The unsigned hash of ``head`` (longer than 8 bytes), now cached."""
    cache = _HEAD_HASHES
    base = head[:-_MID_BYTES]
    hb = cache.get(base)
    if hb is None:
        hb = sum(map(_MUL, base, _powers_of_31(len(base)))) & _HASH_MASK
        if len(cache) >= _HEAD_HASHES_MAX:
            cache.clear()
        cache[base] = hb
    h = (hb * _POW31_MID + sum(map(_MUL, head[-_MID_BYTES:], _MID_POWERS))) & _HASH_MASK
    if len(cache) >= _HEAD_HASHES_MAX:
        cache.clear()
    cache[head] = h
    return h


def java_hash_ascii(data: bytes) -> int:
    """Java ``String.hashCode`` of ASCII bytes (one byte per UTF-16 unit; callers check
    ``isascii()``), as an *unsigned* 32-bit int. See above for how heads are cached."""
    n = len(data)
    if n <= _SHORT_KEY_BYTES:
        return sum(map(_MUL, data, _powers_of_31(n))) & _HASH_MASK
    head = data[:-_TAIL_BYTES]
    h = _HEAD_HASHES.get(head)
    if h is None:
        h = _head_hash(head)
    tail = data[-_TAIL_BYTES:]
    return (h * _POW31_TAIL + sum(map(_MUL, tail, _TAIL_POWERS))) & _HASH_MASK


def java_hashes_ascii(prefix: bytes, keys: list[bytes]) -> list[int]:
    """``java_hash_ascii(prefix + key)`` for each key, with the prefix hashed once (prefix
    and keys ASCII): hash(prefix + key) = hash(prefix) * 31^len(key) + hash(key)."""
    hp = java_hash_ascii(prefix)
    heads = _HEAD_HASHES
    pow31 = _POW31
    out: list[int] = []
    for key in keys:
        n = len(key)
        if n <= _SHORT_KEY_BYTES:
            hk = sum(map(_MUL, key, _powers_of_31(n)))
        else:
            head = key[:-_TAIL_BYTES]
            h = heads.get(head)
            if h is None:
                h = _head_hash(head)
            hk = h * _POW31_TAIL + sum(map(_MUL, key[-_TAIL_BYTES:], _TAIL_POWERS))
        out.append((hp * (pow31[n] if n < len(pow31) else pow(31, n, 1 << 32)) + hk) & _HASH_MASK)
    return out


# ---------------------------------------------------------------------------- properties


def encode_properties(props: dict[str, str]) -> str:
    """``name\\x01value\\x02`` pairs without a trailing separator (RocketMQ 4.9.1+)."""
    return PROPERTY_SEPARATOR.join(f"{k}{NAME_VALUE_SEPARATOR}{v}" for k, v in props.items())


def decode_properties(text: str) -> dict[str, str]:
    """Parse a properties string as Java does: empty segments, pairs without ``\\x01`` and
    pairs with an empty name or value are skipped; a trailing ``\\x02`` is accepted."""
    out: dict[str, str] = {}
    for item in text.split(PROPERTY_SEPARATOR):
        name, sep, value = item.partition(NAME_VALUE_SEPARATOR)
        if sep and name and value:
            out[name] = value
    return out


_NEEDLES: dict[bytes, tuple[bytes, bytes]] = {}


def property_value(props: bytes, name: bytes) -> bytes | None:
    """``decode_properties(props.decode(errors="replace")).get(name)``, UTF-8 encoded,
    without parsing the other pairs (dispatch needs only TAGS, KEYS and UNIQ_KEY).

    A pair's name is everything up to the first ``\\x01`` of its ``\\x02``-separated
    segment, so ``name`` is the name of a segment starting with ``name\\x01``; the last such
    segment wins, as in the dict. Only when that one has an empty value (Java skips it and
    an earlier one counts) is the whole string parsed.
    """
    needles = _NEEDLES.get(name)
    if needles is None:
        needles = _NEEDLES[name] = (name + b"\x01", b"\x02" + name + b"\x01")
    at_start, inside = needles
    i = props.rfind(inside)
    if i >= 0:
        i += len(inside)
    elif props.startswith(at_start):
        i = len(at_start)
    else:
        return None
    j = props.find(b"\x02", i)
    value = props[i:] if j < 0 else props[i:j]
    if value:
        return value
    text = decode_properties(props.decode(errors="replace")).get(name.decode())
    return None if text is None else text.encode()


# ------------------------------------------------------------------------------- msg ids


def offset_msg_id(store_host: Host, commit_log_offset: int) -> str:
    """The offset message id: store address + port + commit-log offset, upper-case hex."""
    raw, port = store_host
    return (raw + _INT.pack(port) + _LONG.pack(commit_log_offset)).hex().upper()


def offset_msg_id_prefix(store_host: Host) -> str:
    """The part of every offset message id of ``store_host`` before the offset: append
    ``f"{offset:016X}"`` to it for the id (what ``offset_msg_id`` returns)."""
    raw, port = store_host
    return (raw + _INT.pack(port)).hex().upper()


def offset_msg_ids(prefix: str, offsets: list[int]) -> list[str]:
    """``offset_msg_id`` for each offset, ``prefix`` from ``offset_msg_id_prefix``: the
    offsets are packed and hexed together, then cut (faster than one format each)."""
    digits = struct.pack(f">{len(offsets)}q", *offsets).hex().upper()
    return [prefix + digits[i : i + 16] for i in range(0, len(digits), 16)]


def decode_offset_msg_id(msg_id: str) -> tuple[Host, int]:
    """(store host, commit-log offset) from an offset message id (32 or 56 hex digits).

    Raises:
        ValueError: not a valid offset message id.
    """
    if len(msg_id) not in (32, 56):
        raise ValueError(f"offset msgId {msg_id!r} must have 32 or 56 hex digits")
    raw = bytes.fromhex(msg_id)
    addr_len = len(raw) - 12
    (port,) = _INT.unpack_from(raw, addr_len)
    (offset,) = _LONG.unpack_from(raw, addr_len + 4)
    return (raw[:addr_len], port), offset


# ------------------------------------------------------------------------------ encoding


def _host_part(host: Host) -> bytes:
    raw, port = host
    return raw + _INT.pack(port)


def encode_record(
    *,
    topic: bytes,
    queue_id: int,
    body: bytes | memoryview,
    flag: int,
    properties: bytes,
    sys_flag: int,
    born_timestamp: int,
    born_host: Host,
    store_host: Host,
    reconsume_times: int = 0,
    prepared_transaction_offset: int = 0,
    crc: int | None = None,
) -> bytes:
    """One record with QUEUEOFFSET, PHYSICALOFFSET and STORETIMESTAMP left zero.

    The V6 sysFlag bits are derived from the host address lengths, as the store sets them.
    ``crc`` may be passed when the caller already has it (a batch entry).
    """
    sys_flag = record_sys_flag(sys_flag, born_host, store_host)
    total = record_length(len(body), len(topic), len(properties), sys_flag)
    if crc is None:
        crc = body_crc(body)
    if not sys_flag & (BORNHOST_V6_FLAG | STOREHOSTADDRESS_V6_FLAG):
        header = _HEADER_V4.pack(
            total,
            MESSAGE_MAGIC_CODE,
            crc,
            queue_id,
            flag,
            0,
            0,
            sys_flag,
            born_timestamp,
            born_host[0],
            born_host[1],
            0,
            store_host[0],
            store_host[1],
            reconsume_times,
            prepared_transaction_offset,
            len(body),
        )
    else:
        header = b"".join(
            (
                struct.pack(
                    ">iiiiiqqiq",
                    total,
                    MESSAGE_MAGIC_CODE,
                    crc,
                    queue_id,
                    flag,
                    0,
                    0,
                    sys_flag,
                    born_timestamp,
                ),
                _host_part(born_host),
                _LONG.pack(0),
                _host_part(store_host),
                struct.pack(">iqi", reconsume_times, prepared_transaction_offset, len(body)),
            )
        )
    return b"".join(
        (header, body, bytes((len(topic),)), topic, _SHORT.pack(len(properties)), properties)
    )


def encode_blank(remaining: int) -> bytes:
    """The END-OF-FILE record filling the rest of a segment: size and BLANK magic."""
    return RECORD_HEAD.pack(remaining, BLANK_MAGIC_CODE)


def patch_append_fields(
    buf: bytearray | memoryview,
    pos: int,
    *,
    queue_offset: int,
    commit_log_offset: int,
    store_timestamp: int,
    sys_flag: int,
) -> None:
    """Write the three fields known only at append time into a copied record."""
    _APPEND_FIELDS.pack_into(buf, pos + POS_QUEUE_OFFSET, queue_offset, commit_log_offset)
    _LONG.pack_into(buf, pos + store_timestamp_pos(sys_flag), store_timestamp)


# ------------------------------------------------------------------------------ decoding


class RecordInfo(NamedTuple):
    """What dispatch, recovery and queries need from a stored record."""

    total_size: int
    body_crc: int
    queue_id: int
    flag: int
    queue_offset: int
    commit_log_offset: int
    sys_flag: int
    born_timestamp: int
    store_timestamp: int
    reconsume_times: int
    prepared_transaction_offset: int
    body_offset: int  # from the record start
    body_length: int
    topic: str
    properties: str


class RecordError(ValueError):
    """A record that does not parse; ``reason`` says why (recovery stops there)."""


def read_int(buf: bytes | bytearray | memoryview, pos: int) -> int:
    return int(_INT.unpack_from(buf, pos)[0])


def read_long(buf: bytes | bytearray | memoryview, pos: int) -> int:
    return int(_LONG.unpack_from(buf, pos)[0])


def decode_record(
    buf: bytes | bytearray | memoryview, pos: int, *, check_crc: bool = False
) -> RecordInfo:
    """Parse the record at ``pos`` (whose magic must be MESSAGE_MAGIC_CODE).

    Raises:
        RecordError: wrong magic, a length that disagrees with the fields, a record running
            past the buffer, or (with ``check_crc``) a body CRC mismatch.
    """
    end_of_buf = len(buf)
    if pos + 88 > end_of_buf:
        raise RecordError("record header runs past the data")
    total, magic, crc, queue_id, flag, queue_offset, phys, sys_flag, born_ts = struct.unpack_from(
        ">iiiiiqqiq", buf, pos
    )
    if magic != MESSAGE_MAGIC_CODE:
        raise RecordError(f"magic {magic & 0xFFFFFFFF:#x} is not a message")
    p = pos + POS_BORN_HOST + host_bytes(sys_flag, BORNHOST_V6_FLAG)
    (store_ts,) = _LONG.unpack_from(buf, p)
    p += 8 + host_bytes(sys_flag, STOREHOSTADDRESS_V6_FLAG)
    if p + 16 > end_of_buf:
        raise RecordError("record header runs past the data")
    reconsume, prepared, body_len = struct.unpack_from(">iqi", buf, p)
    p += 16
    body_offset = p - pos
    if body_len < 0 or total <= 0 or pos + total > end_of_buf:
        raise RecordError(f"record size {total} / body length {body_len} out of range")
    p += body_len
    if p + 1 > pos + total:
        raise RecordError("body runs past the record")
    topic_len = buf[p]
    p += 1
    topic_raw = bytes(buf[p : p + topic_len])
    p += topic_len
    if p + 2 > pos + total:
        raise RecordError("topic runs past the record")
    (props_len,) = _SHORT.unpack_from(buf, p)
    p += 2
    expected = record_length(body_len, topic_len, props_len, sys_flag)
    if props_len < 0 or expected != total:
        raise RecordError(f"record size {total} disagrees with its fields ({expected})")
    props_raw = bytes(buf[p : p + props_len])
    if check_crc:
        start = pos + body_offset
        if body_crc(buf[start : start + body_len]) != crc:
            raise RecordError("body CRC mismatch")
    # The CRC does not cover them and Java accepts any bytes here: a record whose topic or
    # properties are not UTF-8 is still a valid record, not the end of the log.
    topic = topic_raw.decode(errors="replace")
    properties = props_raw.decode(errors="replace")
    return RecordInfo(
        total,
        crc,
        queue_id,
        flag,
        queue_offset,
        phys,
        sys_flag,
        born_ts,
        store_ts,
        reconsume,
        prepared,
        body_offset,
        body_len,
        topic,
        properties,
    )


# ------------------------------------------------------------------------ messages to put

_ANY_HOST: Host = (b"\x00\x00\x00\x00", 0)


@dataclass(slots=True)
class MessageInner:
    """A message as the broker hands it to the store (RocketMQ ``MessageExtBrokerInner``).

    ``properties`` is the encoded properties string exactly as it will be stored.
    """

    topic: str
    queue_id: int
    body: bytes | memoryview
    properties: str = ""
    flag: int = 0
    sys_flag: int = 0
    born_timestamp: int = 0
    born_host: Host = _ANY_HOST
    store_host: Host = _ANY_HOST
    reconsume_times: int = 0
    prepared_transaction_offset: int = 0
    wait_store_msg_ok: bool = True  # the WAIT property: sync flush waits only when true
    # The DELAY level as the broker read it (Java's in-memory delayTimeLevel). > 0 parks the
    # message in SCHEDULE_TOPIC_XXXX; the schedule service re-stores it with 0 even though
    # the stored DELAY property stays, as RocketMQ does.
    delay_level: int = 0


@dataclass(slots=True)
class MessageBatch:
    """A batch as sent (RocketMQ ``MessageExtBatch``): ``body`` is the batch encoding, one
    entry per message (TOTALSIZE, MAGIC, BODYCRC, FLAG, BODYLEN, BODY, PROPLEN, PROPERTIES);
    ``properties`` are batch-level and appended to every message's own."""

    topic: str
    queue_id: int
    body: bytes | memoryview
    properties: str = ""
    sys_flag: int = 0
    born_timestamp: int = 0
    born_host: Host = _ANY_HOST
    store_host: Host = _ANY_HOST
    wait_store_msg_ok: bool = True


_BATCH_ENTRY = struct.Struct(
    ">"
    "i"  # TOTALSIZE of this entry
    "i"  # MAGICCODE (unused)
    "i"  # BODYCRC (unused: the store computes it)
    "i"  # FLAG
    "i"  # BODYLEN, then BODY
)
assert _BATCH_ENTRY.size == 20


def split_batch(body: bytes | memoryview) -> list[tuple[int, memoryview, bytes]]:
    """(flag, body, properties) of each message of a batch body.

    Raises:
        RecordError: an entry's lengths do not fit the data.
    """
    view = memoryview(body)
    out: list[tuple[int, memoryview, bytes]] = []
    pos = 0
    end = len(view)
    while pos < end:
        if pos + _BATCH_ENTRY.size > end:
            raise RecordError(f"batch entry at {pos} is truncated")
        total, _magic, _crc, flag, body_len = _BATCH_ENTRY.unpack_from(view, pos)
        p = pos + _BATCH_ENTRY.size
        if body_len < 0 or p + body_len + 2 > end:
            raise RecordError(f"batch entry at {pos}: body length {body_len} out of range")
        msg_body = view[p : p + body_len]
        p += body_len
        (props_len,) = _SHORT.unpack_from(view, p)
        p += 2
        if props_len < 0 or p + props_len > end:
            raise RecordError(f"batch entry at {pos}: properties length out of range")
        props = bytes(view[p : p + props_len])
        p += props_len
        if total != p - pos:
            raise RecordError(f"batch entry at {pos}: TOTALSIZE {total} != {p - pos}")
        out.append((flag, msg_body, props))
        pos = p
    if not out:
        raise RecordError("empty batch")
    return out


def join_batch_properties(own: bytes, batch: bytes) -> bytes:
    """An inner message's properties followed by the batch-level ones, with a separator
    inserted only when the first part does not already end with one (as 4.9.8 does)."""
    if not batch:
        return own
    if own and not own.endswith(b"\x02"):
        return own + b"\x02" + batch
    return own + batch


class PropertiesTooLongError(ValueError):
    """A message's properties (with the batch-level ones) exceed MAX_PROPERTIES_BYTES."""

    def __init__(self, length: int) -> None:
        super().__init__(f"properties of {length} bytes exceed the 32 KB limit")
        self.length = length


class EncodedBatch(NamedTuple):
    """The records of a batch, built by ``encode_batch_records`` in ``buf[:total_bytes]``.

    Record i has TOTALSIZE ``sizes[i]`` and stores ``properties[i]``: the message's own
    properties followed by the batch-level ones.
    """

    buf: bytearray
    total_bytes: int
    sizes: list[int]
    properties: list[bytes]


def record_sys_flag(sys_flag: int, born_host: Host, store_host: Host) -> int:
    """``sys_flag`` with the V6 bits set from the host address lengths, as the store does."""
    if len(born_host[0]) == 16:
        sys_flag |= BORNHOST_V6_FLAG
    else:
        sys_flag &= ~BORNHOST_V6_FLAG
    if len(store_host[0]) == 16:
        sys_flag |= STOREHOSTADDRESS_V6_FLAG
    else:
        sys_flag &= ~STOREHOSTADDRESS_V6_FLAG
    return sys_flag


# The fixed part of a record up to BODYLENGTH, for each width of the two host fields.
_HEADERS = {
    (born, store): struct.Struct(f">iiiiiqqiq{born}siq{store}siiqi")
    for born in (4, 16)
    for store in (4, 16)
}
assert _HEADERS[4, 4].format == _HEADER_V4.format


def encode_batch_records(  # noqa: PLR0917 - one pass over a batch
    buf: bytearray,
    body: bytes | memoryview,
    batch_properties: bytes,
    topic: bytes,
    queue_id: int,
    sys_flag: int,
    born_timestamp: int,
    born_host: Host,
    store_host: Host,
    queue_offset: int,
    commit_log_offset: int,
    store_timestamp: int,
) -> EncodedBatch:
    """Parse a batch body (see ``split_batch``) and build its records, complete, from the
    start of ``buf`` (or of a larger buffer if ``buf`` is too small), in one pass.

    The first record is at ``commit_log_offset`` with ``queue_offset``, the next ones follow
    with consecutive queue offsets. ``sys_flag`` carries the V6 bits (``record_sys_flag``);
    properties are joined with the batch-level ones as ``join_batch_properties`` does;
    RECONSUMETIMES and PREPARED TRANSACTION OFFSET are 0. The bytes are those
    ``encode_record`` + ``patch_append_fields`` give for each message, built with one header
    ``pack_into`` per record and the body CRC computed once.

    Raises:
        RecordError: an entry's lengths do not fit the data, or there is none.
        PropertiesTooLongError: a message's properties, joined, exceed 32,767 bytes (the
            first such; raised only for a batch that otherwise parses).
    """
    data = body if isinstance(body, bytes) else bytes(body)
    view = memoryview(data)
    sizes: list[int] = []
    props_list: list[bytes] = []
    born_addr, born_port = born_host
    store_addr, store_port = store_host
    header = _HEADERS[len(born_addr), len(store_addr)]
    pack_header = header.pack_into
    header_bytes = header.size
    topic_len = len(topic)
    tail = struct.Struct(f">B{topic_len}sh")  # TOPICLENGTH, TOPIC, PROPERTIESLENGTH
    pack_tail = tail.pack_into
    tail_bytes = tail.size
    fixed = record_length(0, topic_len, 0, sys_flag)
    unpack_entry = _BATCH_ENTRY.unpack_from
    unpack_short = _SHORT.unpack_from
    entry_bytes = _BATCH_ENTRY.size
    crc32 = zlib.crc32
    separated = b"\x02" + batch_properties
    too_long = 0  # the first properties length over the limit: parse on, write no more
    out = 0  # where the next record goes in buf
    phys = commit_log_offset
    pos = 0
    end = len(data)
    while pos < end:
        if pos + entry_bytes > end:
            raise RecordError(f"batch entry at {pos} is truncated")
        total, _magic, _crc, flag, body_len = unpack_entry(data, pos)
        p = pos + entry_bytes
        if body_len < 0 or p + body_len + 2 > end:
            raise RecordError(f"batch entry at {pos}: body length {body_len} out of range")
        q = p + body_len
        (props_len,) = unpack_short(data, q)
        q += 2
        if props_len < 0 or q + props_len > end:
            raise RecordError(f"batch entry at {pos}: properties length out of range")
        next_pos = q + props_len
        if total != next_pos - pos:
            raise RecordError(f"batch entry at {pos}: TOTALSIZE {total} != {next_pos - pos}")
        pos = next_pos
        if not batch_properties:
            props = data[q:next_pos]
        elif props_len and data[next_pos - 1] != 2:  # not ending with \x02
            props = data[q:next_pos] + separated
        else:
            props = data[q:next_pos] + batch_properties
        props_len = len(props)
        if too_long or props_len > MAX_PROPERTIES_BYTES:
            too_long = too_long or props_len
            continue
        size = fixed + body_len + props_len
        if out + size > len(buf):
            grown = bytearray(max(2 * len(buf), out + size))
            grown[:out] = buf[:out]
            buf = grown
        message_body = view[p : p + body_len]
        pack_header(
            buf,
            out,
            size,
            MESSAGE_MAGIC_CODE,
            crc32(message_body) & 0x7FFFFFFF,
            queue_id,
            flag,
            queue_offset,
            phys,
            sys_flag,
            born_timestamp,
            born_addr,
            born_port,
            store_timestamp,
            store_addr,
            store_port,
            0,
            0,
            body_len,
        )
        b = out + header_bytes
        e = b + body_len
        buf[b:e] = message_body
        pack_tail(buf, e, topic_len, topic, props_len)
        e += tail_bytes
        buf[e : e + props_len] = props
        sizes.append(size)
        props_list.append(props)
        out += size
        phys += size
        queue_offset += 1
    if too_long:
        raise PropertiesTooLongError(too_long)
    if not sizes:
        raise RecordError("empty batch")
    return EncodedBatch(buf, out, sizes, props_list)


def patch_physical_offsets(buf: bytearray, sizes: list[int], commit_log_offset: int) -> None:
    """Rewrite PHYSICALOFFSET of consecutive records at the start of ``buf`` (of these
    sizes) for a first record at ``commit_log_offset``."""
    pos = 0
    pack = _LONG.pack_into
    for size in sizes:
        pack(buf, pos + POS_PHYSICAL_OFFSET, commit_log_offset + pos)
        pos += size


_VERIFY = struct.Struct(
    ">"
    "i"  # 0  TOTALSIZE
    "i"  # 4  MAGICCODE
    "i"  # 8  BODYCRC
    "8x"  # 12 QUEUEID, FLAG
    "q"  # 20 QUEUEOFFSET
    "q"  # 28 PHYSICALOFFSET
    "i"  # 36 SYSFLAG
    "8x"  # 40 BORNTIMESTAMP
    "8x"  # 48 BORNHOST (IPv4)
    "8x"  # 56 STORETIMESTAMP
    "8x"  # 64 STOREHOST (IPv4)
    "12x"  # 72 RECONSUMETIMES, PREPARED TRANSACTION OFFSET
    "i"  # 84 BODYLENGTH (for IPv4 hosts; read again for IPv6)
)
assert _VERIFY.size == 88


def verify_record(
    buf: bytes | bytearray | memoryview, pos: int, commit_log_offset: int, *, check_crc: bool
) -> int:
    """Check the record at ``pos`` the way recovery must, without decoding its strings.

    Returns its TOTALSIZE, or raises RecordError saying why it does not verify: wrong magic,
    a PHYSICALOFFSET other than ``commit_log_offset``, lengths that disagree with TOTALSIZE
    or run past the buffer, or (with ``check_crc``) a body CRC mismatch. Recovery of a
    normally closed store runs this over every record of its last segments, so it does the
    least work that still verifies each one.
    """
    end_of_buf = len(buf)
    if pos + 88 > end_of_buf:
        raise RecordError("record header runs past the data")
    # One unpack reads every field checked here (for IPv4 hosts, the common case).
    total, magic, crc, _queue_offset, phys, sys_flag, body_len = _VERIFY.unpack_from(buf, pos)
    if magic != MESSAGE_MAGIC_CODE:
        raise RecordError(f"magic {magic & 0xFFFFFFFF:#x} is not a message")
    if total <= 0 or pos + total > end_of_buf:
        raise RecordError(f"record size {total} runs past the data")
    if phys != commit_log_offset:
        raise RecordError(f"record says it is at {phys}, found at {commit_log_offset}")
    body_pos = 88
    if sys_flag & (BORNHOST_V6_FLAG | STOREHOSTADDRESS_V6_FLAG):
        body_pos = 84
        if sys_flag & BORNHOST_V6_FLAG:
            body_pos += 12
        if sys_flag & STOREHOSTADDRESS_V6_FLAG:
            body_pos += 12
        if pos + body_pos + 4 > end_of_buf:
            raise RecordError("record header runs past the data")
        (body_len,) = _INT.unpack_from(buf, pos + body_pos)
        body_pos += 4
    topic_pos = pos + body_pos + body_len
    if body_len < 0 or topic_pos + 3 > pos + total:
        raise RecordError(f"body length {body_len} runs past the record")
    topic_len = buf[topic_pos]
    if topic_pos + 1 + topic_len + 2 > pos + total:
        raise RecordError("topic runs past the record")
    (props_len,) = _SHORT.unpack_from(buf, topic_pos + 1 + topic_len)
    if props_len < 0 or record_length(body_len, topic_len, props_len, sys_flag) != total:
        raise RecordError(f"record size {total} disagrees with its fields")
    if check_crc and zlib.crc32(buf[pos + body_pos : topic_pos]) & 0x7FFFFFFF != crc:
        raise RecordError("body CRC mismatch")
    return int(total)


def inner_from_record(record: bytes) -> tuple[RecordInfo, MessageInner]:
    """A stored record (as ``look_message_by_offset`` returns it) back as a message to store
    again: same body, flag, properties string, sysFlag, born time and host, reconsume times.
    The caller sets topic, queue, store host and what else changes.

    Raises:
        RecordError: the bytes are not one record.
    """
    info = decode_record(record, 0)
    born_len = 16 if info.sys_flag & BORNHOST_V6_FLAG else 4
    born_host: Host = (record[48 : 48 + born_len], _INT.unpack_from(record, 48 + born_len)[0])
    body = record[info.body_offset : info.body_offset + info.body_length]
    inner = MessageInner(
        topic=info.topic,
        queue_id=info.queue_id,
        body=body,
        properties=info.properties,
        flag=info.flag,
        sys_flag=info.sys_flag,
        born_timestamp=info.born_timestamp,
        born_host=born_host,
        reconsume_times=info.reconsume_times,
        prepared_transaction_offset=info.prepared_transaction_offset,
    )
    return info, inner

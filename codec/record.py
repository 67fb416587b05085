"""The commit-log record layout, byte by byte, and the helpers that read and write it.

RocketMQ counterpart: ``CommitLog.MessageExtEncoder``, ``MessageDecoder`` (decode, the
record's fields) and ``calMsgLength``. docs/store-format.md §2 is the reference.

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
append, record by record with everything packed at once (``codec.batch``).
"""

from __future__ import annotations

import contextlib
import socket
import struct
import zlib
from typing import NamedTuple

from codec import _ext
from codec.sysflag import BORNHOST_V6_FLAG, STOREHOSTADDRESS_V6_FLAG

MESSAGE_MAGIC_CODE = -626843481  # 0xDAA320A7
BLANK_MAGIC_CODE = -875286124  # 0xCBD43194

MAX_TOPIC_BYTES = 127
MAX_PROPERTIES_BYTES = 32767

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


def _header_format(born: int, store: int) -> str:
    """The fixed part of a record, TOTALSIZE to BODYLENGTH, for ``born`` and ``store``
    address bytes (4, or 16 with the V6 flags); offsets for IPv4 hosts."""
    return (
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
        f"{born}s"  # 48 BORNHOST address
        "i"  # 52 BORNHOST port
        "q"  # 56 STORETIMESTAMP
        f"{store}s"  # 64 STOREHOST address
        "i"  # 68 STOREHOST port
        "i"  # 72 RECONSUMETIMES
        "q"  # 76 PREPARED TRANSACTION OFFSET
        "i"  # 84 BODYLENGTH
    )


# (born, store) address widths → the packer of the fixed part; single records and batches
# pack with these.
RECORD_HEADERS = {
    (born, store): struct.Struct(_header_format(born, store))
    for born in (4, 16)
    for store in (4, 16)
}
assert RECORD_HEADERS[4, 4].size == 88 and RECORD_HEADERS[16, 16].size == 112

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


# ------------------------------------------------------------------------------ encoding


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
    header = RECORD_HEADERS[
        16 if sys_flag & BORNHOST_V6_FLAG else 4, 16 if sys_flag & STOREHOSTADDRESS_V6_FLAG else 4
    ].pack(
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
    # Long because it runs per record in recovery and in dispatch's read-back: reading the
    # topic and properties in a function of their own made a pure-Python decode 7-9% slower
    # (M13: `python -m tests.bench.codec_bench`, row "decode_record", pure column, this
    # function against that variant of it in the same run). Most of the length is
    # RecordInfo's fields.
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


class PropertiesTooLongError(ValueError):
    """A message's properties (with the batch-level ones) exceed MAX_PROPERTIES_BYTES."""

    def __init__(self, length: int) -> None:
        super().__init__(f"properties of {length} bytes exceed the 32 KB limit")
        self.length = length


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


# The compiled speedups (codec/_cbatch.pyx) when built and not disabled; the pure functions
# stay importable as <name>_py, the reference the compiled ones are tested against.
encode_record_py = encode_record
patch_append_fields_py = patch_append_fields
decode_record_py = decode_record
verify_record_py = verify_record

if not _ext.DISABLED:
    with contextlib.suppress(ImportError):
        from codec._cbatch import (
            decode_record,
            encode_record,
            patch_append_fields,
            verify_record,
        )

"""A batch of messages: its entries as a producer sends them, and their records.

RocketMQ counterpart: ``MessageDecoder.encodeMessage`` / ``encodeMessages`` (the client's
batch body, one entry per message), ``MessageDecoder.decodeMessages`` (the broker reading
it back) and ``CommitLog.MessageExtBatchEncoder`` (the records the broker appends). An
entry is TOTALSIZE, MAGICCODE, BODYCRC, FLAG (ints), BODYLEN + BODY, PROPLEN (short) +
PROPERTIES; Java's client leaves MAGICCODE and BODYCRC 0, and the broker ignores them.
"""

from __future__ import annotations

import contextlib
import struct
import zlib
from typing import NamedTuple

from codec import _ext
from codec.record import (
    MAX_PROPERTIES_BYTES,
    MESSAGE_MAGIC_CODE,
    RECORD_HEADERS,
    Host,
    PropertiesTooLongError,
    RecordError,
    record_length,
)

_SHORT = struct.Struct(">h")

_BATCH_ENTRY = struct.Struct(
    ">"
    "i"  # TOTALSIZE of this entry
    "i"  # MAGICCODE (unused)
    "i"  # BODYCRC (unused: the store computes it)
    "i"  # FLAG
    "i"  # BODYLEN, then BODY
)
assert _BATCH_ENTRY.size == 20


def encode_batch_entry(flag: int, body: bytes, properties: bytes) -> bytes:
    """One message's entry of a batch body (``MessageDecoder.encodeMessage``)."""
    return b"".join(
        (
            _BATCH_ENTRY.pack(
                _BATCH_ENTRY.size + len(body) + 2 + len(properties), 0, 0, flag, len(body)
            ),
            body,
            _SHORT.pack(len(properties)),
            properties,
        )
    )


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


class EncodedBatch(NamedTuple):
    """The records of a batch, built by ``encode_batch_records`` in ``buf[:total_bytes]``.

    Record i has TOTALSIZE ``sizes[i]`` and stores ``properties[i]``: the message's own
    properties followed by the batch-level ones.
    """

    buf: bytearray
    total_bytes: int
    sizes: list[int]
    properties: list[bytes]


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
    # Long because it is one pass over the batch with every lookup bound to a local: moving
    # an entry's parsing into a function called per record made this 8-13% slower in pure
    # Python (M13: `python -m tests.bench.codec_bench`, row "encode_batch_records, 32 x 1 KiB",
    # pure column, this function against that variant of it in the same run).
    data = body if isinstance(body, bytes) else bytes(body)
    view = memoryview(data)
    sizes: list[int] = []
    props_list: list[bytes] = []
    born_addr, born_port = born_host
    store_addr, store_port = store_host
    header = RECORD_HEADERS[len(born_addr), len(store_addr)]
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


# The compiled speedups (codec/_cbatch.pyx) when built and not disabled; the pure functions
# stay importable as <name>_py, the reference the compiled ones are tested against.
encode_batch_entry_py = encode_batch_entry
split_batch_py = split_batch
encode_batch_records_py = encode_batch_records

if not _ext.DISABLED:
    with contextlib.suppress(ImportError):
        from codec._cbatch import encode_batch_entry, encode_batch_records, split_batch

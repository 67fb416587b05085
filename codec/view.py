"""Stored records as a reader receives them: the body of a pull or query reply.

RocketMQ counterpart: ``MessageDecoder.decodesBatch`` / ``decode`` on the client side
(store-format.md §2), which builds one ``MessageExt`` per record: its fields, the
properties parsed, the body inflated, the offset message id built from the store host.

Here a record is decoded lazily. ``decode_records`` walks the records, checks every length
against TOTALSIZE (a malformed record raises there, never later) and unpacks the fixed
header fields; each view keeps the reply body and where its record starts. The rest (body,
topic, properties, tags, keys, the ids, the hosts: ``LAZY_FIELDS``) is decoded from the
record the first time it is read, and kept in the instance: a consumer pays for the fields
it reads. The views of one reply share its bytes, which live as long as any of them.

``MessageExt`` is a dataclass of the 19 fields: built from keyword arguments too, compared,
copied, replaced and shown by its fields (read, so decoded); every field is assignable and
changes only that copy. A lazy field is a non-data descriptor on the class that stores what
it decodes in the instance, where later reads find it at plain attribute speed; so the
class has an instance ``__dict__``, not slots (``properties``, which ``put_properties`` must
see decoded or not, is a data descriptor over ``_props``).
"""

from __future__ import annotations

import contextlib
import functools
import socket
import struct
import zlib
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import TypeVar, cast

from codec import _ext
from codec.properties import (
    PROPERTY_KEYS,
    PROPERTY_TAGS,
    PROPERTY_UNIQ_KEY,
    decode_properties,
)
from codec.record import RecordError
from codec.sysflag import (
    BORNHOST_V6_FLAG,
    COMPRESSED_FLAG,
    COMPRESSION_MASK,
    COMPRESSION_ZLIB,
    STOREHOSTADDRESS_V6_FLAG,
)

_HEAD = struct.Struct(">iiiiiqqiq")  # TOTALSIZE .. BORNTIMESTAMP (48 bytes)
_INT = struct.Struct(">i")
_LONG = struct.Struct(">q")
_TAIL = struct.Struct(">iqi")  # RECONSUMETIMES, PREPAREDTRANSACTIONOFFSET, BODYLENGTH
# Both hosts IPv4 (the usual case): TOTALSIZE .. BODYLENGTH in one unpack, the hosts skipped.
_HEAD_V4 = struct.Struct(">iiiiiqqiq8xq8xiqi")
assert _HEAD.size == 48 and _TAIL.size == 16 and _HEAD_V4.size == 88
# SYSFLAG's low byte → where BODYLENGTH is, from the record start (the V6 bits widen hosts)
_BODY_LENGTH_AT = tuple(
    84 + (12 if f & BORNHOST_V6_FLAG else 0) + (12 if f & STOREHOSTADDRESS_V6_FLAG else 0)
    for f in range(256)
)

# The fields decoded on first read (the others are unpacked with the header).
LAZY_FIELDS = (
    "topic",
    "body",
    "tags",
    "keys",
    "properties",
    "msg_id",
    "offset_msg_id",
    "born_host",
    "store_host",
)


@dataclass
class MessageExt:
    """A stored message as a reader sees it (RocketMQ ``MessageExt``).

    Built by ``decode_records`` from a reply body (the fields in ``LAZY_FIELDS`` decoded
    from the record when first read), or from keyword arguments. Changing a field changes
    only this copy; ``==`` compares the fields.
    """

    topic: str
    body: bytes
    tags: str | None
    keys: list[str]
    properties: dict[str, str]
    msg_id: str
    offset_msg_id: str
    queue_id: int
    queue_offset: int
    commit_log_offset: int
    born_timestamp: int
    store_timestamp: int
    born_host: str
    store_host: str
    reconsume_times: int
    sys_flag: int
    flag: int
    broker_name: str
    body_crc: int

    # Not fields (no annotation): class defaults, set per instance by decode_records. The
    # record: (the reply body, where the record starts in it); none for a view built from
    # fields. One attribute, not two: a lazy field's first read fetches it once.
    _rec = cast("tuple[bytes, int] | None", None)
    # ``properties`` once decoded or set, and properties put before they were decoded.
    _props = cast("dict[str, str] | None", None)
    _extra = cast("dict[str, str] | None", None)
    # The record's own properties, parsed by the pure lazy fields (never handed out).
    _rprops = cast("dict[str, str] | None", None)

    def __init_subclass__(cls, **kwargs: object) -> None:
        super().__init_subclass__(**kwargs)
        _share_keys(cls)

    def __getstate__(self) -> object:
        """Pickled and copied decoded: every field read, the record left behind (one view
        must not carry its whole reply along)."""
        for name in LAZY_FIELDS:
            getattr(self, name)
        state = super().__getstate__()  # the instance's dict, or (dict, slots) with slots
        if isinstance(state, dict):
            return _without_record(state)
        if isinstance(state, tuple) and isinstance(state[0], dict):
            return (_without_record(state[0]), *state[1:])
        return state

    @property
    def store_size(self) -> int:
        """The record's size in the commit log (``MessageExt.storeSize``): its first four
        bytes; 0 for a view built from fields."""
        rec = self._rec
        if rec is None:
            return 0
        body, pos = rec
        return int.from_bytes(body[pos : pos + 4], "big")

    @property
    def prepared_transaction_offset(self) -> int:
        """The record's PREPAREDTRANSACTIONOFFSET (a committed transactional message: where
        its half message is); 0 for a view built from fields. After the hosts, whose width
        the sys flag gives (IPv6: 20 bytes, else 8)."""
        rec = self._rec
        if rec is None:
            return 0
        body, pos = rec
        sys_flag = int.from_bytes(body[pos + 36 : pos + 40], "big")
        at = pos + 48 + (20 if sys_flag & 0x10 else 8) + 8 + (20 if sys_flag & 0x20 else 8) + 4
        return int.from_bytes(body[at : at + 8], "big", signed=True)

    def put_properties(self, extra: Mapping[str, str]) -> None:
        """``properties.update(extra)`` (``MessageAccessor.putProperty``), without decoding
        the record's properties now: they are added when the properties are first read.
        Tags, keys and the message id stay the record's, as they would after an update."""
        props = self._props
        if props is not None:
            props.update(extra)
        elif self._extra is None:
            self._extra = dict(extra)
        else:
            self._extra.update(extra)


V = TypeVar("V", bound=MessageExt)


def _without_record(attrs: dict[str, object]) -> dict[str, object]:
    return {k: v for k, v in attrs.items() if k not in ("_rec", "_rprops")}


# Every name a view keeps in its instance: the header fields as decode_records sets them,
# its record, then the lazy fields (``properties`` lives in ``_props``).
_INSTANCE_KEYS = (
    "body_crc",
    "queue_id",
    "flag",
    "queue_offset",
    "commit_log_offset",
    "sys_flag",
    "born_timestamp",
    "store_timestamp",
    "reconsume_times",
    "broker_name",
    "_rec",
    "topic",
    "body",
    "tags",
    "keys",
    "_props",
    "_extra",
    "_rprops",
    "msg_id",
    "offset_msg_id",
    "born_host",
    "store_host",
)


def _share_keys(cls: type[MessageExt]) -> None:
    """Enter every name in ``_INSTANCE_KEYS`` into the instance keys ``cls`` shares (one
    probe instance), before its instances are made. CPython sizes a new instance's inline
    attribute values by the keys its class shares then (3.11+): a lazy field stored later
    under a name not yet shared turns that instance's values into a dict of its own, costly
    to make and slower to read."""
    try:
        probe = object.__new__(cls)
    except TypeError:  # abstract: it has no instances
        return
    for name in _INSTANCE_KEYS:
        with contextlib.suppress(AttributeError, TypeError):  # a subclass's slot or property
            object.__setattr__(probe, name, None)


# ------------------------------------------------------------------------------- hosts


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


# ----------------------------------------------------------------------------- records


def decode_records(body: bytes | memoryview, broker_name: str, make: type[V]) -> list[V]:
    """The records of a pull (or query) reply as views of class ``make`` (``MessageExt``
    or a subclass, instantiated without ``__init__``): the header fields set, the
    ``LAZY_FIELDS`` decoded from the record on first read (the body inflated).

    Raises:
        RecordError: the body is truncated or not in the record layout (every length is
            checked here, so reading a field later does not fail).
    """
    # Long because it is one pass over the reply: moving a record's length checks into a
    # function called per record slowed a pure-Python pull of 32 by 2-6% in three of four
    # paired runs (M13: `python -m tests.bench.codec_bench`, row "decode_records, per pull
    # of 32", pure column, this function against that variant of it in the same run).
    rec = body if isinstance(body, bytes) else bytes(body)
    new = object.__new__
    out: list[V] = []
    append = out.append
    pos = 0
    end = len(rec)
    while pos < end:
        if end - pos < _HEAD.size:
            raise RecordError(f"truncated record header at byte {pos}")
        flags = rec[pos + 39]  # SYSFLAG's low byte: the V6 bits say where the body starts
        head = _BODY_LENGTH_AT[flags] + 4
        (total,) = _INT.unpack_from(rec, pos)
        record_end = pos + total
        if total < head or record_end > end:
            raise RecordError(f"record at byte {pos} claims {total} bytes")
        view = new(make)
        if head == 88:
            (
                _,
                _magic,
                view.body_crc,
                view.queue_id,
                view.flag,
                view.queue_offset,
                view.commit_log_offset,
                view.sys_flag,
                view.born_timestamp,
                view.store_timestamp,
                view.reconsume_times,
                _prepared,
                body_len,
            ) = _HEAD_V4.unpack_from(rec, pos)
        else:
            (
                _,
                _magic,
                view.body_crc,
                view.queue_id,
                view.flag,
                view.queue_offset,
                view.commit_log_offset,
                view.sys_flag,
                view.born_timestamp,
            ) = _HEAD.unpack_from(rec, pos)
            p = pos + (68 if flags & BORNHOST_V6_FLAG else 56)  # STORETIMESTAMP
            (view.store_timestamp,) = _LONG.unpack_from(rec, p)
            p += 28 if flags & STOREHOSTADDRESS_V6_FLAG else 16  # RECONSUMETIMES
            view.reconsume_times, _prepared, body_len = _TAIL.unpack_from(rec, p)
        p = pos + head + body_len  # TOPICLENGTH
        if body_len < 0 or p + 3 > record_end:
            raise RecordError(f"record at byte {pos}: body length {body_len} overruns it")
        p += 1 + rec[p]  # PROPERTIESLENGTH
        if p + 2 > record_end:
            raise RecordError(f"record at byte {pos}: topic length overruns it")
        props_len = (rec[p] << 8) | rec[p + 1]
        fields_end = p + 2 + props_len
        if props_len > 0x7FFF or fields_end > record_end:
            raise RecordError(f"record at byte {pos}: properties length overruns it")
        if fields_end != record_end:
            # the next record is found by TOTALSIZE: one that claims more than its fields
            # would hide the records in its tail
            raise RecordError(
                f"record at byte {pos}: its fields end at byte {fields_end}, "
                f"TOTALSIZE says {record_end}"
            )
        view.broker_name = broker_name
        view._rec = (rec, pos)
        append(view)
        pos = record_end
    return out


# ------------------------------------------------------------------ lazy fields (pure)
#
# Each reads the record of a view decode_records made: ``rec`` the reply body, ``at`` where
# the record starts. Its lengths were checked then, so none of these can fail.


def _raw_properties(rec: bytes, at: int) -> bytes:
    p = at + _BODY_LENGTH_AT[rec[at + 39]]
    p += 4 + _INT.unpack_from(rec, p)[0]
    p += 3 + rec[p]
    return rec[p : p + ((rec[p - 2] << 8) | rec[p - 1])]


def _record_properties(view: MessageExt, rec: bytes, at: int) -> dict[str, str]:
    """The record's properties, parsed once for tags, keys, the message id and
    ``properties`` (which gets a copy): what the record says, whatever is done to
    ``properties`` later."""
    parsed = view._rprops
    if parsed is None:
        parsed = decode_properties(_raw_properties(rec, at).decode("utf-8", "replace"))
        view._rprops = parsed
    return parsed


def _host_raw(rec: bytes, at: int, store: bool) -> bytes:
    flags = rec[at + 39]
    p = at + 48
    if store:
        p += 28 if flags & BORNHOST_V6_FLAG else 16
        return rec[p : p + (20 if flags & STOREHOSTADDRESS_V6_FLAG else 8)]
    return rec[p : p + (20 if flags & BORNHOST_V6_FLAG else 8)]


def _offset_msg_id(view: MessageExt, rec: bytes, at: int) -> str:
    (offset,) = _LONG.unpack_from(rec, at + 28)
    return f"{_host_info(_host_raw(rec, at, True))[1]}{offset:016X}"


def _topic(view: MessageExt, rec: bytes, at: int) -> str:
    p = at + _BODY_LENGTH_AT[rec[at + 39]]
    p += 4 + _INT.unpack_from(rec, p)[0]  # TOPICLENGTH
    return rec[p + 1 : p + 1 + rec[p]].decode("utf-8", "replace")


def _body(view: MessageExt, rec: bytes, at: int) -> bytes:
    p = at + _BODY_LENGTH_AT[rec[at + 39]]
    payload = rec[p + 4 : p + 4 + _INT.unpack_from(rec, p)[0]]
    (sys_flag,) = _INT.unpack_from(rec, at + 36)
    return inflate_body(payload, sys_flag) if sys_flag & COMPRESSED_FLAG else payload


def _tags(view: MessageExt, rec: bytes, at: int) -> str | None:
    return _record_properties(view, rec, at).get(PROPERTY_TAGS)


def _keys(view: MessageExt, rec: bytes, at: int) -> list[str]:
    keys = _record_properties(view, rec, at).get(PROPERTY_KEYS)
    return [k for k in keys.split(" ") if k] if keys else []


def _msg_id(view: MessageExt, rec: bytes, at: int) -> str:
    """UNIQ_KEY, the id the producer gave it; else (a message sent without one) the
    offset message id."""
    uniq = _record_properties(view, rec, at).get(PROPERTY_UNIQ_KEY)
    return uniq or _offset_msg_id(view, rec, at)


def _born_host(view: MessageExt, rec: bytes, at: int) -> str:
    return _host_info(_host_raw(rec, at, False))[0]


def _store_host(view: MessageExt, rec: bytes, at: int) -> str:
    return _host_info(_host_raw(rec, at, True))[0]


_DECODERS: dict[str, Callable[[MessageExt, bytes, int], object]] = {
    "topic": _topic,
    "body": _body,
    "tags": _tags,
    "keys": _keys,
    "msg_id": _msg_id,
    "offset_msg_id": _offset_msg_id,
    "born_host": _born_host,
    "store_host": _store_host,
}


class _Lazy:
    """A field decoded from the view's record on first read, then kept in the instance:
    a non-data descriptor, so later reads and any assignment never come here."""

    __slots__ = ("decode", "name")

    def __init__(self, name: str) -> None:
        self.name = name
        self.decode = _DECODERS[name]

    def __get__(self, view: MessageExt | None, owner: type | None = None) -> object:
        if view is None:
            return self
        record = view._rec
        if record is None:  # a view built from fields, this one deleted
            raise AttributeError(f"{type(view).__name__!r} object has no attribute {self.name!r}")
        value = self.decode(view, *record)
        setattr(view, self.name, value)
        return value


def _get_properties(view: MessageExt) -> dict[str, str]:
    props = view._props
    if props is None:
        record = view._rec
        if record is None:
            raise AttributeError(f"{type(view).__name__!r} object has no attribute 'properties'")
        props = dict(_record_properties(view, *record))
        extra = view._extra
        if extra is not None:
            props.update(extra)
            view._extra = None
        view._props = props
    return props


def _set_properties(view: MessageExt, value: dict[str, str]) -> None:
    view._props = value
    if view._extra is not None:
        view._extra = None  # replaced: what was put is gone, as it would be after an update


def attach_lazy_fields(cls: type[MessageExt]) -> None:
    """Install on ``cls`` the descriptors that decode ``LAZY_FIELDS`` on first read:
    ``properties`` is a property (its value kept in ``_props``, so that ``put_properties``
    can tell whether it was decoded), the others non-data descriptors."""
    for name in LAZY_FIELDS:
        if name == "properties":
            setattr(cls, name, property(_get_properties, _set_properties))
        else:
            setattr(cls, name, _Lazy(name))


# ------------------------------------------------------------------------------ bodies


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


# The compiled speedups (codec/_cview.pyx) when built and not disabled; the pure functions
# stay importable as <name>_py, the reference the compiled ones are tested against.
decode_records_py = decode_records
attach_lazy_fields_py = attach_lazy_fields
if not _ext.DISABLED:
    with contextlib.suppress(ImportError):
        from codec._cview import attach_lazy_fields, decode_records

attach_lazy_fields(MessageExt)
_share_keys(MessageExt)

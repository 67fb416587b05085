# cython: language_level=3
"""Records decoded into views, compiled: typed twins of ``decode_records`` and
``attach_lazy_fields`` of codec/view.py (RocketMQ ``MessageDecoder.decodesBatch``; the
record layout is in codec/record.py, the lazy design in codec/view.py).

``decode_records`` walks the reply in C: every length checked against TOTALSIZE with the
pure function's errors, the header fields unpacked from the bytes, one instance of the
view class made per record (without ``__init__``, as ``object.__new__`` does). The lazy
fields are C descriptors: the first read of a field decodes it from the record straight
from the reply's bytes (no slices but the value's own) and keeps it in the instance, where
later reads find it without coming here. Views made by either decoder carry the same state
(``_rec``: the reply body and the record's offset), so either set of descriptors reads
them.

What the descriptors return is what the pure ones return: the same UTF-8 decoding with
replacement, the properties parsed as ``codec.properties.decode_properties`` parses them
(here from the bytes, piece by piece; the names RocketMQ sets as interned strings) and, for
a pair with an empty value, ``property_value`` (compiled or pure, as bound), bodies
inflated and hosts formatted by the pure module's helpers; the last topic is kept, as a
consumer reads one topic over and over. A view class that is not a ``MessageExt`` is handed
to the pure decoder, so its result and errors are the pure ones by construction.
"""

from cpython.bytes cimport PyBytes_AS_STRING, PyBytes_FromStringAndSize, PyBytes_GET_SIZE
from cpython.unicode cimport PyUnicode_DecodeASCII, PyUnicode_DecodeUTF8
from libc.stdint cimport int32_t, int64_t, uint32_t, uint64_t
from libc.string cimport memchr, memcmp

import sys

# view.py imports this module at its end, when everything used here is defined there.
import codec.view as _view
from codec.properties import property_value as _property_value
from codec.record import RecordError

from codec._wire cimport get32 as _i32
from codec._wire cimport get64 as _i64
from codec._wire cimport value_start as _value_start

cdef extern from *:
    """
    /* object.__new__(cls): an instance without __init__. */
    static PyObject* aerolite_new_instance(PyObject* cls, PyObject* no_args) {
        return PyBaseObject_Type.tp_new((PyTypeObject*)cls, no_args, NULL);
    }
    """
    object aerolite_new_instance(object cls, object no_args)

cdef enum:
    # codec.sysflag
    COMPRESSED_FLAG = 0x1
    BORNHOST_V6_FLAG = 0x10
    STOREHOSTADDRESS_V6_FLAG = 0x20

cdef enum:
    # the lazy fields but properties (codec.view.LAZY_FIELDS)
    F_TOPIC
    F_BODY
    F_TAGS
    F_KEYS
    F_MSG_ID
    F_OFFSET_MSG_ID
    F_BORN_HOST
    F_STORE_HOST

_KINDS = {
    "topic": F_TOPIC,
    "body": F_BODY,
    "tags": F_TAGS,
    "keys": F_KEYS,
    "msg_id": F_MSG_ID,
    "offset_msg_id": F_OFFSET_MSG_ID,
    "born_host": F_BORN_HOST,
    "store_host": F_STORE_HOST,
}


cdef inline Py_ssize_t _body_length_at(unsigned char flags) noexcept nogil:
    """Where BODYLENGTH is, from the record start: the V6 bits widen the hosts."""
    cdef Py_ssize_t at = 84
    if flags & BORNHOST_V6_FLAG:
        at += 12
    if flags & STOREHOSTADDRESS_V6_FLAG:
        at += 12
    return at


# ------------------------------------------------------------------------------ records


def decode_records(body, broker_name, make):
    """The records of a pull (or query) reply as views of class ``make`` (see
    codec.view.decode_records)."""
    cdef bytes rec
    cdef const unsigned char* d
    cdef Py_ssize_t pos = 0
    cdef Py_ssize_t end, head, total, record_end, p, body_len, props_len, fields_end
    cdef unsigned char flags
    cdef list out = []
    if not (isinstance(make, type) and issubclass(make, _view.MessageExt)):
        return _view.decode_records_py(body, broker_name, make)
    rec = body if isinstance(body, bytes) else bytes(body)
    d = <const unsigned char*>PyBytes_AS_STRING(rec)
    end = PyBytes_GET_SIZE(rec)
    while pos < end:
        if end - pos < 48:
            raise RecordError(f"truncated record header at byte {pos}")
        flags = d[pos + 39]
        head = _body_length_at(flags) + 4
        total = _i32(d + pos)
        record_end = pos + total
        if total < head or record_end > end:
            raise RecordError(f"record at byte {pos} claims {total} bytes")
        body_len = _i32(d + pos + head - 4)
        p = pos + head + body_len  # TOPICLENGTH
        if body_len < 0 or p + 3 > record_end:
            raise RecordError(f"record at byte {pos}: body length {body_len} overruns it")
        p += 1 + d[p]  # PROPERTIESLENGTH
        if p + 2 > record_end:
            raise RecordError(f"record at byte {pos}: topic length overruns it")
        props_len = (d[p] << 8) | d[p + 1]
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
        view = aerolite_new_instance(make, ())
        view.body_crc = _i32(d + pos + 8)
        view.queue_id = _i32(d + pos + 12)
        view.flag = _i32(d + pos + 16)
        view.queue_offset = _i64(d + pos + 20)
        view.commit_log_offset = _i64(d + pos + 28)
        view.sys_flag = _i32(d + pos + 36)
        view.born_timestamp = _i64(d + pos + 40)
        p = pos + (68 if flags & BORNHOST_V6_FLAG else 56)  # STORETIMESTAMP
        view.store_timestamp = _i64(d + p)
        p += 28 if flags & STOREHOSTADDRESS_V6_FLAG else 16  # RECONSUMETIMES
        view.reconsume_times = _i32(d + p)
        view.broker_name = broker_name
        view._rec = (rec, pos)
        out.append(view)
        pos = record_end
    return out


# -------------------------------------------------------------------------- lazy fields


cdef struct Layout:
    Py_ssize_t at  # the record
    Py_ssize_t body  # BODY
    Py_ssize_t topic  # TOPICLENGTH
    Py_ssize_t props  # PROPERTIES
    Py_ssize_t props_len


cdef bytes _layout(object record, Layout* out):
    """The reply body of a view's ``_rec`` (body, offset), and where the parts of its record
    are, the lengths checked again (cheap here): ``_rec`` is private, but a bad one must
    raise, not read past the bytes."""
    cdef bytes rec
    cdef const unsigned char* d
    cdef Py_ssize_t end, at, head, record_end, p, body_len
    if type(record) is not tuple or len(<tuple>record) != 2:
        raise TypeError(f"a view's record is (bytes, int), not {record!r:.40}")
    rec = <bytes?>(<tuple>record)[0]
    at = (<tuple>record)[1]
    d = <const unsigned char*>PyBytes_AS_STRING(rec)
    end = PyBytes_GET_SIZE(rec)
    if at < 0 or end - at < 48:
        raise RecordError(f"no record at byte {at}")
    head = _body_length_at(d[at + 39]) + 4
    record_end = at + _i32(d + at)
    if record_end < at + head or record_end > end:
        raise RecordError(f"no record at byte {at}")
    body_len = _i32(d + at + head - 4)
    p = at + head + body_len
    if body_len < 0 or p + 3 > record_end or p + 3 + d[p] > record_end:
        raise RecordError(f"no record at byte {at}")
    out.at = at
    out.body = at + head
    out.topic = p
    p += 3 + d[p]
    out.props = p
    out.props_len = (d[p - 2] << 8) | d[p - 1]
    if out.props_len > 0x7FFF or p + out.props_len > record_end:
        raise RecordError(f"no record at byte {at}")
    return rec


cdef bytes _last_topic_raw = b""
cdef str _last_topic = ""


cdef str _topic(const unsigned char* d, Layout* lay):
    """The topic text; the last one is kept, as a consumer reads one topic over and over."""
    global _last_topic_raw, _last_topic
    cdef Py_ssize_t n = d[lay.topic]
    cdef const char* raw = <const char*>d + lay.topic + 1
    if n == PyBytes_GET_SIZE(_last_topic_raw) and memcmp(
        raw, PyBytes_AS_STRING(_last_topic_raw), n
    ) == 0:
        return _last_topic
    topic = PyUnicode_DecodeUTF8(raw, n, "replace")
    _last_topic_raw = PyBytes_FromStringAndSize(raw, n)
    _last_topic = topic
    return topic


cdef object _property(bytes rec, Layout* lay, bytes name):
    """``property_value(<the record's properties>, name)``, decoded: the value of the last
    pair named ``name`` (a pair starts at 0 and after each \\x02), or None."""
    cdef const unsigned char* p = <const unsigned char*>PyBytes_AS_STRING(rec) + lay.props
    cdef Py_ssize_t n = lay.props_len
    cdef Py_ssize_t e
    cdef const unsigned char* q
    cdef Py_ssize_t found = _value_start(
        p, n, <const unsigned char*>PyBytes_AS_STRING(name), PyBytes_GET_SIZE(name)
    )
    if found < 0:
        return None
    q = <const unsigned char*>memchr(p + found, 2, n - found)
    e = n if q == NULL else q - p
    if e > found:
        return PyUnicode_DecodeUTF8(<const char*>p + found, e - found, "replace")
    # The last pair has an empty value: Java skips it and an earlier pair counts.
    value = _property_value(PyBytes_FromStringAndSize(<const char*>p, n), name)
    return None if value is None else value.decode("utf-8", "replace")


def _name_table():
    """Property names by length in bytes: ``((utf-8, interned str), ...)`` each, for the
    names RocketMQ and the SDK set, which nearly every message carries."""
    from codec import properties
    names = {v for k, v in vars(properties).items() if k.startswith("PROPERTY_")}
    names.discard(properties.PROPERTY_SEPARATOR)
    table = [[] for _ in range(max(len(n.encode()) for n in names) + 1)]
    for name in sorted(names):
        table[len(name.encode())].append((name.encode(), sys.intern(name)))
    return tuple(tuple(row) for row in table)


cdef tuple _NAMES = _name_table()


cdef str _name(const unsigned char* p, Py_ssize_t n):
    """The name of a pair: a known one's interned text (its hash computed once), else the
    bytes decoded."""
    if n < len(_NAMES):
        for raw, text in <tuple>_NAMES[n]:
            if memcmp(p, PyBytes_AS_STRING(raw), n) == 0:
                return <str>text
    return PyUnicode_DecodeUTF8(<const char*>p, n, "replace")


cdef dict _parse_properties(const unsigned char* p, Py_ssize_t n):
    """``decode_properties(<these bytes>.decode("utf-8", "replace"))``, each name and value
    decoded from its own bytes: the separators are ASCII, so they never sit inside a UTF-8
    sequence nor inside what one invalid is replaced for, and the pieces decode as they
    would in the whole. A segment whose first \\x01 has bytes before and after it is a pair;
    a later pair of a name overwrites an earlier one."""
    cdef dict out = {}
    cdef Py_ssize_t s = 0
    cdef Py_ssize_t e, sep
    cdef const unsigned char* q
    while s <= n:  # segment [s, e); one (empty) after a trailing \x02, as str.split gives
        q = <const unsigned char*>memchr(p + s, 2, n - s)
        e = n if q == NULL else q - p
        q = <const unsigned char*>memchr(p + s, 1, e - s)
        sep = e if q == NULL else q - p
        if s < sep and sep + 1 < e:
            out[_name(p + s, sep - s)] = PyUnicode_DecodeUTF8(
                <const char*>p + sep + 1, e - sep - 1, "replace"
            )
        s = e + 1
    return out


cdef bytes _host_raw(const unsigned char* d, Layout* lay, bint store):
    cdef unsigned char flags = d[lay.at + 39]
    cdef Py_ssize_t p = lay.at + 48
    cdef Py_ssize_t n = 20 if flags & BORNHOST_V6_FLAG else 8
    if store:
        p += n + 8
        n = 20 if flags & STOREHOSTADDRESS_V6_FLAG else 8
    return PyBytes_FromStringAndSize(<const char*>d + p, n)


# The pure module's cache of host fields: (ip:port, upper-case hex) by the field's bytes.
cdef dict _HOSTS = _view._HOSTS


cdef tuple _host_info(bytes raw):
    info = _HOSTS.get(raw)
    if info is None:
        info = _view._host_info(raw)
    return <tuple>info


cdef str _offset_msg_id(const unsigned char* d, Layout* lay):
    """The store host's hex, then the commit-log offset in 16 upper-case hex digits."""
    cdef int64_t offset = _i64(d + lay.at + 28)
    cdef uint64_t rest = <uint64_t>offset
    cdef char digits[16]
    cdef const char* hex_digits = b"0123456789ABCDEF"
    cdef int i
    store_hex = _host_info(_host_raw(d, lay, True))[1]
    if offset < 0:  # never in a store; formatted as the pure function formats it
        return f"{store_hex}{offset:016X}"
    for i in range(15, -1, -1):
        digits[i] = hex_digits[rest & 0xF]
        rest >>= 4
    return store_hex + PyUnicode_DecodeASCII(digits, 16, NULL)


cdef object _decode_field(int kind, object record):
    cdef Layout lay
    cdef bytes rec = _layout(record, &lay)
    cdef const unsigned char* d = <const unsigned char*>PyBytes_AS_STRING(rec)
    cdef int32_t sys_flag
    if kind == F_TOPIC:
        return _topic(d, &lay)
    if kind == F_BODY:
        payload = PyBytes_FromStringAndSize(<const char*>d + lay.body, lay.topic - lay.body)
        sys_flag = _i32(d + lay.at + 36)
        if sys_flag & COMPRESSED_FLAG:
            return _view.inflate_body(payload, sys_flag)
        return payload
    # codec.properties' PROPERTY_TAGS, PROPERTY_KEYS, PROPERTY_UNIQ_KEY
    if kind == F_TAGS:
        return _property(rec, &lay, b"TAGS")
    if kind == F_KEYS:
        keys = _property(rec, &lay, b"KEYS")
        return [k for k in keys.split(" ") if k] if keys else []
    if kind == F_MSG_ID:
        return _property(rec, &lay, b"UNIQ_KEY") or _offset_msg_id(d, &lay)
    if kind == F_OFFSET_MSG_ID:
        return _offset_msg_id(d, &lay)
    if kind == F_BORN_HOST:
        return _host_info(_host_raw(d, &lay, False))[0]
    return _host_info(_host_raw(d, &lay, True))[0]


cdef object _no_attribute(object view, str name):
    return AttributeError(f"{type(view).__name__!r} object has no attribute {name!r}")


cdef class _Lazy:
    """A field decoded from the view's record on first read, then kept in the instance:
    a non-data descriptor, so later reads and any assignment never come here."""

    cdef readonly str name
    cdef int kind

    def __init__(self, str name):
        self.name = name
        self.kind = _KINDS[name]

    def __get__(self, view, owner):
        if view is None:
            return self
        record = view._rec
        if record is None:  # a view built from fields, this one deleted
            raise _no_attribute(view, self.name)
        value = _decode_field(self.kind, record)
        setattr(view, self.name, value)
        return value


cdef class _LazyProperties:
    """``properties``: decoded on first read and kept in ``_props``, where what
    ``put_properties`` added before is merged (a data descriptor, as the pure property)."""

    def __get__(self, view, owner):
        cdef Layout lay
        if view is None:
            return self
        props = view._props
        if props is not None:
            return props
        record = view._rec
        if record is None:
            raise _no_attribute(view, "properties")
        rec = _layout(record, &lay)
        props = _parse_properties(
            <const unsigned char*>PyBytes_AS_STRING(rec) + lay.props, lay.props_len
        )
        extra = view._extra
        if extra is not None:
            props.update(extra)
            view._extra = None
        view._props = props
        return props

    def __set__(self, view, value):
        view._props = value
        if view._extra is not None:
            view._extra = None

    def __delete__(self, view):
        raise AttributeError(
            f"property 'properties' of {type(view).__qualname__!r} object has no deleter"
        )


def attach_lazy_fields(cls):
    """Install on ``cls`` the descriptors that decode ``LAZY_FIELDS`` on first read (see
    codec.view.attach_lazy_fields)."""
    for name in _view.LAZY_FIELDS:
        setattr(cls, name, _LazyProperties() if name == "properties" else _Lazy(name))

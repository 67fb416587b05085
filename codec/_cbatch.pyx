# cython: language_level=3, boundscheck=False, wraparound=False, cdivision=True
# distutils: libraries = z
"""Typed Cython twins of the batch and record hot paths: codec/batch.py and codec/record.py.

RocketMQ counterpart: ``MessageDecoder.encodeMessage`` / ``decodeMessages`` (a producer's
batch body), ``CommitLog.MessageExtBatchEncoder`` (the records the broker builds of it) and
``CommitLog.checkMessageAndReturnSize`` / ``MessageDecoder.decode`` (recovery and read-back).
The pure functions (``<name>_py`` in their modules) are the reference: same arguments, same
bytes, same results, same exceptions with the same messages.

The C paths take what fits C types: byte buffers (bytes, bytearray, memoryview, mmap) whose
``len`` is their byte length, ints that fit their fields, hosts as (4- or 16-byte address,
port) tuples whose widths agree with the V6 sysFlag bits. Anything else is handed to the pure
function, which then does (or raises) what the reference does. Malformed data (truncated,
lengths out of range, oversized properties) is handled here, with the reference's messages.

The body CRC is zlib's C ``crc32`` (``# distutils: libraries = z`` above links libz, the
library CPython's own zlib module uses). Every index into a buffer is checked against its
length before it is read or written (hence boundscheck=False).
"""

from cpython.buffer cimport PyBUF_SIMPLE, PyBUF_WRITABLE, PyBuffer_Release
from cpython.bytearray cimport PyByteArray_AS_STRING
from cpython.bytes cimport PyBytes_AS_STRING, PyBytes_FromStringAndSize, PyBytes_GET_SIZE
from cpython.unicode cimport PyUnicode_DecodeUTF8
from libc.stdint cimport int16_t, int32_t, int64_t, uint16_t, uint32_t, uint64_t
from libc.string cimport memcpy

from codec._wire cimport borrow as _borrow
from codec._wire cimport get16 as _get16
from codec._wire cimport get32 as _get32
from codec._wire cimport get64 as _get64
from codec._wire cimport int32_of as _i32
from codec._wire cimport int64_of as _i64
from codec._wire cimport put16 as _put16
from codec._wire cimport put32 as _put32
from codec._wire cimport put64 as _put64

import importlib

cdef extern from "zlib.h":
    unsigned long crc32(unsigned long crc, const unsigned char* buf, unsigned int len) nogil

cdef enum:
    ENTRY_HEAD_BYTES = 20  # TOTALSIZE, MAGICCODE, BODYCRC, FLAG, BODYLEN of a batch entry
    RECORD_HEADER_V4 = 88  # a record up to its body, IPv4 hosts
    MAX_PROPERTIES_BYTES = 32767
    BORNHOST_V6_FLAG = 0x10
    STOREHOSTADDRESS_V6_FLAG = 0x20

cdef int32_t MESSAGE_MAGIC_CODE = -626843481  # 0xDAA320A7
cdef int64_t INT32_MAX = 2147483647
# Queue and commit-log offsets beyond this go to the reference: the per-record increments
# then cannot overflow int64 (nor does any real log come near).
cdef int64_t OFFSET_LIMIT = 1 << 62

# The reference functions, the exceptions and the result types, looked up at first use:
# codec.record imports this module at its end, before codec.batch is done, so neither can
# be imported from here while this module initialises.
cdef object _record_module = None
cdef object _batch_module = None
cdef object RecordError = None
cdef object PropertiesTooLongError = None
cdef object RecordInfo = None
cdef object EncodedBatch = None
cdef object _tuple_new = tuple.__new__


cdef int _load() except -1:
    global _record_module, _batch_module, RecordError, PropertiesTooLongError
    global RecordInfo, EncodedBatch
    _record_module = importlib.import_module("codec.record")
    _batch_module = importlib.import_module("codec.batch")
    RecordError = _record_module.RecordError
    PropertiesTooLongError = _record_module.PropertiesTooLongError
    RecordInfo = _record_module.RecordInfo
    EncodedBatch = _batch_module.EncodedBatch
    return 0


cdef inline int _ready() except -1:
    if EncodedBatch is None:
        _load()
    return 0


# ------------------------------------------------------------------------ C-level helpers


cdef inline int64_t _body_crc(const unsigned char* p, Py_ssize_t n) noexcept nogil:
    """Java's ``UtilAll.crc32``: CRC32 of the body, sign bit cleared (n < 2**31)."""
    return <int64_t>(crc32(0, p, <unsigned int>n) & 0x7FFFFFFF)


cdef inline bint _position(object o, Py_ssize_t* out) except -1:
    """Whether ``o`` is an int usable as a position from the start (not negative)."""
    cdef int64_t v
    if not _i64(o, &v) or v < 0 or v > (<int64_t>1 << 48):
        return False
    out[0] = <Py_ssize_t>v
    return True


cdef object _host_address(object host, int64_t* port):
    """The address of ``host`` if it is a (4- or 16-byte bytes, int32 port) tuple (the port
    then stored in ``port``), else None."""
    if type(host) is not tuple or len(<tuple>host) != 2:
        return None
    address = (<tuple>host)[0]
    if type(address) is not bytes or PyBytes_GET_SIZE(address) not in (4, 16):
        return None
    if not _i32((<tuple>host)[1], port):
        return None
    return address


# ------------------------------------------------------------------------ batch entries


def encode_batch_entry(flag, body, properties):
    """See codec.batch.encode_batch_entry (the reference)."""
    cdef Py_buffer b, pr
    cdef int64_t f
    cdef Py_ssize_t total
    cdef unsigned char* out
    if not _i32(flag, &f):
        return _batch_ref().encode_batch_entry_py(flag, body, properties)
    if not _borrow(body, &b, PyBUF_SIMPLE):
        return _batch_ref().encode_batch_entry_py(flag, body, properties)
    if not _borrow(properties, &pr, PyBUF_SIMPLE):
        PyBuffer_Release(&b)
        return _batch_ref().encode_batch_entry_py(flag, body, properties)
    try:
        if pr.len > MAX_PROPERTIES_BYTES or b.len > INT32_MAX - ENTRY_HEAD_BYTES - 2 - pr.len:
            # struct says which field does not fit
            return _batch_ref().encode_batch_entry_py(flag, body, properties)
        total = ENTRY_HEAD_BYTES + b.len + 2 + pr.len
        result = PyBytes_FromStringAndSize(NULL, total)
        out = <unsigned char*>PyBytes_AS_STRING(result)
        _put32(out, <uint32_t>total)
        _put32(out + 4, 0)
        _put32(out + 8, 0)
        _put32(out + 12, <uint32_t>f)
        _put32(out + 16, <uint32_t>b.len)
        memcpy(out + ENTRY_HEAD_BYTES, b.buf, b.len)
        _put16(out + ENTRY_HEAD_BYTES + b.len, <uint16_t>pr.len)
        memcpy(out + ENTRY_HEAD_BYTES + b.len + 2, pr.buf, pr.len)
        return result
    finally:
        PyBuffer_Release(&pr)
        PyBuffer_Release(&b)


cdef object _batch_ref():
    _ready()
    return _batch_module


def split_batch(body):
    """See codec.batch.split_batch (the reference)."""
    cdef Py_buffer v
    cdef const unsigned char* data
    cdef Py_ssize_t pos = 0, end, p
    cdef int32_t total, flag, body_len, props_len
    cdef list out = []
    _ready()
    view = memoryview(body)
    if not _borrow(view, &v, PyBUF_SIMPLE):
        return _batch_module.split_batch_py(body)
    try:
        data = <const unsigned char*>v.buf
        end = v.len
        while pos < end:
            if pos + ENTRY_HEAD_BYTES > end:
                raise RecordError(f"batch entry at {pos} is truncated")
            total = _get32(data + pos)
            flag = _get32(data + pos + 12)
            body_len = _get32(data + pos + 16)
            p = pos + ENTRY_HEAD_BYTES
            if body_len < 0 or p + body_len + 2 > end:
                raise RecordError(f"batch entry at {pos}: body length {body_len} out of range")
            msg_body = view[p : p + body_len]
            p += body_len
            props_len = _get16(data + p)
            p += 2
            if props_len < 0 or p + props_len > end:
                raise RecordError(f"batch entry at {pos}: properties length out of range")
            props = PyBytes_FromStringAndSize(<char*>data + p, props_len)
            p += props_len
            if total != p - pos:
                raise RecordError(f"batch entry at {pos}: TOTALSIZE {total} != {p - pos}")
            out.append((flag, msg_body, props))
            pos = p
    finally:
        PyBuffer_Release(&v)
    if not out:
        raise RecordError("empty batch")
    return out


# ------------------------------------------------------------------------ batch records


def encode_batch_records(
    buf,
    body,
    batch_properties,
    topic,
    queue_id,
    sys_flag,
    born_timestamp,
    born_host,
    store_host,
    queue_offset,
    commit_log_offset,
    store_timestamp,
):
    """See codec.batch.encode_batch_records (the reference)."""
    cdef Py_buffer src_view, dst_view
    cdef bint dst_held = False
    cdef int64_t qid, sflag, born_ts, store_ts, qoff, phys, born_port, store_port
    cdef object born_addr = None, store_addr = None
    cdef Py_ssize_t born_len, store_len, topic_len, batch_len, header_bytes, fixed
    cdef const unsigned char* data
    cdef const unsigned char* topic_ptr
    cdef const unsigned char* batch_ptr
    cdef unsigned char* dst
    cdef unsigned char* rec
    cdef Py_ssize_t cap, end, pos = 0, p, q, next_pos, out = 0, size, joined, new_cap
    cdef int32_t total, flag, body_len, props_len
    cdef int64_t too_long = 0
    cdef bint too_big = False
    cdef int join  # 0: own properties only, 1: own + batch, 2: own + \x02 + batch
    cdef list sizes = []
    cdef list props_list = []
    _ready()
    if not (
        type(topic) is bytes
        and PyBytes_GET_SIZE(topic) <= 255
        and type(batch_properties) is bytes
        and _i32(queue_id, &qid)
        and _i32(sys_flag, &sflag)
        and _i64(born_timestamp, &born_ts)
        and _i64(store_timestamp, &store_ts)
        and _i64(queue_offset, &qoff)
        and -OFFSET_LIMIT <= qoff <= OFFSET_LIMIT
        and _i64(commit_log_offset, &phys)
        and -OFFSET_LIMIT <= phys <= OFFSET_LIMIT
        and (born_addr := _host_address(born_host, &born_port)) is not None
        and (store_addr := _host_address(store_host, &store_port)) is not None
    ):
        return _encode_batch_records_ref(
            buf, body, batch_properties, topic, queue_id, sys_flag, born_timestamp,
            born_host, store_host, queue_offset, commit_log_offset, store_timestamp,
        )
    born_len = PyBytes_GET_SIZE(born_addr)
    store_len = PyBytes_GET_SIZE(store_addr)
    # The reference sizes records by the sysFlag bits and lays them out by the address
    # widths: where they disagree its records are not what they say; leave that to it.
    if ((sflag & BORNHOST_V6_FLAG) != 0) != (born_len == 16) or (
        (sflag & STOREHOSTADDRESS_V6_FLAG) != 0
    ) != (store_len == 16):
        return _encode_batch_records_ref(
            buf, body, batch_properties, topic, queue_id, sys_flag, born_timestamp,
            born_host, store_host, queue_offset, commit_log_offset, store_timestamp,
        )
    if not _borrow(body, &src_view, PyBUF_SIMPLE):
        return _encode_batch_records_ref(
            buf, body, batch_properties, topic, queue_id, sys_flag, born_timestamp,
            born_host, store_host, queue_offset, commit_log_offset, store_timestamp,
        )
    if not _borrow(buf, &dst_view, PyBUF_WRITABLE):
        PyBuffer_Release(&src_view)
        return _encode_batch_records_ref(
            buf, body, batch_properties, topic, queue_id, sys_flag, born_timestamp,
            born_host, store_host, queue_offset, commit_log_offset, store_timestamp,
        )
    dst_held = True
    if (
        <char*>src_view.buf < <char*>dst_view.buf + dst_view.len
        and <char*>dst_view.buf < <char*>src_view.buf + src_view.len
    ):
        # The body lies in buf itself: the reference copies it before writing; so does it.
        PyBuffer_Release(&dst_view)
        PyBuffer_Release(&src_view)
        return _encode_batch_records_ref(
            buf, body, batch_properties, topic, queue_id, sys_flag, born_timestamp,
            born_host, store_host, queue_offset, commit_log_offset, store_timestamp,
        )
    out_buf = buf
    topic_len = PyBytes_GET_SIZE(topic)
    topic_ptr = <const unsigned char*>PyBytes_AS_STRING(topic)
    batch_len = PyBytes_GET_SIZE(batch_properties)
    batch_ptr = <const unsigned char*>PyBytes_AS_STRING(batch_properties)
    header_bytes = 80 + born_len + store_len  # 88 for IPv4 hosts
    fixed = header_bytes + 1 + topic_len + 2  # record_length(0, topic, 0, sys_flag)
    try:
        data = <const unsigned char*>src_view.buf
        end = src_view.len
        dst = <unsigned char*>dst_view.buf
        cap = dst_view.len
        while pos < end:
            if pos + ENTRY_HEAD_BYTES > end:
                raise RecordError(f"batch entry at {pos} is truncated")
            total = _get32(data + pos)
            flag = _get32(data + pos + 12)
            body_len = _get32(data + pos + 16)
            p = pos + ENTRY_HEAD_BYTES
            if body_len < 0 or p + body_len + 2 > end:
                raise RecordError(f"batch entry at {pos}: body length {body_len} out of range")
            q = p + body_len
            props_len = _get16(data + q)
            q += 2
            if props_len < 0 or q + props_len > end:
                raise RecordError(f"batch entry at {pos}: properties length out of range")
            next_pos = q + props_len
            if total != next_pos - pos:
                raise RecordError(
                    f"batch entry at {pos}: TOTALSIZE {total} != {next_pos - pos}"
                )
            pos = next_pos
            # join_batch_properties: a separator only where the own part lacks one
            if batch_len == 0:
                join = 0
                joined = props_len
            elif props_len and data[next_pos - 1] != 2:
                join = 2
                joined = props_len + 1 + batch_len
            else:
                join = 1
                joined = props_len + batch_len
            if too_long or joined > MAX_PROPERTIES_BYTES:
                # parse on to report a malformed entry first, write no more
                if not too_long:
                    too_long = joined
                continue
            size = fixed + body_len + joined
            if size > INT32_MAX:
                too_big = True  # TOTALSIZE does not fit: struct's error, from the reference
                break
            if out + size > cap:
                new_cap = max(2 * cap, out + size)
                grown = bytearray(new_cap)
                memcpy(PyByteArray_AS_STRING(grown), dst, out)
                if dst_held:
                    PyBuffer_Release(&dst_view)
                    dst_held = False
                out_buf = grown
                dst = <unsigned char*>PyByteArray_AS_STRING(grown)
                cap = new_cap
            if join == 0:
                props = PyBytes_FromStringAndSize(<char*>data + q, props_len)
            else:
                props = PyBytes_FromStringAndSize(NULL, joined)
                rec = <unsigned char*>PyBytes_AS_STRING(props)
                memcpy(rec, data + q, props_len)
                if join == 2:
                    rec[props_len] = 2
                memcpy(rec + joined - batch_len, batch_ptr, batch_len)
            rec = dst + out
            _put32(rec, <uint32_t>size)
            _put32(rec + 4, <uint32_t>MESSAGE_MAGIC_CODE)
            _put32(rec + 8, <uint32_t>_body_crc(data + p, body_len))
            _put32(rec + 12, <uint32_t>qid)
            _put32(rec + 16, <uint32_t>flag)
            _put64(rec + 20, <uint64_t>qoff)
            _put64(rec + 28, <uint64_t>phys)
            _put32(rec + 36, <uint32_t>sflag)
            _put64(rec + 40, <uint64_t>born_ts)
            rec += 48
            memcpy(rec, PyBytes_AS_STRING(born_addr), born_len)
            rec += born_len
            _put32(rec, <uint32_t>born_port)
            _put64(rec + 4, <uint64_t>store_ts)
            rec += 12
            memcpy(rec, PyBytes_AS_STRING(store_addr), store_len)
            rec += store_len
            _put32(rec, <uint32_t>store_port)
            _put32(rec + 4, 0)  # RECONSUMETIMES
            _put64(rec + 8, 0)  # PREPARED TRANSACTION OFFSET
            _put32(rec + 16, <uint32_t>body_len)
            rec += 20
            memcpy(rec, data + p, body_len)
            rec += body_len
            rec[0] = <unsigned char>topic_len
            memcpy(rec + 1, topic_ptr, topic_len)
            rec += 1 + topic_len
            _put16(rec, <uint16_t>joined)
            memcpy(rec + 2, PyBytes_AS_STRING(props), joined)
            sizes.append(size)
            props_list.append(props)
            out += size
            phys += size
            qoff += 1
    finally:
        if dst_held:
            PyBuffer_Release(&dst_view)
        PyBuffer_Release(&src_view)
    if too_big:
        # A record over 2 GiB: the reference redoes the same records and raises.
        return _encode_batch_records_ref(
            buf, body, batch_properties, topic, queue_id, sys_flag, born_timestamp,
            born_host, store_host, queue_offset, commit_log_offset, store_timestamp,
        )
    if too_long:
        raise PropertiesTooLongError(too_long)
    if not sizes:
        raise RecordError("empty batch")
    return EncodedBatch(out_buf, out, sizes, props_list)


cdef object _encode_batch_records_ref(
    buf,
    body,
    batch_properties,
    topic,
    queue_id,
    sys_flag,
    born_timestamp,
    born_host,
    store_host,
    queue_offset,
    commit_log_offset,
    store_timestamp,
):
    return _batch_module.encode_batch_records_py(
        buf, body, batch_properties, topic, queue_id, sys_flag, born_timestamp,
        born_host, store_host, queue_offset, commit_log_offset, store_timestamp,
    )


# ------------------------------------------------------------------------ single records


cdef object _record_ref():
    _ready()
    return _record_module


def encode_record(
    *,
    topic,
    queue_id,
    body,
    flag,
    properties,
    sys_flag,
    born_timestamp,
    born_host,
    store_host,
    reconsume_times=0,
    prepared_transaction_offset=0,
    crc=None,
):
    """See codec.record.encode_record (the reference)."""
    cdef Py_buffer b
    cdef bint held = False
    cdef int64_t qid, f, sflag, born_ts, reconsume, prepared, born_port, store_port
    cdef int64_t body_crc = 0
    cdef object born_addr = None, store_addr = None
    cdef Py_ssize_t born_len, store_len, topic_len, props_len, body_len, total
    cdef const unsigned char* body_ptr
    cdef unsigned char* rec
    if not (
        type(topic) is bytes
        and PyBytes_GET_SIZE(topic) <= 255
        and type(properties) is bytes
        and PyBytes_GET_SIZE(properties) <= MAX_PROPERTIES_BYTES
        and _i32(queue_id, &qid)
        and _i32(flag, &f)
        and _i32(sys_flag, &sflag)
        and _i64(born_timestamp, &born_ts)
        and _i32(reconsume_times, &reconsume)
        and _i64(prepared_transaction_offset, &prepared)
        and (crc is None or _i32(crc, &body_crc))
        and (born_addr := _host_address(born_host, &born_port)) is not None
        and (store_addr := _host_address(store_host, &store_port)) is not None
    ):
        return _encode_record_ref(
            topic, queue_id, body, flag, properties, sys_flag, born_timestamp, born_host,
            store_host, reconsume_times, prepared_transaction_offset, crc,
        )
    if type(body) is bytes:
        body_ptr = <const unsigned char*>PyBytes_AS_STRING(body)
        body_len = PyBytes_GET_SIZE(body)
    elif _borrow(body, &b, PyBUF_SIMPLE):
        held = True
        body_ptr = <const unsigned char*>b.buf
        body_len = b.len
    else:
        return _encode_record_ref(
            topic, queue_id, body, flag, properties, sys_flag, born_timestamp, born_host,
            store_host, reconsume_times, prepared_transaction_offset, crc,
        )
    try:
        born_len = PyBytes_GET_SIZE(born_addr)
        store_len = PyBytes_GET_SIZE(store_addr)
        # record_sys_flag: the V6 bits from the address widths (an int32 stays one)
        sflag &= ~(<int64_t>(BORNHOST_V6_FLAG | STOREHOSTADDRESS_V6_FLAG))
        if born_len == 16:
            sflag |= BORNHOST_V6_FLAG
        if store_len == 16:
            sflag |= STOREHOSTADDRESS_V6_FLAG
        topic_len = PyBytes_GET_SIZE(topic)
        props_len = PyBytes_GET_SIZE(properties)
        # record_length: 91 for IPv4 hosts, 12 more for each IPv6 one
        total = 83 + born_len + store_len + body_len + topic_len + props_len
        if total > INT32_MAX:
            # TOTALSIZE does not fit an int: struct's error, from the reference
            return _encode_record_ref(
                topic, queue_id, body, flag, properties, sys_flag, born_timestamp, born_host,
                store_host, reconsume_times, prepared_transaction_offset, crc,
            )
        if crc is None:
            body_crc = _body_crc(body_ptr, body_len)
        result = PyBytes_FromStringAndSize(NULL, total)
        rec = <unsigned char*>PyBytes_AS_STRING(result)
        _put32(rec, <uint32_t>total)
        _put32(rec + 4, <uint32_t>MESSAGE_MAGIC_CODE)
        _put32(rec + 8, <uint32_t>body_crc)
        _put32(rec + 12, <uint32_t>qid)
        _put32(rec + 16, <uint32_t>f)
        _put64(rec + 20, 0)  # QUEUEOFFSET      (append)
        _put64(rec + 28, 0)  # PHYSICALOFFSET   (append)
        _put32(rec + 36, <uint32_t>sflag)
        _put64(rec + 40, <uint64_t>born_ts)
        rec += 48
        memcpy(rec, PyBytes_AS_STRING(born_addr), born_len)
        rec += born_len
        _put32(rec, <uint32_t>born_port)
        _put64(rec + 4, 0)  # STORETIMESTAMP   (append)
        rec += 12
        memcpy(rec, PyBytes_AS_STRING(store_addr), store_len)
        rec += store_len
        _put32(rec, <uint32_t>store_port)
        _put32(rec + 4, <uint32_t>reconsume)
        _put64(rec + 8, <uint64_t>prepared)
        _put32(rec + 16, <uint32_t>body_len)
        rec += 20
        memcpy(rec, body_ptr, body_len)
        rec += body_len
        rec[0] = <unsigned char>topic_len
        memcpy(rec + 1, PyBytes_AS_STRING(topic), topic_len)
        rec += 1 + topic_len
        _put16(rec, <uint16_t>props_len)
        memcpy(rec + 2, PyBytes_AS_STRING(properties), props_len)
        return result
    finally:
        if held:
            PyBuffer_Release(&b)


cdef object _encode_record_ref(
    topic,
    queue_id,
    body,
    flag,
    properties,
    sys_flag,
    born_timestamp,
    born_host,
    store_host,
    reconsume_times,
    prepared_transaction_offset,
    crc,
):
    return _record_ref().encode_record_py(
        topic=topic,
        queue_id=queue_id,
        body=body,
        flag=flag,
        properties=properties,
        sys_flag=sys_flag,
        born_timestamp=born_timestamp,
        born_host=born_host,
        store_host=store_host,
        reconsume_times=reconsume_times,
        prepared_transaction_offset=prepared_transaction_offset,
        crc=crc,
    )


def patch_append_fields(buf, pos, *, queue_offset, commit_log_offset, store_timestamp, sys_flag):
    """See codec.record.patch_append_fields (the reference)."""
    cdef Py_buffer v
    cdef Py_ssize_t start, ts_pos
    cdef int64_t qoff, phys, store_ts, sflag
    cdef unsigned char* dst
    if not (
        _position(pos, &start)
        and _i64(queue_offset, &qoff)
        and _i64(commit_log_offset, &phys)
        and _i64(store_timestamp, &store_ts)
        and _i64(sys_flag, &sflag)
    ) or not _borrow(buf, &v, PyBUF_WRITABLE):
        return _record_ref().patch_append_fields_py(
            buf,
            pos,
            queue_offset=queue_offset,
            commit_log_offset=commit_log_offset,
            store_timestamp=store_timestamp,
            sys_flag=sys_flag,
        )
    # store_timestamp_pos: after BORNHOST, whose width depends on BORNHOST_V6
    ts_pos = start + 48 + (20 if sflag & BORNHOST_V6_FLAG else 8)
    if start + 20 + 16 > v.len or ts_pos + 8 > v.len:
        # struct's error (after the offsets it could write, if any), from the reference
        PyBuffer_Release(&v)
        return _record_ref().patch_append_fields_py(
            buf,
            pos,
            queue_offset=queue_offset,
            commit_log_offset=commit_log_offset,
            store_timestamp=store_timestamp,
            sys_flag=sys_flag,
        )
    dst = <unsigned char*>v.buf
    _put64(dst + start + 20, <uint64_t>qoff)
    _put64(dst + start + 28, <uint64_t>phys)
    _put64(dst + ts_pos, <uint64_t>store_ts)
    PyBuffer_Release(&v)


# ------------------------------------------------------------------------ records


def verify_record(buf, pos, commit_log_offset, *, check_crc):
    """See codec.record.verify_record (the reference)."""
    cdef Py_buffer v
    cdef Py_ssize_t start
    cdef int64_t expected_phys
    _ready()
    if not (_position(pos, &start) and _i64(commit_log_offset, &expected_phys)):
        return _record_module.verify_record_py(buf, pos, commit_log_offset, check_crc=check_crc)
    if not _borrow(buf, &v, PyBUF_SIMPLE):
        return _record_module.verify_record_py(buf, pos, commit_log_offset, check_crc=check_crc)
    try:
        return _verify(
            <const unsigned char*>v.buf, v.len, start, expected_phys, commit_log_offset, check_crc
        )
    finally:
        PyBuffer_Release(&v)


cdef object _verify(
    const unsigned char* b,
    Py_ssize_t end,
    Py_ssize_t pos,
    int64_t expected_phys,
    object commit_log_offset,
    object check_crc,
):
    cdef int32_t total, magic, crc, sys_flag, body_len, props_len
    cdef int64_t phys
    cdef Py_ssize_t body_pos, topic_pos, topic_len
    if pos + RECORD_HEADER_V4 > end:
        raise RecordError("record header runs past the data")
    total = _get32(b + pos)
    magic = _get32(b + pos + 4)
    crc = _get32(b + pos + 8)
    phys = _get64(b + pos + 28)
    sys_flag = _get32(b + pos + 36)
    body_len = _get32(b + pos + 84)
    if magic != MESSAGE_MAGIC_CODE:
        raise RecordError(f"magic {_unsigned(magic):#x} is not a message")
    if total <= 0 or pos + total > end:
        raise RecordError(f"record size {total} runs past the data")
    if phys != expected_phys:
        raise RecordError(f"record says it is at {phys}, found at {commit_log_offset}")
    body_pos = RECORD_HEADER_V4
    if sys_flag & (BORNHOST_V6_FLAG | STOREHOSTADDRESS_V6_FLAG):
        body_pos = 84
        if sys_flag & BORNHOST_V6_FLAG:
            body_pos += 12
        if sys_flag & STOREHOSTADDRESS_V6_FLAG:
            body_pos += 12
        if pos + body_pos + 4 > end:
            raise RecordError("record header runs past the data")
        body_len = _get32(b + pos + body_pos)
        body_pos += 4
    topic_pos = pos + body_pos + body_len
    if body_len < 0 or topic_pos + 3 > pos + total:
        raise RecordError(f"body length {body_len} runs past the record")
    topic_len = b[topic_pos]
    if topic_pos + 1 + topic_len + 2 > pos + total:
        raise RecordError("topic runs past the record")
    props_len = _get16(b + topic_pos + 1 + topic_len)
    if props_len < 0 or _record_length(body_len, topic_len, props_len, sys_flag) != total:
        raise RecordError(f"record size {total} disagrees with its fields")
    if check_crc and _body_crc(b + pos + body_pos, body_len) != crc:
        raise RecordError("body CRC mismatch")
    return total


cdef inline object _unsigned(int32_t v):
    return <uint32_t>v


cdef inline int64_t _record_length(
    int64_t body_bytes, int64_t topic_bytes, int64_t properties_bytes, int32_t sys_flag
) noexcept nogil:
    """TOTALSIZE for these parts (RocketMQ ``calMsgLength``; codec.record.record_length)."""
    cdef int64_t n = 91 + body_bytes + topic_bytes + properties_bytes
    if sys_flag & BORNHOST_V6_FLAG:
        n += 12
    if sys_flag & STOREHOSTADDRESS_V6_FLAG:
        n += 12
    return n


def decode_record(buf, pos, *, check_crc=False):
    """See codec.record.decode_record (the reference)."""
    cdef Py_buffer v
    cdef Py_ssize_t start
    _ready()
    if not _position(pos, &start) or not _borrow(buf, &v, PyBUF_SIMPLE):
        return _record_module.decode_record_py(buf, pos, check_crc=check_crc)
    try:
        return _decode(<const unsigned char*>v.buf, v.len, start, check_crc)
    finally:
        PyBuffer_Release(&v)


cdef object _decode(const unsigned char* b, Py_ssize_t end, Py_ssize_t pos, object check_crc):
    cdef int32_t total, magic, crc, queue_id, flag, sys_flag, reconsume, body_len, props_len
    cdef int64_t queue_offset, phys, born_ts, store_ts, prepared, expected
    cdef Py_ssize_t p, body_offset, topic_pos, topic_len, record_end
    if pos + RECORD_HEADER_V4 > end:
        raise RecordError("record header runs past the data")
    total = _get32(b + pos)
    magic = _get32(b + pos + 4)
    crc = _get32(b + pos + 8)
    queue_id = _get32(b + pos + 12)
    flag = _get32(b + pos + 16)
    queue_offset = _get64(b + pos + 20)
    phys = _get64(b + pos + 28)
    sys_flag = _get32(b + pos + 36)
    born_ts = _get64(b + pos + 40)
    if magic != MESSAGE_MAGIC_CODE:
        raise RecordError(f"magic {_unsigned(magic):#x} is not a message")
    p = pos + 48 + (20 if sys_flag & BORNHOST_V6_FLAG else 8)
    store_ts = _get64(b + p)  # at most pos + 76: inside the header checked above
    p += 8 + (20 if sys_flag & STOREHOSTADDRESS_V6_FLAG else 8)
    if p + 16 > end:
        raise RecordError("record header runs past the data")
    reconsume = _get32(b + p)
    prepared = _get64(b + p + 4)
    body_len = _get32(b + p + 12)
    p += 16
    body_offset = p - pos
    if body_len < 0 or total <= 0 or pos + total > end:
        raise RecordError(f"record size {total} / body length {body_len} out of range")
    record_end = pos + total
    p += body_len
    if p + 1 > record_end:
        raise RecordError("body runs past the record")
    topic_len = b[p]
    p += 1
    topic_pos = p
    p += topic_len
    if p + 2 > record_end:
        raise RecordError("topic runs past the record")
    props_len = _get16(b + p)
    p += 2
    expected = _record_length(body_len, topic_len, props_len, sys_flag)
    if props_len < 0 or expected != total:
        raise RecordError(f"record size {total} disagrees with its fields ({expected})")
    # expected == total: the properties end where the record does, inside the buffer
    if check_crc and _body_crc(b + pos + body_offset, body_len) != crc:
        raise RecordError("body CRC mismatch")
    # The CRC does not cover them and Java accepts any bytes here: a record whose topic or
    # properties are not UTF-8 is still a valid record, not the end of the log.
    topic = PyUnicode_DecodeUTF8(<char*>b + topic_pos, topic_len, "replace")
    properties = PyUnicode_DecodeUTF8(<char*>b + p, props_len, "replace")
    return _tuple_new(
        RecordInfo,
        (
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
        ),
    )

# The C-level pieces the codec's compiled modules (codec/_c*.pyx) share: big-endian fields
# packed and read by hand, Python ints checked against C widths, buffers borrowed whole,
# and the search for a property's value. Inline, so each module gets its own copy in C and
# none of them calls another at run time.

from cpython.buffer cimport PyBUF_SIMPLE, PyBuffer_Release, PyObject_GetBuffer
from cpython.long cimport PyLong_AsLongLongAndOverflow, PyLong_Check
from libc.stdint cimport int16_t, int32_t, int64_t, uint16_t, uint32_t, uint64_t
from libc.string cimport memchr, memcmp

cdef extern from *:
    """
    /* Strings are always canonical from 3.12 on; before, a legacy one must be made so
       before its kind and data are read. */
    #if PY_VERSION_HEX < 0x030C0000
    #define aerolite_unicode_ready(o) PyUnicode_READY(o)
    #else
    #define aerolite_unicode_ready(o) 0
    #endif
    """
    int aerolite_unicode_ready(object o) except -1


cdef inline void put16(unsigned char* p, uint16_t v) noexcept nogil:
    p[0] = <unsigned char>(v >> 8)
    p[1] = <unsigned char>v


cdef inline void put32(unsigned char* p, uint32_t v) noexcept nogil:
    # Big-endian by hand: the compiler folds it into one byte-swapped store.
    p[0] = <unsigned char>(v >> 24)
    p[1] = <unsigned char>(v >> 16)
    p[2] = <unsigned char>(v >> 8)
    p[3] = <unsigned char>v


cdef inline void put64(unsigned char* p, uint64_t v) noexcept nogil:
    put32(p, <uint32_t>(v >> 32))
    put32(p + 4, <uint32_t>v)


cdef inline uint32_t get_u32(const unsigned char* p) noexcept nogil:
    return (<uint32_t>p[0] << 24) | (<uint32_t>p[1] << 16) | (<uint32_t>p[2] << 8) | p[3]


cdef inline int16_t get16(const unsigned char* p) noexcept nogil:
    return <int16_t>((<uint16_t>p[0] << 8) | <uint16_t>p[1])


cdef inline int32_t get32(const unsigned char* p) noexcept nogil:
    return <int32_t>get_u32(p)


cdef inline int64_t get64(const unsigned char* p) noexcept nogil:
    return <int64_t>((<uint64_t>get_u32(p) << 32) | <uint64_t>get_u32(p + 4))


cdef inline bint int64_of(object o, int64_t* out) except -1:
    """Whether ``o`` is an int that fits int64 (then stored in ``out``)."""
    cdef int overflow = 0
    cdef long long v
    if not PyLong_Check(o):
        return False
    v = PyLong_AsLongLongAndOverflow(o, &overflow)
    if overflow:
        return False
    out[0] = v
    return True


cdef inline bint int32_of(object o, int64_t* out) except -1:
    """Whether ``o`` is an int that fits int32 (then stored in ``out``)."""
    return int64_of(o, out) and -2147483648 <= out[0] <= 2147483647


cdef inline bint borrow(object obj, Py_buffer* view, int flags) except -1:
    """Whether ``obj`` lends a contiguous buffer (``flags``: PyBUF_WRITABLE to write) whose
    length is ``len(obj)``, so positions mean bytes as they do to ``struct``; the caller
    releases it."""
    try:
        PyObject_GetBuffer(obj, view, flags | PyBUF_SIMPLE)
    except Exception:
        return False
    try:
        same = len(obj) == view.len
    except Exception:
        same = False
    if not same:
        PyBuffer_Release(view)
    return same


cdef inline Py_ssize_t value_start(
    const unsigned char* p, Py_ssize_t n, const unsigned char* name, Py_ssize_t k
) noexcept nogil:
    """Where the value of the last property pair named ``name`` (``k`` bytes) starts in the
    properties ``p[:n]``, -1 without one.

    A pair starts at 0 and after each \\x02, so the last start followed by name\\x01 is
    what ``codec.properties.property_value`` finds: the last \\x02name\\x01, else
    name\\x01 at 0 (whatever bytes ``name`` holds: the candidates and the test at each are
    the same)."""
    cdef Py_ssize_t found = -1
    cdef Py_ssize_t s = 0
    cdef const unsigned char* q
    while True:
        if n - s > k and p[s + k] == 1 and memcmp(p + s, name, k) == 0:
            found = s + k + 1
        q = <const unsigned char*>memchr(p + s, 2, n - s)
        if q == NULL:
            return found
        s = q - p + 1

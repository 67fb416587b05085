# cython: language_level=3
"""Java's ``String.hashCode`` and the hashes built on it, compiled: typed twins of the hot
functions of codec/hashing.py (see there; RocketMQ ``tagsString2tagsCode``,
``IndexFile.indexKeyHashMethod`` over ``IndexService.buildKey``, ``buildIndex``).

Each function returns what its pure namesake (``codec.hashing.<name>_py``) returns, for
every input: the types dispatch and the SDK pass (exact ``str``, ``bytes``, ``list``) take
the C paths here, anything else is handed to the pure function, so odd inputs and their
errors are the pure ones by construction. The hashes are straight loops in unsigned 32-bit
C arithmetic, which wraps as Java's int does; the pure module's power tables and head
caches are Python-speed tricks a C loop does not need.
"""

from cpython.bytes cimport PyBytes_AS_STRING, PyBytes_GET_SIZE
from cpython.unicode cimport (
    Py_UCS1,
    Py_UCS2,
    PyUnicode_1BYTE_KIND,
    PyUnicode_2BYTE_KIND,
    PyUnicode_DATA,
    PyUnicode_DecodeUTF8,
    PyUnicode_KIND,
)
from libc.stdint cimport int64_t, uint32_t
from libc.string cimport memchr, memcmp

# Only for a pair with an empty value (Java then takes an earlier pair of the name): the
# whole string is parsed, rarely, by the properties codec, compiled or pure as it is bound.
from codec.properties import property_value as _property_value

from codec._wire cimport aerolite_unicode_ready
from codec._wire cimport value_start as _value_start


cdef int64_t _TWO_32 = <int64_t>1 << 32


cdef object _pure(str name):
    """The pure function ``name`` (codec.hashing.<name>_py): what runs for inputs the C
    paths do not take, so their results and errors are the reference's."""
    from codec import hashing  # at call time: hashing imports this module
    return getattr(hashing, name + "_py")


# ------------------------------------------------------------------------ the hash loops


cdef inline uint32_t _hash_bytes(uint32_t h, const unsigned char* p, Py_ssize_t n) noexcept nogil:
    """``h`` continued over the bytes ``p[0:n]`` as UTF-16 units: h*31^n + hash(p).

    Four bytes a step, h*31^4 + a*31^3 + b*31^2 + c*31 + d: the multiplications of one
    step do not wait on each other, only on the previous step's h."""
    cdef Py_ssize_t i = 0
    while i + 4 <= n:
        h = (h * <uint32_t>923521 + p[i] * <uint32_t>29791 + p[i + 1] * <uint32_t>961
             + p[i + 2] * <uint32_t>31 + p[i + 3])
        i += 4
    while i < n:
        h = h * <uint32_t>31 + p[i]
        i += 1
    return h


cdef inline bint _is_ascii(const unsigned char* p, Py_ssize_t n) noexcept nogil:
    cdef unsigned char acc = 0
    cdef Py_ssize_t i
    for i in range(n):
        acc |= p[i]
    return acc < 0x80


cdef int _hash_str(str text, uint32_t* h) except -1:
    """``h[0]`` continued over the UTF-16 code units of ``text``: a code point past the BMP
    is its surrogate pair, and anything else (a lone surrogate too) the one unit it is,
    as Java holds them and ``encode("utf-16-be", "surrogatepass")`` gives them."""
    cdef Py_ssize_t i, n
    cdef uint32_t acc = h[0]
    cdef uint32_t c
    cdef const Py_UCS2* p2
    cdef const uint32_t* p4
    aerolite_unicode_ready(text)
    n = len(text)
    kind = PyUnicode_KIND(text)
    if kind == PyUnicode_1BYTE_KIND:
        acc = _hash_bytes(acc, <const unsigned char*>PyUnicode_DATA(text), n)
    elif kind == PyUnicode_2BYTE_KIND:
        p2 = <const Py_UCS2*>PyUnicode_DATA(text)
        for i in range(n):
            acc = acc * <uint32_t>31 + p2[i]
    else:
        p4 = <const uint32_t*>PyUnicode_DATA(text)
        for i in range(n):
            c = p4[i]
            if c > 0xFFFF:
                c -= 0x10000
                acc = acc * <uint32_t>31 + (0xD800 + (c >> 10))
                acc = acc * <uint32_t>31 + (0xDC00 + (c & 0x3FF))
            else:
                acc = acc * <uint32_t>31 + c
    h[0] = acc
    return 0


cdef inline int64_t _signed(uint32_t h) noexcept nogil:
    """Java's int of the hash bits."""
    return <int64_t>h - _TWO_32 if h & 0x80000000U else <int64_t>h


cdef inline int64_t _index_hash(uint32_t h) noexcept nogil:
    """``indexKeyHashMethod``: abs of the signed hash, and 0 for -2^31 (abs overflows)."""
    return <int64_t>h if h < 0x80000000U else (_TWO_32 - <int64_t>h) & 0x7FFFFFFF


cdef int _utf8_hash(uint32_t* h, const unsigned char* p, Py_ssize_t n) except -1:
    """``h[0]`` continued over ``p[0:n].decode(errors="replace")``: the bytes themselves
    when they are ASCII, else the decoded text's UTF-16 units."""
    if _is_ascii(p, n):
        h[0] = _hash_bytes(h[0], p, n)
        return 0
    return _hash_str(PyUnicode_DecodeUTF8(<char*>p, n, "replace"), h)


cdef int _prefix_hash(bytes topic, uint32_t* h) except -1:
    """The hash of ``(topic + b"#").decode(errors="replace")``, which a key's continues:
    the prefix ends in "#", so (prefix + key) decodes as prefix and key apart."""
    cdef const unsigned char* p = <const unsigned char*>PyBytes_AS_STRING(topic)
    cdef Py_ssize_t n = PyBytes_GET_SIZE(topic)
    h[0] = 0
    if _is_ascii(p, n):
        h[0] = _hash_bytes(0, p, n) * <uint32_t>31 + ord("#")
        return 0
    return _hash_str((topic + b"#").decode("utf-8", "replace"), h)


# ------------------------------------------------------------------- codec.hashing's API


def java_hash(text):
    """Java ``String.hashCode`` over UTF-16 code units, a signed 32-bit int."""
    cdef uint32_t h = 0
    if type(text) is not str:
        return _pure("java_hash")(text)
    _hash_str(<str>text, &h)
    return _signed(h)


def tags_code(tags):
    """The consume-queue tag code: hashCode of the tag, 0 without one."""
    cdef uint32_t h = 0
    if tags is None:
        return 0
    if type(tags) is not str:
        return _pure("tags_code")(tags)
    _hash_str(<str>tags, &h)
    return _signed(h)


def java_hash_ascii(data):
    """Java ``String.hashCode`` of ASCII bytes as an unsigned 32-bit int."""
    if type(data) is not bytes:
        return _pure("java_hash_ascii")(data)
    return _hash_bytes(0, <const unsigned char*>PyBytes_AS_STRING(data), PyBytes_GET_SIZE(data))


def java_hashes_ascii(prefix, keys):
    """``java_hash_ascii(prefix + key)`` for each key."""
    cdef uint32_t hp
    cdef list out = []
    if type(prefix) is not bytes or type(keys) is not list:
        return _pure("java_hashes_ascii")(prefix, keys)
    hp = _hash_bytes(0, <const unsigned char*>PyBytes_AS_STRING(prefix), PyBytes_GET_SIZE(prefix))
    for key in <list>keys:
        if type(key) is not bytes:
            return _pure("java_hashes_ascii")(prefix, keys)
        out.append(_hash_bytes(hp, <const unsigned char*>PyBytes_AS_STRING(key),
                               PyBytes_GET_SIZE(key)))
    return out


def index_key_hash(key):
    """RocketMQ ``indexKeyHashMethod``: abs(hashCode), and 0 where abs overflows."""
    cdef uint32_t h = 0
    if type(key) is not str:
        return _pure("index_key_hash")(key)
    _hash_str(<str>key, &h)
    return _index_hash(h)


def index_key_hashes(topic, keys):
    """``index_key_hash`` of ``topic#key`` for each key, topic and keys UTF-8 bytes."""
    cdef uint32_t hp, h
    cdef list out = []
    if type(topic) is not bytes or type(keys) is not list:
        return _pure("index_key_hashes")(topic, keys)
    _prefix_hash(<bytes>topic, &hp)
    for key in <list>keys:
        if type(key) is not bytes:
            return _pure("index_key_hashes")(topic, keys)
        h = hp
        _utf8_hash(&h, <const unsigned char*>PyBytes_AS_STRING(key), PyBytes_GET_SIZE(key))
        out.append(_index_hash(h))
    return out


# ------------------------------------------------------------- dispatch: a batch's hashes


cdef inline Py_ssize_t _value_end(const unsigned char* p, Py_ssize_t n, Py_ssize_t s) noexcept nogil:
    """The end of the value starting at ``s``: the next \\x02, or the end."""
    cdef const unsigned char* q = <const unsigned char*>memchr(p + s, 2, n - s)
    return n if q == NULL else q - p


cdef int64_t _tags_hash(const unsigned char* p, Py_ssize_t n) except? -1:
    """``tags_code(p[0:n].decode(errors="replace"))`` of a non-empty value."""
    cdef uint32_t h = 0
    _utf8_hash(&h, p, n)
    return _signed(h)


def tags_codes(properties):
    """The consume-queue tags code of each record from its stored properties."""
    cdef list out = []
    cdef bytes value
    cdef const unsigned char* p
    cdef Py_ssize_t n, s, e
    if type(properties) is not list:
        return _pure("tags_codes")(properties)
    for props in <list>properties:
        if type(props) is not bytes:
            return _pure("tags_codes")(properties)
        p = <const unsigned char*>PyBytes_AS_STRING(props)
        n = PyBytes_GET_SIZE(props)
        s = _value_start(p, n, <const unsigned char*>b"TAGS", 4)
        if s < 0:
            out.append(0)
            continue
        e = _value_end(p, n, s)
        if e > s:
            out.append(_tags_hash(p + s, e - s))
            continue
        value = _property_value(props, b"TAGS")  # Java skips an empty value
        if value:
            out.append(_tags_hash(<const unsigned char*>PyBytes_AS_STRING(value),
                                  PyBytes_GET_SIZE(value)))
        else:
            out.append(0)
    return out


cdef int _put_key(list hashes, list key_offsets, object offset, uint32_t hp,
                  const unsigned char* p, Py_ssize_t n) except -1:
    cdef uint32_t h = hp
    _utf8_hash(&h, p, n)
    hashes.append(_index_hash(h))
    key_offsets.append(offset)
    return 0


cdef int _put_keys(list hashes, list key_offsets, object offset, uint32_t hp,
                   const unsigned char* p, Py_ssize_t n) except -1:
    """The keys of a KEYS value ``p[0:n]``: split at spaces, empty ones skipped."""
    cdef Py_ssize_t t = 0
    cdef Py_ssize_t te
    cdef const unsigned char* q
    while t <= n:
        q = <const unsigned char*>memchr(p + t, 0x20, n - t)
        te = n if q == NULL else q - p
        if te > t:
            _put_key(hashes, key_offsets, offset, hp, p + t, te - t)
        t = te + 1
    return 0


def index_hashes(topic, properties, offsets):
    """The index entries of records of ``topic``: hashes of topic#UNIQ_KEY and topic#key
    for each key of KEYS, with the offsets of the records they belong to."""
    cdef list hashes = []
    cdef list key_offsets = []
    cdef bytes value
    cdef const unsigned char* p
    cdef Py_ssize_t i, count, n, s, e
    cdef uint32_t hp
    if type(topic) is not bytes or type(properties) is not list or type(offsets) is not list:
        return _pure("index_hashes")(topic, properties, offsets)
    count = len(<list>properties)
    if len(<list>offsets) != count:
        raise ValueError(f"properties of {count} records for {len(<list>offsets)} offsets")
    _prefix_hash(<bytes>topic, &hp)
    for i in range(count):
        props = (<list>properties)[i]
        offset = (<list>offsets)[i]
        if type(props) is not bytes:
            return _pure("index_hashes")(topic, properties, offsets)
        p = <const unsigned char*>PyBytes_AS_STRING(props)
        n = PyBytes_GET_SIZE(props)
        s = _value_start(p, n, <const unsigned char*>b"UNIQ_KEY", 8)
        if s >= 0:
            e = _value_end(p, n, s)
            if e > s:
                _put_key(hashes, key_offsets, offset, hp, p + s, e - s)
            else:
                value = _property_value(props, b"UNIQ_KEY")  # Java skips an empty value
                if value is not None:
                    _put_key(hashes, key_offsets, offset, hp,
                             <const unsigned char*>PyBytes_AS_STRING(value),
                             PyBytes_GET_SIZE(value))
        s = _value_start(p, n, <const unsigned char*>b"KEYS", 4)
        if s >= 0:
            e = _value_end(p, n, s)
            if e > s:
                _put_keys(hashes, key_offsets, offset, hp, p + s, e - s)
            else:
                value = _property_value(props, b"KEYS")
                if value:
                    _put_keys(hashes, key_offsets, offset, hp,
                              <const unsigned char*>PyBytes_AS_STRING(value),
                              PyBytes_GET_SIZE(value))
    return hashes, key_offsets

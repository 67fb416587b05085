# cython: language_level=3
"""The properties text codec, compiled: typed twins of the hot functions of
codec/properties.py (RocketMQ ``MessageDecoder.messageProperties2String`` /
``string2messageProperties``; the format is described there).

Each function returns what its pure namesake (``codec.properties.<name>_py``) returns, for
every input: the types the store and the SDK pass (exact ``str``, ``bytes``, ``dict`` of
``str``) take the C paths here, anything else is handed to the pure function, so odd inputs
and their errors are the pure ones by construction. Text is read in place (its PyUnicode
kind and data), property bytes through their buffer.
"""

from cpython.bytes cimport PyBytes_AS_STRING, PyBytes_FromStringAndSize, PyBytes_GET_SIZE
from cpython.unicode cimport (
    Py_UCS2,
    PyUnicode_1BYTE_KIND,
    PyUnicode_2BYTE_KIND,
    PyUnicode_DATA,
    PyUnicode_KIND,
)
from libc.stdint cimport uint32_t
from libc.string cimport memchr, memcmp

from codec._wire cimport aerolite_unicode_ready
from codec._wire cimport value_start as _value_start


cdef object _pure(str name):
    """The pure function ``name`` (codec.properties.<name>_py): what runs for inputs the C
    paths do not take, so their results and errors are the reference's."""
    from codec import properties  # at call time: properties imports this module
    return getattr(properties, name + "_py")


# --------------------------------------------------------------------------------- text


cdef inline Py_ssize_t _find(
    int kind, const void* data, uint32_t ch, Py_ssize_t s, Py_ssize_t e
) noexcept nogil:
    """Where the first ``ch`` (a separator, below 0x80) of ``[s, e)`` is, ``e`` if none."""
    cdef const char* q
    cdef const Py_UCS2* p2
    cdef const uint32_t* p4
    cdef Py_ssize_t i
    if kind == PyUnicode_1BYTE_KIND:
        q = <const char*>memchr(<const char*>data + s, <int>ch, e - s)
        return e if q == NULL else q - <const char*>data
    if kind == PyUnicode_2BYTE_KIND:
        p2 = <const Py_UCS2*>data
        for i in range(s, e):
            if p2[i] == ch:
                return i
        return e
    p4 = <const uint32_t*>data
    for i in range(s, e):
        if p4[i] == ch:
            return i
    return e


# Names recur (KEYS, TAGS, UNIQ_KEY, ...): a decoded name is looked up here by its first
# and last byte and length and, when the bytes match, that string object is reused, its
# hash already known, instead of making and hashing a new one. One-byte kind and names of
# up to 64 characters only (what is kept stays small); a collision replaces the slot (a
# miss costs only the copy the pure function makes).
cdef list _NAMES = [None] * 256


cdef str _name(str text, const unsigned char* data, Py_ssize_t s, Py_ssize_t e):
    """``text[s:e]`` of a one-byte-kind ``text`` whose characters are ``data``."""
    cdef Py_ssize_t n = e - s
    cdef Py_ssize_t slot
    cdef object cached
    if n > 64:
        return text[s:e]
    slot = (data[s] * 7 + data[e - 1] + n * 31) & 255
    cached = _NAMES[slot]
    if (
        cached is not None
        and len(<str>cached) == n
        and PyUnicode_KIND(cached) == PyUnicode_1BYTE_KIND
        and memcmp(PyUnicode_DATA(cached), data + s, n) == 0
    ):
        return <str>cached
    name = text[s:e]
    _NAMES[slot] = name
    return name


cdef dict _decode(str text):
    """``decode_properties``: each ``\\x02``-separated segment with a ``\\x01`` after a
    non-empty name and before a non-empty value is a pair; later pairs overwrite."""
    cdef dict out = {}
    cdef Py_ssize_t n, s, e, sep
    cdef int kind
    cdef const void* data
    aerolite_unicode_ready(text)
    n = len(text)
    kind = PyUnicode_KIND(text)
    data = PyUnicode_DATA(text)
    s = 0
    while s <= n:  # segment [s, e); one (empty) after a trailing \x02, as str.split gives
        e = _find(kind, data, 2, s, n)
        sep = _find(kind, data, 1, s, e)
        if s < sep and sep + 1 < e:
            if kind == PyUnicode_1BYTE_KIND:
                out[_name(text, <const unsigned char*>data, s, sep)] = text[sep + 1:e]
            else:
                out[text[s:sep]] = text[sep + 1:e]
        s = e + 1
    return out


def decode_properties(text):
    """Parse a properties string as Java does (see codec.properties)."""
    if type(text) is not str:
        return _pure("decode_properties")(text)
    return _decode(<str>text)


def encode_properties(props):
    """``name\\x01value`` pairs joined by ``\\x02``, without a trailing separator."""
    cdef list pieces = []
    if type(props) is not dict:
        return _pure("encode_properties")(props)
    for name, value in (<dict>props).items():
        # anything but str is formatted (f"{name}") by the pure function; only str here
        if type(name) is not str or type(value) is not str:
            return _pure("encode_properties")(props)
        pieces.append(name)
        pieces.append("\x01")
        pieces.append(value)
        pieces.append("\x02")
    if pieces:
        del pieces[len(pieces) - 1]
    return "".join(pieces)


# -------------------------------------------------------------------------------- bytes


def property_value(props, name):
    """``decode_properties(props.decode(errors="replace")).get(name)``, UTF-8 encoded,
    without parsing the other pairs (see codec.properties)."""
    cdef const unsigned char* p
    cdef const unsigned char* q
    cdef Py_ssize_t n, s, e
    if type(props) is not bytes or type(name) is not bytes:
        return _pure("property_value")(props, name)
    p = <const unsigned char*>PyBytes_AS_STRING(props)
    n = PyBytes_GET_SIZE(props)
    s = _value_start(p, n, <const unsigned char*>PyBytes_AS_STRING(name), PyBytes_GET_SIZE(name))
    if s < 0:
        return None
    q = <const unsigned char*>memchr(p + s, 2, n - s)
    e = n if q == NULL else q - p
    if e > s:
        return PyBytes_FromStringAndSize(<char*>p + s, e - s)
    # The last pair has an empty value: Java skips it and an earlier pair counts.
    text = _decode((<bytes>props).decode("utf-8", "replace")).get((<bytes>name).decode())
    return None if text is None else text.encode()

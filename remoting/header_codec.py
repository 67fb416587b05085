"""Header codecs: JSON (type 0), ROCKETMQ binary (type 1) and msgpack (type 2, ours).

RocketMQ counterpart: ``RemotingSerializable`` (fastjson) and ``RocketMQSerializable``.

Every codec turns a header into a ``HeaderFields`` tuple and back. Decoders are strict about
structure (anything malformed raises ``FrameError`` and the connection is closed, as Java's
decoder does) but lenient about values real clients send: extFields numbers and booleans
(C++ and ali-ons) become strings, a trailing newline (C++ ``FastWriter``) is whitespace, an
empty remark is no remark, and bytes that are not UTF-8 (the C++ client sends keys and
properties in whatever encoding its application used) become U+FFFD, as Java's
``new String(bytes, UTF_8)`` makes them: the request is served, not the connection closed.

JSON is written the way a Java broker's fastjson writes it: keys in alphabetical order,
nulls omitted, no spaces, every extFields value a string, non-ASCII as UTF-8 and control
characters as ``\\u00XX`` escapes.

ROCKETMQ binary layout::

    code        short  (signed; codes above 32767 cannot be written)
    language    byte
    version     short
    opaque      int
    flag        int
    remark len  int    then remark UTF-8 (0 = no remark)
    ext len     int    then per field: key len short, key, value len int, value

A zero-length string in a binary header is null to Java: an empty remark is no remark and an
extFields entry with an empty key or value is absent.
"""

from __future__ import annotations

import json
import struct
from collections.abc import Callable
from typing import Any, NamedTuple, Protocol

import msgpack

from remoting.codes import LanguageCode, SerializeType
from remoting.errors import FrameError


class HeaderSource(Protocol):
    """What an encoder reads: ``HeaderFields`` or a ``RemotingCommand`` itself (so encoding
    builds no intermediate object)."""

    @property
    def code(self) -> int: ...
    @property
    def language(self) -> int: ...
    @property
    def version(self) -> int: ...
    @property
    def opaque(self) -> int: ...
    @property
    def flag(self) -> int: ...
    @property
    def remark(self) -> str | None: ...
    @property
    def ext_fields(self) -> dict[str, str]: ...


class HeaderFields(NamedTuple):
    """The header of a RemotingCommand, codec-neutral."""

    code: int
    language: int
    version: int
    opaque: int
    flag: int
    remark: str | None
    ext_fields: dict[str, str]


_LANGUAGE_NAMES: tuple[str, ...] = tuple(lc.name for lc in LanguageCode)
_LANGUAGE_BY_NAME: dict[str, int] = {lc.name: lc.value for lc in LanguageCode}

_INT32_MIN, _INT32_MAX = -(1 << 31), (1 << 31) - 1


def _language_name(language: int) -> str:
    if 0 <= language < len(_LANGUAGE_NAMES):
        return _LANGUAGE_NAMES[language]
    return "OTHER"


def ext_value(value: Any) -> str:
    """A decoded extFields value as the string Java would have seen.

    Booleans as ``true``/``false``, integral numbers in decimal, other JSON as compact JSON.
    """
    if isinstance(value, str):
        return value
    if value is True:
        return "true"
    if value is False:
        return "false"
    if isinstance(value, int):
        return str(value)
    if isinstance(value, float):
        return str(int(value)) if value.is_integer() else repr(value)
    try:
        return json.dumps(value, separators=(",", ":"), ensure_ascii=False)
    except (TypeError, ValueError):
        # bytes or a msgpack ExtType: no string a Java peer could have meant
        raise FrameError(
            f"extFields value of type {type(value).__name__} has no string form"
        ) from None


def _check_int(name: str, value: Any, lo: int = _INT32_MIN, hi: int = _INT32_MAX) -> int:
    if isinstance(value, bool) or not isinstance(value, int):
        if isinstance(value, str):
            try:
                value = int(value)
            except ValueError:
                raise FrameError(f"header field {name} is not an integer: {value!r}") from None
        else:
            raise FrameError(f"header field {name} is not an integer: {value!r}")
    if not lo <= value <= hi:
        raise FrameError(f"header field {name} out of range: {value}")
    return int(value)


def _int(name: str, value: Any, lo: int = _INT32_MIN, hi: int = _INT32_MAX) -> int:
    if type(value) is int and lo <= value <= hi:
        return value  # the common case, without the checks' call overhead
    return _check_int(name, value, lo, hi)


def _ext_dict(name: str, raw: Any) -> dict[str, str]:
    if raw is None:
        return {}
    if not isinstance(raw, dict):
        raise FrameError(f"header field {name} is not an object")
    return {str(k): ext_value(v) for k, v in raw.items() if v is not None}


def _remark(raw: Any) -> str | None:
    if raw is None or raw == "":
        return None
    if not isinstance(raw, str):
        raise FrameError(f"header field remark is not a string: {raw!r}")
    return raw


# ----------------------------------------------------------------------------------- JSON

_json_encode = json.JSONEncoder(ensure_ascii=False, separators=(",", ":")).encode
_json_decode = json.JSONDecoder().decode

# fastjson's output with its keys in order; extFields and remark are spliced in (or left out)
# already encoded. Formatting a template costs a third of building and encoding a dict.
_JSON_TEMPLATE = (
    '{"code":%d%s,"flag":%d,"language":"%s","opaque":%d%s,'
    '"serializeTypeCurrentRPC":"JSON","version":%d}'
)


def encode_json(h: HeaderSource) -> bytes:
    """Encode as fastjson does: sorted keys, nulls omitted, compact, extFields as strings."""
    ext = h.ext_fields
    remark = h.remark
    return (
        _JSON_TEMPLATE
        % (
            h.code,
            ',"extFields":' + _json_encode(ext) if ext else "",
            h.flag,
            _language_name(h.language),
            h.opaque,
            ',"remark":' + _json_encode(remark) if remark else "",
            h.version,
        )
    ).encode()


def _java_string(text: str) -> str:
    """``text`` with each lone surrogate as ``?``, which is what Java's
    ``String.getBytes(UTF_8)`` stores for one; Python cannot encode it at all."""
    return text.encode("utf-8", "replace").decode("utf-8")


def decode_json(header: memoryview | bytes) -> HeaderFields:
    """Decode a JSON header as any RocketMQ 4.x client writes it."""
    # str(buffer, "utf-8") skips json.loads' encoding detection and a bytes copy
    text = str(header, "utf-8", "replace")
    try:
        doc = _json_decode(text)
    except ValueError as exc:
        raise FrameError(f"JSON header does not parse: {exc}") from None
    except RecursionError:
        raise FrameError("JSON header nests too deeply") from None
    if type(doc) is not dict:
        raise FrameError("JSON header is not an object")
    if "code" not in doc:
        raise FrameError("JSON header has no code")
    language = doc.get("language", "JAVA")
    if type(language) is str:
        lang = _LANGUAGE_BY_NAME.get(language, LanguageCode.OTHER)
    else:
        lang = _check_int("language", language, 0, 255)
    raw_ext = doc.get("extFields")
    ext: dict[str, str]
    if type(raw_ext) is dict and all(type(v) is str for v in raw_ext.values()):
        ext = raw_ext  # what Java and Go send: use the parsed dict as it is
    else:
        ext = _ext_dict("extFields", raw_ext)
    remark = doc.get("remark")
    if "\\ud" in text or "\\uD" in text:
        # Only an escape spells a surrogate (the decode above replaced bad bytes); a lone one
        # would fail every later encode, the commit log's included.
        ext = {_java_string(k): _java_string(v) for k, v in ext.items()}
        if type(remark) is str:
            remark = _java_string(remark)
    return HeaderFields(
        _int("code", doc["code"]),
        lang,
        _int("version", doc.get("version", 0)),
        _int("opaque", doc.get("opaque", 0)),
        _int("flag", doc.get("flag", 0)),
        remark if type(remark) is str and remark else _remark(remark),
        ext,
    )


# ------------------------------------------------------------------------- ROCKETMQ binary

_BIN_FIXED = struct.Struct(
    ">"
    "h"  # code
    "B"  # language code
    "h"  # version
    "i"  # opaque
    "i"  # flag
    "i"  # remark length, then remark bytes
)
assert _BIN_FIXED.size == 17
_BIN_INT = struct.Struct(">i")
_BIN_SHORT = struct.Struct(">h")
assert _BIN_INT.size == 4
assert _BIN_SHORT.size == 2


def encode_binary(h: HeaderSource) -> bytes:
    """Encode as ``RocketMQSerializable.rocketMQProtocolEncode`` does."""
    if not -32768 <= h.code <= 32767:
        raise FrameError(f"code {h.code} cannot be written in a ROCKETMQ header (16 bits)")
    if not -32768 <= h.version <= 32767:
        raise FrameError(f"version {h.version} cannot be written in a ROCKETMQ header")
    remark = h.remark.encode() if h.remark else b""
    parts: list[bytes] = [
        _BIN_FIXED.pack(h.code, h.language & 0xFF, h.version, h.opaque, h.flag, len(remark)),
        remark,
    ]
    ext_parts: list[bytes] = []
    for key, value in h.ext_fields.items():
        k = key.encode()
        v = value.encode()
        ext_parts += (_BIN_SHORT.pack(len(k)), k, _BIN_INT.pack(len(v)), v)
    ext = b"".join(ext_parts)
    parts += (_BIN_INT.pack(len(ext)), ext)
    return b"".join(parts)


def _utf8(buf: memoryview | bytes, start: int, length: int, what: str) -> str:
    if length < 0 or start + length > len(buf):
        raise FrameError(f"ROCKETMQ header: {what} length {length} runs past the header")
    return str(buf[start : start + length], "utf-8", "replace")


def decode_binary(header: memoryview | bytes) -> HeaderFields:
    """Decode a ROCKETMQ binary header; a repeated ext key keeps its last value, as Java."""
    if len(header) < _BIN_FIXED.size + 4:
        raise FrameError(f"ROCKETMQ header of {len(header)} bytes is shorter than 21")
    code, language, version, opaque, flag, remark_len = _BIN_FIXED.unpack_from(header, 0)
    pos = _BIN_FIXED.size
    remark = _utf8(header, pos, remark_len, "remark") if remark_len else None
    pos += remark_len
    if pos + 4 > len(header):
        raise FrameError("ROCKETMQ header: no room for the extFields length")
    (ext_len,) = _BIN_INT.unpack_from(header, pos)
    pos += 4
    end = pos + ext_len
    if ext_len < 0 or end != len(header):
        raise FrameError(
            f"ROCKETMQ header: extFields length {ext_len} does not match the header size"
        )
    ext: dict[str, str] = {}
    while pos < end:
        if pos + 2 > end:
            raise FrameError("ROCKETMQ header: truncated extFields key length")
        (klen,) = _BIN_SHORT.unpack_from(header, pos)
        key = _utf8(header, pos + 2, klen, "extFields key")
        pos += 2 + klen
        if pos + 4 > end:
            raise FrameError("ROCKETMQ header: truncated extFields value length")
        (vlen,) = _BIN_INT.unpack_from(header, pos)
        value = _utf8(header, pos + 4, vlen, "extFields value")
        pos += 4 + vlen
        # Java reads a zero-length string as null: such a key or value is absent.
        if key and value:
            ext[key] = value
    return HeaderFields(code, language, version, opaque, flag, remark or None, ext)


# -------------------------------------------------------------------------------- msgpack

_msgpack_pack: Callable[[object], bytes] = msgpack.Packer(use_bin_type=True).pack


def encode_msgpack(h: HeaderSource) -> bytes:
    """Aerolite's own header: a msgpack array in HeaderFields order."""
    return _msgpack_pack((h.code, h.language, h.version, h.opaque, h.flag, h.remark, h.ext_fields))


def decode_msgpack(header: memoryview | bytes) -> HeaderFields:
    try:
        doc = msgpack.unpackb(
            header, raw=False, unicode_errors="replace", strict_map_key=True, use_list=True
        )
    except (ValueError, msgpack.ExtraData, msgpack.FormatError, msgpack.StackError) as exc:
        raise FrameError(f"msgpack header does not parse: {exc}") from None
    if not isinstance(doc, list) or len(doc) != 7:
        raise FrameError("msgpack header is not a 7-element array")
    code, language, version, opaque, flag, remark, ext = doc
    return HeaderFields(
        code=_check_int("code", code),
        language=_check_int("language", language, 0, 255),
        version=_check_int("version", version),
        opaque=_check_int("opaque", opaque),
        flag=_check_int("flag", flag),
        remark=_remark(remark),
        ext_fields=_ext_dict("extFields", ext),
    )


def decode_header(serialize_type: int, header: memoryview | bytes) -> HeaderFields:
    """Decode with the codec named by the frame's serialize type."""
    if serialize_type == SerializeType.JSON:
        return decode_json(header)
    if serialize_type == SerializeType.ROCKETMQ:
        return decode_binary(header)
    if serialize_type == SerializeType.MSGPACK:
        return decode_msgpack(header)
    raise FrameError(f"unknown serialize type {serialize_type}")


def encode_header(serialize_type: int, h: HeaderSource) -> bytes:
    """Encode with the codec of ``serialize_type``.

    Raises:
        FrameError: the header cannot be written in that serialization (a value out of its
            field's range, a key too long for the binary header, an unknown type).
    """
    try:
        if serialize_type == SerializeType.JSON:
            return encode_json(h)
        if serialize_type == SerializeType.ROCKETMQ:
            return encode_binary(h)
        if serialize_type == SerializeType.MSGPACK:
            return encode_msgpack(h)
    except (struct.error, OverflowError, TypeError, ValueError) as exc:
        raise FrameError(f"header not encodable as type {serialize_type}: {exc}") from None
    raise FrameError(f"unknown serialize type {serialize_type}")

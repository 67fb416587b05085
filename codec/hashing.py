"""Java's ``String.hashCode`` and the hashes built on it.

RocketMQ counterpart: ``MessageExtBrokerInner.tagsString2tagsCode`` (a tag's hash is its
consume-queue tags code), ``IndexFile.indexKeyHashMethod`` over ``IndexService.buildKey``
(``topic#key``: an index slot), and ``MessageQueueSelector`` by hash on the client. Every one is
``String.hashCode`` over UTF-16 code units, wrapped to 32 bits. ``tags_codes`` and
``index_hashes`` give what dispatch enters for the records of an append (the tags codes of
``CommitLog.checkMessageAndReturnSize``, the keys of ``IndexService.buildIndex``).
``java_hashmap_order`` is the order a ``java.util.HashMap`` of strings iterates in, which
Apache's tools print in.

The hot functions have compiled twins in codec/_chash.pyx, bound here when built (below).
"""

from __future__ import annotations

import contextlib
import operator
import struct
from collections.abc import Callable, Iterable

from codec import _ext
from codec.properties import property_value

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


# java_hash's results by text: tags and keys recur (a bound, cleared when reached, keeps
# it small; a miss only costs a hash). A dict rather than functools.lru_cache so that
# java_hash stays a plain function with the signature of the compiled one.
_JAVA_HASHES: dict[str, int] = {}
_JAVA_HASHES_MAX = 4096


def java_hash(text: str) -> int:
    """Java ``String.hashCode``: over UTF-16 code units, wrapped to a signed 32-bit int.

    A character beyond the BMP is two units (its surrogate pair) and a lone surrogate, which
    a Java string may hold as well, is the one unit it is (``surrogatepass``).

    Computed as sum(unit * 31^(n-1-i)) mod 2^32 with ``map`` over precomputed powers:
    1.9 us for a 43-character key against 2.9 us for the per-character loop (dispatch
    hashes every key of every message for the index, and the cache cannot help UNIQ_KEYs).
    """
    cached = _JAVA_HASHES.get(text)
    if cached is not None:
        return cached
    if text.isascii():
        units: bytes | tuple[int, ...] = text.encode("ascii")
    else:
        raw = text.encode("utf-16-be", "surrogatepass")
        units = struct.unpack(f">{len(raw) // 2}H", raw)
    h: int = sum(map(operator.mul, units, _powers_of_31(len(units)))) & _HASH_MASK
    if h & 0x80000000:
        h -= 1 << 32
    if len(_JAVA_HASHES) >= _JAVA_HASHES_MAX:
        _JAVA_HASHES.clear()
    _JAVA_HASHES[text] = h
    return h


def java_hashmap_order(keys: Iterable[str]) -> list[str]:
    """``keys`` (distinct, in insertion order) in the order a ``java.util.HashMap`` (or
    ``HashSet``) built from them iterates: by bucket of the spread ``String.hashCode``,
    insertion order within a bucket. Apache's tools print topics, groups, properties in this
    order; so do ours where scripts compare the two outputs."""
    distinct = list(dict.fromkeys(keys))
    capacity = 16
    while len(distinct) > capacity * 3 // 4:
        capacity *= 2

    def bucket(key: str) -> int:
        h = java_hash(key) & 0xFFFFFFFF
        return (h ^ (h >> 16)) & (capacity - 1)

    return sorted(distinct, key=bucket)  # sorted() is stable: insertion order within a bucket


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


def index_key_hash(key: str) -> int:
    """RocketMQ ``indexKeyHashMethod``: abs(hashCode), and 0 where abs overflows (-2^31)."""
    h = java_hash(key)
    return 0 if h == -(2**31) else abs(h)


def index_key_hashes(topic: bytes, keys: list[bytes]) -> list[int]:
    """``index_key_hash`` of ``topic#key`` for each key, topic and keys given as UTF-8
    bytes (decoded as the store decodes properties, invalid bytes replaced); ASCII keys
    are hashed without decoding, the topic's part once."""
    prefix = topic + b"#"
    if prefix.isascii() and all(map(bytes.isascii, keys)):
        # abs() of the hash as a signed int, and 0 for -2^31
        return [
            h if h < 0x80000000 else (0x100000000 - h) & 0x7FFFFFFF
            for h in java_hashes_ascii(prefix, keys)
        ]
    return [index_key_hash((prefix + key).decode(errors="replace")) for key in keys]


# ---------------------------------------------------------------- dispatch: a batch's hashes
# What dispatch enters for the records of one append (store/dispatch.py), from their stored
# properties: only TAGS, KEYS and UNIQ_KEY are looked up (``property_value``), nothing parsed.


def _tags_code_of(props: bytes) -> int:
    """The tags code of a record (not in SCHEDULE_TOPIC_XXXX) from its stored properties:
    the hashCode of its TAGS value decoded as the store decodes properties, 0 without one."""
    tags = property_value(props, b"TAGS")
    return tags_code(tags.decode(errors="replace")) if tags else 0


def tags_codes(properties: list[bytes]) -> list[int]:
    """The consume-queue tags code of each record, from its stored properties (RocketMQ's
    ``tagsString2tagsCode`` in ``CommitLog.checkMessageAndReturnSize``): ``tags_code`` of its
    TAGS, 0 without one. Not for SCHEDULE_TOPIC_XXXX, whose code is a deliver time."""
    # Every pair starts right after a \x02 here, so one search tells whether any record
    # has a TAGS pair at all; many batches have none.
    if (b"\x02" + b"\x02".join(properties)).find(b"\x02TAGS\x01") < 0:
        return [0] * len(properties)
    return [_tags_code_of(props) for props in properties]


def index_hashes(
    topic: bytes, properties: list[bytes], offsets: list[int]
) -> tuple[list[int], list[int]]:
    """The index entries of records of ``topic`` (UTF-8), RocketMQ's ``IndexService.buildIndex``
    for each: the ``index_key_hash`` of ``topic#UNIQ_KEY`` and of ``topic#key`` for each key of
    KEYS (split at spaces, empty keys skipped), each with the commit-log offset
    ``offsets[i]`` of the record ``properties[i]`` it is a key of; a record's keys are
    adjacent, in that order. A pair with an empty value is no pair (Java skips it, and an
    earlier pair of that name counts). Returns the hashes and their offsets."""
    if len(offsets) != len(properties):
        raise ValueError(f"properties of {len(properties)} records for {len(offsets)} offsets")
    keys: list[bytes] = []
    key_offsets: list[int] = []
    with_keys = (b"\x02" + b"\x02".join(properties)).find(b"\x02KEYS\x01") >= 0
    for offset, props in zip(offsets, properties, strict=True):
        # property_value(props, b"UNIQ_KEY"), inlined for the pair every message has
        i = props.rfind(b"\x02UNIQ_KEY\x01")
        if i >= 0:
            i += 10
        elif props.startswith(b"UNIQ_KEY\x01"):
            i = 9
        if i >= 0:
            j = props.find(b"\x02", i)
            uniq: bytes | None = props[i:j] if j >= 0 else props[i:]
            if not uniq:
                uniq = property_value(props, b"UNIQ_KEY")  # Java skips an empty value
            if uniq is not None:
                keys.append(uniq)
                key_offsets.append(offset)
        if with_keys:
            value = property_value(props, b"KEYS")
            if value:
                for key in value.split(b" "):
                    if key:
                        keys.append(key)
                        key_offsets.append(offset)
    return index_key_hashes(topic, keys), key_offsets


# The compiled speedups (codec/_chash.pyx) when built and not disabled; the pure functions
# stay importable as <name>_py, the reference the compiled ones are tested against.
java_hash_py = java_hash
java_hash_ascii_py = java_hash_ascii
java_hashes_ascii_py = java_hashes_ascii
tags_code_py = tags_code
index_key_hash_py = index_key_hash
index_key_hashes_py = index_key_hashes
tags_codes_py = tags_codes
index_hashes_py = index_hashes

if not _ext.DISABLED:
    with contextlib.suppress(ImportError):
        from codec._chash import (
            index_hashes,
            index_key_hash,
            index_key_hashes,
            java_hash,
            java_hash_ascii,
            java_hashes_ascii,
            tags_code,
            tags_codes,
        )

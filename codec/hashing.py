"""Java's ``String.hashCode`` and the hashes built on it.

RocketMQ counterpart: ``MessageExtBrokerInner.tagsString2tagsCode`` (a tag's hash is its
consume-queue tags code), ``IndexFile.indexKeyHashMethod`` over ``IndexService.buildKey``
(``topic#key``: an index slot), and ``MessageQueueSelector`` by hash on the client. Every one is
``String.hashCode`` over UTF-16 code units, wrapped to 32 bits. ``tags_codes`` and
``index_hashes`` give what dispatch enters for the records of an append (the tags codes of
``CommitLog.checkMessageAndReturnSize``, the keys of ``IndexService.buildIndex``).
``java_hashmap_order`` is the order a ``java.util.HashMap`` of strings iterates in, which
Apache's tools print in; ``java_hashmap_order_by`` that of any keys given their ``hashCode``
(``message_queue_hash``: RocketMQ's ``MessageQueue``), from the table a ``putAll`` makes
(``java_putall_capacity``) too, and ``java_properties_order`` that of a ``java.util.Properties``.

The hot functions have compiled twins in codec/_chash.pyx, bound here when built (below).
"""

from __future__ import annotations

import contextlib
import operator
import struct
from collections.abc import Callable, Iterable, Sequence
from typing import TypeVar

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


# ------------------------------------------------ Java's hash collections: iteration orders
# Apache's tools print what they hold in java.util hash collections, in those collections'
# iteration order: HashMap/HashSet (offset tables, queue sets) and Properties (broker and
# name-server configs). The orders below are those of Java 17 (tested against it).

_T = TypeVar("_T")
_MAXIMUM_CAPACITY = 1 << 30
_TREEIFY_THRESHOLD = 8  # a bin that would hold more nodes than this is treeified ...
_MIN_TREEIFY_CAPACITY = 64  # ... once the table is this large; before, the table grows
_UNTREEIFY_THRESHOLD = 6


def _float32(value: float) -> float:
    """``value`` rounded to a Java ``float`` (IEEE single precision, to nearest)."""
    result: float = struct.unpack("<f", struct.pack("<f", value))[0]
    return result


def _table_size_for(c: int) -> int:
    """``HashMap.tableSizeFor`` / ``ConcurrentHashMap.tableSizeFor``: the least power of two
    >= ``c`` (1 for ``c`` <= 1), at most 2^30."""
    n = 1
    while n < c:
        n <<= 1
    return min(n, _MAXIMUM_CAPACITY)


def _spread(h: int) -> int:
    """``HashMap.hash``: a ``hashCode`` (signed or unsigned 32-bit) with its high half folded
    into the low one, as an unsigned int: ``h ^ (h >>> 16)``."""
    h &= _HASH_MASK
    return h ^ (h >> 16)


def java_putall_capacity(first_size: int) -> int:
    """The table capacity of a ``new HashMap<>()`` after ``putAll`` of a map of ``first_size``
    entries (Java 17 ``HashMap.putMapEntries`` on a map without a table): the threshold is set
    to ``tableSizeFor((int)((float)s / 0.75f + 1.0f))`` and the first ``resize`` takes it as the
    capacity (4 entries: 8, 8: 16, 12: 32, 16: 32, 1: 2). Not the 16 a ``put`` starts from:
    a ``HashMap`` filled by ``putAll`` can iterate in another order than one filled entry by
    entry (RocketMQ's admin merges per-broker offset tables so). 0 entries leave the map without
    a table, which its first ``put`` makes 16."""
    if first_size <= 0:
        return 16
    ft = _float32(_float32(_float32(float(first_size)) / 0.75) + 1.0)
    t = int(ft) if ft < _MAXIMUM_CAPACITY else _MAXIMUM_CAPACITY
    return _table_size_for(t)


def java_hashmap_order_by(
    items: Sequence[_T], hash_of: Callable[[_T], int], capacity: int = 16
) -> list[_T]:
    """``items`` (distinct keys, in insertion order) in the order a ``java.util.HashMap`` (or
    ``HashSet``) iterates them, each key's Java ``hashCode`` given by ``hash_of`` (a signed or
    unsigned 32-bit int), the map's table starting at ``capacity`` (a power of two: 16 for
    ``new HashMap<>()``, ``java_putall_capacity`` after a first ``putAll``; a map that already
    holds keys is given them first, in its iteration order).

    Java's bucket is ``(n - 1) & (h ^ (h >>> 16))`` of a table of ``n``, which doubles when the
    size passes 0.75 n; a resize keeps the relative order of a bucket's keys, so iteration is
    by final bucket, insertion order within one. As in Java 17's ``putVal``, a bucket that
    would hold a 9th key doubles a table under 64 too (``treeifyBin`` resizes instead). In a
    table of 64 or more such a bucket becomes a red-black tree whose iteration order is the
    tree's (its root first): not simulated, the bucket stays in insertion order. At 0.75 keys
    a bucket on average, 9 in one do not happen by chance; crafted strings (of "Aa" and "BB",
    all of one hash) get there."""
    if capacity < 1 or capacity & (capacity - 1):
        raise ValueError(f"a HashMap's capacity is a power of two, not {capacity}")
    hashes = [_spread(hash_of(item)) for item in items]
    cap = min(capacity, _MAXIMUM_CAPACITY)
    counts: dict[int, int] = {}
    for size, h in enumerate(hashes, 1):
        bucket = h & (cap - 1)
        before = counts.get(bucket, 0)
        counts[bucket] = before + 1
        grow = 0
        if before >= _TREEIFY_THRESHOLD and cap < _MIN_TREEIFY_CAPACITY:
            grow = 1  # treeifyBin: resize() instead, then ++size > threshold may resize again
        if size > (cap << grow) * 3 // 4 and (cap << grow) < _MAXIMUM_CAPACITY:
            grow += 1
        if grow:
            cap <<= grow
            counts = {}
            for earlier in hashes[:size]:
                counts[earlier & (cap - 1)] = counts.get(earlier & (cap - 1), 0) + 1
    mask = cap - 1
    order = sorted(range(len(hashes)), key=lambda i: hashes[i] & mask)  # stable
    return [items[i] for i in order]


def java_hashmap_order(keys: Iterable[str]) -> list[str]:
    """``keys`` (distinct, in insertion order) in the order a ``java.util.HashMap`` (or
    ``HashSet``) built from them iterates: by bucket of the spread ``String.hashCode``,
    insertion order within a bucket. Apache's tools print topics, groups, properties in this
    order; so do ours where scripts compare the two outputs. ``java_hashmap_order_by`` over
    ``java_hash``, from a table of 16."""
    return java_hashmap_order_by(list(dict.fromkeys(keys)), java_hash)


class _ConcurrentHashMapOrder:
    """The bins of a Java 17 ``java.util.concurrent.ConcurrentHashMap`` that one thread puts
    string keys into (values play no part): enough of ``putVal``, ``addCount``,
    ``treeifyBin``, ``tryPresize`` and ``transfer`` to know where each key lands and in which
    order a bin's keys iterate."""

    def __init__(self, initial_capacity: int) -> None:
        # ConcurrentHashMap(int) is (initialCapacity, 0.75f, 1): the long divided by a float
        # is a float; the table is the power of two for 1 + that, sizeCtl until initTable.
        size = int(1.0 + _float32(_float32(float(initial_capacity)) / 0.75))
        self.size_ctl = _MAXIMUM_CAPACITY if size >= _MAXIMUM_CAPACITY else _table_size_for(size)
        self.table: list[list[tuple[int, str]]] = []
        self.trees: set[int] = set()  # the bins that are TreeBins
        self.count = 0

    def put(self, key: str) -> None:
        """``put(key, value)``: a new key goes at the tail of its bin (at the head of a
        TreeBin's node list); an existing one stays where it is."""
        h = _spread(java_hash(key)) & 0x7FFFFFFF  # spread() clears the sign (HASH_BITS)
        if not self.table:  # initTable
            n = self.size_ctl if self.size_ctl > 0 else 16
            self.table = [[] for _ in range(n)]
            self.size_ctl = n - (n >> 2)
        i = h & (len(self.table) - 1)
        bin_ = self.table[i]
        if i in self.trees:  # putTreeVal: binCount 2, no treeifyBin
            if all(k != key for _, k in bin_):
                bin_.insert(0, (h, key))
                self._add_count()
            return
        for position, (_, k) in enumerate(bin_, 1):
            if k == key:  # binCount is the matched node's position: treeifyBin at 8+
                if position >= _TREEIFY_THRESHOLD:
                    self._treeify_bin(i)
                return
        bin_.append((h, key))
        if len(bin_) - 1 >= _TREEIFY_THRESHOLD:  # binCount: the nodes there were before
            self._treeify_bin(i)
        self._add_count()

    def _add_count(self) -> None:
        """``addCount(1, binCount)``: resize while the count reaches sizeCtl."""
        self.count += 1
        while self.count >= self.size_ctl and len(self.table) < _MAXIMUM_CAPACITY:
            self._transfer()

    def _treeify_bin(self, i: int) -> None:
        """``treeifyBin``: a table under 64 grows instead (``tryPresize(n << 1)``), else the
        bin becomes a TreeBin, its nodes kept in order."""
        n = len(self.table)
        if n < _MIN_TREEIFY_CAPACITY:
            self._try_presize(n << 1)
        else:
            self.trees.add(i)

    def _try_presize(self, size: int) -> None:
        """``tryPresize``: transfer until sizeCtl (0.75 n) reaches tableSizeFor(1.5 size + 1):
        from ``treeifyBin`` of a table of n that is 3 doublings, to 8 n, not 1."""
        c = (
            _MAXIMUM_CAPACITY
            if size >= _MAXIMUM_CAPACITY >> 1
            else _table_size_for(size + (size >> 1) + 1)
        )
        while c > self.size_ctl and len(self.table) < _MAXIMUM_CAPACITY:
            self._transfer()

    def _transfer(self) -> None:
        """``transfer`` to a table of 2 n. A list bin is split at ``lastRun``, the start of its
        longest tail whose nodes all go the same way: that tail moves as it is, the nodes before
        it are re-linked one by one at the head of their new list, so in reverse order. A
        TreeBin is split in order (and untreeified at 6 nodes or fewer)."""
        old = self.table
        n = len(old)
        table: list[list[tuple[int, str]]] = [[] for _ in range(2 * n)]
        trees: set[int] = set()
        for i, bin_ in enumerate(old):
            if not bin_:
                continue
            if i in self.trees:
                lo = [node for node in bin_ if not node[0] & n]
                hi = [node for node in bin_ if node[0] & n]
                table[i], table[i + n] = lo, hi
                trees.update(
                    j for j, half in ((i, lo), (i + n, hi)) if len(half) > _UNTREEIFY_THRESHOLD
                )
                continue
            last_run = len(bin_) - 1
            run_bit = bin_[last_run][0] & n
            while last_run > 0 and bin_[last_run - 1][0] & n == run_bit:
                last_run -= 1
            lo = bin_[last_run:] if not run_bit else []
            hi = bin_[last_run:] if run_bit else []
            for node in bin_[:last_run]:
                (hi if node[0] & n else lo).insert(0, node)
            table[i], table[i + n] = lo, hi
        self.table, self.trees = table, trees
        self.size_ctl = (n << 1) - (n >> 1)

    def keys(self) -> list[str]:
        """Iteration order: bins 0 .. n - 1, each bin's nodes in order."""
        return [key for bin_ in self.table for _, key in bin_]


def java_properties_order(keys: Iterable[str]) -> list[str]:
    """``keys`` (in the order they were put, repeats allowed) in the order a
    ``java.util.Properties`` that they were put into one by one iterates (``keySet``,
    ``entrySet``, ``forEach``): what ``Properties.load`` makes of ``key=value`` lines, which
    RocketMQ's ``MixAll.string2Properties`` runs on a broker's config and mqadmin prints in.

    Since Java 9 a ``Properties`` keeps its entries in a ``new ConcurrentHashMap<>(8)``: a table
    of 16 (1 + 8 / 0.75 rounded up to a power of two) made at the first put, bin
    ``(n - 1) & spread(h)`` with ``spread(h) = (h ^ (h >>> 16)) & 0x7fffffff``, new keys at a
    bin's tail, and a doubling when the count after a put reaches 0.75 n (the 12th key, the
    24th, ...). Unlike a ``HashMap``'s, the doubling reverses part of a bin (see
    ``_ConcurrentHashMapOrder._transfer``), so the order is not by bin and insertion order:
    the map's history is replayed. A 9th key in one bin grows a table under 64 to 8 times its
    size (``treeifyBin`` calls ``tryPresize(2 n)``, which transfers until sizeCtl reaches
    ``tableSizeFor(3 n + 1)``); from 64 on the bin becomes a TreeBin, whose node list, which
    iteration follows, takes new keys at its head: both are simulated. Not for a
    ``Properties`` filled by ``putAll`` (Java 17 presizes the table for the other map first)."""
    chm = _ConcurrentHashMapOrder(8)
    for key in keys:
        chm.put(key)
    return chm.keys()


def message_queue_hash(topic: str, broker_name: str, queue_id: int) -> int:
    """RocketMQ 4.9.7 ``MessageQueue.hashCode()`` (Eclipse-generated: prime 31, result 1, then
    brokerName, queueId, topic), a signed 32-bit int. ``HashSet<MessageQueue>`` and
    ``HashMap<MessageQueue, ...>`` (queue sets, offset tables) iterate by it: give it to
    ``java_hashmap_order_by``."""
    result = 31 * 1 + java_hash(broker_name)
    result = 31 * result + queue_id
    result = (31 * result + java_hash(topic)) & _HASH_MASK
    return result - (1 << 32) if result & 0x80000000 else result


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

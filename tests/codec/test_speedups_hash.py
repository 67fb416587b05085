"""The compiled Java hashes (codec/_chash.pyx) return what the pure ones (codec/hashing.py,
``<name>_py``) return, and raise what they raise, on any input.

Inputs are random and adversarial: any text (non-BMP characters, lone and paired
surrogates), any bytes (non-UTF-8, truncated sequences), keys longer than the pure
version's cached heads, properties with separators in odd places, empty values, duplicate
names, a trailing \\x02 and 32,767 bytes, and arguments of other types (handed to the pure
function). The dispatch functions are also checked against a model built from the parsed
properties: what ``dispatch_record`` enters for each record.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest
from hypothesis import example, given, settings
from hypothesis import strategies as st

from codec import _ext, hashing
from codec.properties import decode_properties

compiled = pytest.importorskip("codec._chash", reason="compiled speedups not built")

# Every function of codec/hashing.py with a compiled twin.
NAMES = (
    "java_hash",
    "tags_code",
    "java_hash_ascii",
    "java_hashes_ascii",
    "index_key_hash",
    "index_key_hashes",
    "tags_codes",
    "index_hashes",
)

# Any code point, surrogates (category Cs) included: a str may hold lone ones.
ANY_TEXT = st.text(st.characters(exclude_categories=()), max_size=60)
# Text of the hard cases: ASCII, Latin-1, BMP, non-BMP, a surrogate pair written as two
# lone surrogates, lone high and low surrogates, separators.
ODD_TEXT = st.text(
    st.sampled_from(["a", "Z", "#", " ", "\x00", "\x7f", "é", "ÿ", "日", "\uffff", "😀"])
    | st.sampled_from(["\U00010348", "\U0010ffff", "\ud83d", "\ude00", "\ud800", "\udfff"])
    | st.sampled_from(["\x01", "\x02"]),
    max_size=60,
)
TEXT = ANY_TEXT | ODD_TEXT
# Bytes of every kind: ASCII (the fast paths), UTF-8 of any text, and invalid UTF-8.
ASCII = st.binary(max_size=80).map(lambda b: bytes(c & 0x7F for c in b))
UTF8 = TEXT.map(lambda t: t.encode("utf-8", "surrogatepass"))
BYTES = ASCII | UTF8 | st.binary(max_size=80)
# UNIQ_KEYs as RocketMQ clients make them: 20 fixed hex digits, 8 of time, 4 of a counter.
MSG_ID = st.tuples(st.integers(0, 2**32 - 1), st.integers(0, 0xFFFF)).map(
    lambda t: f"0A0000071234ABCDEF01{t[0]:08X}{t[1]:04X}".encode()
)
KEY = BYTES | MSG_ID
TOPIC = (
    st.sampled_from([b"TopicTest", b"T", b"", b"t\xc3\xa9", b"\xff", b"\xe6\x97", b"a#b"]) | BYTES
)

# Stored properties: pairs (names dispatch looks up, others, empty ones) with values that
# hold separators, spaces, non-ASCII and invalid UTF-8, or no \x01 at all; or raw bytes.
NAME = st.sampled_from([b"TAGS", b"KEYS", b"UNIQ_KEY", b"X", b"", b"TAG", b"KEYSX", b"\xff"])
VALUE = st.sampled_from([b"", b" ", b"  a  b ", b"\x01", b"TagA", b"k1 k2"]) | KEY
SEGMENT = st.tuples(NAME, VALUE).map(lambda p: p[0] + b"\x01" + p[1]) | VALUE
PROPS = (
    st.tuples(st.lists(SEGMENT, max_size=8), st.booleans()).map(
        lambda t: b"\x02".join(t[0]) + (b"\x02" if t[1] else b"")
    )
    | st.binary(max_size=60)
    | st.text(st.sampled_from("\x01\x02 TAGSKEYUNIQ_é"), max_size=40).map(str.encode)
)
OFFSET = st.integers(0, 2**40) | st.integers(2**63, 2**70)  # big ones are kept as they are


def outcome(fn: Callable[..., Any], *args: Any) -> tuple[Any, ...]:
    """What a call gives: its result and the result's type, or its error's type and text."""
    try:
        result = fn(*args)
    except Exception as exc:  # compared, not handled: any error must be the same one
        return ("raised", type(exc), str(exc))
    return ("returned", type(result), result)


def same(name: str, *args: Any) -> Any:
    """Call the compiled and the pure ``name``, assert they agree, return the result."""
    got = outcome(getattr(compiled, name), *args)
    assert got == outcome(getattr(hashing, f"{name}_py"), *args), (name, args)
    return got[2]


# --------------------------------------------------------------------------- binding


def test_the_module_binds_the_compiled_functions() -> None:
    for name in NAMES:
        expected = getattr(hashing, f"{name}_py") if _ext.DISABLED else getattr(compiled, name)
        assert getattr(hashing, name) is expected, name


# ---------------------------------------------------------------------- String.hashCode


@settings(max_examples=600, deadline=None)
@given(text=TEXT)
@example(text="")
@example(text="polygenelubricants")  # -2^31
@example(text="\ud800")
@example(text="\ud83d\ude00")  # a surrogate pair written as two characters
def test_java_hash(text: str) -> None:
    h = same("java_hash", text)
    assert -(2**31) <= h < 2**31
    same("index_key_hash", text)
    same("tags_code", text)


def test_java_hash_is_over_utf16_units() -> None:
    """As Java computes it: a non-BMP character is its surrogate pair, a lone surrogate the
    unit it is, in either implementation."""
    for fn in (compiled.java_hash, hashing.java_hash_py):
        assert fn("\ud800") == 0xD800
        assert fn("\ud83d\ude00") == fn("😀") == 0xD83D * 31 + 0xDE00
        assert fn("a\udfffb") == (ord("a") * 31 + 0xDFFF) * 31 + ord("b")
        assert fn("polygenelubricants") == -(2**31)
        assert fn("TagA") == 2598919
    assert compiled.index_key_hash("polygenelubricants") == 0
    assert compiled.tags_code(None) == compiled.tags_code("") == 0


@settings(max_examples=300, deadline=None)
@given(data=BYTES | MSG_ID)
def test_java_hash_ascii(data: bytes) -> None:
    same("java_hash_ascii", data)


@settings(max_examples=300, deadline=None)
@given(prefix=BYTES, keys=st.lists(KEY, max_size=8))
def test_java_hashes_ascii(prefix: bytes, keys: list[bytes]) -> None:
    same("java_hashes_ascii", prefix, keys)
    same("java_hashes_ascii", prefix, keys)  # the pure one again, from its cached heads


@settings(max_examples=400, deadline=None)
@given(topic=TOPIC, keys=st.lists(KEY, max_size=8))
def test_index_key_hashes(topic: bytes, keys: list[bytes]) -> None:
    hashes = same("index_key_hashes", topic, keys)
    assert all(0 <= h < 2**31 for h in hashes)


def test_index_key_hashes_of_min_int_is_zero() -> None:
    lacking = (2**31 - (hashing.java_hash_py("T#") & 0xFFFFFFFF) * 31**7) % 2**32
    digits = bytes((lacking // 31**k) % 31 for k in range(6, -1, -1))
    assert same("index_key_hashes", b"T", [digits, b"x"])[0] == 0


OTHER_TYPES = [
    None,
    0,
    b"TagA",
    "TagA",
    bytearray(b"TopicTest#0A0000071234ABCDEF01"),
    bytearray(b"short"),
    memoryview(b"TopicTest#key"),
    ("a", "b"),
    [b"a", "b"],
    [bytearray(b"k")],
    (b"k1", b"k2"),
    type("S", (str,), {})("sub"),
    type("B", (bytes,), {})(b"sub"),
]


@pytest.mark.parametrize("arg", OTHER_TYPES, ids=repr)
def test_other_types_behave_as_the_pure_functions(arg: Any) -> None:
    for name in ("java_hash", "tags_code", "java_hash_ascii", "index_key_hash", "tags_codes"):
        same(name, arg)
    for name in ("java_hashes_ascii", "index_key_hashes"):
        same(name, arg, [b"k"])
        same(name, b"T", arg)
    same("index_hashes", arg, [b"UNIQ_KEY\x01u"], [1])
    same("index_hashes", b"T", arg, [1])
    same("index_hashes", b"T", [b"UNIQ_KEY\x01u", b"KEYS\x01a b"], arg)


# ----------------------------------------------------------------- dispatch's functions


def _model_tags_code(props: bytes) -> int:
    """dispatch_record's tags code (outside SCHEDULE_TOPIC_XXXX), from the parsed pairs."""
    return hashing.tags_code_py(decode_properties(props.decode(errors="replace")).get("TAGS"))


def _model_index(
    topic: bytes, properties: list[bytes], offsets: list[int]
) -> tuple[list[int], list[int]]:
    """What build_index enters for each record in turn, from the parsed pairs."""
    prefix = topic.decode(errors="replace") + "#"
    hashes: list[int] = []
    key_offsets: list[int] = []
    for props, offset in zip(properties, offsets, strict=True):
        pairs = decode_properties(props.decode(errors="replace"))
        keys = [pairs["UNIQ_KEY"]] if "UNIQ_KEY" in pairs else []
        keys += [k for k in pairs.get("KEYS", "").split(" ") if k]
        hashes += [hashing.index_key_hash_py(prefix + k) for k in keys]
        key_offsets += [offset] * len(keys)
    return hashes, key_offsets


@settings(max_examples=600, deadline=None)
@given(properties=st.lists(PROPS, max_size=8))
@example(properties=[b"TAGS\x01", b"TAGS\x01a\x02TAGS\x01", b"\x02TAGS\x01\xff\x02", b""])
def test_tags_codes(properties: list[bytes]) -> None:
    codes = same("tags_codes", properties)
    assert codes == [_model_tags_code(p) for p in properties]


@settings(max_examples=600, deadline=None)
@given(
    topic=TOPIC,
    records=st.lists(st.tuples(PROPS, OFFSET), max_size=8),
)
@example(
    topic=b"T",
    records=[
        (b"UNIQ_KEY\x01u1\x02UNIQ_KEY\x01", 0),  # empty last value: the earlier one counts
        (b"KEYS\x01 a  b \x02KEYS\x01\x02UNIQ_KEY\x01\xff", 10),
        (b"\x02UNIQ_KEY\x01x\x02KEYS\x01k\x02", 20),
        (b"", 30),
    ],
)
def test_index_hashes(topic: bytes, records: list[tuple[bytes, int]]) -> None:
    properties = [p for p, _ in records]
    offsets = [o for _, o in records]
    got = same("index_hashes", topic, properties, offsets)
    assert got == _model_index(topic, properties, offsets)


@pytest.mark.parametrize("offsets", [[], [1], [1, 2, 3]])
def test_index_hashes_of_unequal_lists_raise_alike(offsets: list[int]) -> None:
    with pytest.raises(ValueError, match="properties of 2 records for"):
        compiled.index_hashes(b"T", [b"UNIQ_KEY\x01a", b""], offsets)
    same("index_hashes", b"T", [b"UNIQ_KEY\x01a", b""], offsets)


def test_properties_of_32767_bytes() -> None:
    keys = b" ".join(b"K%05d" % i for i in range(5000))
    big = [
        (b"UNIQ_KEY\x01" + b"U" * 32000 + b"\x02TAGS\x01" + b"t" * 700)[:32767],
        (b"KEYS\x01" + keys)[:32767],
        b"TAGS\x01" + "é".encode() * 16381,
        b"\x02" * 32767,
        (b"TAGS\x01x\x02" * 4096)[:32766] + b"\x02",
    ]
    assert all(len(p) <= 32767 for p in big)
    assert same("tags_codes", big) == [_model_tags_code(p) for p in big]
    offsets = list(range(len(big)))
    got = same("index_hashes", b"TopicTest", big, offsets)
    assert got == _model_index(b"TopicTest", big, offsets)
    assert len(got[0]) > 4000  # a UNIQ_KEY, then the keys that fit


def test_a_batch_of_message_ids() -> None:
    """The dispatch case: 32 records with a client UNIQ_KEY each, some with tags and keys."""
    properties = [
        b"UNIQ_KEY\x010A0000071234ABCDEF01%08X%04X\x02WAIT\x01true" % (7, i)
        + (b"\x02TAGS\x01TagA\x02KEYS\x01order-%d" % i if i % 2 else b"")
        for i in range(32)
    ]
    offsets = [i * 200 for i in range(32)]
    hashes, key_offsets = same("index_hashes", b"TopicTest", properties, offsets)
    assert len(hashes) == 48 and key_offsets == _model_index(b"TopicTest", properties, offsets)[1]
    assert same("tags_codes", properties) == [2598919 * (i % 2) for i in range(32)]

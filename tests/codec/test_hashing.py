"""Java's ``String.hashCode`` and what is built on it: tags codes and index key hashes.

Known values (protocol.md §9.7) and the definition over UTF-16 code units, then the fast ASCII
hashes with cached heads and the index key hashes (RocketMQ ``indexKeyHashMethod``) against
the plain hash. Each function runs in every implementation there is (tests/codec/conftest.py).
"""

from __future__ import annotations

from collections.abc import Callable

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from tests.codec.conftest import over, pure

JavaHash = Callable[[str], int]
AsciiHash = Callable[[bytes], int]
AsciiHashes = Callable[[bytes, list[bytes]], list[int]]
IndexKeyHashes = Callable[[bytes, list[bytes]], list[int]]

# The reference the fast paths are checked against.
java_hash: JavaHash = pure("hashing", "java_hash")
index_key_hash: JavaHash = pure("hashing", "index_key_hash")

TAG_CODES = [
    ("TagA", 2598919),
    ("polygenelubricants", -(2**31)),  # hashCode is Integer.MIN_VALUE
    ("Hello World", -862545276),
    ("", 0),
    ("hello", 99162322),
    ("\U0001f600", 0xD83D * 31 + 0xDE00),  # one non-BMP code point: two UTF-16 units
]

GOLDEN = [
    ("TagA", 2598919),
    ("", 0),
    ("a", 97),
    ("Aa", 2112),
    ("BB", 2112),  # the classic collision
    ("hello world", 1794106052),
    ("polygenelubricants", -(2**31)),  # wraps to Integer.MIN_VALUE
    ("é", 233),
    ("中文", 646394),
    ("😀", 1772899),  # a surrogate pair: two UTF-16 units, as Java counts
]


def _utf16_hash(text: str) -> int:
    """``s[0]*31^(n-1) + … + s[n-1]`` over UTF-16 code units, as a signed 32-bit int."""
    raw = text.encode("utf-16-be")
    h = 0
    for i in range(0, len(raw), 2):
        h = (31 * h + int.from_bytes(raw[i : i + 2], "big")) % 2**32
    return h - 2**32 if h >= 2**31 else h


# ---------------------------------------------------------------------- String.hashCode


@over("hashing", "java_hash")
@pytest.mark.parametrize(("text", "expected"), TAG_CODES)
def test_java_hash_known_values(impl: JavaHash, text: str, expected: int) -> None:
    assert impl(text) == expected
    assert _utf16_hash(text) == expected


@over("hashing", "java_hash")
@pytest.mark.parametrize(("text", "expected"), GOLDEN)
def test_java_hash_golden(impl: JavaHash, text: str, expected: int) -> None:
    assert impl(text) == expected


@over("hashing", "java_hash")
@pytest.mark.parametrize(
    "text", ["é", "日本語タグ", "a\U0001f600b", "\U00010348\U0001f600", "x" * 40, "y" * 2000]
)
def test_java_hash_utf16_definition(impl: JavaHash, text: str) -> None:
    assert impl(text) == _utf16_hash(text)
    assert -(2**31) <= impl(text) < 2**31


@over("hashing", "tags_code")
def test_tags_code_of_no_tag_is_zero(impl: Callable[[str | None], int]) -> None:
    assert impl(None) == 0
    assert impl("") == 0
    assert impl("TagA") == 2598919
    assert impl("polygenelubricants") == -(2**31)  # sign-extended in the consume queue


# ----------------------------------------------------------------------- ASCII hashes

_ASCII = st.binary(max_size=80).map(lambda b: bytes(c & 0x7F for c in b))


@over("hashing", "java_hash_ascii", "ascii_hash")
@over("hashing", "java_hashes_ascii", "ascii_hashes")
@settings(max_examples=300, deadline=None)
@given(prefix=_ASCII, keys=st.lists(_ASCII, max_size=6))
def test_ascii_hashes_are_java_hash(
    ascii_hash: AsciiHash, ascii_hashes: AsciiHashes, prefix: bytes, keys: list[bytes]
) -> None:
    expected = [java_hash((prefix + k).decode()) & 0xFFFFFFFF for k in keys]
    assert [ascii_hash(prefix + k) for k in keys] == expected
    assert ascii_hashes(prefix, keys) == expected
    assert ascii_hashes(prefix, keys) == expected  # again, from the cached heads


@over("hashing", "java_hashes_ascii")
def test_ascii_hashes_of_message_ids_share_heads(impl: AsciiHashes) -> None:
    """UNIQ_KEYs as clients make them: a fixed head, then time and a counter."""
    keys = [f"0A0000071234ABCDEF01{t:08X}{c:04X}".encode() for t in (7, 8) for c in range(40)]
    for topic in (b"T", b"TopicTest"):
        expected = [java_hash(f"{topic.decode()}#{k.decode()}") & 0xFFFFFFFF for k in keys]
        assert impl(topic + b"#", keys) == expected


@over("hashing", "java_hashes_ascii")
def test_ascii_hashes_of_long_keys(impl: AsciiHashes) -> None:
    """Keys past the table of powers of 31 (1,024 units) still hash as Java does."""
    keys = [b"k" * 1023, b"k" * 1024, b"k" * 1025, bytes(range(128)) * 12]
    assert impl(b"T#", keys) == [java_hash("T#" + k.decode()) & 0xFFFFFFFF for k in keys]


# ---------------------------------------------------------------------- index key hashes


@over("hashing", "index_key_hashes")
@settings(max_examples=200, deadline=None)
@given(topic=st.text(min_size=1, max_size=12), keys=st.lists(st.text(max_size=20), max_size=5))
def test_index_key_hashes_match_index_key_hash(
    impl: IndexKeyHashes, topic: str, keys: list[str]
) -> None:
    """``index_key_hashes`` hashes ``topic#key`` (RocketMQ ``IndexService.buildKey``) as the
    store decodes it, invalid UTF-8 replaced."""
    encoded = [k.encode("utf-8", "surrogatepass") for k in keys]
    got = impl(topic.encode("utf-8", "surrogatepass"), encoded)
    for key, raw, h in zip(keys, encoded, got, strict=True):
        text = f"{topic}#{raw.decode(errors='replace')}"
        assert h == index_key_hash(text), key
        assert 0 <= h < 2**31


def _min_int_key() -> bytes:
    # "T#" + 7 characters c_i (0..30, the base-31 digits of what the prefix lacks) hashes
    # to 2^31 mod 2^32: hash("T#" + s) = hash("T#") * 31^7 + sum(c_i * 31^(6-i)).
    lacking = (2**31 - (java_hash("T#") & 0xFFFFFFFF) * 31**7) % 2**32
    return bytes((lacking // 31**k) % 31 for k in range(6, -1, -1))


@over("hashing", "index_key_hash")
def test_index_key_hash_of_min_int_is_zero(impl: JavaHash) -> None:
    """A key whose hashCode is -2^31 is indexed under 0 (abs overflows)."""
    digits = _min_int_key()
    assert java_hash("T#" + digits.decode()) == -(2**31)
    assert impl("T#" + digits.decode()) == 0
    assert impl("T#a") == abs(java_hash("T#a"))


@over("hashing", "index_key_hashes")
def test_index_key_hashes_of_min_int_is_zero(impl: IndexKeyHashes) -> None:
    assert impl(b"T", [_min_int_key()]) == [0]

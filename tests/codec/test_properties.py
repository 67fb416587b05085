"""The properties text codec against a transcription of Java's ``string2messageProperties``
(protocol.md §9.1), and ``property_value`` (one value without parsing the rest) against the
full parse. Each function runs in every implementation there is (tests/codec/conftest.py)."""

from __future__ import annotations

from collections.abc import Callable

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from codec import (
    PROPERTY_KEYS,
    PROPERTY_TAGS,
    PROPERTY_UNIQ_KEY,
    RESERVED_PROPERTIES,
    properties,
)
from tests.codec.conftest import over, pure
from tests.support import java_string2message_properties, properties_text

Encode = Callable[[dict[str, str]], str]
Decode = Callable[[str], dict[str, str]]
PropertyValue = Callable[[bytes, bytes], bytes | None]

# The reference property_value is checked against.
decode_properties: Decode = pure("properties", "decode_properties")

_names = st.text(alphabet=st.characters(exclude_characters="\x01\x02", codec="utf-8"), max_size=8)
_values = st.text(alphabet=st.characters(exclude_characters="\x02", codec="utf-8"), max_size=8)
# Property text with the separators and non-ASCII in it.
_TEXT = st.text(alphabet="ab=é\x01\x02 KEYSTAGUNIQ_", max_size=30)


@over("properties", "encode_properties", "encode")
@over("properties", "decode_properties", "decode")
@settings(max_examples=100)
@given(st.dictionaries(_names, _values, max_size=6))
def test_properties_round_trip(encode: Encode, decode: Decode, props: dict[str, str]) -> None:
    text = encode(props)
    assert text == "\x02".join(f"{k}\x01{v}" for k, v in props.items())  # no trailing \x02
    kept = {k: v for k, v in props.items() if k and v}  # Java drops empty names and values
    assert decode(text) == kept
    assert decode(text + "\x02") == kept  # trailing separator (≤ 4.9.0, C++, Go)
    assert java_string2message_properties(text) == kept


@over("properties", "decode_properties")
@settings(max_examples=100)
@given(st.text(alphabet="ab\x01\x02é\U0001f600", max_size=30))
def test_properties_decode_matches_java(impl: Decode, text: str) -> None:
    assert impl(text) == java_string2message_properties(text)


@over("properties", "decode_properties")
@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("", {}),
        ("\x02\x02", {}),
        ("a\x01b", {"a": "b"}),
        ("a\x01b\x02", {"a": "b"}),
        ("a\x01\x02b\x01c", {"b": "c"}),  # empty value skipped
        ("\x01v\x02b\x01c", {"b": "c"}),  # empty name skipped
        ("novalue\x02b\x01c", {"b": "c"}),  # no \x01 at all
        ("a\x01x\x01y", {"a": "x\x01y"}),  # the first \x01 splits
        ("a\x011\x02a\x012", {"a": "2"}),  # the last one wins
        ("名前\x01値", {"名前": "値"}),
    ],
)
def test_properties_decode_edge_cases(impl: Decode, text: str, expected: dict[str, str]) -> None:
    assert impl(text) == expected
    assert java_string2message_properties(text) == expected


def test_property_names_are_rocketmq_message_const() -> None:
    assert (PROPERTY_KEYS, PROPERTY_TAGS, PROPERTY_UNIQ_KEY) == ("KEYS", "TAGS", "UNIQ_KEY")
    assert properties.PROPERTY_WAIT == "WAIT"
    assert properties.PROPERTY_DELAY == "DELAY"
    assert properties.PROPERTY_REAL_QUEUE_ID == "REAL_QID"
    assert {"KEYS", "TAGS", "UNIQ_KEY", "WAIT", "DELAY"} <= RESERVED_PROPERTIES


# ------------------------------------------------------------------------ property_value


@over("properties", "property_value")
@settings(max_examples=500, deadline=None)
@given(text=_TEXT, name=st.sampled_from(["TAGS", "KEYS", "UNIQ_KEY", "a", "é"]))
def test_property_value_is_the_parsed_value(impl: PropertyValue, text: str, name: str) -> None:
    raw = text.encode()
    expected = decode_properties(raw.decode(errors="replace")).get(name)
    got = impl(raw, name.encode())
    assert (got.decode() if got is not None else None) == expected


@over("properties", "property_value")
@settings(max_examples=200, deadline=None)
@given(
    pairs=st.lists(
        st.tuples(st.sampled_from(["TAGS", "KEYS", "UNIQ_KEY", "X"]), _TEXT), max_size=5
    ),
    trailing=st.booleans(),
)
def test_property_value_of_well_formed_pairs(
    impl: PropertyValue, pairs: list[tuple[str, str]], trailing: bool
) -> None:
    text = properties_text(pairs) + ("\x02" if trailing else "")
    parsed = decode_properties(text)
    for name in ("TAGS", "KEYS", "UNIQ_KEY"):
        got = impl(text.encode(), name.encode())
        assert (got.decode() if got is not None else None) == parsed.get(name)


@over("properties", "property_value")
@pytest.mark.parametrize(
    "raw",
    [
        b"TAGS\x01\xff\xfe\x02KEYS\x01k",
        b"TAGS\x01\x02TAGS\x01\xff",
        b"TAGS\x01a\x02TAGS\x01\x02\xff",
        b"\xff\x01v\x02TAGS\x01\xc3",
        b"\xffTAGS\x01v",
    ],
)
def test_property_value_of_invalid_utf8(impl: PropertyValue, raw: bytes) -> None:
    """Bytes that are not UTF-8 are no error: the value read decodes (invalid bytes
    replaced) to what the whole string decoded so gives, and every implementation returns
    the same bytes."""
    got = impl(raw, b"TAGS")
    expected = decode_properties(raw.decode(errors="replace")).get("TAGS")
    assert (got.decode(errors="replace") if got is not None else None) == expected
    assert got == pure("properties", "property_value")(raw, b"TAGS")

"""The compiled properties codec (codec/_cprops.pyx) returns what the pure one
(codec/properties.py, ``<name>_py``) returns, and raises what it raises, on any input.

Inputs are random and adversarial: any text (non-BMP characters, lone surrogates, every
string kind), separators in odd places, empty names and values, duplicate names, a
trailing \\x02, non-UTF-8 bytes, 32,767-byte properties, and arguments of other types
(handed to the pure function).
"""

from __future__ import annotations

from collections import OrderedDict
from collections.abc import Callable
from typing import Any

import pytest
from hypothesis import example, given, settings
from hypothesis import strategies as st

from codec import _ext, properties

compiled = pytest.importorskip("codec._cprops", reason="compiled speedups not built")

NAMES = ("encode_properties", "decode_properties", "property_value")

# Any code point, surrogates (category Cs) included: a str may hold lone ones.
ANY_TEXT = st.text(st.characters(exclude_categories=()), max_size=40)
# Separators and the characters of every string kind (1, 2 and 4 bytes a character).
ODD_TEXT = st.lists(
    st.sampled_from(["\x01", "\x02", "\x01\x02", " ", "a", "TAGS", "KEYS", "UNIQ_KEY"])
    | st.sampled_from(["é", "ÿ", "日", "\ud800", "\udfff", "😀", "\U0010ffff", "\x00"]),
    max_size=12,
).map("".join)
TEXT = ANY_TEXT | ODD_TEXT
NAME_TEXT = st.sampled_from(["TAGS", "KEYS", "UNIQ_KEY", "a", "", "é", "😀"]) | TEXT
# A properties string: pairs (duplicate names likely, empty names and values), segments
# without \x01, and maybe a trailing \x02; or any text at all.
PAIR = st.tuples(NAME_TEXT, TEXT).map(lambda p: f"{p[0]}\x01{p[1]}")
PROPS_TEXT = (
    st.tuples(st.lists(PAIR | TEXT, max_size=8), st.booleans()).map(
        lambda t: "\x02".join(t[0]) + ("\x02" if t[1] else "")
    )
    | TEXT
)
PROPS_BYTES = (
    PROPS_TEXT.map(lambda t: t.encode("utf-8", "surrogatepass"))
    | st.binary(max_size=60)
    | st.lists(
        st.sampled_from([b"\x01", b"\x02", b"TAGS", b"a", b"\xff", b"\xc3", b"\xe6\x97"])
    ).map(b"".join)
)
NAME_BYTES = (
    st.sampled_from([b"TAGS", b"KEYS", b"UNIQ_KEY", b"a", b"", b"\xff", b"\xc3\xa9", b"a\x02b"])
    | NAME_TEXT.map(lambda t: t.encode("utf-8", "surrogatepass"))
    | st.binary(max_size=6)
)


def outcome(fn: Callable[..., Any], *args: Any) -> tuple[Any, ...]:
    """What a call gives: its result and the result's type, or its error's type and text."""
    try:
        result = fn(*args)
    except Exception as exc:  # compared, not handled: any error must be the same one
        return ("raised", type(exc), str(exc))
    if isinstance(result, dict):  # the order of the pairs is part of the result
        return ("returned", type(result), list(result.items()))
    return ("returned", type(result), result)


def same(name: str, *args: Any) -> Any:
    """Call the compiled and the pure ``name``, assert they agree, return the result."""
    got = outcome(getattr(compiled, name), *args)
    assert got == outcome(getattr(properties, f"{name}_py"), *args), (name, args)
    return got[2]


def test_the_module_binds_the_compiled_functions() -> None:
    for name in NAMES:
        expected = getattr(properties, f"{name}_py") if _ext.DISABLED else getattr(compiled, name)
        assert getattr(properties, name) is expected, name


# --------------------------------------------------------------------------------- text


@settings(max_examples=800, deadline=None)
@given(text=PROPS_TEXT)
@example(text="")
@example(text="\x02")
@example(text="\x01\x02\x01a\x02a\x01\x02a\x01b\x01c\x02a\x01d\x02")  # dupes, empties, trailing
@example(text="é\x01\ud800\x02😀\x01日\x02é\x01x")  # every kind, a duplicate name
def test_decode_properties(text: str) -> None:
    same("decode_properties", text)


@settings(max_examples=500, deadline=None)
@given(props=st.dictionaries(NAME_TEXT, TEXT, max_size=8))
@example(props={})
@example(props={"": ""})
@example(props={"a\x01": "\x02", "\ud800": "😀"})
def test_encode_properties(props: dict[str, str]) -> None:
    text = same("encode_properties", props)
    same("decode_properties", text)


# -------------------------------------------------------------------------------- bytes


@settings(max_examples=1000, deadline=None)
@given(props=PROPS_BYTES, name=NAME_BYTES)
@example(props=b"TAGS\x01a\x02TAGS\x01", name=b"TAGS")  # an earlier value counts
@example(props=b"TAGS\x01\x02TAGS\x01", name=b"TAGS")
@example(props=b"\x02TAGS\x01v\x02", name=b"TAGS")
@example(props=b"\x01", name=b"")
@example(props=b"\xff\x01", name=b"\xff")  # empty value, name not UTF-8: decode raises
@example(props=b"a\x02b\x01x", name=b"a\x02b")  # a separator in the name
def test_property_value(props: bytes, name: bytes) -> None:
    same("property_value", props, name)


def test_property_value_raises_as_the_pure_one() -> None:
    with pytest.raises(UnicodeDecodeError, match="invalid start byte"):
        compiled.property_value(b"\xff\x01", b"\xff")
    same("property_value", b"\xff\x01", b"\xff")


def test_properties_of_32767_bytes() -> None:
    keys = " ".join(f"K{i:05d}" for i in range(6000))
    texts = [
        (f"UNIQ_KEY\x01{'U' * 32000}\x02TAGS\x01{'t' * 700}")[:32767],
        f"KEYS\x01{keys}"[:32767],
        "TAGS\x01" + "é" * 16381,
        "\x02" * 32767,
        ("a\x01x\x02" * 8192)[:32766] + "\x02",
        "\x01" * 32767,
    ]
    for text in texts:
        raw = text.encode()
        assert len(raw) <= 32767
        parsed = same("decode_properties", text)
        same("encode_properties", dict(parsed))
        for name in (b"TAGS", b"KEYS", b"UNIQ_KEY", b"a", b""):
            same("property_value", raw, name)


OTHER_TYPES = [
    None,
    0,
    b"a\x01b",
    "a\x01b",
    bytearray(b"TAGS\x01a"),
    memoryview(b"TAGS\x01a"),
    {"a": 1, 2: "b"},
    {"a": None},
    OrderedDict([("a", "b")]),
    [("a", "b")],
    type("S", (str,), {})("a\x01b"),
    type("B", (bytes,), {})(b"TAGS\x01a"),
]


@pytest.mark.parametrize("arg", OTHER_TYPES, ids=repr)
def test_other_types_behave_as_the_pure_functions(arg: Any) -> None:
    same("encode_properties", arg)
    same("decode_properties", arg)
    same("property_value", arg, b"TAGS")
    same("property_value", b"TAGS\x01a", arg)
    same("property_value", b"TAGS\x01", arg)

"""The SQL92 evaluator against a table of expressions by property sets.

Expected answers follow Apache RocketMQ 4.9's filter module (``SelectorParser``,
``ComparisonExpression``): properties are strings converted to the type of the number they meet,
NULL propagates, a conversion failure makes the message not match, NOT binds tighter than ``=``.
"""

from __future__ import annotations

import pytest

from broker.filter_sql import SqlFilterError, compile_sql

ORDER = {"a": "10", "region": "eu", "price": "9.5", "vip": "true", "name": "it's"}
OTHER = {"a": "3", "region": "us", "price": "12", "big": "3000000000"}
EMPTY: dict[str, str] = {}
TEXT = {"a": "ten", "region": "eu"}

PROPS = {"order": ORDER, "other": OTHER, "empty": EMPTY, "text": TEXT}

_FIVE_WORDS = ("CONTAINS", "STARTSWITH", "ENDSWITH")

# expression, then the verdict (True / False / None = unknown) for order, other, empty, text
TABLE: list[tuple[str, tuple[bool | None, bool | None, bool | None, bool | None]]] = [
    ("a = 10", (True, False, None, None)),
    ("a = 10.0", (True, False, None, None)),
    ("a <> 10", (False, True, None, None)),
    ("a > 5", (True, False, None, None)),
    ("a >= 10", (True, False, None, None)),
    ("a < 5", (False, True, None, None)),
    ("a <= 3", (False, True, None, None)),
    ("5 < a", (True, False, None, None)),
    ("a BETWEEN 3 AND 10", (True, True, None, None)),
    ("a BETWEEN 4 AND 9", (False, False, None, None)),
    ("a NOT BETWEEN 4 AND 9", (True, True, None, None)),
    ("region = 'eu'", (True, False, None, True)),
    ("region <> 'eu'", (False, True, None, False)),
    ("region IN ('eu', 'apac')", (True, False, None, True)),
    ("region NOT IN ('eu', 'apac')", (False, True, None, False)),
    ("region IS NULL", (False, False, True, False)),
    ("region IS NOT NULL", (True, True, False, True)),
    ("vip IS NOT NULL", (True, False, False, False)),
    ("a > 5 AND region = 'eu'", (True, False, None, None)),
    ("a > 5 OR region = 'us'", (True, True, None, None)),
    ("region = 'us' OR a > 5", (True, True, None, None)),
    ("region = 'eu' OR a > 5", (True, False, None, True)),
    ("(a > 5 OR region = 'us') AND price < 10.0", (True, False, None, None)),
    ("(a > 5 OR region = 'us') AND price < 10", (None, False, None, None)),
    # integer literal: '9.5' does not parse as an Integer, so nothing matches (Java throws)
    ("price > 5", (None, True, None, None)),
    ("price > 5.0", (True, True, None, None)),
    ("price > 9.25 AND price < 9.75", (True, False, None, None)),
    # a long literal reads the property as a long; an int literal cannot
    ("big = 3000000000", (None, True, None, None)),
    ("big > 2", (None, None, None, None)),
    ("big > 2147483648", (None, True, None, None)),
    # 2L fits an int, so RocketMQ makes it an Integer after all
    ("big > 2L", (None, None, None, None)),
    ("a > -1", (True, True, None, None)),
    ("a = +10", (True, False, None, None)),
    # two properties compared with < and > are read as doubles
    ("price > a", (False, True, None, None)),
    ("name = 'it''s'", (True, None, None, None)),
    ("NOT (a = 10)", (False, True, None, None)),
    # NOT binds tighter than '=': (NOT cast(a)) = 10 compares a Boolean with a number
    ("NOT a = 10", (False, False, None, False)),
    ("vip = TRUE", (True, None, None, None)),
    ("vip = FALSE", (False, None, None, None)),
    ("TRUE", (True, True, True, True)),
    ("FALSE", (False, False, False, False)),
    ("NULL", (None, None, None, None)),
    ("vip", (False, None, None, None)),
    # a conversion failure ends the evaluation before OR / AND see the constant
    ("a = 10 OR TRUE", (True, True, True, None)),
    ("a = 10 AND FALSE", (False, False, False, None)),
    ("region CONTAINS 'u'", (True, True, False, True)),
    ("region NOT CONTAINS 'u'", (False, False, False, False)),
    ("region STARTSWITH 'e'", (True, False, False, True)),
    ("region ENDSWITH 's'", (False, True, False, False)),
    ("region CONTAINS ''", (False, False, False, False)),
    ("a = 10 -- a trailing comment\n", (True, False, None, None)),
    ("a /* inline */ = 10", (True, False, None, None)),
    ("a between 3 and 10 and REGION is null", (True, True, None, None)),
]

# RocketMQ 5's string tests: a 4.9 broker reads "region CONTAINS 'u'" as the bare property.
ROCKETMQ5_ONLY = frozenset(e for e, _ in TABLE if any(w in e for w in _FIVE_WORDS))


@pytest.mark.parametrize(("expression", "verdicts"), TABLE, ids=[row[0] for row in TABLE])
def test_table(
    expression: str, verdicts: tuple[bool | None, bool | None, bool | None, bool | None]
) -> None:
    compiled = compile_sql(expression)
    for (name, props), expected in zip(PROPS.items(), verdicts, strict=True):
        assert compiled.evaluate(props) is expected, (name, props)
        assert compiled.matches(props) is (expected is True), (name, props)


def test_case_of_keywords_does_not_matter_but_case_of_properties_does() -> None:
    assert compile_sql("A = 10").matches({"A": "10"})
    assert not compile_sql("A = 10").matches({"a": "10"})
    assert compile_sql("a Is NoT nUlL").matches({"a": ""})


def test_null_literals_and_three_valued_logic() -> None:
    unknown_and_false = compile_sql("missing = 1 AND a = 2")
    assert unknown_and_false.evaluate({"a": "1"}) is False
    unknown_or_true = compile_sql("missing = 1 OR a = 1")
    assert unknown_or_true.evaluate({"a": "1"}) is True
    assert compile_sql("NOT (missing = 1)").evaluate({}) is None


def test_what_follows_a_complete_expression_is_ignored_as_rocketmq_does() -> None:
    assert compile_sql("a = 1)").matches({"a": "1"})
    assert compile_sql("a = 1 garbage ! #").matches({"a": "1"})
    like = compile_sql("a LIKE 'x%'")  # the bare property a: never TRUE for a string
    assert like.evaluate({"a": "x1"}) is False
    assert like.evaluate({}) is None


def test_compiled_expressions_are_cached() -> None:
    assert compile_sql("a > 1") is compile_sql("a > 1")


BAD = [
    ("", "empty"),
    ("   ", "empty"),
    ("a >", "end of expression"),
    ("(a = 1", "expected ')'"),
    ("a == 1", "unexpected '='"),
    ("a = 1 #", "unexpected character '#'"),
    ("a != 1", "unexpected character '!'"),
    ("a # 1", "unexpected character '#'"),
    ("a > 'x'", "cannot be compared"),
    ("a > TRUE", "cannot be compared"),
    ("(a > 1) > 2", "cannot be compared"),
    ("a = NULL", "IS NULL"),
    ("TRUE = 1", "cannot be compared"),
    ("5", "will not result in a boolean"),
    ("'text'", "will not result in a boolean"),
    ("-a", "will not result in a boolean"),
    ("a BETWEEN 5 AND 1", "less than or equal"),
    ("a BETWEEN NULL AND 1", "cannot be NULL"),
    ("1 IN ('a')", "property before IN"),
    ("a IN (1, 2)", "string literal"),
    ("a IN ()", "string literal"),
    ("a IS 5", "expected NULL"),
    ("a = 0.0", "4.9E-324"),
    ("a = 1e400", "largest double"),
    ("a = 99999999999999999999", "range of a long"),
    ("a = 'unterminated", "unexpected character"),
    ("a = 1 AND", "end of expression"),
]


@pytest.mark.parametrize(("expression", "why"), BAD, ids=[row[0] or "<empty>" for row in BAD])
def test_bad_expressions_are_refused(expression: str, why: str) -> None:
    with pytest.raises(SqlFilterError, match=why.replace("(", r"\(").replace(")", r"\)")):
        compile_sql(expression)

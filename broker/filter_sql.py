"""SQL92 property filters: the selector language of RocketMQ's ``filter`` module.

RocketMQ counterpart: ``org.apache.rocketmq.filter`` — ``SelectorParser.jj`` (a trimmed
ActiveMQ JMS selector grammar), ``ComparisonExpression``, ``LogicExpression``,
``UnaryExpression`` and ``ConstantExpression`` — as the broker runs them in
``ExpressionMessageFilter.isMatchedByCommitLog`` when ``enablePropertyFilter=true``.

The grammar, loosest binding first::

    or         := and (OR and)*
    and        := equality (AND equality)*
    equality   := comparison ( = comparison | <> comparison | IS [NOT] NULL )*
    comparison := unary ( > | >= | < | <= unary
                        | [NOT] BETWEEN unary AND unary
                        | [NOT] IN ( 'str' [, 'str']* )
                        | [NOT] CONTAINS | STARTSWITH | ENDSWITH 'str' )*
    unary      := + unary | - unary | NOT unary | literal | property | ( or )

CONTAINS / STARTSWITH / ENDSWITH are RocketMQ 5's additions; a 5.x client may send them.
Keywords are case-insensitive; ``--`` and ``/* */`` are comments.

Semantics follow the Java code, quirks included, so a subscription selects the same messages
here as on an Apache broker:

* Property values are strings (missing → NULL). When a string meets a number, it is parsed as
  that number's Java type (``Integer.valueOf``, ``Long.valueOf``, ``Double.valueOf``); a string
  that does not parse aborts the whole evaluation and the message does not match (Java throws
  and ``isMatchedByCommitLog`` answers false). ``>``/``<`` between two properties compares them
  as doubles.
* Three-valued logic: a comparison with NULL is NULL, ``NOT NULL`` is NULL, ``AND``/``OR``
  short-circuit as in SQL, and only TRUE selects a message.
* NOT binds tighter than comparison (``NOT a = 1`` is ``(NOT a) = 1``), as in the grammar.
* Parsing stops where the expression can no longer continue; what follows is ignored
  (``a LIKE 'x'`` is the bare property ``a``), as the JavaCC parser does.
* Compile-time checks that RocketMQ makes: only numbers (or properties) around ``>``/``<``,
  no NULL literal in ``=``/``<>``, IN only after a property, BETWEEN bounds in order, float
  literals within ``Double.MIN_VALUE`` … ``Double.MAX_VALUE`` (so ``0.0`` is refused, as there).
"""

from __future__ import annotations

import functools
import math
import re
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass
from enum import Enum
from typing import Any, Final, TypeAlias

__all__ = ["SqlFilter", "SqlFilterError", "compile_sql"]


class SqlFilterError(ValueError):
    """The expression does not parse (``MQFilterException: Invalid MessageSelector``)."""


class _EvalError(Exception):
    """A value that Java would fail to convert: the message does not match."""


class _Long(int):
    """A Java ``Long`` (as opposed to an ``Integer``): strings compared with it are parsed
    with the 64-bit range."""

    __slots__ = ()


Value: TypeAlias = str | int | float | bool | None
Context: TypeAlias = Mapping[str, str]
Evaluator: TypeAlias = Callable[[Context], Value]

_INT_MIN, _INT_MAX = -(2**31), 2**31 - 1
_LONG_MIN, _LONG_MAX = -(2**63), 2**63 - 1
_DOUBLE_MIN_VALUE: Final = 5e-324  # Java's Double.MIN_VALUE: the smallest positive double
_JAVA_WHITESPACE: Final = "".join(chr(c) for c in range(33))
_JAVA_INT = re.compile(r"[+-]?[0-9]+")
_JAVA_DOUBLE = re.compile(
    r"[+-]?(?:NaN|Infinity|(?:[0-9]+\.?[0-9]*|\.[0-9]+)(?:[eE][+-]?[0-9]+)?[fFdD]?)"
)


# ------------------------------------------------------------------ tokens


class _T(Enum):
    EOF = "end of expression"
    ID = "identifier"
    STRING = "string literal"
    DECIMAL = "decimal literal"
    FLOAT = "floating point literal"
    KEYWORD = "keyword"
    OP = "operator"


_KEYWORDS: Final = frozenset(
    {
        "NOT",
        "AND",
        "OR",
        "BETWEEN",
        "IN",
        "TRUE",
        "FALSE",
        "NULL",
        "IS",
        "CONTAINS",
        "STARTSWITH",
        "ENDSWITH",
    }
)

_TOKEN_RE = re.compile(
    r"""
    (?P<ws>[ \t\n\r\f]+)
  | (?P<line>--[^\n\r]*)
  | (?P<block>/\*.*?\*/)
  | (?P<float>[0-9]+\.[0-9]*(?:[eE][+-]?[0-9]+)?|\.[0-9]+(?:[eE][+-]?[0-9]+)?|[0-9]+[eE][+-]?[0-9]+)
  | (?P<decimal>(?:0|[1-9][0-9]*)[lL]?)
  | (?P<string>'(?:''|[^'])*')
  | (?P<id>[A-Za-z_$][A-Za-z0-9_$]*)
  | (?P<op><>|>=|<=|[=><(),+-])
    """,
    re.VERBOSE | re.DOTALL,
)


@dataclass(frozen=True, slots=True)
class _Token:
    kind: _T
    text: str
    pos: int

    def is_kw(self, word: str) -> bool:
        return self.kind is _T.KEYWORD and self.text == word

    def is_op(self, op: str) -> bool:
        return self.kind is _T.OP and self.text == op

    def describe(self) -> str:
        if self.kind is _T.EOF:
            return "end of expression"
        return f"{self.text!r} at column {self.pos + 1}"


def _tokenize(text: str) -> Iterator[_Token]:
    """Tokens on demand: like JavaCC's token manager, a bad character past the point where
    the expression ends is never looked at."""
    pos = 0
    while pos < len(text):
        m = _TOKEN_RE.match(text, pos)
        if m is None:
            raise SqlFilterError(f"unexpected character {text[pos]!r} at column {pos + 1}")
        kind = m.lastgroup
        value = m.group()
        start, pos = pos, m.end()
        if kind == "id":
            upper = value.upper()
            if upper in _KEYWORDS:
                yield _Token(_T.KEYWORD, upper, start)
            else:
                yield _Token(_T.ID, value, start)
        elif kind == "float":
            yield _Token(_T.FLOAT, value, start)
        elif kind == "decimal":
            yield _Token(_T.DECIMAL, value, start)
        elif kind == "string":
            yield _Token(_T.STRING, value[1:-1].replace("''", "'"), start)
        elif kind == "op":
            yield _Token(_T.OP, value, start)
    while True:
        yield _Token(_T.EOF, "", len(text))


# ------------------------------------------------------------------ the expression tree


class _Kind(Enum):
    """What the parser needs to know of a node for RocketMQ's compile-time checks."""

    PROPERTY = 1
    CONSTANT = 2  # a number or string literal
    BOOL_CONSTANT = 3  # TRUE, FALSE, NULL (Java: BooleanConstantExpression)
    BOOLEAN = 4  # comparisons, logic, NOT, IN, …: a BooleanExpression
    VALUE = 5  # negation: neither constant nor boolean


@dataclass(frozen=True, slots=True)
class _Node:
    kind: _Kind
    run: Evaluator
    text: str
    value: Value = None  # the literal, for CONSTANT / BOOL_CONSTANT


def _const(value: Value, text: str, kind: _Kind = _Kind.CONSTANT) -> _Node:
    return _Node(kind, lambda _ctx: value, text, value)


def _parse_java_int(text: str, low: int, high: int) -> int:
    if not _JAVA_INT.fullmatch(text):
        raise _EvalError
    value = int(text)
    if not low <= value <= high:
        raise _EvalError
    return value


def _parse_java_double(text: str) -> float:
    # Double.valueOf trims every char <= ' ' first.
    stripped = text.strip(_JAVA_WHITESPACE)
    if not _JAVA_DOUBLE.fullmatch(stripped):
        raise _EvalError
    if stripped[-1] in "fFdD" and not stripped.endswith("Infinity"):
        stripped = stripped[:-1]
    return float(stripped)


def _to_number_like(text: str, other: int | float) -> int | float:
    """A property string read as the Java type of the number it is compared with."""
    if isinstance(other, float):
        return _parse_java_double(text)
    if isinstance(other, _Long):
        return _parse_java_int(text, _LONG_MIN, _LONG_MAX)
    return _parse_java_int(text, _INT_MIN, _INT_MAX)


def _cmp_same(lv: Any, rv: Any) -> int:
    if isinstance(lv, float) and isinstance(rv, float) and (math.isnan(lv) or math.isnan(rv)):
        # Double.compareTo: NaN above everything and equal to itself.
        return int(math.isnan(lv)) - int(math.isnan(rv))
    return int(lv > rv) - int(lv < rv)


def _compare(lv: Value, rv: Value) -> int:
    """``ComparisonExpression.__compare`` with string conversion on (as the parser sets it)."""
    assert lv is not None and rv is not None
    l_num = isinstance(lv, int | float) and not isinstance(lv, bool)
    r_num = isinstance(rv, int | float) and not isinstance(rv, bool)
    if l_num and r_num:
        if isinstance(lv, float) or isinstance(rv, float):
            return _cmp_same(float(lv), float(rv))
        return _cmp_same(lv, rv)
    if isinstance(lv, str) and isinstance(rv, str):
        return _cmp_same(lv, rv)
    if isinstance(lv, bool) and isinstance(rv, bool):
        return _cmp_same(lv, rv)
    if isinstance(lv, bool):
        if isinstance(rv, str):
            raise _EvalError  # Java casts the Boolean itself to String: ClassCastException
        return -1
    if isinstance(lv, str):
        if isinstance(rv, bool):
            return _cmp_same(lv.lower() == "true", rv)
        return _cmp_same(_to_number_like(lv, rv), rv)  # type: ignore[arg-type]
    # lv is a number, rv a string or a boolean
    if isinstance(rv, str):
        return _cmp_same(lv, _to_number_like(rv, lv))
    return -1


def _ordering(left: _Node, right: _Node, symbol: str, accept: Callable[[int], bool]) -> _Node:
    for side in (left, right):
        if side.kind in (_Kind.CONSTANT, _Kind.BOOL_CONSTANT) and not (
            isinstance(side.value, int | float) and not isinstance(side.value, bool)
        ):
            raise SqlFilterError(f"value {side.text} cannot be compared with {symbol}")
        if side.kind is _Kind.BOOLEAN:
            raise SqlFilterError(f"value {side.text} cannot be compared with {symbol}")
    lrun, rrun = left.run, right.run

    def run(ctx: Context) -> Value:
        lv = lrun(ctx)
        if lv is None:
            return None
        rv = rrun(ctx)
        if rv is None:
            return None
        if isinstance(lv, str) and isinstance(rv, str):
            return accept(_cmp_same(_parse_java_double(lv), _parse_java_double(rv)))
        return accept(_compare(lv, rv))

    return _Node(_Kind.BOOLEAN, run, f"({left.text} {symbol} {right.text})")


def _raw_equal(left: _Node, right: _Node) -> Evaluator:
    lrun, rrun = left.run, right.run

    def run(ctx: Context) -> Value:
        lv = lrun(ctx)
        rv = rrun(ctx)
        if (lv is None) != (rv is None):
            return None if lv is None else False
        if lv is None or (lv == rv and type(lv) is type(rv)):
            return True
        return _compare(lv, rv) == 0

    return run


def _equal(left: _Node, right: _Node) -> _Node:
    for side in (left, right):
        if side.kind is _Kind.BOOL_CONSTANT and side.value is None:
            raise SqlFilterError("NULL cannot be compared with =, use IS NULL")
    if left.kind is _Kind.BOOL_CONSTANT and right.kind is _Kind.CONSTANT:
        raise SqlFilterError(f"{left.text} cannot be compared with {right.text}")
    return _Node(_Kind.BOOLEAN, _raw_equal(left, right), f"({left.text} = {right.text})")


def _not_run(inner: Evaluator) -> Evaluator:
    def run(ctx: Context) -> Value:
        value = inner(ctx)
        if value is None:
            return None
        return not value

    return run


def _and(left: _Node, right: _Node) -> _Node:
    lrun, rrun = left.run, right.run

    def run(ctx: Context) -> Value:
        lv = lrun(ctx)
        if lv is False:
            return False
        rv = rrun(ctx)
        if rv is False:
            return False
        if lv is None or rv is None:
            return None
        return True

    return _Node(_Kind.BOOLEAN, run, f"({left.text} AND {right.text})")


def _or(left: _Node, right: _Node) -> _Node:
    lrun, rrun = left.run, right.run

    def run(ctx: Context) -> Value:
        lv = lrun(ctx)
        if lv is True:
            return True
        rv = rrun(ctx)
        if rv is True:
            return True
        if lv is None or rv is None:
            return None
        return False

    return _Node(_Kind.BOOLEAN, run, f"({left.text} OR {right.text})")


def _as_boolean(node: _Node) -> _Node:
    """``SelectorParser.asBooleanExpression``: a bare property is cast (only a Java Boolean,
    which a string property never is, counts as TRUE); literals and negations are refused."""
    if node.kind in (_Kind.BOOLEAN, _Kind.BOOL_CONSTANT):
        return node
    if node.kind is _Kind.PROPERTY:
        inner = node.run

        def run(ctx: Context) -> Value:
            value = inner(ctx)
            if value is None:
                return None
            return value if isinstance(value, bool) else False

        return _Node(_Kind.BOOLEAN, run, node.text)
    raise SqlFilterError(f"expression will not result in a boolean value: {node.text}")


def _negate(node: _Node) -> _Node:
    inner = node.run

    def run(ctx: Context) -> Value:
        value = inner(ctx)
        if isinstance(value, bool) or not isinstance(value, int | float):
            return None
        if isinstance(value, _Long):
            return _Long(-int(value))
        return -value

    # Not folded into a constant: Java keeps a negation as a UnaryExpression, which
    # escapes the constant-only checks (BETWEEN's bound order, for one).
    return _Node(_Kind.VALUE, run, f"-{node.text}")


def _string_test(
    left: _Node, search: str, symbol: str, test: Callable[[str, str], bool], negate: bool
) -> _Node:
    inner = left.run

    def run(ctx: Context) -> Value:
        if not search:
            return False
        value = inner(ctx)
        if not isinstance(value, str):
            return False
        return test(value, search) != negate

    word = f"NOT {symbol}" if negate else symbol
    return _Node(_Kind.BOOLEAN, run, f"({left.text} {word} '{search}')")


# ------------------------------------------------------------------ the parser


class _Parser:
    def __init__(self, text: str) -> None:
        self._source = _tokenize(text)
        self.tokens: list[_Token] = []
        self.i = 0

    def _at(self, index: int) -> _Token:
        while len(self.tokens) <= index:
            self.tokens.append(next(self._source))
        return self.tokens[index]

    @property
    def tok(self) -> _Token:
        return self._at(self.i)

    def peek(self, ahead: int = 1) -> _Token:
        return self._at(self.i + ahead)

    def advance(self) -> _Token:
        tok = self._at(self.i)
        if tok.kind is not _T.EOF:
            self.i += 1
        return tok

    def expect_op(self, op: str) -> None:
        if not self.tok.is_op(op):
            raise SqlFilterError(f"expected {op!r} but found {self.tok.describe()}")
        self.advance()

    def expect_kw(self, word: str) -> None:
        if not self.tok.is_kw(word):
            raise SqlFilterError(f"expected {word} but found {self.tok.describe()}")
        self.advance()

    def string(self) -> str:
        tok = self.tok
        if tok.kind is not _T.STRING:
            raise SqlFilterError(f"expected a string literal but found {tok.describe()}")
        self.advance()
        return tok.text

    def parse(self) -> _Node:
        # Whatever follows a complete expression is ignored, not refused: RocketMQ's
        # JmsSelector() rule has no <EOF>, so "a = 1)" compiles as "a = 1" there, and a
        # subscription that works on an Apache broker must work here.
        return _as_boolean(self.or_expr())

    def or_expr(self) -> _Node:
        left = self.and_expr()
        while self.tok.is_kw("OR"):
            self.advance()
            left = _or(_as_boolean(left), _as_boolean(self.and_expr()))
        return left

    def and_expr(self) -> _Node:
        left = self.equality()
        while self.tok.is_kw("AND"):
            self.advance()
            left = _and(_as_boolean(left), _as_boolean(self.equality()))
        return left

    def equality(self) -> _Node:
        left = self.comparison()
        while True:
            tok = self.tok
            if tok.is_op("="):
                self.advance()
                left = _equal(left, self.comparison())
            elif tok.is_op("<>"):
                self.advance()
                eq = _equal(left, self.comparison())
                left = _Node(_Kind.BOOLEAN, _not_run(eq.run), eq.text.replace(" = ", " <> ", 1))
            elif tok.is_kw("IS"):
                self.advance()
                negate = self.tok.is_kw("NOT")
                if negate:
                    self.advance()
                self.expect_kw("NULL")
                null = _const(None, "NULL", _Kind.BOOL_CONSTANT)
                run = _raw_equal(left, null)
                if negate:
                    run = _not_run(run)
                word = "IS NOT NULL" if negate else "IS NULL"
                left = _Node(_Kind.BOOLEAN, run, f"({left.text} {word})")
            else:
                return left

    def comparison(self) -> _Node:
        left = self.unary()
        while True:
            tok = self.tok
            if tok.kind is _T.OP and tok.text in _ORDERINGS:
                self.advance()
                left = _ordering(left, self.unary(), tok.text, _ORDERINGS[tok.text])
                continue
            negate = tok.is_kw("NOT") and self.peek().kind is _T.KEYWORD
            word = self.peek() if negate else tok
            if word.is_kw("BETWEEN"):
                self.i += 2 if negate else 1
                low = self.unary()
                self.expect_kw("AND")
                high = self.unary()
                left = self._between(left, low, high, negate)
            elif word.is_kw("IN"):
                self.i += 2 if negate else 1
                left = self._in(left, negate)
            elif word.kind is _T.KEYWORD and word.text in _STRING_TESTS:
                self.i += 2 if negate else 1
                test = _STRING_TESTS[word.text]
                left = _string_test(left, self.string(), word.text, test, negate)
            else:
                return left

    def _between(self, value: _Node, low: _Node, high: _Node, negate: bool) -> _Node:
        if negate:
            return _or(
                _ordering(value, low, "<", _ORDERINGS["<"]),
                _ordering(value, high, ">", _ORDERINGS[">"]),
            )
        if low.kind in (_Kind.CONSTANT, _Kind.BOOL_CONSTANT) and high.kind in (
            _Kind.CONSTANT,
            _Kind.BOOL_CONSTANT,
        ):
            if low.value is None or high.value is None:
                raise SqlFilterError("illegal values of BETWEEN: they cannot be NULL")
            try:
                ordered = _compare(high.value, low.value) >= 0
            except _EvalError:
                raise SqlFilterError(
                    f"illegal values of BETWEEN: {low.text} and {high.text} cannot be compared"
                ) from None
            if not ordered:
                raise SqlFilterError(
                    f"illegal values of BETWEEN: the low value {low.text} must be less than "
                    f"or equal to the high value {high.text}"
                )
        return _and(
            _ordering(value, low, ">=", _ORDERINGS[">="]),
            _ordering(value, high, "<=", _ORDERINGS["<="]),
        )

    def _in(self, left: _Node, negate: bool) -> _Node:
        if left.kind is not _Kind.PROPERTY:
            raise SqlFilterError(f"expected a property before IN, got {left.text}")
        self.expect_op("(")
        items = [self.string()]
        while self.tok.is_op(","):
            self.advance()
            items.append(self.string())
        self.expect_op(")")
        choices = frozenset(items)
        inner = left.run

        def run(ctx: Context) -> Value:
            value = inner(ctx)
            if not isinstance(value, str):
                return None
            return (value in choices) != negate

        word = "NOT IN" if negate else "IN"
        listed = ", ".join(f"'{item}'" for item in items)
        return _Node(_Kind.BOOLEAN, run, f"({left.text} {word} ({listed}))")

    def unary(self) -> _Node:
        tok = self.tok
        if tok.is_op("+"):
            self.advance()
            return self.unary()
        if tok.is_op("-"):
            self.advance()
            return _negate(self.unary())
        if tok.is_kw("NOT"):
            self.advance()
            inner = _as_boolean(self.unary())
            return _Node(_Kind.BOOLEAN, _not_run(inner.run), f"(NOT {inner.text})")
        return self.primary()

    def primary(self) -> _Node:
        tok = self.advance()
        if tok.kind is _T.STRING:
            return _const(tok.text, "'" + tok.text.replace("'", "''") + "'")
        if tok.kind is _T.DECIMAL:
            return _decimal(tok.text)
        if tok.kind is _T.FLOAT:
            return _float(tok.text)
        if tok.kind is _T.ID:
            name = tok.text
            return _Node(_Kind.PROPERTY, lambda ctx: ctx.get(name), name)
        if tok.is_kw("TRUE"):
            return _const(True, "TRUE", _Kind.BOOL_CONSTANT)
        if tok.is_kw("FALSE"):
            return _const(False, "FALSE", _Kind.BOOL_CONSTANT)
        if tok.is_kw("NULL"):
            return _const(None, "NULL", _Kind.BOOL_CONSTANT)
        if tok.is_op("("):
            node = self.or_expr()
            self.expect_op(")")
            return node
        raise SqlFilterError(f"unexpected {tok.describe()}")


_ORDERINGS: Final[dict[str, Callable[[int], bool]]] = {
    ">": lambda c: c > 0,
    ">=": lambda c: c >= 0,
    "<": lambda c: c < 0,
    "<=": lambda c: c <= 0,
}
_STRING_TESTS: Final[dict[str, Callable[[str, str], bool]]] = {
    "CONTAINS": lambda value, search: search in value,
    "STARTSWITH": str.startswith,
    "ENDSWITH": str.endswith,
}


def _decimal(text: str) -> _Node:
    digits = text.rstrip("lL")
    value = int(digits)
    if value > _LONG_MAX:
        raise SqlFilterError(f"{text} is out of the range of a long")
    number: int = value if value <= _INT_MAX else _Long(value)
    return _const(number, text)


def _float(text: str) -> _Node:
    value = float(text)
    if math.isinf(value):
        raise SqlFilterError(f"{text} is greater than the largest double")
    if value < _DOUBLE_MIN_VALUE:
        # RocketMQ compares with Double.MIN_VALUE, the smallest *positive* double, so it
        # refuses 0.0 too; we refuse what it refuses.
        raise SqlFilterError(f"{text} is less than 4.9E-324")
    return _const(value, text)


# ------------------------------------------------------------------ public surface


@dataclass(frozen=True, slots=True)
class SqlFilter:
    """A compiled SQL92 expression."""

    expression: str
    _run: Evaluator

    def evaluate(self, properties: Context) -> bool | None:
        """TRUE, FALSE or NULL (unknown) for a message's properties; None also when a value
        cannot be converted as Java would (where RocketMQ throws)."""
        try:
            value = self._run(properties)
        except _EvalError:
            return None
        return value if isinstance(value, bool) else None

    def matches(self, properties: Context) -> bool:
        """Whether a message with these properties is delivered: only TRUE selects it."""
        try:
            return self._run(properties) is True
        except _EvalError:
            return False


@functools.lru_cache(maxsize=1024)
def compile_sql(expression: str) -> SqlFilter:
    """Parse ``expression`` once (cached by its text, as ``SelectorParser`` caches).

    Raises:
        SqlFilterError: it does not parse, or fails one of RocketMQ's compile-time checks.
    """
    if not expression or not expression.strip():
        raise SqlFilterError("the expression is empty")
    node = _Parser(expression).parse()
    return SqlFilter(expression, node.run)

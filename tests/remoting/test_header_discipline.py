"""Every custom header on the wire goes through its typed class in ``remoting/headers.py``.

RocketMQ counterpart: the rule its code keeps by hand, ``CommandCustomHeader`` classes
decoded by ``RemotingCommand.decodeCommandCustomHeader`` rather than ``getExtFields().get``.

Checked on the AST of every module of codec/ remoting/ store/ broker/ client/, so a wire
name cannot hide in a corner: outside ``remoting/headers.py`` a module may not

- subscript ``ext_fields`` with a string (``request.ext_fields["offset"]``, read or write),
  nor call ``.get``/``.pop``/``.setdefault`` on it with one; ``ext_fields`` here is the
  attribute, a name called ``ext_fields``, or a local bound from either, from
  ``header.to_ext_fields()``/``to_v2()`` or from ``dict(...)`` of one of those. A
  module-level string constant (``KEY = "msgId"``) counts as the string it names;
- hand a dict with string keys (a literal, or ``dict(key=...)``), or a local bound from one,
  to a request/response builder (``RemotingCommand.request``, ``RemotingCommand(...)``,
  ``response_to``, or a function of the same module that passes a ``dict[str, str]``
  parameter on to one, like the admin client's ``_call``), assign one to ``.ext_fields``
  or ``update`` ``ext_fields`` with one.

What must stay generic is in ``ALLOWED`` with the reason.
"""

from __future__ import annotations

import ast
import dataclasses
import functools
import textwrap
from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

import remoting.headers as headers_module
from remoting.codes import SerializeType
from remoting.command import RemotingCommand
from remoting.headers import (
    BrokerNameRequestHeader,
    CommandHeader,
    ConsumerGroupRequestHeader,
    ConsumerRunningInfoRequestHeader,
    DeleteAccessConfigRequestHeader,
    GetConsumeStatsRequestHeader,
    GetMaxOffsetResponseHeader,
    GroupNameRequestHeader,
    ProducerGroupRequestHeader,
    QueryDataVersionResponseHeader,
    QueryMessageRequestHeader,
    QueueRequestHeader,
    SearchOffsetRequestHeader,
    SendMessageResponseHeader,
    TopicRequestHeader,
    UpdateGlobalWhiteAddrsConfigRequestHeader,
)

ROOT = Path(__file__).resolve().parent.parent.parent
PACKAGES = ("codec", "remoting", "store", "broker", "client")

# Modules that are the header machinery itself, not users of it.
EXEMPT = {
    "remoting/headers.py": "the typed headers: the one place wire names live",
}

# (module, enclosing function, wire key) that must stay generic, with why.
ALLOWED: dict[tuple[str, str, str], str] = {
    # The ACL signature covers every field of a request, whatever its code, so the client
    # hook and the broker's check add and read the three ACL fields on any header
    # (RocketMQ's AclClientRPCHook / PlainAccessValidator do the same with addExtField).
    ("remoting/acl.py", "AclClientHook.before_request", "AccessKey"): "signs any request",
    ("remoting/acl.py", "AclClientHook.before_request", "SecurityToken"): "signs any request",
    ("remoting/acl.py", "AclClientHook.before_request", "Signature"): "signs any request",
    ("broker/acl.py", "PlainAcl.check", "AccessKey"): "checks the signature of any request",
    ("broker/acl.py", "PlainAcl.check", "Signature"): "checks the signature of any request",
    ("broker/acl.py", "PlainAcl.before_request", "AccessKey"): "logs who was refused",
}

# The remoting API's builders; a module's own helpers that hand a header dict on to one
# (the admin client's ``_call``, a processor's ``_ok``) are found by _forwarding_builders.
_BUILDERS = frozenset({"request", "RemotingCommand", "response_to"})
_EXT_PRODUCERS = frozenset({"to_ext_fields", "to_v2"})
_LOOKUPS = frozenset({"get", "pop", "setdefault"})


@dataclass(frozen=True, slots=True)
class Finding:
    module: str
    line: int
    function: str
    key: str
    what: str

    def __str__(self) -> str:
        return f"{self.module}:{self.line} in {self.function or '<module>'}: {self.what}"


def _own_constants(tree: ast.Module) -> dict[str, str]:
    out: dict[str, str] = {}
    for node in tree.body:
        if (
            isinstance(node, ast.Assign)
            and isinstance(node.value, ast.Constant)
            and isinstance(node.value.value, str)
        ):
            for target in node.targets:
                if isinstance(target, ast.Name):
                    out[target.id] = node.value.value
    return out


@functools.cache
def _constants_of(module: str) -> dict[str, str]:
    parts = module.split(".")
    for path in (ROOT.joinpath(*parts).with_suffix(".py"), ROOT.joinpath(*parts, "__init__.py")):
        if path.is_file():
            return _own_constants(ast.parse(path.read_text()))
    return {}


def _module_constants(tree: ast.Module) -> dict[str, str]:
    """Module-level string constants, and those imported from our other modules, so that
    ``from remoting.acl import ACCESS_KEY`` then ``ext.get(ACCESS_KEY)`` is seen as a key."""
    out: dict[str, str] = {}
    for node in tree.body:
        if (
            isinstance(node, ast.ImportFrom)
            and node.module
            and node.level == 0
            and node.module.split(".")[0] in PACKAGES
        ):
            theirs = _constants_of(node.module)
            for alias in node.names:
                if alias.name in theirs:
                    out[alias.asname or alias.name] = theirs[alias.name]
    out.update(_own_constants(tree))
    return out


def _string_keys(node: ast.expr) -> list[str] | None:
    """The string keys of a dict display or ``dict(k=...)`` call; None for anything else."""
    if isinstance(node, ast.Dict):
        keys = [
            k.value for k in node.keys if isinstance(k, ast.Constant) and isinstance(k.value, str)
        ]
        return keys or None
    if isinstance(node, ast.Call) and isinstance(node.func, ast.Name) and node.func.id == "dict":
        keys = [kw.arg for kw in node.keywords if kw.arg is not None]
        return keys or None
    if isinstance(node, ast.BinOp) and isinstance(node.op, ast.BitOr):  # {...} | {...}
        keys = [*(_string_keys(node.left) or ()), *(_string_keys(node.right) or ())]
        return keys or None
    return None


def _call_name(node: ast.Call) -> str | None:
    if isinstance(node.func, ast.Attribute):
        return node.func.attr
    if isinstance(node.func, ast.Name):
        return node.func.id
    return None


def _is_header_dict_annotation(node: ast.expr | None) -> bool:
    text = ast.unparse(node) if node is not None else ""
    return "dict[str, str]" in text or "Mapping[str, str]" in text


def _hands_on(node: ast.expr, params: set[str]) -> bool:
    """``node`` is one of ``params`` as it is: ``ext``, ``ext or {}``, ``dict(ext)``."""
    if isinstance(node, ast.Name):
        return node.id in params
    if isinstance(node, ast.BoolOp):
        return any(_hands_on(v, params) for v in node.values)
    if isinstance(node, ast.Call) and _call_name(node) == "dict" and len(node.args) == 1:
        return _hands_on(node.args[0], params)
    return False


def _forwarding_builders(tree: ast.Module, seed: frozenset[str] = _BUILDERS) -> frozenset[str]:
    """``seed``, and the functions of this module that pass a ``dict[str, str]`` parameter
    on to one of them, to a fixed point."""
    builders = set(seed)
    funcs = [n for n in ast.walk(tree) if isinstance(n, (ast.FunctionDef, ast.AsyncFunctionDef))]
    changed = True
    while changed:
        changed = False
        for func in funcs:
            if func.name in builders:
                continue
            args = func.args
            params = {
                a.arg
                for a in (*args.posonlyargs, *args.args, *args.kwonlyargs)
                if _is_header_dict_annotation(a.annotation)
            }
            if not params:
                continue
            for call in ast.walk(func):
                if not isinstance(call, ast.Call) or _call_name(call) not in builders:
                    continue
                values = [*call.args, *(kw.value for kw in call.keywords)]
                if any(_hands_on(v, params) for v in values):
                    builders.add(func.name)
                    changed = True
                    break
    return frozenset(builders)


class _Checker(ast.NodeVisitor):
    def __init__(
        self, module: str, constants: dict[str, str], allowed: Mapping[tuple[str, str, str], str]
    ) -> None:
        self.module = module
        self.constants = constants
        self.allowed = allowed
        self.builders = _BUILDERS
        self.findings: list[Finding] = []
        self._scope: list[str] = []
        # per function: locals bound from ext_fields, and locals bound from keyed dicts
        self._ext_names: list[set[str]] = [set()]
        self._dict_names: list[dict[str, list[str]]] = [{}]

    # -------------------------------------------------------------------------- scopes

    def _enter(self, name: str, node: ast.AST, params: list[str]) -> None:
        self._scope.append(name)
        self._ext_names.append({p for p in params if p == "ext_fields"})
        self._dict_names.append({})
        self._prescan(node)
        self.generic_visit(node)
        self._dict_names.pop()
        self._ext_names.pop()
        self._scope.pop()

    def visit_ClassDef(self, node: ast.ClassDef) -> None:
        self._scope.append(node.name)
        self.generic_visit(node)
        self._scope.pop()

    def visit_FunctionDef(self, node: ast.FunctionDef) -> None:
        self._enter(node.name, node, [a.arg for a in ast.walk(node.args) if isinstance(a, ast.arg)])

    def visit_AsyncFunctionDef(self, node: ast.AsyncFunctionDef) -> None:
        self._enter(node.name, node, [a.arg for a in ast.walk(node.args) if isinstance(a, ast.arg)])

    def _prescan(self, func: ast.AST) -> None:
        """Bind the names of this function (not of nested ones) before checking uses, so an
        order of statements in loops cannot hide one; repeat until no new name binds."""
        assigns: list[tuple[str, ast.expr]] = []
        stack = list(ast.iter_child_nodes(func))
        while stack:
            node = stack.pop()
            if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef, ast.Lambda)):
                continue
            if isinstance(node, ast.Assign):
                assigns.extend(
                    (target.id, node.value)
                    for target in node.targets
                    if isinstance(target, ast.Name)
                )
            elif (
                isinstance(node, (ast.AnnAssign, ast.NamedExpr))
                and node.value is not None
                and isinstance(node.target, ast.Name)
            ):
                assigns.append((node.target.id, node.value))
            stack.extend(ast.iter_child_nodes(node))
        changed = True
        while changed:
            changed = False
            for name, value in assigns:
                if name not in self._ext_names[-1] and self._is_ext(value):
                    self._ext_names[-1].add(name)
                    changed = True
                keys = _string_keys(value)
                if keys and name not in self._dict_names[-1]:
                    self._dict_names[-1][name] = keys
                    changed = True

    @property
    def _function(self) -> str:
        return ".".join(self._scope)

    # ------------------------------------------------------------------------- helpers

    def _is_ext(self, node: ast.expr) -> bool:
        if isinstance(node, ast.Attribute):
            return node.attr == "ext_fields"
        if isinstance(node, ast.Name):
            return node.id == "ext_fields" or node.id in self._ext_names[-1]
        if isinstance(node, ast.Call):
            name = _call_name(node)
            if name in _EXT_PRODUCERS:
                return True
            if name == "dict" and len(node.args) == 1 and not node.keywords:
                return self._is_ext(node.args[0])
        return False

    def _key(self, node: ast.expr) -> str | None:
        if isinstance(node, ast.Constant) and isinstance(node.value, str):
            return node.value
        if isinstance(node, ast.Name):
            return self.constants.get(node.id)
        return None

    def _report(self, node: ast.AST, key: str, what: str) -> None:
        if (self.module, self._function, key) in self.allowed:
            return
        line = getattr(node, "lineno", 0)
        self.findings.append(Finding(self.module, line, self._function, key, what))

    def _check_dict_arg(self, node: ast.expr, where: str) -> None:
        keys = _string_keys(node)
        if keys is None and isinstance(node, ast.Name):
            keys = self._dict_names[-1].get(node.id)
        for key in keys or ():
            self._report(node, key, f"hand-built header key {key!r} {where}")

    # ---------------------------------------------------------------------------- uses

    def visit_Subscript(self, node: ast.Subscript) -> None:
        if self._is_ext(node.value):
            key = self._key(node.slice)
            if key is not None:
                self._report(node, key, f"ext_fields[{key!r}]")
        self.generic_visit(node)

    def visit_Call(self, node: ast.Call) -> None:
        name = _call_name(node)
        func = node.func
        if isinstance(func, ast.Attribute) and self._is_ext(func.value):
            if name in _LOOKUPS and node.args:
                key = self._key(node.args[0])
                if key is not None:
                    self._report(node, key, f"ext_fields.{name}({key!r})")
            elif name == "update":
                for arg in node.args:
                    self._check_dict_arg(arg, "in ext_fields.update")
                for kw in node.keywords:
                    if kw.arg is not None:
                        self._report(node, kw.arg, f"ext_fields.update({kw.arg}=...)")
        if name in self.builders:
            for arg in node.args:
                self._check_dict_arg(arg, f"passed to {name}()")
            for kw in node.keywords:
                self._check_dict_arg(kw.value, f"passed to {name}()")
        self.generic_visit(node)

    def visit_Assign(self, node: ast.Assign) -> None:
        for target in node.targets:
            if isinstance(target, ast.Attribute) and target.attr == "ext_fields":
                self._check_dict_arg(node.value, "assigned to .ext_fields")
        self.generic_visit(node)


def check_source(
    source: str,
    module: str = "<sample>",
    allowed: Mapping[tuple[str, str, str], str] = ALLOWED,
) -> list[Finding]:
    """The findings in one module's source, but those ``allowed`` lets through."""
    tree = ast.parse(source)
    checker = _Checker(module, _module_constants(tree), allowed)
    checker.builders = _forwarding_builders(tree, _tree_builders())
    checker._prescan(tree)
    checker.visit(tree)
    return checker.findings


@functools.cache
def _tree_builders() -> frozenset[str]:
    """The builders, and every function of the tree that hands a header dict on to one, by
    name: ``Admin.update_acl_config(addr, fields)`` builds a request for the CLI too."""
    trees = [ast.parse(path.read_text()) for _module, path in _modules()]
    builders = _BUILDERS
    while True:
        grown = frozenset().union(*(_forwarding_builders(t, builders) for t in trees))
        if grown == builders:
            return builders
        builders = grown


def _modules() -> Iterator[tuple[str, Path]]:
    for package in PACKAGES:
        for path in sorted((ROOT / package).rglob("*.py")):
            module = path.relative_to(ROOT).as_posix()
            if module not in EXEMPT:
                yield module, path


@functools.cache
def _tree_findings() -> tuple[Finding, ...]:
    """Every finding in the tree, the allow-list not applied (parsed once per run)."""
    return tuple(
        f for module, path in _modules() for f in check_source(path.read_text(), module, {})
    )


# ------------------------------------------------------------------------------- the tree


def test_no_hand_built_header_outside_headers_py() -> None:
    found = [str(f) for f in _tree_findings() if (f.module, f.function, f.key) not in ALLOWED]
    assert not found, (
        "wire header keys handled by hand; use the typed class in remoting/headers.py:\n"
        + "\n".join(found)
    )


def test_allowed_entries_are_still_needed() -> None:
    seen = {(f.module, f.function, f.key) for f in _tree_findings()}
    stale = sorted(set(ALLOWED) - seen)
    assert not stale, f"allow-list entries that match nothing any more: {stale}"


# -------------------------------------------------------------------- the checker itself


def _src(text: str) -> str:
    return textwrap.dedent(text).lstrip("\n")


BAD_SAMPLES = {
    "subscript": "def f(response):\n    return response.ext_fields['offset']\n",
    "get": "def f(request):\n    return request.ext_fields.get('consumerGroup')\n",
    "pop": "def f(cmd):\n    cmd.ext_fields.pop('msgId', None)\n",
    "setdefault": "def f(cmd):\n    cmd.ext_fields.setdefault('queueId', '0')\n",
    "write": "def f(cmd):\n    cmd.ext_fields['masterAddr'] = 'x'\n",
    "local": _src("""
        def f(response):
            ext = response.ext_fields
            return int(ext['queueOffset'])
        """),
    "local_dict": _src("""
        def f(response):
            ext = dict(response.ext_fields)
            return ext.get('msgId')
        """),
    "to_ext_fields": _src("""
        def f(h):
            ext = h.to_ext_fields()
            ext['_UNIQUE_KEY_QUERY'] = 'true'
        """),
    "parameter": "def f(ext_fields):\n    return ext_fields.get('offset')\n",
    "constant": _src("""
        KEY = 'msgId'
        def f(response):
            return response.ext_fields.get(KEY)
        """),
    "imported_constant": _src("""
        from remoting.acl import ACCESS_KEY
        def f(request):
            return request.ext_fields.get(ACCESS_KEY)
        """),
    "module_level": "x = cmd.ext_fields['topic']\n",
    "loop_order": _src("""
        def f(rs):
            for r in rs:
                if r:
                    print(ext['offset'])
                ext = r.ext_fields
        """),
    "request_literal": _src("""
        def f(mq):
            return RemotingCommand.request(30, {'topic': mq.topic, 'queueId': str(mq.queue_id)})
        """),
    "request_dict_call": _src("""
        def f(g):
            return RemotingCommand.request(1, dict(consumerGroup=g))
        """),
    "request_local": _src("""
        def f(g):
            ext = {'consumerGroup': g}
            return RemotingCommand.request(1, ext)
        """),
    "response_literal": _src("""
        def f(request):
            return response_to(request, 0, None, {'offset': '1'})
        """),
    "forwarding_helper": _src("""
        def _ok(request, ext: dict[str, str] | None = None):
            return response_to(request, 0, None, ext)
        def f(request):
            return _ok(request, {'offset': '1'})
        """),
    "forwarding_method": _src("""
        class Admin:
            async def _call(self, addr, code, ext: dict[str, str] | None = None):
                return await self.invoke(addr, RemotingCommand.request(code, ext or {}))
            async def f(self, addr, g):
                ext = {'consumerGroup': g}
                return await self._call(addr, 1, ext)
        """),
    "merged_dicts": _src("""
        def f(ak, optional):
            fields = {'accessKey': ak} | {k: v for k, v in optional.items() if v}
            return RemotingCommand.request(50, fields)
        """),
    "constructor_kw": _src("""
        def f():
            return RemotingCommand(code=1, ext_fields={'brokerName': 'b'})
        """),
    "assigned": "def f(cmd):\n    cmd.ext_fields = {'haServerAddr': 'x'}\n",
    "update": "def f(cmd):\n    cmd.ext_fields.update({'msgId': 'x'})\n",
    "update_kw": "def f(cmd):\n    cmd.ext_fields.update(msgId='x')\n",
}

GOOD_SAMPLES = {
    "typed_read": _src("""
        def f(response):
            return OffsetResponseHeader.from_ext_fields(response.ext_fields).offset
        """),
    "typed_write": _src("""
        def f(mq):
            header = QueueRequestHeader(topic=mq.topic, queue_id=mq.queue_id)
            return RemotingCommand.request(30, header.to_ext_fields())
        """),
    "empty_header": "def f():\n    return RemotingCommand.request(34, {})\n",
    "generic_copy": "def f(request):\n    return dict(request.ext_fields)\n",
    "body_json": "def f(doc):\n    return doc.get('offsetTable')\n",
    "other_dict": "def f(doc):\n    return dumps({'brokerName': doc})\n",
    "variable_key": "def f(request, k):\n    return request.ext_fields.get(k)\n",
    "not_forwarding": _src("""
        def _answer_with(request, body: bytes):
            return response_to(request, 0, None, None, body)
        def f(request):
            return _answer_with(request, {'offset': '1'})
        """),
}


@pytest.mark.parametrize("name", sorted(BAD_SAMPLES))
def test_checker_flags_a_hand_built_header(name: str) -> None:
    found = check_source(BAD_SAMPLES[name])
    assert found, f"sample {name!r} was not flagged"


@pytest.mark.parametrize("name", sorted(GOOD_SAMPLES))
def test_checker_passes_typed_headers(name: str) -> None:
    assert check_source(GOOD_SAMPLES[name]) == []


def test_checker_names_module_line_function_and_key() -> None:
    (finding,) = check_source(BAD_SAMPLES["get"], "client/x.py")
    assert (finding.module, finding.line, finding.function, finding.key) == (
        "client/x.py",
        2,
        "f",
        "consumerGroup",
    )
    assert str(finding) == "client/x.py:2 in f: ext_fields.get('consumerGroup')"


def test_allow_list_needs_module_function_and_key() -> None:
    src = "def before_request(request):\n    request.ext_fields['AccessKey'] = 'ak'\n"
    # same key, other module or function: still flagged
    assert check_source(src, "remoting/acl.py")
    assert check_source(src.replace("before_request", "other"), "remoting/acl.py")


# --------------------------------------------- the typed classes write what hands wrote

# Each converted call site: the typed header, and the dict the hand-written code built
# (keys in its order: neither header codec sorts extFields, so the order is on the wire).
CONVERTED: dict[str, tuple[CommandHeader, dict[str, str]]] = {
    "namesrv QUERY_DATA_VERSION reply": (
        QueryDataVersionResponseHeader(changed=True),
        {"changed": "true"},
    ),
    "namesrv QUERY_DATA_VERSION reply, unchanged": (
        QueryDataVersionResponseHeader(changed=False),
        {"changed": "false"},
    ),
    "admin QUERY_MESSAGE by unique key": (
        QueryMessageRequestHeader(
            topic="T",
            key="k",
            max_num=64,
            begin_timestamp=0,
            end_timestamp=9,
            unique_key_query=True,
        ),
        {
            "topic": "T",
            "key": "k",
            "maxNum": "64",
            "beginTimestamp": "0",
            "endTimestamp": "9",
            "_UNIQUE_KEY_QUERY": "true",
        },
    ),
    "admin QUERY_MESSAGE by key": (
        QueryMessageRequestHeader(
            topic="T",
            key="k",
            max_num=32,
            begin_timestamp=1,
            end_timestamp=2,
            unique_key_query=False,
        ),
        {
            "topic": "T",
            "key": "k",
            "maxNum": "32",
            "beginTimestamp": "1",
            "endTimestamp": "2",
            "_UNIQUE_KEY_QUERY": "false",
        },
    ),
    "admin DELETE_TOPIC / GET_TOPIC_STATS_INFO": (TopicRequestHeader(topic="T"), {"topic": "T"}),
    "admin DELETE_SUBSCRIPTIONGROUP": (
        GroupNameRequestHeader(group_name="g"),
        {"groupName": "g", "removeOffset": "false"},
    ),
    "admin GET_CONSUME_STATS": (
        GetConsumeStatsRequestHeader(consumer_group="g", topic=None),
        {"consumerGroup": "g"},
    ),
    "admin GET_CONSUME_STATS of a topic": (
        GetConsumeStatsRequestHeader(consumer_group="g", topic="T"),
        {"consumerGroup": "g", "topic": "T"},
    ),
    "admin GET_CONSUMER_CONNECTION_LIST": (
        ConsumerGroupRequestHeader(consumer_group="g"),
        {"consumerGroup": "g"},
    ),
    "admin GET_CONSUMER_RUNNING_INFO": (
        ConsumerRunningInfoRequestHeader(consumer_group="g", client_id="c", jstack_enable=False),
        {"consumerGroup": "g", "clientId": "c", "jstackEnable": "false"},
    ),
    "admin GET_PRODUCER_CONNECTION_LIST": (
        ProducerGroupRequestHeader(producer_group="pg"),
        {"producerGroup": "pg"},
    ),
    "admin WIPE/ADD_WRITE_PERM": (BrokerNameRequestHeader(broker_name="b"), {"brokerName": "b"}),
    "admin GET_MAX/MIN_OFFSET": (
        QueueRequestHeader(topic="T", queue_id=3),
        {"topic": "T", "queueId": "3"},
    ),
    "admin SEARCH_OFFSET_BY_TIMESTAMP": (
        SearchOffsetRequestHeader(topic="T", queue_id=3, timestamp=1700000000000),
        {"topic": "T", "queueId": "3", "timestamp": "1700000000000"},
    ),
    "admin DELETE_ACL_CONFIG": (
        DeleteAccessConfigRequestHeader(access_key="ak"),
        {"accessKey": "ak"},
    ),
    "admin UPDATE_GLOBAL_WHITE_ADDRS_CONFIG": (
        UpdateGlobalWhiteAddrsConfigRequestHeader(global_white_addrs="10.*,192.168.0.1"),
        {"globalWhiteAddrs": "10.*,192.168.0.1"},
    ),
    "broker send reply": (
        SendMessageResponseHeader(
            msg_id="7F00000100002A9F0000000000000123",
            queue_id=3,
            queue_offset=12345,
            msg_region="DefaultRegion",
            trace_on="true",
        ),
        {
            "msgId": "7F00000100002A9F0000000000000123",
            "queueId": "3",
            "queueOffset": "12345",
            "MSG_REGION": "DefaultRegion",
            "TRACE_ON": "true",
        },
    ),
    "broker GET_MAX_OFFSET reply": (GetMaxOffsetResponseHeader(offset=-1), {"offset": "-1"}),
}


@pytest.mark.parametrize("site", sorted(CONVERTED))
def test_converted_site_writes_the_same_bytes(site: str) -> None:
    header, hand = CONVERTED[site]
    typed = header.to_ext_fields()
    assert list(typed.items()) == list(hand.items())
    for serialize_type in (SerializeType.JSON, SerializeType.ROCKETMQ):
        a = RemotingCommand(code=1, opaque=7, ext_fields=typed, serialize_type=serialize_type)
        b = RemotingCommand(code=1, opaque=7, ext_fields=hand, serialize_type=serialize_type)
        assert a.to_bytes() == b.to_bytes()
    assert type(header).from_ext_fields(hand) == header


def _reference_write(header: CommandHeader) -> dict[str, str]:
    """What CommandHeader.to_ext_fields did before it was generated: the field loop."""
    out: dict[str, str] = {}
    for f in dataclasses.fields(header):  # type: ignore[arg-type]
        value = getattr(header, f.name)
        if value is not None:
            out[f.metadata["wire"]] = (
                "true" if value is True else "false" if value is False else str(value)
            )
    return out


_HEADER_CLASSES = sorted(
    (
        c
        for c in vars(headers_module).values()
        if isinstance(c, type) and issubclass(c, CommandHeader) and c is not CommandHeader
    ),
    key=lambda c: c.__name__,
)


@pytest.mark.parametrize("cls", _HEADER_CLASSES, ids=lambda c: c.__name__)
def test_generated_writer_matches_the_field_loop(cls: type[CommandHeader]) -> None:
    # every field set (to values with a sign, digits, text), then every optional one unset
    full: dict[str, Any] = {}
    for f in dataclasses.fields(cls):  # type: ignore[arg-type]
        hint = str(f.type)
        full[f.name] = True if "bool" in hint else -42 if "int" in hint else f"v-{f.name}"
    header = cls(**full)
    assert list(header.to_ext_fields().items()) == list(_reference_write(header).items())
    sparse = cls(
        **{
            f.name: full[f.name]
            for f in dataclasses.fields(cls)  # type: ignore[arg-type]
            if f.default is dataclasses.MISSING
        }
    )
    assert list(sparse.to_ext_fields().items()) == list(_reference_write(sparse).items())
    assert cls.from_ext_fields(header.to_ext_fields()) == header

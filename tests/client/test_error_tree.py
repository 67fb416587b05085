"""One error tree: everything the SDK raises derives from ``RocketMQError`` with ``code`` and
``retriable``, checked three ways: the classes ``client.errors`` exports, every ``raise`` in
the SDK's source (an AST walk over client/, the Spark connector included), and real failures
through a real name server and broker (and a peer that accepts and never answers).

RocketMQ counterpart: ``MQClientException`` / ``MQBrokerException`` / ``RemotingException``;
the model of one base with a retriable flag is aiokafka's ``errors.py``.
"""

from __future__ import annotations

import ast
import asyncio
import builtins
import importlib
import inspect
import re
import struct
import time
import typing
import zlib
from collections.abc import AsyncIterator
from datetime import timedelta
from pathlib import Path

import pytest

import client
import client.errors
from broker.broker import Broker
from broker.namesrv.server import NameServer
from client import Message, Producer, PullConsumer, SimpleConsumer
from remoting.bodies import (
    PERM_READ,
    PERM_WRITE,
    DataVersion,
    RegisterBrokerBody,
    TopicConfig,
    TopicConfigWrapper,
)
from remoting.client import ClientConfig, RemotingClient
from remoting.codes import RequestCode, ResponseCode
from remoting.command import RemotingCommand, response_to
from remoting.connection import Connection
from remoting.dispatch import Lane, ProcessorTable
from remoting.errors import RocketMQError
from remoting.headers import RegisterBrokerRequestHeader
from remoting.server import RemotingServer, ServerConfig
from tests.client.conftest import create_topic
from tests.client.test_errors import silent_listener  # noqa: F401 - the fixture
from tests.support import LOOPBACK, call

ROOT = Path(__file__).resolve().parents[2]

# ----------------------------------------------------------------------- 1: the classes


def test_every_exported_error_is_in_the_tree_with_code_and_retriable() -> None:
    exported = [getattr(client.errors, name) for name in client.errors.__all__]
    assert len(exported) > 30
    for cls in exported:
        assert inspect.isclass(cls) and issubclass(cls, RocketMQError), cls
        assert cls.code is None or isinstance(cls.code, int), cls
        assert isinstance(cls.retriable, bool), cls
        assert getattr(client, cls.__name__) is cls, f"client does not re-export {cls}"
    # every error class client.errors defines is exported (none left out of the one place)
    defined = {
        name
        for name, obj in vars(client.errors).items()
        if inspect.isclass(obj) and issubclass(obj, BaseException)
    }
    assert defined <= set(client.errors.__all__)


def test_the_new_members_of_the_tree() -> None:
    timeout = client.ClientTimeoutError(
        RequestCode.SEND_MESSAGE_V2, "any broker of topic T", 3, outcome="no response"
    )
    # one except clause catches every timeout; the SDK's own are ClientErrors too
    assert isinstance(timeout, client.RemotingTimeoutError)
    assert isinstance(timeout, client.ClientError)
    assert (timeout.code, timeout.retriable) == (None, True)
    assert (timeout.addr, timeout.request_code, timeout.timeout_s) == (
        "any broker of topic T",
        RequestCode.SEND_MESSAGE_V2,
        3,
    )
    assert str(timeout) == "SEND_MESSAGE_V2 (310) to any broker of topic T: no response after 3.0 s"
    named = client.ClientTimeoutError("Admin.topic_stats", "any broker", 120.0)
    assert named.request_code is None
    assert str(named) == "Admin.topic_stats to any broker: no response after 120.0 s"

    unreadable = client.ResponseDecodeError(
        "not JSON", request_code=RequestCode.GET_ROUTEINFO_BY_TOPIC, addr="127.0.0.1:9876"
    )
    assert str(unreadable) == (
        "GET_ROUTEINFO_BY_TOPIC (105) to 127.0.0.1:9876: unreadable answer: not JSON"
    )
    assert (unreadable.code, unreadable.retriable) == (None, False)
    assert issubclass(client.MessageDecodeError, client.ResponseDecodeError)
    assert issubclass(client.MessageDecodeError, ValueError)  # as before
    # a message refused before sending carries the code a broker refuses one with (Java's
    # Validators throw MQClientException(MESSAGE_ILLEGAL, …)); other arguments carry none
    assert client.InvalidMessageError.code == ResponseCode.MESSAGE_ILLEGAL
    assert client.MessageIllegalError.code == ResponseCode.MESSAGE_ILLEGAL
    assert client.InvalidArgumentError.code is None


def test_the_connector_and_cli_errors_are_in_the_tree() -> None:
    from client.admin_commands import UsageError
    from client.spark.offsets import DataLossError, SparkOptionError

    pytest.importorskip("pyarrow")
    from client.spark.arrow import WriteSchemaError

    for cls, also in (
        (SparkOptionError, ValueError),
        (WriteSchemaError, ValueError),
        (DataLossError, RuntimeError),  # what they were before: old except clauses still work
        (UsageError, ValueError),
    ):
        assert issubclass(cls, RocketMQError) and issubclass(cls, also), cls
    assert issubclass(SparkOptionError, client.InvalidArgumentError)
    assert issubclass(WriteSchemaError, client.InvalidArgumentError)
    assert issubclass(DataLossError, client.ClientError)


# ------------------------------------------------------------------ 2: every raise in client/

# Raises whose exception is not a name the walk can resolve, each with why it is in the tree
# (or never reaches a user). Keyed by file and the raised expression's source. An entry that
# no longer matches a raise fails the test, so the list cannot go stale.
ALLOWED: dict[tuple[str, str], str] = {
    ("client/message.py", "error"): (
        "check_topic's parameter, typed type[InvalidArgumentError]: InvalidArgumentError or "
        "InvalidMessageError"
    ),
    ("client/instance.py", "last"): "the last name server's RemotingError, re-raised",
    ("client/producer.py", "last_error"): (
        "the last attempt's BrokerError, RemotingError or NoRouteError (what the except "
        "clauses above it catch), re-raised"
    ),
    ("client/admin.py", "last"): "the last master's RocketMQError (caught as one), re-raised",
    ("client/spark/session.py", "result"): (
        "a send's failure collected by gather(return_exceptions=True): what Producer raises"
    ),
    ("client/admin_commands.py", "argparse.ArgumentTypeError"): (
        "argparse's contract for a type= function: argparse prints it and exits 2; it never "
        "leaves parse_args"
    ),
}


def _bindings(tree: ast.Module) -> dict[str, tuple[str, str | None]]:
    """Names a module binds by import: name -> (module, attribute or None for a module)."""
    out: dict[str, tuple[str, str | None]] = {}
    for node in ast.walk(tree):
        if isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            for alias in node.names:
                out[alias.asname or alias.name] = (node.module, alias.name)
        elif isinstance(node, ast.Import):
            for alias in node.names:
                if alias.asname:
                    out[alias.asname] = (alias.name, None)
                else:
                    top = alias.name.split(".")[0]
                    out[top] = (top, None)
    return out


def _resolve(expr: ast.expr, module: str, tree: ast.Module) -> object:
    """The object a Name or dotted Attribute stands for, or None when it is a local name."""
    if isinstance(expr, ast.Attribute):
        owner = _resolve(expr.value, module, tree)
        return None if owner is None else getattr(owner, expr.attr)
    if not isinstance(expr, ast.Name):
        return None
    bound = _bindings(tree).get(expr.id)
    if bound is not None:
        mod, attr = bound
        imported = importlib.import_module(mod)
        return imported if attr is None else getattr(imported, attr)
    if any(
        isinstance(node, ast.ClassDef | ast.FunctionDef) and node.name == expr.id
        for node in tree.body
    ):
        return getattr(importlib.import_module(module), expr.id)
    return getattr(builtins, expr.id, None)


def _in_tree(obj: object) -> bool:
    if inspect.isclass(obj):
        return issubclass(obj, RocketMQError)
    if callable(obj):  # a factory such as BrokerError.for_code: what it returns
        returns = typing.get_type_hints(obj).get("return")
        return inspect.isclass(returns) and issubclass(returns, RocketMQError)
    return False


def _raised(node: ast.Raise) -> list[ast.expr]:
    """The expressions a raise may raise: ``a or B(...)`` may raise either."""
    assert node.exc is not None
    exc = node.exc
    parts = exc.values if isinstance(exc, ast.BoolOp) else [exc]
    return [p.func if isinstance(p, ast.Call) else p for p in parts]


def test_every_raise_in_the_sdk_raises_a_class_of_the_tree() -> None:
    offenders: list[str] = []
    seen: set[tuple[str, str]] = set()
    paths = sorted((ROOT / "client").rglob("*.py"))
    assert len(paths) > 20
    for path in paths:
        rel = path.relative_to(ROOT).as_posix()
        if rel.startswith("client/spark/") and importlib.util.find_spec("pyspark") is None:
            continue  # source.py and listener.py import pyspark
        module = ".".join(path.relative_to(ROOT).with_suffix("").parts).removesuffix(".__init__")
        tree = ast.parse(path.read_text(), filename=str(path))
        for node in ast.walk(tree):
            if not isinstance(node, ast.Raise) or node.exc is None:
                continue  # a bare raise re-raises what an except clause caught
            for expr in _raised(node):
                key = (rel, ast.unparse(expr))
                if key in ALLOWED:
                    seen.add(key)
                    continue
                target = _resolve(expr, module, tree)
                if not _in_tree(target):
                    offenders.append(f"{rel}:{node.lineno} raise {ast.unparse(node.exc)}")
    assert not offenders, "raises outside the RocketMQError tree:\n" + "\n".join(offenders)
    if importlib.util.find_spec("pyspark") is not None:
        assert seen == set(ALLOWED), f"stale allow-list entries: {set(ALLOWED) - seen}"


def test_the_walk_catches_what_it_must() -> None:
    """The resolver is what the test above leans on: it must see a builtin, an abstract
    method's NotImplementedError and an imported tree class for what they are."""
    source = (
        "from client.errors import ClientError\n"
        "def f():\n"
        "    raise NotImplementedError\n"
        "def g():\n"
        "    raise ValueError('x')\n"
        "def h():\n"
        "    raise ClientError('x')\n"
    )
    tree = ast.parse(source)
    raises = [n for n in ast.walk(tree) if isinstance(n, ast.Raise)]
    verdicts = [_in_tree(_resolve(_raised(r)[0], "client.errors", tree)) for r in raises]
    assert verdicts == [False, False, True]


# ------------------------------------------------------------------ 3: real failures


@pytest.fixture
async def silent_broker(
    namesrv: NameServer,
    silent_listener: str,  # noqa: F811 - test_errors' fixture
) -> AsyncIterator[str]:
    """``silent_listener`` (test_errors: accepts connections, reads everything, answers
    nothing) registered with the name server as the master of broker-silent serving
    SilentTopic, as a broker's REGISTER_BROKER would: producers and consumers go
    there. The registering connection stays open (the name server drops a broker whose
    connection closes)."""
    topic = "SilentTopic"
    table = {topic: TopicConfig(topic, 1, 1, PERM_READ | PERM_WRITE)}
    body = RegisterBrokerBody(TopicConfigWrapper(table, DataVersion(1_700_000_000_000, 1)))
    encoded = body.encode(compressed=False)
    header = RegisterBrokerRequestHeader(
        broker_name="broker-silent",
        broker_addr=silent_listener,
        cluster_name="DefaultCluster",
        ha_server_addr=silent_listener,
        broker_id=0,
        compressed=False,
        body_crc32=zlib.crc32(encoded) & 0x7FFFFFFF,
    )
    async with RemotingClient(ClientConfig()) as rc:
        response = await call(
            rc, namesrv.address, RequestCode.REGISTER_BROKER, header.to_ext_fields(), encoded
        )
        assert response.code == ResponseCode.SUCCESS, response.remark
        yield silent_listener


def assert_send_refused(
    exc: client.BrokerError, broker: Broker, topic: str, code: int, *, retriable: bool
) -> None:
    """A send's refusal carries the code, whether to retry, and which request, broker and
    topic were refused."""
    assert (exc.code, exc.retriable) == (code, retriable)
    assert (exc.request_code, exc.addr, exc.topic) == (
        RequestCode.SEND_MESSAGE_V2,
        broker.address,
        topic,
    )


async def test_a_send_to_a_topic_that_does_not_exist(namesrv: NameServer, broker: Broker) -> None:
    """After the producer's retries (test_errors checks one attempt), the error is still the
    broker's refusal."""
    # TBW102 without the inherit bit: the producer finds a broker, which creates nothing.
    await create_topic(broker, "TBW102", queues=1, perm=PERM_READ | PERM_WRITE)
    async with Producer("pg-tree-unknown", namesrv.address) as p:
        with pytest.raises(client.TopicNotExistError) as caught:
            await p.send(Message("NoSuchTopicHere", b"x"))
    exc = caught.value
    assert_send_refused(
        exc, broker, "NoSuchTopicHere", ResponseCode.TOPIC_NOT_EXIST, retriable=True
    )
    assert str(exc).startswith(
        f"SEND_MESSAGE_V2 (310) to {broker.address}, topic NoSuchTopicHere: refused with "
        "TOPIC_NOT_EXIST (17): topic[NoSuchTopicHere] not exist"
    )


async def test_a_topic_no_name_server_knows_is_a_retriable_no_route(
    namesrv: NameServer, broker: Broker
) -> None:
    async with SimpleConsumer("cg-tree-noroute", namesrv.address) as sc:
        sc.subscribe("NoSuchTopicAnywhere")
        with pytest.raises(client.NoRouteError) as caught:
            await sc.receive(1)
    assert isinstance(caught.value, client.ClientError)
    assert (caught.value.code, caught.value.retriable) == (None, True)
    assert str(caught.value) == (
        "no route info of topic NoSuchTopicAnywhere: the name server does not know it"
    )


async def test_a_peer_that_never_answers_times_out_naming_request_address_and_wait(
    namesrv: NameServer, silent_broker: str
) -> None:
    """A broker that accepts and never answers: a send waits its timeout once (the first
    contact's serialization probe shares that budget) and says where and how long."""
    async with Producer(
        "pg-tree-silent", namesrv.address, send_timeout_s=1.0, auto_batch=False
    ) as p:
        started = time.monotonic()
        with pytest.raises(client.RemotingTimeoutError) as caught:
            await p.send(Message("SilentTopic", b"x"))
        waited = time.monotonic() - started
    exc = caught.value
    assert (exc.code, exc.retriable) == (None, True)
    assert (exc.addr, exc.request_code, exc.timeout_s) == (
        silent_broker,
        RequestCode.SEND_MESSAGE_V2,
        1.0,
    )
    assert str(exc) == f"SEND_MESSAGE_V2 (310) to {silent_broker}: no response after 1.0 s"
    assert 0.9 < waited < 2.0, waited


async def test_a_receive_from_a_broker_that_never_answers(
    namesrv: NameServer, silent_broker: str
) -> None:
    async with SimpleConsumer(
        "cg-tree-silent",
        namesrv.address,
        subscriptions={"SilentTopic": "*"},
        await_duration=timedelta(0),
        request_timeout_s=0.5,
    ) as sc:
        with pytest.raises(client.RemotingTimeoutError) as caught:
            await sc.receive(1)
    exc = caught.value
    assert (exc.code, exc.retriable) == (None, True)
    assert (exc.addr, exc.request_code) == (silent_broker, RequestCode.POP_MESSAGE)
    assert str(exc) == f"POP_MESSAGE (200050) to {silent_broker}: no response after 0.5 s"


async def test_a_poll_that_finds_nothing_is_an_empty_answer_not_an_error(
    namesrv: NameServer, broker: Broker
) -> None:
    """RocketMQ's lite pull consumer: poll(timeout) returns nothing when nothing came."""
    await create_topic(broker, "QuietTopic", queues=1)
    consumer = PullConsumer("cg-tree-quiet", namesrv.address)
    consumer.assign([client.MessageQueue("QuietTopic", broker.config.broker_name, 0)])
    async with consumer:
        started = time.monotonic()
        assert await consumer.poll(timeout_s=0.2) == []
        assert 0.15 < time.monotonic() - started < 2.0


async def test_properties_over_32_kb(namesrv: NameServer, broker: Broker) -> None:
    """Too long for the store's 16-bit length: refused with MESSAGE_ILLEGAL however it is
    sent, alone or coalesced with others; a batch cannot even be encoded."""
    await create_topic(broker, "BigProps", queues=2)
    big = Message("BigProps", b"x", properties={"big": "v" * 40_000})
    async with Producer("pg-tree-props", namesrv.address) as p:
        with pytest.raises(client.MessageIllegalError) as alone:
            await p.send(big)
        # sends overlapping one another are coalesced; this one cannot be and goes alone
        results = await asyncio.gather(
            *(p.send(Message("BigProps", f"m{i}".encode())) for i in range(20)),
            p.send(big),
            return_exceptions=True,
        )
        with pytest.raises(client.InvalidMessageError) as batched:
            await p.send_batch([Message("BigProps", b"ok"), big])
    exc = alone.value
    assert_send_refused(exc, broker, "BigProps", ResponseCode.MESSAGE_ILLEGAL, retriable=False)
    assert re.search(r"properties of \d+ bytes exceed the 32 KB limit", str(exc))
    *plain, coalesced = results
    assert all(isinstance(r, client.SendResult) for r in plain), plain
    assert isinstance(coalesced, client.MessageIllegalError), repr(coalesced)
    assert coalesced.code == ResponseCode.MESSAGE_ILLEGAL
    refused = batched.value
    assert (refused.code, refused.retriable) == (ResponseCode.MESSAGE_ILLEGAL, False)
    assert re.fullmatch(
        r"message 1 of the batch: properties of \d+ bytes exceed the 32 KB limit", str(refused)
    )
    assert isinstance(refused.__cause__, struct.error)  # the codec's failure, kept as the cause


async def test_an_unreadable_route_is_a_response_decode_error() -> None:
    """A name server that answers GET_ROUTEINFO_BY_TOPIC SUCCESS with a body that is no
    route (a real remoting server with that one processor)."""

    async def garbage(_conn: Connection, request: RemotingCommand) -> RemotingCommand:
        return response_to(request, ResponseCode.SUCCESS, None, None, b"{not json")

    table = ProcessorTable()
    table.register(RequestCode.GET_ROUTEINFO_BY_TOPIC, garbage, Lane("routes", workers=1))
    async with (
        RemotingServer(ServerConfig(host=LOOPBACK, port=0), table) as server,
        Producer("pg-tree-garbage", server.address, auto_batch=False) as p,
    ):
        with pytest.raises(client.ResponseDecodeError) as caught:
            await p.send(Message("AnyTopic", b"x"))
    exc = caught.value
    assert (exc.request_code, exc.addr) == (RequestCode.GET_ROUTEINFO_BY_TOPIC, server.address)
    assert str(exc).startswith(
        f"GET_ROUTEINFO_BY_TOPIC (105) to {server.address}: unreadable answer: "
        "not a route of topic AnyTopic"
    )
    assert isinstance(exc.__cause__, ValueError)

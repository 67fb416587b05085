"""Fuzzing every request code's header and body parsing on a real broker and name server.

A ``python -m broker standalone`` process is started once; hypothesis then sends requests
with every RocketMQ request code, ext fields drawn from the real header field names (and
others) with hostile values (missing, empty, negative, over 64 bits, not numbers, odd
text), and random or plausible bodies. Each request must get exactly one reply with its
opaque and a RocketMQ response code. No handler may fail with an unexpected exception: the
broker's log must hold no ``processor_failed`` line, and no remark may be a Python
exception's text. Afterwards the broker still serves a normal send and pull.

``AEROLITE_FUZZ_EXAMPLES`` raises the number of examples (``make fuzz`` runs many more);
the default keeps the suite's share small.
"""

from __future__ import annotations

import dataclasses
import inspect
import json
import os
import re
import socket
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest
from hypothesis import HealthCheck, example, given, settings
from hypothesis import strategies as st

from remoting import headers
from remoting.codes import RequestCode, ResponseCode, SerializeType
from remoting.command import RemotingCommand, decode_command
from remoting.frame import FrameDecoder

EXAMPLES = int(os.environ.get("AEROLITE_FUZZ_EXAMPLES", "250"))
REPLY_TIMEOUT_S = 10.0
RESPONSE_CODES = {int(c) for c in ResponseCode}
# A remark built from an unexpected exception reads "TypeError: …"; ours never do.
_EXCEPTION_REMARK = re.compile(r"^[A-Z][A-Za-z]*(Error|Exception): ")

# Every wire name any typed header uses, so the fuzzer hits real fields.
WIRE_NAMES = sorted(
    {
        f.metadata["wire"]
        for _, cls in inspect.getmembers(headers, inspect.isclass)
        if dataclasses.is_dataclass(cls)
        for f in dataclasses.fields(cls)
        if "wire" in f.metadata
    }
)
# Codes that change the broker for everyone: fuzzing them would wipe the state the other
# examples and the final health check rely on, not test parsing any better.
DISRUPTIVE = {
    RequestCode.UPDATE_BROKER_CONFIG,
    RequestCode.UPDATE_NAMESRV_CONFIG,
    RequestCode.UNREGISTER_BROKER,
    RequestCode.WIPE_WRITE_PERM_OF_BROKER,
    RequestCode.DELETE_EXPIRED_COMMITLOG,
    RequestCode.CLEAN_EXPIRED_CONSUMEQUEUE,
}
CODES = sorted(int(c) for c in RequestCode if c not in DISRUPTIVE)

HOSTILE = st.sampled_from(
    [
        "",
        "-1",
        "0",
        "1",
        "7",
        "2147483648",
        "-2147483649",
        "9223372036854775807",
        "9223372036854775808",
        "1e3",
        " 1",
        "abc",
        "true",
        "null",
        "TBW102",
        "%RETRY%g",
        "a" * 300,
        "\x00",
        "é€😀",
        "T@G",
        "127.0.0.1:1",
        "SQL92",
        "a >",
    ]
)
VALUE = HOSTILE | st.integers().map(str) | st.text(max_size=30)
EXT = st.dictionaries(st.sampled_from(WIRE_NAMES) | st.text(max_size=12), VALUE, max_size=10)
BODY = (
    st.none()
    | st.binary(max_size=200)
    | st.sampled_from(
        [
            b"{}",
            b"[]",
            b"null",
            b'{"offsetTable":{}}',
            b'{"clientID":"x","producerDataSet":[],"consumerDataSet":[{}]}',
            b'{"topicConfigSerializeWrapper":{"topicConfigTable":{"t":{}}}}',
            b'{"mqSet":[{"topic":1}]}',
            b"\xff\xfe",
        ]
    )
)


class Target:
    """The standalone process and one blocking connection to each of its listeners."""

    def __init__(self, tmp: Path) -> None:
        self.log = tmp / "broker.log"
        with self.log.open("w") as err:
            self.proc = subprocess.Popen(  # our own broker, fixed arguments
                [
                    sys.executable,
                    "-m",
                    "broker",
                    "--log-json",
                    "standalone",
                    "--store",
                    str(tmp / "store"),
                    "--namesrv-port",
                    "0",
                    "--listen-port",
                    "0",
                    "--set",
                    "metricsPort=0",
                    "--set",
                    "enableDashboard=false",
                    "--set",
                    "mappedFileSizeCommitLog=1048576",
                    "--set",
                    "maxMessageSize=262144",
                ],
                stdout=subprocess.PIPE,
                stderr=err,
                text=True,
            )
        assert self.proc.stdout is not None
        self.socks: dict[str, socket.socket] = {}
        line = self.proc.stdout.readline()
        if not line.startswith("ready "):
            self.close()
            pytest.fail(f"the broker did not start:\n{self.log.read_text()[-3000:]}")
        addrs = dict(w.split("=", 1) for w in line.split()[1:])
        self.socks = {role: self._dial(addr) for role, addr in addrs.items()}
        self.decoders = {role: FrameDecoder() for role in addrs}

    @staticmethod
    def _dial(addr: str) -> socket.socket:
        host, port = addr.rsplit(":", 1)
        sock = socket.create_connection((host, int(port)), timeout=REPLY_TIMEOUT_S)
        sock.settimeout(REPLY_TIMEOUT_S)
        return sock

    def call(self, role: str, request: RemotingCommand) -> RemotingCommand:
        sock = self.socks[role]
        sock.sendall(request.to_bytes())
        decoder = self.decoders[role]
        while True:
            data = sock.recv(65536)
            assert data, f"the {role} closed the connection on code {request.code}"
            frames = decoder.feed(data)
            if frames:
                assert len(frames) == 1, "more than one reply to one request"
                return decode_command(frames[0])

    def failures(self) -> list[dict[str, object]]:
        out = []
        for line in self.log.read_text().splitlines():
            try:
                entry = json.loads(line)
            except ValueError:
                continue
            if entry.get("event") in ("processor_failed", "unhandled_loop_error"):
                out.append(entry)
        return out

    def close(self) -> None:
        for sock in self.socks.values():
            sock.close()
        if self.proc.poll() is None:
            self.proc.terminate()
            try:
                self.proc.wait(timeout=30)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait(timeout=30)
        if self.proc.stdout is not None:
            self.proc.stdout.close()


@pytest.fixture(scope="module")
def target(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Target]:
    t = Target(tmp_path_factory.mktemp("fuzz"))
    try:
        yield t
    finally:
        t.close()


@settings(
    max_examples=EXAMPLES,
    deadline=None,
    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
    derandomize=os.environ.get("AEROLITE_FUZZ_RANDOM") is None,
)
@given(
    role=st.sampled_from(["broker", "namesrv"]),
    code=st.sampled_from(CODES),
    ext=EXT,
    body=BODY,
    serialize=st.sampled_from([SerializeType.JSON, SerializeType.ROCKETMQ]),
)
@example(
    role="broker",
    code=RequestCode.PULL_MESSAGE,
    ext={"queueId": "-1"},
    body=None,
    serialize=SerializeType.JSON,
)
@example(
    role="broker",
    code=RequestCode.SEND_MESSAGE_V2,
    ext={"a": "T", "b": "x"},
    body=b"",
    serialize=SerializeType.JSON,
)
@example(
    role="broker",
    code=RequestCode.HEART_BEAT,
    ext={},
    body=b'{"consumerDataSet":[{}]}',
    serialize=SerializeType.JSON,
)
@example(  # found by the fuzzer: a 300-character name reached the file system
    role="broker",
    code=RequestCode.DELETE_TOPIC_IN_BROKER,
    ext={"topic": "a" * 300},
    body=None,
    serialize=SerializeType.JSON,
)
@example(
    role="broker",
    code=RequestCode.DELETE_TOPIC_IN_BROKER,
    ext={"topic": "../.."},
    body=None,
    serialize=SerializeType.JSON,
)
@example(
    role="namesrv",
    code=RequestCode.REGISTER_BROKER,
    ext={},
    body=b"\xff",
    serialize=SerializeType.ROCKETMQ,
)
def test_every_request_gets_one_clean_reply(
    target: Target,
    *,
    role: str,
    code: int,
    ext: dict[str, str],
    body: bytes | None,
    serialize: SerializeType,
) -> None:
    request = RemotingCommand.request(code, ext, body)
    # 5.x codes (200000+) do not fit the binary header's 16 bits: JSON only, as in RocketMQ.
    request.serialize_type = serialize if code < 1 << 15 else SerializeType.JSON
    response = target.call(role, request)
    assert response.opaque == request.opaque
    assert response.is_response
    assert response.code in RESPONSE_CODES, (code, response.code, response.remark)
    assert not _EXCEPTION_REMARK.match(response.remark or ""), (code, ext, response.remark)
    assert not target.failures(), target.failures()[:2]


def test_the_broker_still_serves_after_the_fuzz(target: Target) -> None:
    """Runs after the fuzzer (same module): a send and a pull still work."""
    send = RemotingCommand.request(
        RequestCode.SEND_MESSAGE,
        headers.SendMessageRequestHeader(
            producer_group="pg-fuzz",
            topic="TopicAfterFuzz",
            default_topic="TBW102",
            default_topic_queue_nums=4,
            queue_id=0,
            sys_flag=0,
            born_timestamp=0,
            flag=0,
            properties="",
        ).to_ext_fields(),
        b"still here",
    )
    assert target.call("broker", send).code == ResponseCode.SUCCESS
    assert not target.failures()

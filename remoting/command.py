"""``RemotingCommand``: one request or response, and its encoding to a frame.

RocketMQ counterpart: ``org.apache.rocketmq.remoting.protocol.RemotingCommand``.

A command is a header (code, language, version, opaque, flag, remark, ext_fields) plus an
optional body. ``ext_fields`` holds the "custom header" as strings with the camelCase wire
names; typed access goes through ``remoting.headers``. Responses are built with
``response_to(request, ...)`` so they always carry the request's opaque and serialization and
the response flag bit that clients look for.
"""

from __future__ import annotations

import itertools
from dataclasses import dataclass, field

from remoting.codes import PROTOCOL_VERSION, CommandFlag, LanguageCode, SerializeType
from remoting.frame import frame_prefix, split_frame
from remoting.header_codec import decode_header, encode_header

_RESPONSE = int(CommandFlag.RESPONSE)
_ONEWAY = int(CommandFlag.ONEWAY)

# Opaque ids start at 1 and stay positive: ali-ons treats 0 as "missing" and the C++ client
# masks the sign bit, so neither 0 nor a negative id is safe to send.
_opaque_counter = itertools.count(1)


def next_opaque() -> int:
    """A new request id, in 1 .. 2**31-1, wrapping."""
    return (next(_opaque_counter) % 0x7FFFFFFF) + 1


@dataclass(slots=True)
class RemotingCommand:
    """A request or response on the wire."""

    code: int
    opaque: int = 0
    flag: int = 0
    remark: str | None = None
    ext_fields: dict[str, str] = field(default_factory=dict)
    body: bytes | memoryview | None = None
    language: int = LanguageCode.PYTHON
    version: int = PROTOCOL_VERSION
    serialize_type: int = SerializeType.JSON
    # Which of its connection's counters a received request is in (``remoting.connection``
    # sets it: IN_FLIGHT while awaiting its reply, PARKED while a long poll): counted out
    # once however many ways its answer goes. Not part of the wire form.
    slot: int = field(default=0, compare=False, repr=False)

    @classmethod
    def request(
        cls,
        code: int,
        ext_fields: dict[str, str] | None = None,
        body: bytes | memoryview | None = None,
        *,
        oneway: bool = False,
        serialize_type: int = SerializeType.JSON,
    ) -> RemotingCommand:
        """A new request with a fresh opaque."""
        return cls(
            code=code,
            opaque=next_opaque(),
            flag=_ONEWAY if oneway else 0,
            ext_fields=ext_fields if ext_fields is not None else {},
            body=body,
            serialize_type=serialize_type,
        )

    @property
    def is_response(self) -> bool:
        return bool(self.flag & _RESPONSE)

    @property
    def is_oneway(self) -> bool:
        return bool(self.flag & _ONEWAY)

    def mark_oneway(self) -> None:
        self.flag |= _ONEWAY

    @property
    def body_bytes(self) -> bytes:
        """The body as ``bytes`` (copies a memoryview once); ``b""`` when absent."""
        body = self.body
        if body is None:
            return b""
        return body if type(body) is bytes else bytes(body)

    def encode(self) -> list[bytes | memoryview]:
        """The frame as parts (prefix, header, body) ready for ``transport.writelines``.

        Raises:
            FrameError: the header cannot be written in this command's serialization.
        """
        header = encode_header(self.serialize_type, self)
        body = self.body
        body_len = len(body) if body is not None else 0
        prefix = frame_prefix(self.serialize_type, len(header), body_len)
        if body_len:
            assert body is not None
            return [prefix, header, body]
        return [prefix, header]

    def to_bytes(self) -> bytes:
        """The whole frame, length prefix included."""
        return b"".join(self.encode())

    def __repr__(self) -> str:
        kind = "response" if self.is_response else "request"
        body = len(self.body) if self.body is not None else 0
        return (
            f"RemotingCommand({kind} code={self.code} opaque={self.opaque} flag={self.flag} "
            f"remark={self.remark!r} ext_fields={self.ext_fields!r} body={body}B)"
        )


def decode_command(frame: memoryview) -> RemotingCommand:
    """A command from one frame as ``FrameDecoder.feed`` returns it.

    The body stays a memoryview over the received bytes (no copy).

    Raises:
        FrameError: the header is malformed or its serialize type is unknown.
    """
    serialize_type, header, body = split_frame(frame)
    h = decode_header(serialize_type, header)
    return RemotingCommand(
        h.code,
        h.opaque,
        h.flag,
        h.remark,
        h.ext_fields,
        body if len(body) else None,
        h.language,
        h.version,
        serialize_type,
    )


def response_to(
    request: RemotingCommand,
    code: int,
    remark: str | None = None,
    ext_fields: dict[str, str] | None = None,
    body: bytes | memoryview | None = None,
) -> RemotingCommand:
    """A response to ``request``: same opaque and serialization, response flag set."""
    return RemotingCommand(
        code=code,
        opaque=request.opaque,
        flag=_RESPONSE,
        remark=remark,
        ext_fields=ext_fields if ext_fields is not None else {},
        body=body,
        language=LanguageCode.JAVA,
        serialize_type=request.serialize_type,
    )

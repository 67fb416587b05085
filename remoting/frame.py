"""Sans-IO framing of the remoting protocol: length-prefixed frames in, frames out.

RocketMQ counterpart: ``NettyDecoder`` (a ``LengthFieldBasedFrameDecoder`` with a 16 MiB cap)
and the prefix half of ``RemotingCommand.encodeHeader``.

A frame on the wire::

    +----------+------------+---------------+--------+------+
    | length 4 | type 1     | header len 3  | header | body |
    +----------+------------+---------------+--------+------+
      length = 4 + header len + body len  (bytes after the length field)
      type   = SerializeType in the top byte of the header-length word

``FrameDecoder.feed`` returns one ``memoryview`` per complete frame, starting at the
header-length word. The views point into immutable ``bytes`` only, never into a buffer that
may be resized later (a viewed ``bytearray`` raises ``BufferError`` on resize).
"""

from __future__ import annotations

import struct

from remoting.errors import FrameError

# Java's com.rocketmq.remoting.frameMaxLength. It bounds the whole frame, length field
# included, so the largest length value accepted is this minus 4.
DEFAULT_MAX_FRAME_BYTES = 16 * 1024 * 1024

_LENGTH = struct.Struct(">i")  # signed, as Java reads it: a negative length is an error
assert _LENGTH.size == 4

_PREFIX = struct.Struct(
    ">"
    "I"  # frame length: 4 + header length + body length
    "I"  # (serialize type << 24) | header length
)
assert _PREFIX.size == 8

MAX_HEADER_BYTES = 0xFFFFFF  # the header length has 24 bits


class FrameDecoder:
    """Splits a byte stream into frames.

    Args:
        max_frame_bytes: the largest accepted frame, its 4-byte length field included; a
            larger one raises ``FrameError`` (the caller closes the connection, as Java does).
    """

    __slots__ = ("_buffered", "_chunks", "_need", "max_frame_bytes")

    def __init__(self, max_frame_bytes: int = DEFAULT_MAX_FRAME_BYTES) -> None:
        self.max_frame_bytes = max_frame_bytes
        # Partial data is kept as a list of chunks and joined only once enough has arrived:
        # joining on every read would make a large frame sent in small pieces quadratic.
        self._chunks: list[bytes] = []
        self._buffered = 0
        self._need = 4

    @property
    def buffered_bytes(self) -> int:
        """Bytes held for a frame that is not complete yet."""
        return self._buffered

    def feed(self, data: bytes | bytearray | memoryview) -> list[memoryview]:
        """Add received bytes; return the frames they complete (each without its length field).

        Raises:
            FrameError: a length field is negative, smaller than 4, or over the maximum.
        """
        if not isinstance(data, bytes):
            data = bytes(data)  # a view must never pin a mutable buffer
        if self._chunks:
            self._chunks.append(data)
            self._buffered += len(data)
            if self._buffered < self._need:
                return []
            data = b"".join(self._chunks)
            self._chunks.clear()
        frames: list[memoryview] = []
        view = memoryview(data)
        end_of_data = len(data)
        pos = 0
        need = 4
        while end_of_data - pos >= 4:
            (length,) = _LENGTH.unpack_from(data, pos)
            if length < 4 or length > self.max_frame_bytes - 4:
                self._reset()
                raise FrameError(f"frame length {length} outside [4, {self.max_frame_bytes - 4}]")
            frame_end = pos + 4 + length
            if frame_end > end_of_data:
                need = 4 + length
                break
            frames.append(view[pos + 4 : frame_end])
            pos = frame_end
        rest = end_of_data - pos
        if rest:
            self._chunks.append(data[pos:] if pos else data)
            self._need = need
        else:
            self._need = 4
        self._buffered = rest
        return frames

    def _reset(self) -> None:
        self._chunks.clear()
        self._buffered = 0
        self._need = 4


def frame_prefix(serialize_type: int, header_bytes: int, body_bytes: int) -> bytes:
    """The 8 bytes before a header: frame length and the type/header-length word."""
    if header_bytes > MAX_HEADER_BYTES:
        raise FrameError(f"header of {header_bytes} bytes does not fit 24 bits")
    return _PREFIX.pack(4 + header_bytes + body_bytes, (serialize_type << 24) | header_bytes)


def split_frame(frame: memoryview) -> tuple[int, memoryview, memoryview]:
    """Split a frame (as returned by ``feed``) into (serialize type, header, body).

    Raises:
        FrameError: the header length is larger than the frame.
    """
    if len(frame) < 4:
        raise FrameError(f"frame of {len(frame)} bytes has no header-length word")
    (word,) = _LENGTH.unpack_from(frame, 0)
    serialize_type = (word >> 24) & 0xFF
    header_len = word & 0xFFFFFF
    if 4 + header_len > len(frame):
        raise FrameError(f"header length {header_len} larger than the frame ({len(frame) - 4})")
    return serialize_type, frame[4 : 4 + header_len], frame[4 + header_len :]

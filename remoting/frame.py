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

A decoder can also refuse a header longer than ``max_header_bytes`` as soon as the 8 bytes
that announce it have arrived, before any of the header or body is buffered; RocketMQ has no
such limit of its own (only the 16 MiB frame), and decoding a 14 MB JSON header blocks the
event loop for a third of a second.
"""

from __future__ import annotations

import struct

from remoting.errors import FrameError, HeaderTooLargeError

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

# The same 8 bytes as the decoder reads them: the length signed, as Java does.
_PREFIX_IN = struct.Struct(
    ">"
    "i"  # frame length
    "I"  # (serialize type << 24) | header length
)
assert _PREFIX_IN.size == 8

MAX_HEADER_BYTES = 0xFFFFFF  # the header length has 24 bits

# The longest header a server accepts by default. The largest legal requests are sends: their
# header carries the message's properties, which the store caps at 32,767 bytes (Apache's
# MessageDecoder and CommitLog do the same); JSON writes each control character, the property
# separators \u0001 and \u0002 included, as a 6-byte "\u" escape, so those properties
# can take up to 6 x 32,767 = 196,602 bytes of header, plus the topic, group and a few short
# fields. 256 KiB never refuses a request the broker could store, and decodes in a few ms.
DEFAULT_MAX_HEADER_BYTES = 256 * 1024


class FrameDecoder:
    """Splits a byte stream into frames.

    Args:
        max_frame_bytes: the largest accepted frame, its 4-byte length field included; a
            larger one raises ``FrameError`` (the caller closes the connection, as Java does).
        max_header_bytes: the longest accepted header; a frame announcing a longer one
            raises ``HeaderTooLargeError`` before its header is read.
    """

    __slots__ = ("_buffered", "_chunks", "_need", "_pending", "max_frame_bytes", "max_header_bytes")

    def __init__(
        self,
        max_frame_bytes: int = DEFAULT_MAX_FRAME_BYTES,
        max_header_bytes: int = MAX_HEADER_BYTES,
    ) -> None:
        self.max_frame_bytes = max_frame_bytes
        self.max_header_bytes = max_header_bytes
        # Partial data is kept as a list of chunks and joined only once enough has arrived:
        # joining on every read would make a large frame sent in small pieces quadratic.
        self._chunks: list[bytes] = []
        self._buffered = 0
        self._need = 4
        self._pending = 0

    @property
    def buffered_bytes(self) -> int:
        """Bytes held for a frame that is not complete yet."""
        return self._buffered

    @property
    def pending_frame_bytes(self) -> int:
        """What the incomplete frame will hold once complete: its announced size, length
        field included, or the bytes buffered while its length is not known yet; 0 when no
        frame is incomplete. The caller can charge a frame's whole size to a budget as soon
        as its length is known, before the bytes arrive."""
        return self._pending

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
                if self._buffered < 4:
                    self._pending = self._buffered  # the length is still unknown
                return []
            data = b"".join(self._chunks)
            self._chunks.clear()
        frames: list[memoryview] = []
        view = memoryview(data)
        end_of_data = len(data)
        pos = 0
        need = 4
        max_length = self.max_frame_bytes - 4
        max_header = self.max_header_bytes
        while end_of_data - pos >= 4:
            if end_of_data - pos >= 8:
                length, word = _PREFIX_IN.unpack_from(data, pos)
                header_ok = (word & 0xFFFFFF) <= max_header
            else:
                (length,) = _LENGTH.unpack_from(data, pos)
                word = 0
                header_ok = True
            if length < 4 or length > max_length:
                self._reset()
                raise FrameError(f"frame length {length} outside [4, {max_length}]")
            if not header_ok:
                self._reset()
                raise HeaderTooLargeError(word & 0xFFFFFF, max_header)
            frame_end = pos + 4 + length
            if frame_end > end_of_data:
                # Under 8 bytes, the header length is unread: come back at 8 to check it.
                need = 4 + length if end_of_data - pos >= 8 else 8
                self._pending = 4 + length
                break
            frames.append(view[pos + 4 : frame_end])
            pos = frame_end
        rest = end_of_data - pos
        if rest:
            self._chunks.append(data[pos:] if pos else data)
            self._need = need
            if rest < 4:
                self._pending = rest
        else:
            self._need = 4
            self._pending = 0
        self._buffered = rest
        return frames

    def _reset(self) -> None:
        self._chunks.clear()
        self._buffered = 0
        self._need = 4
        self._pending = 0


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

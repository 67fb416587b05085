"""Fuzzing the frame decoder and the three header decoders with arbitrary bytes.

Whatever arrives, in whatever pieces: ``FrameDecoder.feed`` returns frames or raises
``FrameError``, and ``decode_command`` returns a command or raises ``FrameError``; nothing
else escapes, nothing hangs, and a command that decodes encodes and decodes to itself.
Inputs are random bytes, and bytes behind a plausible prefix (a sane length and a serialize
type of 0, 1, 2 or anything) so the header decoders see them.

``AEROLITE_FUZZ_EXAMPLES`` raises the number of examples (``make fuzz``).
"""

from __future__ import annotations

import json
import os
import struct

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from remoting.command import decode_command
from remoting.errors import FrameError
from remoting.frame import FrameDecoder

EXAMPLES = int(os.environ.get("AEROLITE_FUZZ_EXAMPLES", "300"))
FUZZ = settings(
    max_examples=EXAMPLES,
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow],
    derandomize=os.environ.get("AEROLITE_FUZZ_RANDOM") is None,
)

JSON_ISH = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats() | st.text(max_size=10),
    lambda inner: (
        st.lists(inner, max_size=4) | st.dictionaries(st.text(max_size=8), inner, max_size=4)
    ),
    max_leaves=12,
)


@st.composite
def framed(draw: st.DrawFn) -> bytes:
    """A frame prefix that passes the length check, then noise (or near-JSON) as header."""
    if draw(st.booleans()):
        header = json.dumps(draw(JSON_ISH)).encode()
    else:
        header = draw(st.binary(max_size=120))
    body = draw(st.binary(max_size=40))
    serialize = draw(st.sampled_from([0, 1, 2, 3, 255]))
    header_len = draw(st.sampled_from([len(header), 0, max(0, len(header) - 1), 0xFFFFFF]))
    length = 4 + len(header) + len(body)
    return struct.pack(">iI", length, (serialize << 24) | header_len) + header + body


def chunks(data: bytes, cuts: list[int]) -> list[bytes]:
    points = sorted({c % (len(data) + 1) for c in cuts})
    out, last = [], 0
    for p in [*points, len(data)]:
        out.append(data[last:p])
        last = p
    return out


@FUZZ
@given(data=st.binary(max_size=300) | framed(), cuts=st.lists(st.integers(0, 400), max_size=6))
def test_any_bytes_give_frames_or_a_frame_error(data: bytes, cuts: list[int]) -> None:
    decoder = FrameDecoder(max_frame_bytes=1 << 20)
    frames = []
    try:
        for piece in chunks(data, cuts):
            frames += decoder.feed(piece)
    except FrameError:
        return
    for frame in frames:
        try:
            command = decode_command(frame)
        except FrameError:
            continue
        again = FrameDecoder().feed(command.to_bytes())
        assert len(again) == 1
        decoded = decode_command(again[0])
        assert (decoded.code, decoded.opaque, decoded.flag) == (
            command.code,
            command.opaque,
            command.flag,
        )
        assert decoded.ext_fields == command.ext_fields
        assert decoded.body_bytes == command.body_bytes

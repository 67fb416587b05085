"""Message ids: the broker's offset id and the client's unique id.

RocketMQ counterpart: ``MessageDecoder.createMessageId`` / ``decodeMessageId`` (the offset
message id: store host + commit-log offset, upper-case hex) and ``MessageClientIDSetter``
(UNIQ_KEY: a fixed per-process prefix, the time since the start of the month, a counter).
"""

from __future__ import annotations

import os
import struct
import threading
import time
from datetime import datetime, timedelta

from codec.record import Host

_INT = struct.Struct(">i")
_LONG = struct.Struct(">q")


def offset_msg_id(store_host: Host, commit_log_offset: int) -> str:
    """The offset message id: store address + port + commit-log offset, upper-case hex."""
    raw, port = store_host
    return (raw + _INT.pack(port) + _LONG.pack(commit_log_offset)).hex().upper()


def offset_msg_id_prefix(store_host: Host) -> str:
    """The part of every offset message id of ``store_host`` before the offset: append
    ``f"{offset:016X}"`` to it for the id (what ``offset_msg_id`` returns)."""
    raw, port = store_host
    return (raw + _INT.pack(port)).hex().upper()


def offset_msg_ids(prefix: str, offsets: list[int]) -> list[str]:
    """``offset_msg_id`` for each offset, ``prefix`` from ``offset_msg_id_prefix``: the
    offsets are packed and hexed together, then cut (faster than one format each)."""
    digits = struct.pack(f">{len(offsets)}q", *offsets).hex().upper()
    return [prefix + digits[i : i + 16] for i in range(0, len(digits), 16)]


def decode_offset_msg_id(msg_id: str) -> tuple[Host, int]:
    """(store host, commit-log offset) from an offset message id: 32 hex digits for an IPv4
    store host, 56 for IPv6.

    Raises:
        ValueError: not 32 or 56 hex digits.
    """
    if len(msg_id) not in (32, 56):
        raise ValueError(
            f"offset message id {msg_id!r} must have 32 (IPv4) or 56 (IPv6) hex digits"
        )
    try:
        raw = bytes.fromhex(msg_id)
    except ValueError:
        raise ValueError(f"offset message id {msg_id!r} is not hex") from None
    addr_len = len(raw) - 12
    (port,) = _INT.unpack_from(raw, addr_len)
    (offset,) = _LONG.unpack_from(raw, addr_len + 4)
    return (raw[:addr_len], port), offset


def _month_start_ms(when_ms: int, months_back: int = 0) -> int:
    start = datetime.fromtimestamp(when_ms / 1000).replace(
        day=1, hour=0, minute=0, second=0, microsecond=0
    )
    for _ in range(months_back):
        start = (start - timedelta(days=1)).replace(day=1)
    return int(start.timestamp() * 1000)


def decode_uniq_msg_id(msg_id: str, now_ms: int | None = None) -> tuple[str, int, int]:
    """(client IP, pid, approximate time in epoch ms) of a unique message id (UNIQ_KEY) —
    ``MessageClientIDSetter.getIPStrFromID`` / ``getNearlyTimeFromID``: the time is the
    milliseconds since the start of this month, or of last month when that would be in the
    future.

    Raises:
        ValueError: not 32 (IPv4) or 56 (IPv6) hex digits.
    """
    if len(msg_id) not in (32, 56):
        raise ValueError(f"message id {msg_id!r} must have 32 (IPv4) or 56 (IPv6) hex digits")
    try:
        raw = bytes.fromhex(msg_id)
    except ValueError:
        raise ValueError(f"message id {msg_id!r} is not hex") from None
    ip_len = 16 if len(raw) == 28 else 4
    ip = raw[:ip_len]
    ip_text = (
        ".".join(str(b) for b in ip)
        if ip_len == 4
        else ":".join(ip[i : i + 2].hex() for i in range(0, 16, 2))
    )
    (pid,) = struct.unpack_from(">H", raw, ip_len)
    (span,) = struct.unpack_from(">I", raw, ip_len + 6)
    now = int(time.time() * 1000) if now_ms is None else now_ms
    start = _month_start_ms(now)
    if start + span >= now:
        start = _month_start_ms(now, 1)
    return ip_text, pid, start + span


def looks_like_offset_msg_id(msg_id: str) -> bool:
    """Whether a 32/56-digit id reads as an offset id (a port after the address) rather
    than a unique id (a pid and a hash there, which make no port)."""
    try:
        raw = bytes.fromhex(msg_id)
    except ValueError:
        return False
    if len(raw) not in (16, 28):
        return False
    (port,) = _INT.unpack_from(raw, len(raw) - 12)
    return bool(0 < port < 65536)


class UniqIdGenerator:
    """``MessageClientIDSetter``: 32 hex digits = IPv4 address + pid + 4 random bytes (the
    fixed prefix) + milliseconds since the start of the month + a 16-bit counter.

    Args:
        ipv4: the 4 address bytes of the host (the client finds its outgoing interface).
        pid: the process id (this one's by default); its low 15 bits are used, as in Java.
        salt: 4 bytes that tell apart two generators of one process (Java uses the class
            loader's hash code; random bytes by default serve the same end).
    """

    def __init__(self, ipv4: bytes, pid: int | None = None, salt: bytes | None = None) -> None:
        pid = os.getpid() if pid is None else pid
        salt = os.urandom(4) if salt is None else salt
        if len(ipv4) != 4 or len(salt) != 4:
            raise ValueError("the id prefix needs a 4-byte IPv4 address and a 4-byte salt")
        self._prefix = (ipv4 + struct.pack(">h", pid & 0x7FFF) + salt).hex().upper()
        self._counter = 0
        self._lock = threading.Lock()  # the blocking facade may call from other threads
        self._month_start_ms = 0
        self._next_month_ms = 0
        self._last_ms = -1
        self._head = ""  # prefix + the time part of _last_ms

    def _set_month(self, now_ms: int) -> None:
        now = datetime.fromtimestamp(now_ms / 1000)
        start = now.replace(day=1, hour=0, minute=0, second=0, microsecond=0)
        nxt = (
            start.replace(year=start.year + 1, month=1)
            if start.month == 12
            else start.replace(month=start.month + 1)
        )
        self._month_start_ms = int(start.timestamp() * 1000)
        self._next_month_ms = int(nxt.timestamp() * 1000)

    def next_id(self) -> str:
        now_ms = int(time.time() * 1000)
        with self._lock:
            counter = self._counter
            self._counter = (counter + 1) & 0xFFFF
            if now_ms != self._last_ms:
                # Many ids share a millisecond: format its part once.
                if now_ms >= self._next_month_ms:
                    self._set_month(now_ms)
                # Java writes (int) of the span and reads the 4 bytes back unsigned
                # (getNearlyTimeFromID): past 24.8 days into a month the top bit is set.
                elapsed = (now_ms - self._month_start_ms) & 0xFFFFFFFF
                self._head = f"{self._prefix}{elapsed:08X}"
                self._last_ms = now_ms
            head = self._head
        return f"{head}{counter:04X}"

"""Master/slave replication of the commit log (classic 4.x HA).

RocketMQ counterpart: ``HAService`` with ``AcceptSocketService``, ``HAConnection`` (its
``ReadSocketService`` / ``WriteSocketService``), ``GroupTransferService`` and ``HAClient``
(store-format.md §11). Raw TCP on ``haListenPort``:

* slave → master: an 8-byte long, the slave's commit-log max offset, at once, after every
  chunk it appends and every 5 s. The master uses the last complete one; the first decides
  where the stream starts (0: the start of the master's newest segment), later ones are the
  slave's acknowledgements, which SYNC_MASTER sends wait for.
* master → slave: ``long offset, int size`` and ``size`` bytes of commit log from ``offset``,
  at most 32 KiB, never across a segment end; a 0-size header every 5 s when idle.

The slave appends the bytes verbatim at the same offsets; its own dispatch builds consume
queues and index from them. Where RocketMQ's master only drops a slave that reports more than
it has, ours tells it where the master ends (a 0-size header at that offset): the slave cuts
its store back to it, with a log line, and replicates from there. That is right when the
master lost a tail its slave had (a master restarted from an older disk). A slave that holds
a *different* history of the same length is not detected (nothing in the protocol says what
the bytes are); a slave never appends anywhere but at its own end.

TLS (beyond RocketMQ, whose HA port is always plain TCP): the master opens its port through
``listen``, which the broker gives the listener of its TLS mode (``tlsServerMode``), and the
slave dials with the broker's client context (``tlsEnable``). The slave speaks first (its
offset report), so a permissive master tells a TLS slave from a plain one by that first byte.
"""

from __future__ import annotations

import asyncio
import contextlib
import socket
import ssl
import struct
import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Protocol

import structlog

from store.errors import DiskFullError

if TYPE_CHECKING:
    from store.message_store import MessageStore

log = structlog.get_logger(__name__)

_OFFSET = struct.Struct(">q")
_HEADER = struct.Struct(">qi")
TRANSFER_BATCH_BYTES = 32 * 1024  # haTransferBatchSize
HEARTBEAT_S = 5.0  # haSendHeartbeatInterval
HOUSEKEEPING_S = 20.0  # haHousekeepingInterval
RECONNECT_S = 1.0
DISK_FULL_RETRY_S = 10.0  # a slave whose disk is full tries the stream again this often

StreamHandler = Callable[[asyncio.StreamReader, asyncio.StreamWriter], Awaitable[None]]


class Listening(Protocol):
    """A bound listener: ``asyncio.Server``, or the broker's, which obeys its TLS mode."""

    @property
    def sockets(self) -> tuple[socket.socket, ...]: ...

    def close(self) -> None: ...

    async def wait_closed(self) -> None: ...


# ``listen(handler, host, port)``: bind, and run ``handler`` for every connection.
Listen = Callable[[StreamHandler, str, int], Awaitable[Listening]]


@dataclass(eq=False)
class _Slave:
    peer: str
    writer: asyncio.StreamWriter
    next_offset: int = -1  # where the stream goes on; -1 until the first report
    acked: int = -1
    last_read: float = field(default_factory=time.monotonic)
    wake: asyncio.Event = field(default_factory=asyncio.Event)


class HAService:
    """The master's side: serves slaves and tracks how far they have the commit log."""

    def __init__(self, store: MessageStore, *, fallbehind_max_bytes: int = 256 << 20) -> None:
        self.store = store
        self.fallbehind_max_bytes = fallbehind_max_bytes
        self.slaves: set[_Slave] = set()
        self.acked_offset = 0  # the highest offset any slave confirmed (push2SlaveMaxOffset)
        self._waiters: list[tuple[int, asyncio.Future[None]]] = []
        self._server: Listening | None = None
        self._tasks: set[asyncio.Task[None]] = set()
        self.port = 0

    # -------------------------------------------------------------------- lifecycle

    async def start(self, host: str, port: int, *, listen: Listen | None = None) -> int:
        """Bind (``listen``, else plain ``asyncio.start_server``) and serve slaves.

        Raises:
            OSError: the address cannot be bound.
        """
        if listen is None:
            self._server = await asyncio.start_server(self._serve, host, port)
        else:
            self._server = await listen(self._serve, host, port)
        self.port = int(self._server.sockets[0].getsockname()[1])
        log.info("ha_master_listening", address=f"{host}:{self.port}")
        return self.port

    async def stop(self) -> None:
        server, self._server = self._server, None
        if server is not None:
            server.close()
        # Closing the sockets ends each connection's handler by itself; cancelling a
        # handler that asyncio.start_server runs would be reported as an error.
        for slave in list(self.slaves):
            slave.writer.close()
            with contextlib.suppress(OSError):
                transport = slave.writer.transport
                transport.abort()
        if server is not None:
            # Only now: from Python 3.12.1 wait_closed also waits for open connections.
            await server.wait_closed()
        if self._tasks:
            _done, pending = await asyncio.wait(list(self._tasks), timeout=2.0)
            for task in pending:
                task.cancel()
        for _offset, future in self._waiters:
            if not future.done():
                future.cancel()
        self._waiters.clear()

    def notify_appended(self) -> None:
        """New commit-log bytes: wake every slave's stream."""
        for slave in self.slaves:
            slave.wake.set()

    # ------------------------------------------------------------ SYNC_MASTER

    def slave_ok(self) -> bool:
        """``isSlaveOK``: a slave is connected and not too far behind."""
        if not self.slaves:
            return False
        return self.store.commit_log.max_offset - self.acked_offset < self.fallbehind_max_bytes

    async def wait_for_slave(self, offset: int, timeout_s: float) -> bool:
        """Whether a slave confirms having the commit log up to ``offset`` in time."""
        if self.acked_offset >= offset:
            return True
        future: asyncio.Future[None] = asyncio.get_running_loop().create_future()
        self._waiters.append((offset, future))
        try:
            await asyncio.wait_for(future, timeout_s)
        except TimeoutError:
            return False
        finally:
            self._waiters = [(o, f) for o, f in self._waiters if f is not future]
        return True

    def _acknowledged(self, offset: int) -> None:
        if offset <= self.acked_offset:
            return
        self.acked_offset = offset
        still: list[tuple[int, asyncio.Future[None]]] = []
        for wanted, future in self._waiters:
            if wanted <= offset:
                if not future.done():
                    future.set_result(None)
            else:
                still.append((wanted, future))
        self._waiters = still

    # ------------------------------------------------------------------ per slave

    async def _serve(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        peer = writer.get_extra_info("peername")
        slave = _Slave(f"{peer[0]}:{peer[1]}" if peer else "?", writer)
        self.slaves.add(slave)
        log.info("ha_slave_connected", peer=slave.peer)
        task = asyncio.current_task()
        if task is not None:
            self._tasks.add(task)
        sender = asyncio.create_task(self._send(slave))
        self._tasks.add(sender)
        try:
            await self._read_reports(reader, slave)
        except (ConnectionError, asyncio.IncompleteReadError, TimeoutError):
            pass
        finally:
            sender.cancel()
            with contextlib.suppress(asyncio.CancelledError, ConnectionError):
                await sender
            self._tasks.discard(sender)
            self.slaves.discard(slave)
            writer.close()
            if task is not None:
                self._tasks.discard(task)
            log.info("ha_slave_disconnected", peer=slave.peer, acked=slave.acked)

    async def _read_reports(self, reader: asyncio.StreamReader, slave: _Slave) -> None:
        commit_log = self.store.commit_log
        while True:
            data = await asyncio.wait_for(reader.readexactly(8), HOUSEKEEPING_S)
            slave.last_read = time.monotonic()
            (offset,) = _OFFSET.unpack(data)
            master_end = commit_log.max_offset
            if slave.next_offset < 0:
                if offset > master_end:
                    # The slave is ahead of us: say where we end; it cuts back to it.
                    log.warning("ha_slave_ahead", peer=slave.peer, slave=offset, master=master_end)
                    slave.writer.write(_HEADER.pack(master_end, 0))
                    await slave.writer.drain()
                    continue
                if offset == 0:
                    newest = master_end - master_end % commit_log.file_bytes
                    offset = max(newest, commit_log.min_offset)
                slave.next_offset = offset
                slave.wake.set()
                log.info("ha_transfer_start", peer=slave.peer, offset=offset)
                continue
            if offset > master_end:
                log.warning("ha_slave_report_past_end", peer=slave.peer, slave=offset)
                return
            slave.acked = offset
            self._acknowledged(offset)

    async def _send(self, slave: _Slave) -> None:
        commit_log = self.store.commit_log
        last_sent = time.monotonic()
        while True:
            if slave.next_offset < 0 or slave.next_offset >= commit_log.max_offset:
                slave.wake.clear()
                with contextlib.suppress(TimeoutError):
                    await asyncio.wait_for(slave.wake.wait(), HEARTBEAT_S)
                if (
                    slave.next_offset >= 0
                    and slave.next_offset >= commit_log.max_offset
                    and time.monotonic() - last_sent >= HEARTBEAT_S
                ):
                    slave.writer.write(_HEADER.pack(slave.next_offset, 0))
                    await slave.writer.drain()
                    last_sent = time.monotonic()
                continue
            got = commit_log.data_from(slave.next_offset)
            if got is None:
                slave.wake.clear()
                await asyncio.sleep(0.05)
                continue
            view, mf = got
            try:
                chunk = bytes(view[:TRANSFER_BATCH_BYTES])
            finally:
                view.release()
                mf.release()
            slave.writer.write(_HEADER.pack(slave.next_offset, len(chunk)))
            slave.writer.write(chunk)
            slave.next_offset += len(chunk)
            await slave.writer.drain()
            last_sent = time.monotonic()


class HAClient:
    """The slave's side: replicate the master's commit log into this store."""

    def __init__(
        self,
        store: MessageStore,
        master_address: Callable[[], str | None],
        *,
        ssl_context: ssl.SSLContext | None = None,
    ) -> None:
        self.store = store
        self.master_address = master_address
        self.ssl_context = ssl_context  # dial the master with TLS
        self._task: asyncio.Task[None] | None = None
        self.connected_to: str | None = None
        self.truncations = 0

    def start(self) -> None:
        if self._task is None:
            self._task = asyncio.create_task(self._run(), name="ha-client")

    async def stop(self) -> None:
        task, self._task = self._task, None
        if task is not None:
            task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await task

    async def _run(self) -> None:
        disk_full = False
        tls_failed = False
        while True:
            address = self.master_address()
            wait_s = RECONNECT_S
            if address:
                tls_failure = False
                try:
                    await self._replicate(address)
                except DiskFullError as exc:
                    # Not a lost connection: this slave's disk has no room for the stream.
                    # Logged once per spell, retried less often (the master resends).
                    if not disk_full:  # the message says it all: no traceback
                        log.error("ha_slave_disk_full", master=address, error=str(exc))  # noqa: TRY400
                    wait_s = DISK_FULL_RETRY_S
                except ssl.SSLError as exc:
                    # A handshake that fails (a certificate not trusted, a plain master) fails
                    # the same way every second: said once per spell, as a warning.
                    tls_failure = True
                    if not tls_failed:
                        log.warning("ha_master_tls_failed", master=address, error=str(exc))
                except (OSError, asyncio.IncompleteReadError, TimeoutError) as exc:
                    log.info("ha_master_connection_lost", master=address, error=str(exc))
                except ValueError as exc:
                    log.warning("ha_stream_refused", master=address, error=str(exc))
                finally:
                    self.connected_to = None
                disk_full = wait_s == DISK_FULL_RETRY_S
                tls_failed = tls_failure
            await asyncio.sleep(wait_s)

    async def _replicate(self, address: str) -> None:
        host, _, port = address.rpartition(":")
        tls = self.ssl_context
        reader, writer = await asyncio.wait_for(
            asyncio.open_connection(
                host, int(port), ssl=tls, server_hostname=host if tls is not None else None
            ),
            5.0,
        )
        self.connected_to = address
        store = self.store
        log.info(
            "ha_master_connected",
            master=address,
            offset=store.commit_log.max_offset,
            tls=tls is not None,
        )
        try:
            writer.write(_OFFSET.pack(store.commit_log.max_offset))
            await writer.drain()
            last_report = time.monotonic()
            while True:
                timeout = max(0.1, HEARTBEAT_S - (time.monotonic() - last_report))
                try:
                    head = await asyncio.wait_for(reader.readexactly(_HEADER.size), timeout)
                except TimeoutError:
                    writer.write(_OFFSET.pack(store.commit_log.max_offset))
                    await writer.drain()
                    last_report = time.monotonic()
                    continue
                offset, size = _HEADER.unpack(head)
                mine = store.commit_log.max_offset
                if size == 0 and offset < mine:
                    # The master ends before us: our tail is another history.
                    log.warning("ha_slave_truncated", master_end=offset, slave_end=mine)
                    await store.truncate_replica(offset)
                    self.truncations += 1
                    return  # reconnect and report the new end
                if size == 0:
                    continue
                data = await reader.readexactly(size)
                if offset != store.commit_log.max_offset and store.commit_log.max_offset > 0:
                    raise ValueError(
                        f"the master sent offset {offset}, this slave ends at "
                        f"{store.commit_log.max_offset}"
                    )
                store.append_replicated(offset, data)
                writer.write(_OFFSET.pack(store.commit_log.max_offset))
                await writer.drain()
                last_report = time.monotonic()
        finally:
            writer.close()

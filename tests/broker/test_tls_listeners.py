"""Every listener of a broker and of a name server obeys ``tlsServerMode``, and a cluster
whose servers all enforce TLS works: brokers register and slaves replicate over TLS.

With ``tlsServerMode=enforcing`` the main port refused plaintext while the VIP channel
(listenPort - 2), the HA port and the Prometheus endpoints of the broker and the name server
took it; brokers registered and slaves replicated in plain TCP, so an enforcing name server or
master cut them off. The listeners are enumerated from the kernel's table of this process's
listening sockets, which must be exactly the ones the servers say they opened
(``listening()``): a listener added later without a probe here fails the test. Each is tried
in plaintext (refused under enforcing, served under permissive) and over TLS (served).
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import ssl
import struct
import subprocess
import sys
from collections.abc import AsyncIterator, Awaitable, Callable
from pathlib import Path
from typing import Any, Protocol

import pytest

from broker.broker import Broker
from broker.config import BrokerConfig, BrokerRole, NamesrvConfig
from broker.namesrv.server import NameServer
from remoting.client import ClientConfig, RemotingClient
from remoting.codes import RequestCode, ResponseCode
from remoting.command import RemotingCommand
from remoting.errors import RemotingError
from remoting.tls import TlsMode, client_context
from tests.broker.test_cli import FREE_METRICS, _addresses, _start, _stop
from tests.remoting.test_tls import Cert, make_cert
from tests.support import LOOPBACK, send, store_config, wait_until

TOPIC = "TopicTlsListeners"
PROBE_TIMEOUT_S = 3.0
HA_OFFSET = struct.Struct(">q")  # slave → master: its commit-log end
HA_HEADER = struct.Struct(">qi")  # master → slave: offset and size of what follows

Probe = Callable[[int, ssl.SSLContext | None], Awaitable[bool]]


class Cluster(Protocol):
    async def __call__(
        self, mode: TlsMode, *, slave: bool = False, **broker: Any
    ) -> tuple[NameServer, Broker, Broker | None]: ...


@pytest.fixture(scope="module")
def cert(tmp_path_factory: pytest.TempPathFactory) -> Cert:
    return make_cert(tmp_path_factory.mktemp("tls"))


@pytest.fixture
def tls(cert: Cert) -> ssl.SSLContext:
    return client_context(cert.cert)


@pytest.fixture
async def cluster(cert: Cert, tmp_path: Path) -> AsyncIterator[Cluster]:
    """``await cluster(mode)``: a name server and a master (and a slave) in ``mode``, with
    their metrics endpoints on; the brokers trust the test certificate as clients."""
    async with contextlib.AsyncExitStack() as stack:

        async def start(
            mode: TlsMode, *, slave: bool = False, **broker: Any
        ) -> tuple[NameServer, Broker, Broker | None]:
            tls: dict[str, Any] = {
                "tls_server_mode": mode,
                "tls_server_cert_path": cert.cert,
                "tls_server_key_path": cert.key,
            }
            namesrv = await stack.enter_async_context(
                NameServer(
                    NamesrvConfig(bind_address=LOOPBACK, listen_port=0, metrics_port=0, **tls)
                )
            )

            async def start_broker(name: str, **role: Any) -> Broker:
                config = BrokerConfig(
                    bind_address=LOOPBACK,
                    listen_port=0,
                    metrics_port=0,
                    namesrv_addr=namesrv.address,
                    tls_client_trust_cert_path=cert.cert,
                    store=store_config(tmp_path / name),
                    **tls,
                    **role,
                    **broker,
                )
                return await stack.enter_async_context(Broker(config))

            master = await start_broker("master")
            follower = None
            if slave:
                follower = await start_broker("slave", broker_role=BrokerRole.SLAVE, broker_id=1)
            return namesrv, master, follower

        yield start


# ---------------------------------------------------------------------- the listeners


def listening_ports(pid: int | str = "self") -> set[int]:
    """The TCP ports a process listens on: rows of its /proc/net/tcp{,6} in state LISTEN
    whose socket inode is one of the process's descriptors."""
    proc = Path("/proc") / str(pid)
    if not (proc / "net" / "tcp").exists():
        pytest.skip("no /proc/PID/net/tcp: the kernel's socket table is Linux's")
    inodes = set()
    for fd in os.listdir(proc / "fd"):
        with contextlib.suppress(OSError):
            target = os.readlink(proc / "fd" / fd)
            if target.startswith("socket:["):
                inodes.add(target[len("socket:[") : -1])
    ports = set()
    for table in ("tcp", "tcp6"):
        with contextlib.suppress(OSError):
            for row in (proc / "net" / table).read_text().splitlines()[1:]:
                fields = row.split()
                local, state, inode = fields[1], fields[3], fields[9]
                if state == "0A" and inode in inodes:  # 0A: TCP_LISTEN
                    ports.add(int(local.rsplit(":", 1)[1], 16))
    return ports


def listeners(namesrv: NameServer, *brokers: Broker) -> dict[int, str]:
    """Port → what the server says listens there (``namesrv:main``, ``broker:ha``, …)."""
    out = {port: f"namesrv:{name}" for name, port in namesrv.listening().items()}
    for broker in brokers:
        out.update({port: f"broker:{name}" for name, port in broker.listening().items()})
    return out


# ---------------------------------------------------------------------------- probes


async def remoting_probe(port: int, tls: ssl.SSLContext | None) -> bool:
    """Does a remoting request get an answer (any code)?"""
    config = ClientConfig(connect_timeout_s=PROBE_TIMEOUT_S, ssl_context=tls)
    request = RemotingCommand.request(RequestCode.GET_BROKER_RUNTIME_INFO, {})
    async with RemotingClient(config) as client:
        try:
            response = await client.invoke(f"{LOOPBACK}:{port}", request, PROBE_TIMEOUT_S)
        except RemotingError:
            return False
    return response.is_response


async def http_probe(port: int, tls: ssl.SSLContext | None) -> bool:
    """Does ``GET /metrics`` get a 200?"""
    try:
        async with asyncio.timeout(PROBE_TIMEOUT_S):
            reader, writer = await asyncio.open_connection(
                LOOPBACK, port, ssl=tls, server_hostname=LOOPBACK if tls else None
            )
            try:
                writer.write(b"GET /metrics HTTP/1.1\r\nHost: aerolite\r\n\r\n")
                await writer.drain()
                head = await reader.read(12)
            finally:
                writer.close()
                with contextlib.suppress(OSError):
                    await writer.wait_closed()
    except (OSError, TimeoutError):
        return False
    return head == b"HTTP/1.1 200"


async def ha_probe(port: int, tls: ssl.SSLContext | None) -> bool:
    """Does the master stream commit log to a slave that reports offset 0? (It has
    messages, so the first chunk follows at once.)"""
    try:
        async with asyncio.timeout(PROBE_TIMEOUT_S):
            reader, writer = await asyncio.open_connection(
                LOOPBACK, port, ssl=tls, server_hostname=LOOPBACK if tls else None
            )
            try:
                writer.write(HA_OFFSET.pack(0))
                await writer.drain()
                _offset, size = HA_HEADER.unpack(await reader.readexactly(HA_HEADER.size))
            finally:
                writer.close()
                with contextlib.suppress(OSError):
                    await writer.wait_closed()
    except (OSError, TimeoutError, asyncio.IncompleteReadError):
        return False
    return bool(size > 0)


H2_PREFACE = b"PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n"
H2_EMPTY_SETTINGS = b"\x00\x00\x00\x04\x00\x00\x00\x00\x00"


async def grpc_probe(port: int, tls: ssl.SSLContext | None) -> bool:
    """Does the gRPC port answer an HTTP/2 preface with its SETTINGS frame? (Over TLS gRPC
    wants ALPN h2.)"""
    if tls is not None:
        tls.set_alpn_protocols(["h2"])
    try:
        async with asyncio.timeout(PROBE_TIMEOUT_S):
            reader, writer = await asyncio.open_connection(
                LOOPBACK, port, ssl=tls, server_hostname=LOOPBACK if tls else None
            )
            try:
                writer.write(H2_PREFACE + H2_EMPTY_SETTINGS)
                await writer.drain()
                frame = await reader.readexactly(9)
            finally:
                # Not close(): gRPC leaves a TLS close_notify unanswered, so waiting for an
                # orderly TLS shutdown would wait for the probe's deadline.
                writer.transport.abort()
    except (OSError, TimeoutError, asyncio.IncompleteReadError):
        return False
    return frame[3] == 0x4  # a SETTINGS frame


async def grpc_inner_probe(port: int, tls: ssl.SSLContext | None) -> bool:
    """gRPC's own port behind the relay of the public one: loopback only and plaintext
    whatever the mode (what reaches it passed the public port's TLS mode), so it is probed
    in plaintext, and under enforcing it must not exist at all (gRPC serves TLS itself)."""
    return await grpc_probe(port, None)


PROBES: dict[str, Probe] = {
    "namesrv:main": remoting_probe,
    "namesrv:metrics": http_probe,
    "broker:main": remoting_probe,
    "broker:vip": remoting_probe,
    "broker:ha": ha_probe,
    "broker:metrics": http_probe,
    "broker:grpc": grpc_probe,
    "broker:grpc-inner": grpc_inner_probe,
}


async def probe_all(
    namesrv: NameServer, brokers: list[Broker], tls: ssl.SSLContext | None
) -> dict[str, bool]:
    """Each listener of the process, by name: did the probe get served?"""
    named = listeners(namesrv, *brokers)
    assert listening_ports() == set(named), (
        "this process listens on ports no server names (a listener the test cannot probe)",
        listening_ports(),
        named,
    )
    return {name: await PROBES[name](port, tls) for port, name in sorted(named.items())}


async def registered(namesrv: NameServer, broker: Broker) -> None:
    await wait_until(
        lambda: any(
            broker.address in bd.broker_addrs.values()
            for bd in namesrv.routes.broker_addr_table.values()
        ),
        f"{broker.address} to be registered with {namesrv.address}",
    )


# ----------------------------------------------------------------------------- tests


async def test_every_listener_refuses_plaintext_under_enforcing(
    cluster: Cluster, tls: ssl.SSLContext
) -> None:
    namesrv, master, _ = await cluster(TlsMode.ENFORCING)
    if master.vip_server is None:
        pytest.skip(f"port {master.server.port - 2} (the VIP channel) was taken")
    # The broker registered with the enforcing name server: over TLS.
    await registered(namesrv, master)
    async with RemotingClient(ClientConfig(ssl_context=tls)) as client:
        response = await send(client, master.address, TOPIC, b"over tls")
        assert response.code == ResponseCode.SUCCESS, response

    names = set(listeners(namesrv, master).values())
    # Enforcing: gRPC ends TLS itself, with no relay and so no loopback port behind it.
    assert names == set(PROBES) - {"broker:grpc-inner"}, names
    assert await probe_all(namesrv, [master], None) == dict.fromkeys(sorted(names), False)
    assert await probe_all(namesrv, [master], tls) == dict.fromkeys(sorted(names), True)

    # Nothing sent in plaintext is stored, whichever remoting port it went to.
    async with RemotingClient(ClientConfig(connect_timeout_s=PROBE_TIMEOUT_S)) as plain:
        for server in (master.server, master.vip_server):
            with pytest.raises(RemotingError):
                await send(plain, server.address, TOPIC, b"plain")
    assert master.store.get_max_offset(TOPIC, 0) == 1


async def test_every_listener_takes_both_under_permissive(
    cluster: Cluster, tls: ssl.SSLContext
) -> None:
    namesrv, master, _ = await cluster(TlsMode.PERMISSIVE, tls_enable=True)
    await registered(namesrv, master)
    async with RemotingClient() as client:
        response = await send(client, master.address, TOPIC, b"in the clear")
        assert response.code == ResponseCode.SUCCESS, response
    names = sorted(listeners(namesrv, master).values())
    assert await probe_all(namesrv, [master], None) == dict.fromkeys(names, True)
    assert await probe_all(namesrv, [master], tls) == dict.fromkeys(names, True)


async def test_every_listener_takes_plaintext_when_tls_is_disabled(cluster: Cluster) -> None:
    namesrv, master, _ = await cluster(TlsMode.DISABLED)
    await registered(namesrv, master)
    async with RemotingClient() as client:
        response = await send(client, master.address, TOPIC, b"in the clear")
        assert response.code == ResponseCode.SUCCESS, response
    names = sorted(listeners(namesrv, master).values())
    assert await probe_all(namesrv, [master], None) == dict.fromkeys(names, True)


async def test_master_and_slave_replicate_over_tls_when_both_enforce(
    cluster: Cluster, tls: ssl.SSLContext
) -> None:
    namesrv, master, slave = await cluster(TlsMode.ENFORCING, slave=True)
    assert slave is not None and slave.ha_client is not None and slave.slave_sync is not None
    await registered(namesrv, slave)
    await wait_until(
        lambda: slave.ha_client is not None and slave.ha_client.connected_to is not None,
        "the slave to reach its master",
        timeout_s=5,
    )
    assert master.ha is not None
    # The stream the master serves its slave is a TLS one.
    assert [s.writer.get_extra_info("ssl_object") is not None for s in master.ha.slaves] == [True]

    async with RemotingClient(ClientConfig(ssl_context=tls)) as client:
        for n in range(10):
            response = await send(client, master.address, TOPIC, f"m{n}".encode())
            assert response.code == ResponseCode.SUCCESS, response
    await wait_until(
        lambda: slave.store.commit_log.max_offset == master.store.commit_log.max_offset,
        "the slave to catch up",
        timeout_s=5,
    )
    # The slave's copy of its master's tables comes over the master's enforcing port.
    master.offsets.commit("cg-tls", TOPIC, 0, 7)
    await slave.slave_sync.sync_all()
    assert slave.topics.get(TOPIC) is not None
    assert slave.offsets.query("cg-tls", TOPIC, 0) == 7


async def test_standalone_serves_its_name_server_under_the_brokers_tls_mode(
    cert: Cert, tls: ssl.SSLContext, tmp_path: Path
) -> None:
    # One process, one TLS setting: its name server was built without it and took plaintext
    # beside an enforcing broker.
    stderr = (tmp_path / "standalone.err").open("w")
    proc = _start(
        "standalone",
        "--store",
        str(tmp_path),
        "--namesrv-port",
        "0",
        "--listen-port",
        "0",
        *FREE_METRICS,
        "--set",
        "tlsServerMode=enforcing",
        "--set",
        f"tlsServerCertPath={cert.cert}",
        "--set",
        f"tlsServerKeyPath={cert.key}",
        stderr=stderr,
    )
    try:
        assert proc.stdout is not None
        addrs = _addresses(await asyncio.to_thread(proc.stdout.readline))
        async with RemotingClient(ClientConfig(ssl_context=tls)) as client:
            response = await send(client, addrs["broker"], TOPIC, b"over tls")
            assert response.code == ResponseCode.SUCCESS, response
        # Every port the process listens on: the ready line names four, the VIP channel is
        # listenPort - 2, and the one left must be the HA port (its probe says so).
        ports = listening_ports(proc.pid)
        broker_port = int(addrs["broker"].rsplit(":", 1)[1])
        probes: dict[int, Probe] = {
            int(addrs["namesrv"].rsplit(":", 1)[1]): remoting_probe,
            broker_port: remoting_probe,
            broker_port - 2: remoting_probe,
            int(addrs["metrics"].rsplit(":", 1)[1]): http_probe,
            int(addrs["grpc"].rsplit(":", 1)[1]): grpc_probe,
        }
        if broker_port - 2 not in ports:
            pytest.skip(f"port {broker_port - 2} (the VIP channel) was taken")
        assert len(ports) == len(probes) + 1 and set(probes) < ports, (probes, ports)
        for port in sorted(ports):
            probe = probes.get(port, ha_probe)
            kinds = (remoting_probe, http_probe, ha_probe)
            assert [await plain(port, None) for plain in kinds] == [False] * 3, port
            assert await probe(port, tls), port
        # The healthcheck dials TLS when told to (and with the CA, checks the certificate).
        for flags, ok in (((), False), (("--tls",), True), (("--tls-ca", str(cert.cert)), True)):
            ping = await asyncio.to_thread(
                subprocess.run,
                [
                    sys.executable,
                    "-m",
                    "broker",
                    "ping",
                    "--timeout",
                    "15",
                    *flags,
                    addrs["broker"],
                ],
                capture_output=True,
                text=True,
                timeout=30,
            )
            assert (ping.returncode == 0) == ok, (flags, ping.stdout, ping.stderr)
    finally:
        _stop(proc)
        stderr.close()

"""The docker-compose cluster, run as local processes by ``aerolite cluster up``: two name
servers, broker-a (SYNC_MASTER + slave) and broker-b (ASYNC_MASTER + slave).

- the topology starts and passes a round trip with the official C++ client (PyPI rocketmq);
- kill -9 of the SYNC master under load: producers go on with broker-b (the longest pause
  between two acknowledged sends is measured and printed), every acknowledged message is
  consumed afterwards, broker-a's from its slave, and the consumer group continues on the
  slave from the offsets it committed on the master, without a gap;
- kill -9 of the ASYNC master under load: what the slave misses is only a tail of what was
  acknowledged (counted and printed), never a hole; once its slave stops too, the group is
  gone from both name servers;
- a burst of concurrent sends is dispatched whole by broker-a's slave (replication cuts its
  records anywhere), and after kill -9 of the master a new group reads every message broker-a
  acknowledged from the slave;
- a master and a slave restarted mid-stream (kill -9, then a clean stop) catch up, and the
  slave's commit log is byte-identical to its master's;
- the launcher says where each service's metrics are, and Ctrl-C stops every service,
  logs each stop and ends with a line that counts them.

Figures are printed as ``cluster-figure key=value`` lines (``pytest -s`` shows them).
"""

from __future__ import annotations

import asyncio
import contextlib
import http.client
import json
import os
import signal
import subprocess
import sys
import time
from collections.abc import Awaitable, Callable, Iterator
from pathlib import Path

import pytest

from client import ConsumeFromWhere, Message, Producer, PushConsumer, SendStatus
from client.admin import Admin
from client.errors import ClientError
from client.message import MessageView
from remoting.client import RemotingClient
from remoting.codes import RequestCode, ResponseCode
from remoting.command import RemotingCommand
from remoting.errors import RemotingError
from remoting.headers import CreateTopicRequestHeader
from remoting.route import TopicRouteData, loads
from tests.e2e.compose import COMPOSE_FILE, ComposeCluster
from tests.e2e.conftest import Clients, Sent, assert_same_messages, consume, diagnose, send
from tests.processes import unique

pytestmark = pytest.mark.e2e

TIMEOUT_S = 5.0


def figure(**values: object) -> None:
    print("cluster-figure " + " ".join(f"{k}={v}" for k, v in values.items()), flush=True)


@pytest.fixture
def compose(tmp_path: Path, request: pytest.FixtureRequest) -> Iterator[ComposeCluster]:
    cluster = ComposeCluster(COMPOSE_FILE, tmp_path / "cluster")
    diagnose(request, "cluster logs", cluster.logs)
    cluster.start()
    try:
        yield cluster
    finally:
        cluster.close()


async def create_topic(rc: RemotingClient, addr: str, topic: str, queues: int = 4) -> None:
    header = CreateTopicRequestHeader(
        topic=topic,
        default_topic="TBW102",
        read_queue_nums=queues,
        write_queue_nums=queues,
        perm=6,
        topic_filter_type="SINGLE_TAG",
    )
    request = RemotingCommand.request(RequestCode.UPDATE_AND_CREATE_TOPIC, header.to_ext_fields())
    response = await rc.invoke(addr, request, TIMEOUT_S)
    assert response.code == ResponseCode.SUCCESS, response


async def route_of(rc: RemotingClient, namesrv: str, topic: str) -> TopicRouteData | None:
    request = RemotingCommand.request(RequestCode.GET_ROUTEINFO_BY_TOPIC, {"topic": topic})
    response = await rc.invoke(namesrv, request, TIMEOUT_S)
    if response.code != ResponseCode.SUCCESS:
        return None
    return TopicRouteData.from_json(loads(response.body_bytes))


async def wait_for(
    check: Callable[[], Awaitable[bool]], what: str, timeout_s: float = 20.0
) -> None:
    deadline = time.monotonic() + timeout_s
    while True:
        if await check():
            return
        if time.monotonic() > deadline:
            pytest.fail(f"timed out after {timeout_s:g} s waiting for {what}")
        await asyncio.sleep(0.1)


async def routed_groups(rc: RemotingClient, namesrvs: str, topic: str) -> list[set[str]]:
    """For each name server: the broker groups the topic's route has a master for."""
    out = []
    for ns in namesrvs.split(";"):
        route = await route_of(rc, ns, topic)
        out.append({b.broker_name for b in route.broker_datas if b.master_addr} if route else set())
    return out


async def create_on_both_groups(rc: RemotingClient, compose: ComposeCluster, topic: str) -> None:
    """Create ``topic`` on both masters and wait until both name servers route it to both."""
    for svc in ("broker-a-0", "broker-b-0"):
        await create_topic(rc, compose.address(svc), topic)

    async def both_routed() -> bool:
        return all(
            g == {"broker-a", "broker-b"} for g in await routed_groups(rc, compose.namesrv, topic)
        )

    await wait_for(both_routed, "both groups in the route on both name servers")


async def committed(rc: RemotingClient, addr: str, group: str, topic: str, queue: int) -> int:
    request = RemotingCommand.request(
        RequestCode.QUERY_CONSUMER_OFFSET,
        {"consumerGroup": group, "topic": topic, "queueId": str(queue)},
    )
    response = await rc.invoke(addr, request, TIMEOUT_S)
    if response.code != ResponseCode.SUCCESS:
        return -1
    return int(response.ext_fields.get("offset", "-1"))


class Collected:
    def __init__(self) -> None:
        self.bodies: list[str] = []
        self._arrived = asyncio.Event()

    async def add(self, msg: MessageView) -> None:
        self.bodies.append(msg.body.decode())
        self._arrived.set()

    async def wait_for(self, wanted: set[str], timeout_s: float) -> None:
        """Until all of ``wanted`` arrived, or ``timeout_s`` (the caller checks what came)."""
        with contextlib.suppress(TimeoutError):
            async with asyncio.timeout(timeout_s):
                while not wanted <= set(self.bodies):
                    self._arrived.clear()
                    await self._arrived.wait()


def consumer(namesrv: str, group: str, topic: str, into: Collected) -> PushConsumer:
    c = PushConsumer(group, namesrv, consume_from_where=ConsumeFromWhere.CONSUME_FROM_FIRST_OFFSET)
    c.subscribe(topic)(into.add)
    return c


# ------------------------------------------------------------------------------- tests


def test_the_compose_topology_round_trips_with_the_cpp_client(
    compose: ComposeCluster, tmp_path: Path, request: pytest.FixtureRequest
) -> None:
    # Every service answers its healthcheck command (the launcher's address for 127.0.0.1).
    for name, info in compose.state["services"].items():
        target = compose.address(name)
        if info["role"] == "dashboard":
            target = f"http://{target}/healthz"
        done = subprocess.run(  # our own CLI, fixed arguments
            [sys.executable, "-m", "broker", "ping", target],
            capture_output=True,
            text=True,
            timeout=30,
            check=False,
        )
        assert done.returncode == 0, (name, done.stderr)
    # The console reached the name servers through the host network's 127.0.0.1 ports (the
    # launcher's translation) and every broker at the address it advertises.
    console = compose.address("dashboard")
    deadline = time.monotonic() + 30
    while "4 broker(s)" not in (seen := http_get(f"http://{console}/healthz")):
        assert time.monotonic() < deadline, seen
        time.sleep(0.5)
    overview = http_get(f"http://{console}/")
    for name, info in compose.state["services"].items():
        if info["role"] == "broker":
            assert info["address"] in overview, name
    clients = Clients(compose.namesrv, tmp_path / "clients", request)
    try:
        topic = unique("ClusterCpp")
        messages = [Sent(body=f"cluster-{i}", tags="T", keys=(f"k{i}",)) for i in range(200)]
        send(clients, topic, messages, warmup_topic=unique("ClusterCppWarm"))
        run = consume(clients, topic, unique("cg_cluster_cpp"), len(messages), deadline_s=60)
        assert_same_messages(run, messages)
    finally:
        clients.close()


async def test_killing_the_sync_master_under_load_loses_nothing(
    compose: ComposeCluster,
) -> None:
    topic, group = unique("ClusterSync"), unique("cg_sync")
    async with RemotingClient() as rc:
        await create_on_both_groups(rc, compose, topic)

        acked: dict[str, str] = {}  # body → broker group, SEND_OK only
        ack_times: list[tuple[float, str]] = []
        failures = 0
        reached_500 = asyncio.Event()
        async with Producer(unique("pg_sync"), compose.namesrv, send_timeout_s=3) as producer:

            async def send_one(i: int) -> None:
                nonlocal failures
                body = f"sync-{i}"
                try:
                    result = await producer.send(Message(topic, body.encode()))
                except (ClientError, RemotingError):
                    failures += 1
                    return
                if result.status is SendStatus.SEND_OK:
                    acked[body] = result.message_queue.broker_name
                    ack_times.append((time.monotonic(), result.message_queue.broker_name))
                    if len(acked) >= 500:
                        reached_500.set()

            # Phase 1: the group consumes and commits the first 200.
            for i in range(200):
                await send_one(i)
            assert len(acked) == 200 and failures == 0
            # The producer spreads its sends over both groups' queues.
            assert set(acked.values()) == {"broker-a", "broker-b"}
            first = Collected()
            async with consumer(compose.namesrv, group, topic, first):
                await first.wait_for(set(acked), timeout_s=30)
                await asyncio.sleep(0.5)
            assert set(first.bodies) == set(acked)
            # The slave copies the committed offsets every 10 s (SlaveSynchronize).
            master, slave = compose.address("broker-a-0"), compose.address("broker-a-1")

            async def offsets_synced() -> bool:
                for q in range(4):
                    m = await committed(rc, master, group, topic, q)
                    if m < 0 or await committed(rc, slave, group, topic, q) != m:
                        return False
                return True

            await wait_for(offsets_synced, "the slave to copy the group's offsets", 25)

            # Phase 2: eight senders at once; kill -9 broker-a's master while sends to it
            # are in flight.
            counter = iter(range(200, 10**9))
            killed_at = 0.0
            before_kill = 0
            deadline = time.monotonic() + 60

            def done() -> bool:
                if time.monotonic() > deadline:
                    return True
                return bool(killed_at) and len(acked) >= before_kill + 300

            async def sender() -> None:
                while not done():
                    await send_one(next(counter))

            async def killer() -> None:
                nonlocal killed_at, before_kill
                with contextlib.suppress(TimeoutError):
                    async with asyncio.timeout(max(0.0, deadline - time.monotonic())):
                        await reached_500.wait()
                before_kill = len(acked)
                killed_at = time.monotonic()
                await asyncio.to_thread(compose.kill9, "broker-a-0")

            await asyncio.gather(killer(), *(sender() for _ in range(8)))
            assert killed_at, "the load never reached the kill"
            assert len(acked) >= before_kill + 300, "producers did not carry on after the kill"
        after = [t for t, _ in ack_times if t >= killed_at]
        pause_ms = (after[0] - killed_at) * 1000
        gaps = [b - a for a, b in zip([killed_at, *after], after, strict=False)]
        figure(
            test="sync_master_kill",
            acked_before_kill=before_kill,
            acked_after_kill=len(acked) - before_kill,
            failed_sends=failures,
            first_ack_after_kill_ms=round(pause_ms, 1),
            longest_pause_after_kill_ms=round(max(gaps) * 1000, 1),
        )
        assert all(b == "broker-b" for t, b in ack_times if t > killed_at + 5)

        # Phase 3: the group goes on, broker-a's queues from the slave, from its offsets.
        rest = set(acked) - set(first.bodies)
        second = Collected()
        async with consumer(compose.namesrv, group, topic, second):
            await second.wait_for(rest, timeout_s=60)
            await asyncio.sleep(1.0)
        missing = rest - set(second.bodies)
        again = set(second.bodies) & set(first.bodies)
        figure(
            test="sync_failover_reads",
            expected=len(rest),
            missing=len(missing),
            redelivered=len(again),
        )
        assert not missing, f"{len(missing)} acknowledged messages lost, e.g. {sorted(missing)[:5]}"
        # Committed offsets held on the slave: nothing consumed before is delivered again.
        assert not again, f"{len(again)} messages consumed before came again"


async def test_a_burst_acknowledged_by_the_sync_master_is_read_back_from_its_slave(
    compose: ComposeCluster,
) -> None:
    """3 waves of 200 concurrent 1 KiB sends to one topic: the sends are coalesced into
    batches far larger than replication's 32 KiB chunks, so the slave receives records cut
    anywhere. Its dispatch must still enter every one of them (it used to read the first cut
    record as corrupt and stop, silently); then kill -9 broker-a's master, and a new group
    reading from the first offset gets every message broker-a acknowledged, from the slave."""
    topic = unique("ClusterBurst")
    async with RemotingClient() as rc, Admin(compose.namesrv) as admin:
        await create_on_both_groups(rc, compose, topic)
        acked: dict[str, str] = {}  # body -> broker group, SEND_OK only
        async with Producer(unique("pg_burst"), compose.namesrv, send_timeout_s=15) as producer:
            for wave in range(3):
                bodies = [f"burst-{wave}-{i}-".ljust(1024, ".") for i in range(200)]
                results = await asyncio.gather(
                    *(producer.send(Message(topic, b.encode())) for b in bodies),
                    return_exceptions=True,
                )
                for b, r in zip(bodies, results, strict=True):
                    if not isinstance(r, BaseException) and r.status is SendStatus.SEND_OK:
                        acked[b] = r.message_queue.broker_name
        on_a = {b for b, g in acked.items() if g == "broker-a"}
        assert len(acked) >= 500 and len(on_a) >= 100, (len(acked), len(on_a))
        master, slave = compose.address("broker-a-0"), compose.address("broker-a-1")
        master_end = int((await admin.runtime_info(master))["commitLogMaxOffset"])
        seen: dict[str, str] = {}

        async def slave_dispatched() -> bool:
            seen.update(await admin.runtime_info(slave))
            return (
                int(seen["commitLogMaxOffset"]) >= master_end and seen["dispatchBehindBytes"] == "0"
            )

        await wait_for(slave_dispatched, "broker-a's slave to dispatch the burst", 30)
        assert seen["dispatchStatus"] == "OK", seen
        figure(test="burst_slave", acked=len(acked), on_broker_a=len(on_a), bytes=master_end)
        await asyncio.to_thread(compose.kill9, "broker-a-0")

    read = Collected()
    async with consumer(compose.namesrv, unique("cg_burst"), topic, read):
        await read.wait_for(set(acked), timeout_s=60)
    missing = on_a - set(read.bodies)
    figure(test="burst_failover_reads", expected=len(on_a), missing=len(missing))
    assert not missing, f"{len(missing)} of {len(on_a)} acknowledged by broker-a unreadable"
    assert set(acked) <= set(read.bodies)


async def test_killing_the_async_master_loses_only_a_tail(compose: ComposeCluster) -> None:
    topic = unique("ClusterAsync")
    async with RemotingClient() as rc:
        await create_topic(rc, compose.address("broker-b-0"), topic, queues=2)

        async def routed() -> bool:
            return all(g == {"broker-b"} for g in await routed_groups(rc, compose.namesrv, topic))

        await wait_for(routed, "broker-b in the route")
        acked: list[tuple[float, str, int, int]] = []  # time, body, queue, queue offset
        async with Producer(
            unique("pg_async"), compose.namesrv, send_timeout_s=2, retry_times_when_send_failed=0
        ) as producer:
            kill_task: asyncio.Task[None] | None = None
            sent = 0

            async def kill_soon() -> None:
                await asyncio.sleep(1.5)  # a steady stream is flowing by then
                compose.kill9("broker-b-0")

            deadline = time.monotonic() + 30
            while time.monotonic() < deadline:
                if kill_task is None and len(acked) >= 300:
                    kill_task = asyncio.create_task(kill_soon())
                if kill_task is not None and kill_task.done():
                    break
                body = f"async-{sent}"
                sent += 1
                try:
                    r = await producer.send(Message(topic, body.encode()))
                except (ClientError, RemotingError):
                    await asyncio.sleep(0.01)
                    continue
                acked.append((time.monotonic(), body, r.message_queue.queue_id, r.queue_offset))
            assert kill_task is not None
            await kill_task
        killed_at = time.monotonic()

        # broker-b's slave is all that is left of the group; the master's address is gone.
        async def master_dropped() -> bool:
            for ns in compose.namesrv.split(";"):
                route = await route_of(rc, ns, topic)
                if route is None or any(b.master_addr for b in route.broker_datas):
                    return False
            return True

        await wait_for(master_dropped, "the name servers to drop broker-b's master", 10)
        dropped_ms = (time.monotonic() - killed_at) * 1000

        got = Collected()
        async with consumer(compose.namesrv, unique("cg_async"), topic, got):
            await got.wait_for({b for _, b, _, _ in acked}, timeout_s=15)
            await asyncio.sleep(1.0)
        received = set(got.bodies)
        lost = [(q, off, body) for _, body, q, off in acked if body not in received]
        span = acked[-1][0] - acked[0][0] if len(acked) > 1 else 0.0
        figure(
            test="async_master_kill",
            acked=len(acked),
            acked_per_s=round(len(acked) / span) if span else 0,
            lost=len(lost),
            master_dropped_from_route_ms=round(dropped_ms, 1),
        )
        # Only a tail: within each queue, everything before the first lost one arrived.
        for q in {q for q, _, _ in lost}:
            first_lost = min(off for qq, off, _ in lost if qq == q)
            tail = [off for _, _, qq, off in acked if qq == q and off >= first_lost]
            assert sorted(off for qq, off, _ in lost if qq == q) == sorted(tail), (
                f"queue {q}: a hole, not a tail"
            )
        # and at most what was acknowledged in the last second before the kill
        recent = [b for t, b, _, _ in acked if t >= acked[-1][0] - 1.0]
        assert len(lost) <= len(recent), (len(lost), len(recent))

        # The slave stops too: the group leaves both name servers.
        compose.stop_service("broker-b-1")

        async def group_gone() -> bool:
            for ns in compose.namesrv.split(";"):
                request = RemotingCommand.request(RequestCode.GET_BROKER_CLUSTER_INFO, {})
                response = await rc.invoke(ns, request, TIMEOUT_S)
                if "broker-b" in response.body_bytes.decode():
                    return False
                if await route_of(rc, ns, topic) is not None:
                    return False
            return True

        await wait_for(group_gone, "broker-b to leave the name servers", 10)


async def test_master_and_slave_restarts_keep_the_commit_logs_identical(
    compose: ComposeCluster,
) -> None:
    topic = unique("ClusterRepl")
    async with RemotingClient() as rc:
        await create_topic(rc, compose.address("broker-b-0"), topic, queues=2)

        async def routed() -> bool:
            return all(g == {"broker-b"} for g in await routed_groups(rc, compose.namesrv, topic))

        await wait_for(routed, "broker-b in the route")
    body = b"x" * 1000
    store_m = compose.data / "volumes" / "broker-b-0" / "store"
    store_s = compose.data / "volumes" / "broker-b-1" / "store"
    async with Producer(unique("pg_repl"), compose.namesrv, send_timeout_s=5) as producer:

        async def produce(n: int) -> None:
            for _ in range(n):
                with contextlib.suppress(ClientError, RemotingError):
                    await producer.send(Message(topic, body))

        await produce(300)
        compose.kill9("broker-b-1")  # the slave dies mid-stream
        await produce(300)
        compose.restart("broker-b-1")
        await produce(300)
        compose.stop_service("broker-b-0")  # then the master restarts
        compose.restart("broker-b-0")
        await produce(300)

    def identical() -> bool:
        m, s = commit_log_bytes(store_m), commit_log_bytes(store_s)
        return len(m) > 1_000_000 and m == s

    deadline = time.monotonic() + 30
    while not identical():
        if time.monotonic() > deadline:
            m, s = commit_log_bytes(store_m), commit_log_bytes(store_s)
            pytest.fail(f"master {len(m)} bytes, slave {len(s)} bytes, equal: {m == s}")
        await asyncio.sleep(0.2)
    figure(test="replication_restarts", bytes=len(commit_log_bytes(store_m)))


def test_ctrl_c_stops_every_service_and_says_where_metrics_were(
    tmp_path: Path, request: pytest.FixtureRequest
) -> None:
    cluster = ComposeCluster(COMPOSE_FILE, tmp_path / "cluster")
    diagnose(request, "cluster logs", cluster.logs)
    cluster.start()
    try:
        services = cluster.state["services"]
        # One line per service names its metrics endpoint, on the service's own address.
        lines = {
            line.split()[1]: dict(w.split("=", 1) for w in line.split()[2:])
            for line in cluster.output
            if line.startswith("service ")
        }
        assert set(lines) == set(services)
        for name, info in services.items():
            if info["role"] == "dashboard":
                assert "metrics" not in lines[name]  # /metric pages link to the brokers'
                continue
            default = 5558 if name.startswith("namesrv") else 5557  # the roles' defaults
            assert lines[name]["metrics"] == f"{info['host']}:{default}", (name, lines[name])
            assert info["metrics"] == lines[name]["metrics"]
        host, port = lines["namesrv2"]["metrics"].rsplit(":", 1)
        conn = http.client.HTTPConnection(host, int(port), timeout=10)
        try:
            conn.request("GET", "/metrics")
            assert b"rocketmq_namesrv_brokers" in conn.getresponse().read()
        finally:
            conn.close()
        assert cluster.launcher is not None
        os.kill(cluster.launcher.pid, signal.SIGINT)  # what Ctrl-C sends the launcher
        code = cluster.launcher.wait(timeout=180)
        deadline = time.monotonic() + 10  # the reader thread takes the last line
        while not any(line.startswith("stopped ") for line in cluster.output):
            assert time.monotonic() < deadline, cluster.output
            time.sleep(0.05)
    finally:
        cluster.close()
    assert code == 0, cluster.logs()
    events = [
        json.loads(line)
        for line in cluster.launcher_log.read_text().splitlines()
        if line.startswith("{")
    ]
    stopped = {e["service"]: e["code"] for e in events if e["event"] == "cluster_service_stopped"}
    assert stopped == dict.fromkeys(services, 0)
    final = cluster.output[-1].strip()
    assert final.startswith(f"stopped {len(services)} services"), final
    for name in services:
        assert f"{name}=0" in final


def http_get(url: str) -> str:
    host, _, rest = url.removeprefix("http://").partition("/")
    name, port = host.rsplit(":", 1)
    conn = http.client.HTTPConnection(name, int(port), timeout=10)
    try:
        conn.request("GET", "/" + rest)
        return conn.getresponse().read().decode()
    finally:
        conn.close()


def commit_log_bytes(store: Path) -> bytes:
    """The commit log's written bytes, segment after segment, without the zero tail of the
    newest (pre-allocated) segment."""
    # Only segment names: a segment being created sits under a temporary name until it has
    # its full size (the broker may be allocating the next one while we look).
    files = sorted(
        (p for p in (store / "commitlog").iterdir() if p.name.isdigit()), key=lambda p: int(p.name)
    )
    data = b"".join(p.read_bytes() for p in files)
    return data.rstrip(b"\0")

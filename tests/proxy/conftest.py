"""Fixtures for the RocketMQ 5 client tests: a broker tuned for quick gRPC scenarios, topics
and groups made on it, and the official 5.x Python client as a driver process.

The broker is tests/conftest.py's ``start_broker`` (in this test's event loop, 127.0.0.1,
ports 0, ``broker.grpc.port`` its gRPC port). The client, PyPI ``rocketmq-python-client``,
lives in ``.venv-rmq5`` (``make install``): its package is named ``rocketmq``, as is the
4.x C++ client's in ``.venv``, so it never runs inside pytest. ``rmq5_driver.py`` is run
by that venv's interpreter with one JSON line of steps; it prints JSON lines and leaves by
itself (at its own deadline at the latest). ``Rmq5`` starts it with ``HOME`` in a temp dir
(the client logs to ``~/logs/rocketmq_python``) and waits for it off the event loop, which
the broker needs meanwhile; leftovers are killed by PID at teardown, and a failing test's
report carries each driver's lines and stderr and the client's log.
"""

from __future__ import annotations

import asyncio
import gc
import json
import os
import subprocess
from collections.abc import AsyncIterator, Awaitable, Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from broker.broker import Broker
from client import MessageView
from client.admin import Admin
from remoting.bodies import PERM_READ, PERM_WRITE, SubscriptionGroupConfig, TopicConfig
from remoting.route import MessageQueue
from tests.processes import DriverRun, tail, unique
from tests.support import BrokerFactory, wait_dispatched

ROOT = Path(__file__).resolve().parents[2]
RMQ5_PYTHON = ROOT / ".venv-rmq5" / "bin" / "python"
DRIVER = Path(__file__).resolve().parent / "rmq5_driver.py"

# Quick scenarios: receives that find nothing come back after 1 s (await_s 1, the broker's
# floor lowered from 5 s), invisible times from 1 s (from 10 s), and retry backoffs of 1 s
# (a 5.x consumer's backoff is the delay levels from the third on).
QUICK_BROKER: dict[str, Any] = {
    "grpc_min_long_polling_timeout_ms": 500,
    "grpc_min_invisible_ms": 1000,
}
QUICK_STORE: dict[str, Any] = {"message_delay_level": " ".join(["1s"] * 18)}

ProxyBrokerFactory = Callable[..., Awaitable[Broker]]
_REPORTED = pytest.StashKey[list["Rmq5"]]()


class Rmq5:
    """Runs ``rmq5_driver.py`` against a broker's gRPC port, for one test."""

    def __init__(self, work: Path) -> None:
        self.work = work
        self.home = work / "home"
        self.home.mkdir(parents=True, exist_ok=True)
        self.runs: list[DriverRun] = []

    def start(
        self, broker: Broker, steps: list[dict[str, Any]], deadline_s: float = 60
    ) -> DriverRun:
        """Start the driver on ``steps`` (it leaves after ``deadline_s`` at the latest)."""
        if not RMQ5_PYTHON.exists():
            pytest.skip(f"{RMQ5_PYTHON} is missing: run `make install`")
        env = dict(os.environ)
        env["HOME"] = str(self.home)
        env.pop("PYTHONPATH", None)
        name = f"rmq5-{len(self.runs):02d}-{steps[0]['op'] if steps else 'none'}"
        stderr_path = self.work / f"{name}.stderr"
        with stderr_path.open("w") as stderr:
            proc = subprocess.Popen(  # our own driver script, fixed arguments
                [str(RMQ5_PYTHON), str(DRIVER)],
                stdin=subprocess.PIPE,
                stdout=subprocess.PIPE,
                stderr=stderr,
                text=True,
                cwd=self.work,
                env=env,
            )
        assert proc.stdin is not None
        args = {"endpoint": f"127.0.0.1:{broker.grpc.port}", "deadline_s": deadline_s}
        proc.stdin.write(json.dumps({**args, "steps": steps}) + "\n")
        proc.stdin.flush()
        run = DriverRun(name, proc, stderr_path)
        self.runs.append(run)
        return run

    async def finish(self, run: DriverRun, timeout_s: float = 90) -> dict[str, Any]:
        """Wait (off the loop) for the driver to leave; its ``done`` line (fails without
        one, or with an error in it)."""
        return await asyncio.to_thread(run.finish, timeout_s)

    async def run(
        self, broker: Broker, steps: list[dict[str, Any]], deadline_s: float = 60
    ) -> DriverRun:
        """``start`` then ``finish``: the driver's whole run."""
        run = self.start(broker, steps, deadline_s)
        await self.finish(run, deadline_s + 30)
        return run

    async def wait_for(
        self, run: DriverRun, predicate: Callable[[DriverRun], bool], timeout_s: float
    ) -> bool:
        """``run.wait_for`` off the loop."""
        return await asyncio.to_thread(run.wait_for, predicate, timeout_s)

    @staticmethod
    def go(run: DriverRun) -> None:
        """Let a driver waiting in a ``wait_go`` step go on."""
        assert run.proc.stdin is not None
        run.proc.stdin.write("go\n")
        run.proc.stdin.flush()

    def report(self) -> list[tuple[str, str]]:
        """What a failing test's report shows: each run's lines and stderr, the client's
        log (its only word on what it swallowed)."""
        sections = [(f"rmq5: {run.name}", run.describe()) for run in self.runs]
        if self.runs:
            log = self.home / "logs" / "rocketmq_python" / "rocketmq_client.log"
            sections.append(("rmq5: client log", tail(log, 4000)))
        return sections

    def close(self) -> None:
        for run in self.runs:
            run.kill()


@pytest.fixture
def rmq5(tmp_path: Path, request: pytest.FixtureRequest) -> Iterator[Rmq5]:
    r = Rmq5(tmp_path / "rmq5")
    request.node.stash.setdefault(_REPORTED, []).append(r)
    try:
        yield r
    finally:
        r.close()


@pytest.fixture
async def start_proxy_broker(start_broker: BrokerFactory) -> AsyncIterator[ProxyBrokerFactory]:
    """``await start_proxy_broker(**BrokerConfig fields)``: a broker with QUICK_BROKER
    settings and QUICK_STORE delay levels under the given ones. The brokers are shut down
    and the heap collected at the end, so a task a stream left pending is reported (by the
    suite's loop guard) in the test that left it."""
    started: list[Broker] = []

    async def start(**config: Any) -> Broker:
        store = {**QUICK_STORE, **config.pop("store", {})}
        broker = await start_broker(store=store, **{**QUICK_BROKER, **config})
        started.append(broker)
        return broker

    try:
        yield start
    finally:
        for broker in started:
            await broker.shutdown()  # idempotent: start_broker's own shutdown comes later
        gc.collect()
        await asyncio.sleep(0)


@pytest.fixture
async def broker5(start_proxy_broker: ProxyBrokerFactory) -> Broker:
    """A ``start_proxy_broker`` broker with nothing more."""
    return await start_proxy_broker()


@pytest.hookimpl(wrapper=True)
def pytest_runtest_makereport(item: pytest.Item, call: pytest.CallInfo[None]) -> Any:
    report = yield
    if report.failed and call.when in ("setup", "call"):
        for rmq5 in item.stash.get(_REPORTED, []):
            report.sections += rmq5.report()
    return report


# ------------------------------------------------------------------------ broker state


async def create_topic(broker: Broker, prefix: str, queues: int = 4) -> str:
    """A new topic on ``broker``, registered with the name server before this returns (as
    ``mqadmin updateTopic`` leaves it): 5.x clients need a route from the start."""
    topic = unique(prefix)
    broker.topics.update(TopicConfig(topic, queues, queues, PERM_READ | PERM_WRITE))
    assert await broker.registration.register_all() >= 1
    return topic


def create_group(broker: Broker, prefix: str, **config: Any) -> str:
    """A new subscription group on ``broker`` (``SubscriptionGroupConfig`` fields)."""
    group = unique(prefix)
    broker.subscription_groups.update(SubscriptionGroupConfig(group, **config))
    return group


async def read_queue(broker: Broker, topic: str, queue_id: int = 0) -> list[MessageView]:
    """Every message of one queue, read with the 4.x SDK (``client.Admin.pull``)."""
    await wait_dispatched(broker)
    out: list[MessageView] = []
    mq = MessageQueue(topic, broker.config.broker_name, queue_id)
    async with Admin(broker.config.namesrv_addr) as admin:
        offset = 0
        for _ in range(100):
            batch, offset, max_offset = await admin.pull(mq, offset)
            out += batch
            if not batch or offset >= max_offset:
                break
    return out


def queue_ids_of(broker: Broker, topic: str) -> range:
    tc = broker.topics.get(topic)
    assert tc is not None, topic
    return range(tc.read_queue_nums)


async def read_topic(broker: Broker, topic: str) -> dict[int, list[MessageView]]:
    """Each queue's messages, queue id → messages in queue order."""
    return {q: await read_queue(broker, topic, q) for q in queue_ids_of(broker, topic)}

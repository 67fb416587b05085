"""A broker recovering a large store after a crash: its port and metrics answer at once,
saying "recovering" with how far it got; it registers with the name server and serves only
once the store is loaded. The store is a real one, crashed (the abort file a kill -9 leaves,
its consume queues and index gone), so every record is verified and dispatched again."""

from __future__ import annotations

import asyncio
import shutil
from pathlib import Path

import pytest

from broker.__main__ import _parser, _ping, _run
from broker.broker import Broker
from broker.config import BrokerConfig
from broker.namesrv.server import NameServer
from remoting.client import RemotingClient
from remoting.codes import RequestCode, ResponseCode
from remoting.command import RemotingCommand
from store.message_store import MessageStore
from tests.broker.test_metrics import scrape, value
from tests.store.conftest import message
from tests.support import LOOPBACK, store_config, wait_until

RECORDS = 40_000


def crashed_store(root: Path, namesrv: str) -> BrokerConfig:
    return BrokerConfig(
        namesrv_addr=namesrv,
        bind_address=LOOPBACK,
        listen_port=0,
        metrics_port=0,
        grpc_listen_port=0,
        broker_name="broker-recovering",
        store=store_config(root, commit_log_file_bytes=1 << 20, max_index_num=1 << 16),
    )


async def fill(config: BrokerConfig) -> None:
    async with MessageStore(config.store) as store:
        for n in range(RECORDS):
            assert (await store.put_message(message("TopicBig", n % 4, b"x" * 40))).status.stored
    root = config.store.root_dir
    (root / "abort").touch()  # as a kill -9 leaves it
    shutil.rmtree(root / "consumequeue")  # everything is dispatched again
    shutil.rmtree(root / "index", ignore_errors=True)


def ping(address: str, capsys: pytest.CaptureFixture[str]) -> tuple[int, str]:
    """``aerolite ping ADDRESS`` on an event loop of its own (run on a thread): exit code
    and output. In this process, not a new one: a new one takes longer to start than the
    recovery of a store this test can afford to fill lasts."""
    code = _run(_ping(_parser().parse_args(["ping", address, "--timeout", "5"])))
    out, err = capsys.readouterr()
    return code, out + err


async def test_a_recovering_broker_says_so_until_it_serves(
    namesrv: NameServer, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    config = crashed_store(tmp_path / "store", namesrv.address)
    await fill(config)
    broker = Broker(config)
    starting = asyncio.create_task(broker.start())
    try:
        await wait_until(
            lambda: broker.recovering and broker.store.recovery is not None,
            "the store's load under way",
            timeout_s=10,
            interval_s=0.001,
        )
        async with RemotingClient() as client:
            request = RemotingCommand.request(RequestCode.GET_BROKER_RUNTIME_INFO, {})
            answer = await client.invoke(broker.address, request, 5)
        assert answer.code == ResponseCode.SYSTEM_BUSY
        assert (answer.remark or "").startswith(
            "[RECOVERING]broker broker-recovering is recovering: "
        ), answer.remark
        samples = await scrape(broker.metrics_port)
        assert value(samples, "rocketmq_broker_recovering", node_id="broker-recovering") == 1
        # Not in any route while it cannot serve.
        assert "broker-recovering" not in namesrv.routes.broker_addr_table
        code, said = await asyncio.to_thread(ping, broker.address, capsys)
        if not starting.done():  # the ping's new process-like loop may have taken a while
            assert code == 1 and "is recovering: " in said, said
            assert "bytes," in said and "records re-dispatched" in said, said
        await asyncio.wait_for(asyncio.shield(starting), 60)
        assert not broker.recovering and broker.store.recovery is None
        code, said = await asyncio.to_thread(ping, broker.address, capsys)
        assert code == 0 and said.startswith(f"ok {broker.address} code=0"), said
        samples = await scrape(broker.metrics_port)
        assert value(samples, "rocketmq_broker_recovering", node_id="broker-recovering") == 0
        assert broker.store.get_max_offset("TopicBig", 0) == RECORDS // 4
        await wait_until(
            lambda: "broker-recovering" in namesrv.routes.broker_addr_table, "registration"
        )
    finally:
        if not starting.done():
            await asyncio.wait_for(asyncio.shield(starting), 60)
        await broker.shutdown()

"""The SDK over TLS: a name server in permissive mode (brokers register over plain TCP,
clients may use TLS) and a broker in enforcing mode; a producer and a consumer given
``tls=`` send and receive, and one without TLS is refused by the broker."""

from __future__ import annotations

import contextlib
from pathlib import Path

import pytest

from broker.broker import Broker
from broker.config import BrokerConfig, NamesrvConfig
from broker.namesrv.server import NameServer
from client import ConsumeFromWhere, Message, Producer, PushConsumer
from client.errors import ClientError
from remoting.errors import RemotingError
from remoting.tls import TlsMode, client_context
from store.config import StoreConfig
from tests.client.conftest import STORE_DEFAULTS, Received, create_topic
from tests.remoting.test_tls import make_cert
from tests.support import LOOPBACK

TOPIC = "TopicTls"


async def test_producer_and_consumer_over_tls(tmp_path: Path) -> None:
    cert = make_cert(tmp_path)
    async with contextlib.AsyncExitStack() as stack:
        namesrv = await stack.enter_async_context(
            NameServer(
                NamesrvConfig(
                    bind_address=LOOPBACK,
                    listen_port=0,
                    metrics_port=0,
                    tls_server_mode=TlsMode.PERMISSIVE,
                    tls_server_cert_path=cert.cert,
                    tls_server_key_path=cert.key,
                )
            )
        )
        broker = await stack.enter_async_context(
            Broker(
                BrokerConfig(
                    bind_address=LOOPBACK,
                    listen_port=0,
                    metrics_port=0,
                    namesrv_addr=namesrv.address,
                    tls_server_mode=TlsMode.ENFORCING,
                    store=StoreConfig(root_dir=tmp_path / "store", **STORE_DEFAULTS),
                    tls_server_cert_path=cert.cert,
                    tls_server_key_path=cert.key,
                )
            )
        )
        await create_topic(broker, TOPIC, queues=2)
        tls = client_context(cert.cert)
        received = Received()
        consumer = PushConsumer(
            "cg-tls",
            namesrv.address,
            tls=tls,
            consume_from_where=ConsumeFromWhere.CONSUME_FROM_FIRST_OFFSET,
        )
        consumer.subscribe(TOPIC)(received.add)
        async with Producer("pg-tls", namesrv.address, tls=tls) as producer:
            for n in range(10):
                await producer.send(Message(TOPIC, f"secret-{n}".encode()))
            async with consumer:
                await received.wait_for(10, timeout_s=10)
        assert sorted(received.bodies()) == sorted(f"secret-{n}".encode() for n in range(10))

        async with Producer(
            "pg-plain", namesrv.address, send_timeout_s=2, retry_times_when_send_failed=0
        ) as plain:
            with pytest.raises((RemotingError, ClientError)):
                await plain.send(Message(TOPIC, b"in the clear"))

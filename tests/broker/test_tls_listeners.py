"""Every remoting listener of a broker obeys its TLS mode, not only the main port.

With ``tlsServerMode=enforcing`` the main port refused plaintext while the VIP channel
(listenPort - 2, which Java clients up to 4.4 use by default) was built without the TLS
settings and stored a plaintext SEND_MESSAGE. The test enumerates the broker's remoting
listeners, sends a plaintext SEND_MESSAGE to each (refused: nothing stored) and the same
over TLS (stored).
"""

from __future__ import annotations

import pytest

from broker.broker import Broker
from remoting.client import ClientConfig, RemotingClient
from remoting.codes import ResponseCode
from remoting.errors import RemotingError
from remoting.server import RemotingServer
from remoting.tls import TlsMode, client_context
from tests.broker.conftest import BrokerFactory, send
from tests.remoting.test_tls import Cert, make_cert

TOPIC = "TopicTlsListeners"


@pytest.fixture(scope="module")
def cert(tmp_path_factory: pytest.TempPathFactory) -> Cert:
    return make_cert(tmp_path_factory.mktemp("tls"))


def listeners(broker: Broker) -> list[RemotingServer]:
    """The broker's remoting listeners; the VIP channel must be among them here."""
    if broker.vip_server is None:
        pytest.skip(f"port {broker.server.port - 2} (the VIP channel) was taken")
    return [broker.server, broker.vip_server]


async def test_every_listener_refuses_plaintext_under_enforcing(
    start_broker: BrokerFactory, cert: Cert
) -> None:
    broker = await start_broker(
        tls_server_mode=TlsMode.ENFORCING,
        tls_server_cert_path=cert.cert,
        tls_server_key_path=cert.key,
    )
    servers = listeners(broker)
    assert {s.config.tls_mode for s in servers} == {TlsMode.ENFORCING}

    async with RemotingClient(ClientConfig(connect_timeout_s=3.0)) as plain:
        for server in servers:
            with pytest.raises(RemotingError):
                await send(plain, server.address, TOPIC, b"plain")
    assert broker.store.get_max_offset(TOPIC, 0) == 0, "a plaintext send was stored"

    tls = ClientConfig(connect_timeout_s=3.0, ssl_context=client_context(cert.cert))
    async with RemotingClient(tls) as client:
        for server in servers:
            response = await send(client, server.address, TOPIC, b"over tls")
            assert response.code == ResponseCode.SUCCESS, (server.address, response)
    assert broker.store.get_max_offset(TOPIC, 0) == len(servers)


async def test_the_vip_channel_takes_plaintext_when_tls_is_disabled(
    start_broker: BrokerFactory,
) -> None:
    broker = await start_broker()
    async with RemotingClient(ClientConfig(connect_timeout_s=3.0)) as plain:
        for server in listeners(broker):
            response = await send(plain, server.address, TOPIC, b"plain")
            assert response.code == ResponseCode.SUCCESS, (server.address, response)

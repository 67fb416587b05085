"""TLS on the remoting port: ``enforcing`` takes only TLS, ``permissive`` takes TLS and plain
clients on one port (it looks at the first byte), ``disabled`` only plain; a client dials with
an ``ssl.SSLContext``. The certificate is a self-signed one made for the test by openssl."""

from __future__ import annotations

import dataclasses
import shutil
import ssl
import subprocess
from pathlib import Path

import pytest

from remoting.client import ClientConfig
from remoting.errors import ConnectError, RemotingError
from remoting.tls import TlsMode, client_context, server_context
from tests.remoting.conftest import ServerFactory, check_echo
from tests.support import CLIENT_CONFIG, ClientFactory


@dataclasses.dataclass(frozen=True)
class Cert:
    cert: Path
    key: Path


def make_cert(directory: Path) -> Cert:
    """A self-signed certificate for 127.0.0.1 and localhost (openssl, run as a tool)."""
    openssl = shutil.which("openssl")
    if openssl is None:
        pytest.skip("openssl is not installed")
    cert, key = directory / "cert.pem", directory / "key.pem"
    subprocess.run(  # a fixed argument list: the system's openssl makes a test certificate
        [
            openssl,
            "req",
            "-x509",
            "-newkey",
            "rsa:2048",
            "-nodes",
            "-days",
            "2",
            "-keyout",
            str(key),
            "-out",
            str(cert),
            "-subj",
            "/CN=localhost",
            "-addext",
            "subjectAltName=IP:127.0.0.1,DNS:localhost",
        ],
        check=True,
        capture_output=True,
        timeout=60,
    )
    return Cert(cert, key)


@pytest.fixture(scope="module")
def cert(tmp_path_factory: pytest.TempPathFactory) -> Cert:
    return make_cert(tmp_path_factory.mktemp("tls"))


def tls_client_config(cert: Cert) -> ClientConfig:
    return dataclasses.replace(CLIENT_CONFIG, ssl_context=client_context(cert.cert))


async def test_enforcing_takes_tls_and_refuses_plain(
    cert: Cert, start_server: ServerFactory, start_client: ClientFactory
) -> None:
    server = await start_server(
        tls_mode=TlsMode.ENFORCING, ssl_context=server_context(cert.cert, cert.key)
    )
    tls = await start_client(tls_client_config(cert))
    for i in range(3):
        await check_echo(tls, server.address, i)
    plain = await start_client()
    with pytest.raises(RemotingError):
        await check_echo(plain, server.address, 9)


async def test_permissive_takes_both_on_one_port(
    cert: Cert, start_server: ServerFactory, start_client: ClientFactory
) -> None:
    server = await start_server(
        tls_mode=TlsMode.PERMISSIVE, ssl_context=server_context(cert.cert, cert.key)
    )
    tls = await start_client(tls_client_config(cert))
    plain = await start_client()
    for i in range(3):
        await check_echo(tls, server.address, i)
        await check_echo(plain, server.address, 100 + i)
    assert len(server.connections) == 2


async def test_disabled_refuses_a_tls_client(
    cert: Cert, start_server: ServerFactory, start_client: ClientFactory
) -> None:
    server = await start_server()
    tls = await start_client(tls_client_config(cert))
    with pytest.raises(ConnectError):
        await check_echo(tls, server.address, 1)


async def test_a_client_that_does_not_trust_the_server_fails_clearly(
    cert: Cert, start_server: ServerFactory, start_client: ClientFactory
) -> None:
    server = await start_server(
        tls_mode=TlsMode.ENFORCING, ssl_context=server_context(cert.cert, cert.key)
    )
    untrusting = await start_client(
        dataclasses.replace(CLIENT_CONFIG, ssl_context=ssl.create_default_context())
    )
    with pytest.raises(ConnectError, match=r"CERTIFICATE_VERIFY_FAILED|certificate"):
        await check_echo(untrusting, server.address, 1)


def test_a_tls_mode_without_a_certificate_is_refused() -> None:
    from remoting.server import ServerConfig

    with pytest.raises(ValueError, match="needs a certificate"):
        ServerConfig(tls_mode=TlsMode.ENFORCING)

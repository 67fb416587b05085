"""TLS on the remoting port, and the contexts for servers and clients.

RocketMQ counterpart: ``TlsSystemConfig`` / ``TlsHelper`` and ``tls.server.mode``:

- ``disabled``: plain TCP only;
- ``permissive``: plain and TLS clients on the same port. The server looks at a new
  connection's first byte without reading it: 0x16 opens a TLS handshake record, anything
  else is a remoting frame (whose first byte is the top of a length, never 0x16 for frames
  under 352 MiB);
- ``enforcing``: TLS only; a plain client fails its handshake and is closed.

Certificates are PEM files: the server's chain and key, and optionally the CAs a server
trusts for client certificates (then a client must present one) or a client trusts for
servers.
"""

from __future__ import annotations

import ssl
from enum import StrEnum
from pathlib import Path

TLS_HANDSHAKE_RECORD = 0x16


class TlsMode(StrEnum):
    DISABLED = "disabled"
    PERMISSIVE = "permissive"
    ENFORCING = "enforcing"


def server_context(
    cert_path: str | Path, key_path: str | Path, trust_path: str | Path | None = None
) -> ssl.SSLContext:
    """A TLS server context; with ``trust_path`` clients must present a certificate it
    signs (``tls.server.need.client.auth=require``).

    Raises:
        OSError, ssl.SSLError: a file is missing or does not hold what it should.
    """
    ctx = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH)
    ctx.minimum_version = ssl.TLSVersion.TLSv1_2
    ctx.load_cert_chain(str(cert_path), str(key_path))
    if trust_path is not None:
        ctx.load_verify_locations(str(trust_path))
        ctx.verify_mode = ssl.CERT_REQUIRED
    return ctx


def client_context(
    trust_path: str | Path | None = None,
    *,
    verify: bool = True,
    cert_path: str | Path | None = None,
    key_path: str | Path | None = None,
) -> ssl.SSLContext:
    """A TLS client context: the system CAs, or ``trust_path``'s; ``verify=False`` accepts
    any server certificate (RocketMQ's ``tls.test.mode.enable``, for tests only); a client
    certificate for servers that require one.

    Raises:
        OSError, ssl.SSLError: a file is missing or does not hold what it should.
    """
    ctx = ssl.create_default_context(ssl.Purpose.SERVER_AUTH)
    ctx.minimum_version = ssl.TLSVersion.TLSv1_2
    if trust_path is not None:
        ctx.load_verify_locations(str(trust_path))
    if not verify:
        ctx.check_hostname = False
        ctx.verify_mode = ssl.CERT_NONE
    if cert_path is not None:
        ctx.load_cert_chain(str(cert_path), str(key_path) if key_path is not None else None)
    return ctx

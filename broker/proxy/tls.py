"""TLS of the gRPC port: the certificate it presents and the context it ends TLS with.

RocketMQ counterpart: the proxy's ``GrpcServerBuilder`` TLS setup (``TlsCertificateManager``)
and ``ProxyAndTlsProtocolNegotiator``: one port takes TLS and plaintext alike, and with no
certificate configured the proxy makes a self-signed one (Netty's
``SelfSignedCertificate``). Every 5.x client but Python's turns TLS on by default (and
trusts any certificate), so a broker whose remoting ports are plaintext still answers them
with TLS on this port, from a certificate made at start, as the proxy does.
"""

from __future__ import annotations

import datetime
import ipaddress
import ssl
from dataclasses import dataclass
from pathlib import Path

from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.x509.oid import NameOID

from remoting.tls import server_context

SELF_SIGNED_DAYS = 365  # SelfSignedCertificate's default validity


@dataclass(frozen=True, slots=True)
class CertFiles:
    cert: Path
    key: Path


def self_signed(directory: Path, hosts: list[str]) -> CertFiles:
    """A new EC P-256 key and a certificate for ``hosts`` (names or IP addresses), written
    to ``directory`` (the key readable by its owner only)."""
    key = ec.generate_private_key(ec.SECP256R1())
    name = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, "aerolite")])
    alt: list[x509.GeneralName] = []
    for host in dict.fromkeys(hosts):
        try:
            alt.append(x509.IPAddress(ipaddress.ip_address(host)))
        except ValueError:
            alt.append(x509.DNSName(host))
    now = datetime.datetime.now(datetime.UTC)
    cert = (
        x509.CertificateBuilder()
        .subject_name(name)
        .issuer_name(name)
        .public_key(key.public_key())
        .serial_number(x509.random_serial_number())
        .not_valid_before(now - datetime.timedelta(minutes=5))
        .not_valid_after(now + datetime.timedelta(days=SELF_SIGNED_DAYS))
        .add_extension(x509.SubjectAlternativeName(alt), critical=False)
        .sign(key, hashes.SHA256())
    )
    files = CertFiles(directory / "grpc-self-signed.pem", directory / "grpc-self-signed.key")
    files.cert.write_bytes(cert.public_bytes(serialization.Encoding.PEM))
    files.key.touch(mode=0o600)
    files.key.write_bytes(
        key.private_bytes(
            serialization.Encoding.PEM,
            serialization.PrivateFormat.PKCS8,
            serialization.NoEncryption(),
        )
    )
    return files


def h2_context(cert: Path, key: Path, trust: Path | None = None) -> ssl.SSLContext:
    """A server context that negotiates HTTP/2 by ALPN, as gRPC clients require."""
    ctx = server_context(cert, key, trust)
    ctx.set_alpn_protocols(["h2"])
    return ctx

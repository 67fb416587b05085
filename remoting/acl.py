"""Request signing for RocketMQ's ACL 1.0: what a client adds and a broker checks.

RocketMQ counterpart: ``AclClientRPCHook``, ``AclUtils.combineRequestContent`` and
``AclSigner`` (Java), ``ClientRPCHook::signCommand`` (C++).

A signed request carries ``AccessKey`` (and ``SecurityToken`` when there is one) among its
ext fields, and ``Signature``: Base64 of HMAC-SHA1, keyed by the secret key, over the values
of every other ext field in key order, followed by the body. Fields a client adds outside the
signed header are left out of the content (``_UNIQUE_KEY_QUERY``). The C++ client also
signs its ``OnsChannel`` field, which the broker's check includes like any other field.
"""

from __future__ import annotations

import base64
import hashlib
import hmac
from collections.abc import Mapping
from dataclasses import dataclass

from remoting.command import RemotingCommand

ACCESS_KEY = "AccessKey"
SIGNATURE = "Signature"
SECURITY_TOKEN = "SecurityToken"  # noqa: S105 - a field name, not a secret
UNIQUE_MSG_QUERY_FLAG = "_UNIQUE_KEY_QUERY"
_UNSIGNED = frozenset({SIGNATURE, UNIQUE_MSG_QUERY_FLAG})


@dataclass(frozen=True, slots=True)
class SessionCredentials:
    """An ACL account's keys (RocketMQ ``SessionCredentials``)."""

    access_key: str
    secret_key: str
    security_token: str | None = None

    def __repr__(self) -> str:  # never print a secret into a log
        return f"SessionCredentials(access_key={self.access_key!r}, secret_key=***)"


def signed_content(ext_fields: Mapping[str, str], body: bytes | memoryview | None) -> bytes:
    """The bytes a signature covers: field values in key order, then the body."""
    text = "".join(v for k, v in sorted(ext_fields.items()) if k not in _UNSIGNED)
    content = text.encode("utf-8")
    return content + bytes(body) if body else content


def signature(content: bytes, secret_key: str) -> str:
    """``AclSigner.calSignature``: Base64(HMAC-SHA1(secret key, content))."""
    digest = hmac.new(secret_key.encode("utf-8"), content, hashlib.sha1).digest()
    return base64.b64encode(digest).decode("ascii")


class AclClientHook:
    """The client side: sign every request before it is written (an ``RPCHook``)."""

    def __init__(self, credentials: SessionCredentials) -> None:
        self.credentials = credentials

    def before_request(self, remote_addr: str, request: RemotingCommand) -> None:
        ext = request.ext_fields
        ext[ACCESS_KEY] = self.credentials.access_key
        if self.credentials.security_token is not None:
            ext[SECURITY_TOKEN] = self.credentials.security_token
        ext.pop(SIGNATURE, None)
        ext[SIGNATURE] = signature(signed_content(ext, request.body), self.credentials.secret_key)

    def after_response(
        self, remote_addr: str, request: RemotingCommand, response: RemotingCommand | None
    ) -> None:
        return None

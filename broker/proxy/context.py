"""Who is calling: the metadata every 5.x client request carries, and its ACL check.

RocketMQ counterpart: ``proxy/grpc/interceptor/HeaderInterceptor`` + ``ContextInterceptor``
(``x-mq-client-id``, ``x-mq-language``, ``x-mq-client-version``, ``x-mq-namespace``, the
peer address into a ``ProxyContext``) and, with ACL on, the ``authorization`` header as the
proxy's plain ACL reads it (``acl/plain/PlainAccessValidator.parse`` of gRPC metadata):
``MQv2-HMAC-SHA1 Credential=<AK>, SignedHeaders=x-mq-date-time, Signature=<hex>``, the
signature being HMAC-SHA1 of the ``x-mq-date-time`` value under the account's secret key.
"""

from __future__ import annotations

import hashlib
import hmac
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from grpc import aio

from broker.acl import RETRY_PREFIX, SUB, PlainAcl
from broker.proxy.apis import definition_pb2 as pb
from broker.proxy.server import RELAYED_PEERS
from broker.proxy.status import ProxyError
from broker.subscriptions import check_group_name
from broker.topics import SYSTEM_TOPIC_PREFIX, check_topic_name
from remoting.bodies import SYSTEM_TOPICS
from remoting.errors import NoPermissionError

AUTHORIZATION = "authorization"
DATE_TIME = "x-mq-date-time"
CLIENT_ID = "x-mq-client-id"
LANGUAGE = "x-mq-language"
CLIENT_VERSION = "x-mq-client-version"
NAMESPACE = "x-mq-namespace"
ALGORITHM = "MQv2-HMAC-SHA1"
SYSTEM_GROUP_PREFIX = "CID_RMQ_SYS_"  # MixAll.CID_RMQ_SYS_PREFIX


@dataclass(frozen=True, slots=True)
class CallContext:
    """One call's caller."""

    client_id: str
    language: str
    version: str
    namespace: str
    peer: str  # host:port, as a remoting peer is written
    metadata: Mapping[str, str]

    @property
    def host(self) -> str:
        return self.peer.rpartition(":")[0].strip("[]")


def peer_address(grpc_peer: str) -> str:
    """grpc's ``ipv4:1.2.3.4:5``/``ipv6:[::1]:5`` as ``1.2.3.4:5``/``[::1]:5``: the
    client's own address when the call came through the TLS relay."""
    kind, _, rest = grpc_peer.partition(":")
    if kind not in ("ipv4", "ipv6") or not rest:
        return grpc_peer
    host, _, port = rest.rpartition(":")
    if host == "127.0.0.1" and port.isdigit():
        return RELAYED_PEERS.get(int(port), rest)
    return rest


def context_of(context: aio.ServicerContext[Any, Any]) -> CallContext:
    metadata = {k.lower(): v for k, v in context.invocation_metadata() or () if isinstance(v, str)}
    return CallContext(
        client_id=metadata.get(CLIENT_ID, ""),
        language=metadata.get(LANGUAGE, ""),
        version=metadata.get(CLIENT_VERSION, ""),
        namespace=metadata.get(NAMESPACE, ""),
        peer=peer_address(context.peer() or ""),
        metadata=metadata,
    )


def require_client_id(context: aio.ServicerContext[Any, Any]) -> None:
    """Every call names its client, or is refused before anything runs (the proxy's
    ``GrpcMessagingApplication.validateContext``).

    Raises:
        ProxyError: CLIENT_ID_REQUIRED.
    """
    for key, value in context.invocation_metadata() or ():
        if key == CLIENT_ID and isinstance(value, str) and value.strip():
            return
    raise ProxyError(pb.CLIENT_ID_REQUIRED, f"client id cannot be empty ({CLIENT_ID})")


def _credential(header: str) -> tuple[str, str]:
    """The access key and signature of an ``authorization`` value.

    Raises:
        ProxyError: UNAUTHORIZED, naming what is malformed.
    """
    algorithm, _, rest = header.strip().partition(" ")
    if algorithm != ALGORITHM:
        raise ProxyError(
            pb.UNAUTHORIZED, f"authorization algorithm {algorithm!r} is not {ALGORITHM}"
        )
    fields: dict[str, str] = {}
    for part in rest.split(","):
        key, _, value = part.strip().partition("=")
        fields[key] = value
    ak, sig = fields.get("Credential", ""), fields.get("Signature", "")
    if not ak or not sig:
        raise ProxyError(pb.UNAUTHORIZED, "authorization needs Credential and Signature")
    # Credential is "<AK>" (Java) or "<AK>/<region>/<service>" in some clients' forms.
    return ak.split("/", 1)[0], sig


def check_access(acl: PlainAcl | None, call: CallContext, resources: Mapping[str, int]) -> None:
    """With ACL on, the caller's account must sign its date and hold ``resources``
    (topic → PUB/SUB, ``%RETRY%<group>`` → SUB).

    Raises:
        ProxyError: UNAUTHORIZED (no or a bad signature), FORBIDDEN (no permission).
    """
    if acl is None or acl.whitelisted(call.host):
        return
    header = call.metadata.get(AUTHORIZATION)
    if header is None:
        raise ProxyError(pb.UNAUTHORIZED, "No accessKey is configured (no authorization header)")
    ak, given = _credential(header)
    date = call.metadata.get(DATE_TIME, "").encode()

    def signed(secret: str) -> bool:
        expected = hmac.new(secret.encode(), date, hashlib.sha1).hexdigest()
        return hmac.compare_digest(expected.upper(), given.upper())

    # RocketMQ 5.3's proxy answers UNAUTHORIZED for a bad signature and for a missing
    # permission alike (AuthenticationException and AuthorizationException map to 40100).
    try:
        account = acl.authenticate(call.host, ak, signed)
        acl.authorize(account, resources)
    except NoPermissionError as exc:
        raise ProxyError(pb.UNAUTHORIZED, str(exc)) from None


def valid_topic(topic: str) -> str:
    """``GrpcValidator.validateTopic``: a legal name, and not a system topic.

    Raises:
        ProxyError: ILLEGAL_TOPIC, naming the rule.
    """
    why = check_topic_name(topic)
    if why is not None:
        raise ProxyError(pb.ILLEGAL_TOPIC, why)
    if topic in SYSTEM_TOPICS or topic.startswith(SYSTEM_TOPIC_PREFIX):
        raise ProxyError(pb.ILLEGAL_TOPIC, f"cannot access system topic {topic}")
    return topic


def valid_group(group: str) -> str:
    """``GrpcValidator.validateConsumerGroup``: a legal name, not a system group.

    Raises:
        ProxyError: ILLEGAL_CONSUMER_GROUP, naming the rule.
    """
    why = check_group_name(group)
    if why is not None:
        raise ProxyError(pb.ILLEGAL_CONSUMER_GROUP, why)
    if group.startswith(SYSTEM_GROUP_PREFIX):
        raise ProxyError(pb.ILLEGAL_CONSUMER_GROUP, f"cannot use system consumer group {group}")
    return group


def consume_need(topic: str | None, group: str | None) -> dict[str, int]:
    need: dict[str, int] = {}
    if topic:
        need[topic] = SUB
    if group:
        need[RETRY_PREFIX + group] = SUB
    return need

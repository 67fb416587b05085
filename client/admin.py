"""``Admin``: look messages up, by id or by key, across every broker of a topic.

RocketMQ counterpart: ``MQAdminImpl`` as used by ``DefaultMQAdminExt`` and ``mqadmin
queryMsgById / queryMsgByKey / queryMsgByUniqueKey``:

- an *offset message id* (``SendResult.offset_msg_id``; store host + commit-log offset) names
  its broker and position, so it is read with VIEW_MESSAGE_BY_ID (33) from that broker;
- a *unique key* (``SendResult.msg_id``, the UNIQ_KEY a producer gives each message) and a
  business *key* are found through the brokers' index files with QUERY_MESSAGE (12), asking
  the master of every broker that serves the topic. The index keeps hashes only, so answers
  are filtered again here by the key itself, as the Java client does.

Usage::

    async with Admin(namesrv="127.0.0.1:9876") as admin:
        msg = await admin.view_message(result.offset_msg_id)
        same = await admin.query_by_unique_key("orders", result.msg_id)
        found = await admin.query_by_key("orders", "order-1", max_num=32)
"""

from __future__ import annotations

import asyncio
import socket
import struct
import time

import structlog

from client.errors import ClientError, InvalidMessageError, NoRouteError
from client.instance import ClientInstance, namesrv_from_env
from client.message import MessageDecodeError, MessageView, check_topic, decode_messages
from client.service import ClientService
from remoting.codes import RequestCode, ResponseCode
from remoting.command import RemotingCommand
from remoting.errors import BrokerError, RemotingError
from remoting.headers import QueryMessageRequestHeader, ViewMessageRequestHeader
from remoting.route import BrokerData, loads

log = structlog.get_logger(__name__)

QUERY_TIMEOUT_S = 5.0
MAX_QUERY_NUM = 64  # the broker caps maxNum here
_PORT_OFFSET = struct.Struct(">iq")


def decode_offset_msg_id(msg_id: str) -> tuple[str, int]:
    """(``ip:port`` of the storing broker, commit-log offset) from an offset message id.

    Raises:
        InvalidMessageError: not 32 (IPv4) or 56 (IPv6) hex digits.
    """
    if len(msg_id) not in (32, 56):
        raise InvalidMessageError(
            f"offset message id {msg_id!r} must have 32 (IPv4) or 56 (IPv6) hex digits"
        )
    try:
        raw = bytes.fromhex(msg_id)
    except ValueError:
        raise InvalidMessageError(f"offset message id {msg_id!r} is not hex") from None
    addr_len = len(raw) - 12
    ip = socket.inet_ntop(socket.AF_INET if addr_len == 4 else socket.AF_INET6, raw[:addr_len])
    port, offset = _PORT_OFFSET.unpack_from(raw, addr_len)
    if not 0 < port < 65536 or offset < 0:
        raise InvalidMessageError(f"offset message id {msg_id!r} names no broker position")
    host = ip if addr_len == 4 else f"[{ip}]"
    return f"{host}:{port}", offset


class Admin(ClientService):
    """Message lookups; ``async with`` starts and shuts it down."""

    def __init__(self, namesrv: str | None = None, *, instance_name: str | None = None) -> None:
        self.namesrv = namesrv_from_env(namesrv)
        self.instance_name = instance_name
        self._instance: ClientInstance | None = None

    async def start(self) -> None:
        if self._instance is None:
            self._instance = await ClientInstance.acquire(self.namesrv, self.instance_name)

    async def shutdown(self) -> None:
        instance, self._instance = self._instance, None
        if instance is not None:
            await instance.release()

    def _describe(self) -> str:
        return "the admin client"

    # ------------------------------------------------------------------------ lookups

    async def view_message(self, offset_msg_id: str) -> MessageView:
        """The message an offset message id names.

        Raises:
            InvalidMessageError: the id is malformed.
            ClientError: the broker has no message there (or could not be reached).
        """
        addr, offset = decode_offset_msg_id(offset_msg_id)
        instance = self._running()
        request = RemotingCommand.request(
            RequestCode.VIEW_MESSAGE_BY_ID, ViewMessageRequestHeader(offset=offset).to_ext_fields()
        )
        try:
            response = await instance.invoke_broker(addr, request, QUERY_TIMEOUT_S)
        except RemotingError as exc:
            raise ClientError(
                f"broker {addr} of message {offset_msg_id} did not answer: {exc}"
            ) from exc
        if response.code != ResponseCode.SUCCESS:
            raise ClientError(
                f"no message {offset_msg_id} at {addr}: code {response.code} {response.remark}"
            )
        msgs = decode_messages(response.body_bytes, await self._broker_name(addr))
        if not msgs:
            raise ClientError(f"broker {addr} answered without message {offset_msg_id}")
        return msgs[0]

    async def query_by_unique_key(self, topic: str, msg_id: str) -> MessageView | None:
        """The message of ``topic`` whose client id (UNIQ_KEY, ``SendResult.msg_id``) is
        ``msg_id``; None when no broker has it. Of several copies (a message sent twice by a
        retrying producer), the first stored."""
        found = await self._query(topic, msg_id, MAX_QUERY_NUM, 0, 2**63 - 1, unique=True)
        matches = [m for m in found if m.msg_id == msg_id]
        if not matches:
            return None
        return min(matches, key=lambda m: m.store_timestamp)

    async def query_by_key(
        self,
        topic: str,
        key: str,
        *,
        max_num: int = 32,
        begin_ms: int = 0,
        end_ms: int | None = None,
    ) -> list[MessageView]:
        """Messages of ``topic`` carrying business key ``key`` stored within
        [``begin_ms``, ``end_ms``] (epoch ms; default all time), at most ``max_num`` per
        broker (the broker's cap is 64), oldest first."""
        if not key or " " in key:
            raise InvalidMessageError(f"key {key!r} must be a non-empty string without spaces")
        if not 1 <= max_num <= MAX_QUERY_NUM:
            raise InvalidMessageError(f"max_num must be within 1..{MAX_QUERY_NUM}, not {max_num}")
        end = end_ms if end_ms is not None else int(time.time() * 1000) + 60_000
        if begin_ms > end:
            raise InvalidMessageError(f"begin_ms {begin_ms} is after end_ms {end}")
        found = await self._query(topic, key, max_num, begin_ms, end, unique=False)
        return sorted(
            (m for m in found if key in m.keys), key=lambda m: (m.store_timestamp, m.msg_id)
        )

    async def _query(
        self, topic: str, key: str, max_num: int, begin_ms: int, end_ms: int, *, unique: bool
    ) -> list[MessageView]:
        check_topic(topic)
        instance = self._running()
        route = await instance.update_route(topic)
        if route is None:
            raise NoRouteError(topic, "the name server does not know it")
        targets = [(bd.broker_name, bd.master_addr) for bd in route.broker_datas]
        if not any(addr for _name, addr in targets):
            raise NoRouteError(topic, "no master broker serves it")

        async def ask(broker_name: str, addr: str) -> list[MessageView]:
            header = QueryMessageRequestHeader(
                topic=topic,
                key=key,
                max_num=max_num,
                begin_timestamp=begin_ms,
                end_timestamp=end_ms,
            )
            ext = header.to_ext_fields()
            ext["_UNIQUE_KEY_QUERY"] = "true" if unique else "false"
            request = RemotingCommand.request(RequestCode.QUERY_MESSAGE, ext)
            try:
                response = await instance.invoke_broker(addr, request, QUERY_TIMEOUT_S)
            except RemotingError as exc:
                log.warning("query_broker_failed", broker=broker_name, error=str(exc))
                return []
            if response.code == ResponseCode.QUERY_NOT_FOUND:
                return []
            if response.code != ResponseCode.SUCCESS:
                raise BrokerError.for_code(response.code, response.remark)
            try:
                return decode_messages(response.body_bytes, broker_name)
            except MessageDecodeError as exc:
                log.warning("query_answer_undecodable", broker=broker_name, error=str(exc))
                return []

        answers = await asyncio.gather(*(ask(name, addr) for name, addr in targets if addr))
        return [m for answer in answers for m in answer if m.topic == topic]

    async def _broker_name(self, addr: str) -> str:
        """The broker name serving ``addr``: from known routes, else the name server's
        cluster table; "" when neither knows it."""
        instance = self._running()
        for name, addrs in instance.broker_addrs.items():
            if addr in addrs.values():
                return name
        request = RemotingCommand.request(RequestCode.GET_BROKER_CLUSTER_INFO, {})
        try:
            response = await instance.invoke_namesrv(request)
            table = loads(response.body_bytes).get("brokerAddrTable", {})
        except (RemotingError, ValueError, AttributeError) as exc:
            log.info("cluster_info_unavailable", error=str(exc))
            return ""
        for name, data in table.items():
            try:
                if addr in BrokerData.from_json(data).broker_addrs.values():
                    return str(name)
            except (KeyError, ValueError, TypeError, AttributeError):
                continue  # an entry we cannot read names no broker we can match
        return ""

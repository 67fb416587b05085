"""Transactional sends: a half message, the local transaction, then commit or rollback; and
answers to the broker's check-back.

RocketMQ counterpart: ``TransactionMQProducer`` with ``TransactionListener``
(``executeLocalTransaction`` / ``checkLocalTransaction``) and
``DefaultMQProducerImpl.sendMessageInTransaction`` / ``endTransaction`` /
``checkTransactionState`` (protocol.md §13.5).

``send_message_in_transaction`` sends the message as a half message (TRAN_MSG, PGROUP, the
PREPARED sysFlag type; a DELAY level is dropped, as Java drops it), runs ``executor`` only if
the broker stored it (SEND_OK; anything else counts as a rollback), and sends END_TRANSACTION
(oneway, as Java does) with the executor's answer; an executor that raises answers UNKNOWN.
An UNKNOWN leaves the message to the broker's check-back: it sends CHECK_TRANSACTION_STATE on
this client's connection, ``checker`` is asked about the message, and its answer goes back as
END_TRANSACTION with fromTransactionCheck. Both callbacks may be plain or ``async``.
"""

from __future__ import annotations

import inspect
import logging
import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from enum import IntEnum
from typing import Any

from client.admin import decode_offset_msg_id
from client.errors import InvalidMessageError
from client.message import UNIQ_IDS, Message, MessageView, SendResult, SendStatus
from client.producer import Producer, _Outgoing
from client.trace import DEFAULT_REGION, MessageType, TraceBean, TraceContext, TraceType
from codec import (
    COMPRESSED_FLAG,
    COMPRESSION_ZLIB,
    PROPERTY_DELAY,
    PROPERTY_PRODUCER_GROUP,
    PROPERTY_TRANSACTION_PREPARED,
    compress_body,
    encode_properties,
)
from remoting.codes import RequestCode
from remoting.command import RemotingCommand
from remoting.connection import Connection
from remoting.headers import CheckTransactionStateRequestHeader, EndTransactionRequestHeader
from remoting.lifecycle import TaskGroup

log = logging.getLogger(__name__)

TRANSACTION_PREPARED_TYPE = 0x4
END_TRANSACTION_TIMEOUT_S = 3.0


class LocalTransactionState(IntEnum):
    """What the local transaction decided; the values are END_TRANSACTION's
    commitOrRollback (Java's COMMIT_MESSAGE, ROLLBACK_MESSAGE, UNKNOW)."""

    UNKNOWN = 0
    COMMIT = 8
    ROLLBACK = 12


# LocalTransactionState's Java names, as EndTransaction trace records carry them.
_JAVA_STATE = {
    LocalTransactionState.UNKNOWN: "UNKNOW",
    LocalTransactionState.COMMIT: "COMMIT_MESSAGE",
    LocalTransactionState.ROLLBACK: "ROLLBACK_MESSAGE",
}

Executor = Callable[[Message, Any], LocalTransactionState | Awaitable[LocalTransactionState]]
Checker = Callable[[MessageView], LocalTransactionState | Awaitable[LocalTransactionState]]


@dataclass(slots=True)
class TransactionSendResult:
    """The half message's send result and what the local transaction decided."""

    send_result: SendResult
    local_state: LocalTransactionState

    @property
    def msg_id(self) -> str:
        return self.send_result.msg_id

    @property
    def transaction_id(self) -> str:
        return self.send_result.msg_id


async def _answer(value: LocalTransactionState | Awaitable[LocalTransactionState]) -> Any:
    return await value if inspect.isawaitable(value) else value


class TransactionProducer(Producer):
    """A producer of transactional messages.

    Args:
        group: the producer group; the broker checks back with a live member of it.
        executor: ``(message, arg) -> LocalTransactionState``, the local transaction.
        checker: ``(message) -> LocalTransactionState``, asked when the broker does not
            know the outcome (UNKNOWN, or END_TRANSACTION lost).
        Other arguments as ``Producer`` (auto-batching does not apply to half messages).
    """

    def __init__(
        self,
        group: str,
        namesrv: str | None = None,
        *,
        executor: Executor,
        checker: Checker,
        **kwargs: Any,
    ) -> None:
        super().__init__(group, namesrv, **kwargs)
        self.executor = executor
        self.checker = checker
        self._checks = TaskGroup("transaction-checks")  # the checker runs user code
        self._introduced: set[str] = set()  # brokers that got a heartbeat naming the group

    async def shutdown(self) -> None:
        await self._checks.close(timeout_s=END_TRANSACTION_TIMEOUT_S)
        await super().shutdown()

    async def send_message_in_transaction(
        self, msg: Message, arg: Any = None, *, timeout_s: float | None = None
    ) -> TransactionSendResult:
        """Send ``msg`` as a half message, run the local transaction, end it.

        Raises:
            InvalidMessageError: the message fails validation (nothing is sent).
            NoRouteError, BrokerError, RemotingError: the half message was not stored.
        """
        msg.validate(self.max_message_bytes)
        if msg.deliver_at is not None or msg.delay is not None:
            raise InvalidMessageError("a transactional message cannot be a timer message")
        uniq = UNIQ_IDS.next_id()
        body = bytes(msg.body)
        sys_flag = TRANSACTION_PREPARED_TYPE
        if len(body) >= self.compress_over_bytes:
            body = compress_body(body, self.compress_level)
            sys_flag |= COMPRESSED_FLAG | COMPRESSION_ZLIB
        props = msg.wire_properties(uniq)
        props.pop(PROPERTY_DELAY, None)
        props[PROPERTY_TRANSACTION_PREPARED] = "true"
        props[PROPERTY_PRODUCER_GROUP] = self.group
        out = _Outgoing(
            RequestCode.SEND_MESSAGE_V2,
            body,
            sys_flag,
            encode_properties(props),
            msg.flag,
            uniq,
            False,
        )
        started_ms = int(time.time() * 1000)
        result = await self._send_with_retries(msg.topic, out, timeout_s or self.send_timeout_s)
        if self.tracer is not None:
            self._trace_sent(msg, result, started_ms, MessageType.TRANS_HALF)
        await self._introduce(result)
        error: BaseException | None = None
        if result.status is SendStatus.SEND_OK:
            try:
                state = LocalTransactionState(await _answer(self.executor(msg, arg)))
            except Exception as exc:  # the outcome is unknown: the broker will check back
                log.warning(
                    "local_transaction_failed group=%s msg_id=%s error=%r", self.group, uniq, exc
                )
                state, error = LocalTransactionState.UNKNOWN, exc
        else:
            state = LocalTransactionState.ROLLBACK
        await self._end(msg, result, state, error)
        return TransactionSendResult(result, state)

    async def _introduce(self, result: SendResult) -> None:
        """A broker that stores our half messages must know this producer group to check
        back; the 30 s heartbeat round may not have reached it yet (a new route)."""
        addr = self._broker_addr(result.message_queue)
        if addr not in self._introduced and await self._running().heartbeat_broker(addr):
            self._introduced.add(addr)

    async def _end(
        self,
        msg: Message,
        result: SendResult,
        state: LocalTransactionState,
        error: BaseException | None,
    ) -> None:
        """END_TRANSACTION, oneway, to the broker that stored the half message."""
        try:
            _, commit_log_offset = decode_offset_msg_id(result.offset_msg_id)
        except InvalidMessageError:
            log.warning("end_transaction_without_offset msg_id=%s", result.msg_id)
            return
        header = EndTransactionRequestHeader(
            producer_group=self.group,
            tran_state_table_offset=result.queue_offset,
            commit_log_offset=commit_log_offset,
            commit_or_rollback=int(state),
            from_transaction_check=False,
            msg_id=result.msg_id,
            transaction_id=result.msg_id,
        )
        request = RemotingCommand.request(RequestCode.END_TRANSACTION, header.to_ext_fields())
        if error is not None:
            request.remark = f"executeLocalTransactionBranch exception: {error!r}"[:512]
        instance = self._running()
        addr = self._broker_addr(result.message_queue)
        if self.tracer is not None:
            keys = msg.keys if isinstance(msg.keys, str) or msg.keys is None else " ".join(msg.keys)
            bean = TraceBean(
                msg_id=result.msg_id, topic=msg.topic, tags=msg.tags, keys=keys, store_host=addr
            )
            self._trace_end(bean, state, from_check=False)
        request.serialize_type = await instance.serialize_type(addr)
        try:
            await instance.remoting.invoke_oneway(addr, request, END_TRANSACTION_TIMEOUT_S)
        except Exception as exc:  # the check-back covers a lost END_TRANSACTION
            log.warning("end_transaction_failed group=%s broker=%s error=%r", self.group, addr, exc)

    def _trace_end(
        self,
        bean: TraceBean,
        state: LocalTransactionState,
        *,
        from_check: bool,
        region: str | None = None,
    ) -> None:
        """EndTransactionTraceHookImpl: the EndTransaction record of an END_TRANSACTION sent,
        after the local transaction or a check-back (``bean`` names the message, its
        transaction and the broker); its message type is always Commit."""
        tracer = self.tracer
        if tracer is None:
            return
        bean.msg_type = MessageType.TRANS_COMMIT
        bean.transaction_id = bean.transaction_id or bean.msg_id
        bean.transaction_state = _JAVA_STATE[state]
        bean.from_transaction_check = from_check
        ctx = TraceContext(
            TraceType.END_TRANSACTION, self.group, [bean], region_id=region or DEFAULT_REGION
        )
        tracer.append(ctx)

    # ------------------------------------------------------------------ check-back

    def check_transaction_state(
        self, conn: Connection, header: CheckTransactionStateRequestHeader, msg: MessageView
    ) -> None:
        """The broker asks about ``msg`` (ClientInstance routes CHECK_TRANSACTION_STATE here)."""
        self._checks.spawn(self._check(conn, header, msg), name="transaction-check")

    async def _check(
        self, conn: Connection, header: CheckTransactionStateRequestHeader, msg: MessageView
    ) -> None:
        remark: str | None = None
        try:
            state = LocalTransactionState(await _answer(self.checker(msg)))
        except Exception as exc:
            log.warning(
                "transaction_checker_failed group=%s msg_id=%s error=%r",
                self.group,
                msg.msg_id,
                exc,
            )
            state, remark = (
                LocalTransactionState.UNKNOWN,
                f"checkLocalTransactionState exception: {exc!r}",
            )
        end = EndTransactionRequestHeader(
            producer_group=self.group,
            tran_state_table_offset=header.tran_state_table_offset,
            commit_log_offset=header.commit_log_offset,
            commit_or_rollback=int(state),
            from_transaction_check=True,
            msg_id=msg.properties.get("UNIQ_KEY") or msg.msg_id,
            transaction_id=header.transaction_id,
        )
        request = RemotingCommand.request(RequestCode.END_TRANSACTION, end.to_ext_fields())
        request.remark = remark[:512] if remark else None
        log.info(
            "transaction_checked group=%s msg_id=%s state=%s", self.group, msg.msg_id, state.name
        )
        if self.tracer is not None:
            bean = TraceBean(
                msg_id=end.msg_id or msg.msg_id,
                topic=msg.topic,
                tags=msg.tags,
                keys=msg.properties.get("KEYS"),
                store_host=conn.peer,
                transaction_id=header.transaction_id,
            )
            self._trace_end(bean, state, from_check=True, region=msg.properties.get("MSG_REGION"))
        try:
            # On the connection the check came on: Java answers the channel's broker too.
            conn.invoke_oneway(request)
        except Exception as exc:
            log.warning(
                "end_transaction_failed group=%s broker=%s error=%r", self.group, conn.peer, exc
            )

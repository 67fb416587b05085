"""END_TRANSACTION (37): a producer's commit or rollback of a half message.

RocketMQ counterpart: ``EndTransactionProcessor`` (4.9). The half record is found by its
commit-log offset and must belong to the request's producer group, queue offset and offset;
a commit stores it again for REAL_TOPIC / REAL_QID with the COMMIT sysFlag type and its
offset as the prepared-transaction offset (the property string unchanged, protocol.md §13.5),
then writes the op record; a rollback writes only the op record. Java and C++ clients send
this oneway; a request sent normally gets the answer. commitOrRollback 0 (unknown) is
ignored without an answer, as RocketMQ does: the check-back service will ask again.
"""

from __future__ import annotations

from typing import Protocol

import structlog

from broker.config import BrokerRole
from broker.facets import HasConfig, StoreAccess
from broker.processors.send import STATUS_CODES, delay_level_of
from broker.topics import TRANS_HALF_TOPIC
from codec import (
    PROPERTY_PRODUCER_GROUP,
    PROPERTY_REAL_QUEUE_ID,
    PROPERTY_REAL_TOPIC,
    TRANSACTION_COMMIT_TYPE,
    TRANSACTION_NOT_TYPE,
    TRANSACTION_ROLLBACK_TYPE,
    TRANSACTION_TYPE_MASK,
    MessageInner,
    RecordError,
    RecordInfo,
    decode_properties,
    inner_from_record,
)
from remoting.codes import ResponseCode
from remoting.command import RemotingCommand, response_to
from remoting.connection import Connection
from remoting.headers import EndTransactionRequestHeader

log = structlog.get_logger(__name__)


class HalfOps(Protocol):
    """The transaction service's op queue: a half message's end is written there."""

    async def write_op(self, half: RecordInfo) -> bool: ...


class EndTransactionBroker(HasConfig, StoreAccess, Protocol):
    """What ending a transaction touches: the role (a slave refuses), the store holding the
    half message, and the transaction service's op queue."""

    @property
    def transactions(self) -> HalfOps: ...


class EndTransactionProcessor:
    def __init__(self, broker: EndTransactionBroker) -> None:
        self.broker = broker

    async def handle(self, conn: Connection, request: RemotingCommand) -> RemotingCommand | None:
        """Check the role and the request, find the half message, then roll it back or
        commit it; each step returns the refusal it finds."""
        if self.broker.config.broker_role is BrokerRole.SLAVE:
            return response_to(
                request,
                ResponseCode.SLAVE_NOT_AVAILABLE,
                "Can't process transaction on a slave broker",
            )
        h = EndTransactionRequestHeader.from_ext_fields(request.ext_fields)
        kind = h.commit_or_rollback
        if kind == TRANSACTION_NOT_TYPE:
            log.info(
                "transaction_unknown",
                producer_group=h.producer_group,
                msg_id=h.msg_id,
                from_check=h.from_transaction_check,
                peer=conn.peer,
            )
            # Java clients send this oneway (nothing goes back then); Java's broker leaves a
            # two-way one unanswered, which would keep its client waiting for the timeout
            # and hold its place among the connection's requests in flight until then.
            return response_to(request, ResponseCode.SUCCESS)
        if kind not in (TRANSACTION_COMMIT_TYPE, TRANSACTION_ROLLBACK_TYPE):
            return response_to(
                request,
                ResponseCode.SYSTEM_ERROR,
                f"commitOrRollback {kind} is none of 0 (unknown), 8 (commit), 12 (rollback)",
            )
        half = self._find_half(request, h)
        if isinstance(half, RemotingCommand):
            return half  # refused
        info, inner, props = half
        if kind == TRANSACTION_ROLLBACK_TYPE:
            await self.broker.transactions.write_op(info)
            log.info(
                "transaction_rolled_back",
                producer_group=h.producer_group,
                msg_id=h.msg_id,
                from_check=h.from_transaction_check,
            )
            return response_to(request, ResponseCode.SUCCESS)
        return await self._commit(request, h, info, inner, props)

    def _find_half(
        self, request: RemotingCommand, h: EndTransactionRequestHeader
    ) -> tuple[RecordInfo, MessageInner, dict[str, str]] | RemotingCommand:
        """The half message at the request's commit-log offset (its record, a copy to store
        and its properties) when it is the producer group's at the request's offsets, else
        the refusal."""
        record = self.broker.store.look_message_by_offset(h.commit_log_offset)
        if record is None:
            return response_to(
                request, ResponseCode.SYSTEM_ERROR, "Find prepared transaction message failed"
            )
        try:
            info, inner = inner_from_record(record)
        except RecordError:
            return response_to(
                request, ResponseCode.SYSTEM_ERROR, "Find prepared transaction message failed"
            )
        if info.topic != TRANS_HALF_TOPIC:
            return response_to(
                request,
                ResponseCode.SYSTEM_ERROR,
                f"the message at commitLogOffset {h.commit_log_offset} is not a half message",
            )
        props = decode_properties(info.properties)
        if props.get(PROPERTY_PRODUCER_GROUP) != h.producer_group:
            return response_to(request, ResponseCode.SYSTEM_ERROR, "The producer group wrong")
        if info.queue_offset != h.tran_state_table_offset:
            return response_to(
                request, ResponseCode.SYSTEM_ERROR, "The transaction state table offset wrong"
            )
        if info.commit_log_offset != h.commit_log_offset:
            return response_to(request, ResponseCode.SYSTEM_ERROR, "The commit log offset wrong")
        return info, inner, props

    async def _commit(
        self,
        request: RemotingCommand,
        h: EndTransactionRequestHeader,
        info: RecordInfo,
        inner: MessageInner,
        props: dict[str, str],
    ) -> RemotingCommand:
        """Store the half message again for its real topic and queue, with the COMMIT type
        and its offset as the prepared-transaction offset; then write the op record."""
        real_topic = props.get(PROPERTY_REAL_TOPIC)
        real_qid = props.get(PROPERTY_REAL_QUEUE_ID, "")
        if not real_topic or not real_qid.isdigit():
            return response_to(
                request,
                ResponseCode.SYSTEM_ERROR,
                "the half message names no REAL_TOPIC / REAL_QID",
            )
        inner.topic = real_topic
        inner.queue_id = int(real_qid)
        inner.sys_flag = (info.sys_flag & ~TRANSACTION_TYPE_MASK) | TRANSACTION_COMMIT_TYPE
        inner.prepared_transaction_offset = h.commit_log_offset
        inner.store_host = self.broker.store_host
        inner.wait_store_msg_ok = False
        inner.delay_level = delay_level_of(props)
        put = await self.broker.store.put_message(inner)
        code, remark = STATUS_CODES[put.status]
        if put.status.stored:
            await self.broker.transactions.write_op(info)
            log.info(
                "transaction_committed",
                producer_group=h.producer_group,
                topic=real_topic,
                msg_id=h.msg_id,
                from_check=h.from_transaction_check,
            )
        else:
            log.warning(
                "transaction_commit_refused",
                producer_group=h.producer_group,
                topic=real_topic,
                status=put.status.name,
            )
        return response_to(request, code, remark or (put.remark or None))

"""The receipt handle a 5.x client acks or changes a received message with.

RocketMQ counterpart: ``common/consumer/ReceiptHandle`` — the pop's extraInfo
(``ckQueueOffset popTime invisibleTime reviveQid topicType brokerName queueId offset``,
``remoting.receipt.Receipt``) with the message's commit-log offset appended, space-separated.
The client passes it back unchanged; ChangeInvisibleDuration answers with a new one.
"""

from __future__ import annotations

from dataclasses import dataclass

from broker.proxy.apis import definition_pb2 as pb
from broker.proxy.status import ProxyError
from remoting.receipt import Receipt


@dataclass(frozen=True, slots=True)
class Handle:
    receipt: Receipt  # with queue_offset set: the message's own offset
    commit_log_offset: int

    @property
    def queue_offset(self) -> int:
        assert self.receipt.queue_offset is not None
        return self.receipt.queue_offset

    def __str__(self) -> str:
        return f"{self.receipt} {self.commit_log_offset}"


def parse_handle(text: str) -> Handle:
    """Raises:
    ProxyError: INVALID_RECEIPT_HANDLE, naming what is wrong."""
    head, _, tail = text.strip().rpartition(" ")
    try:
        receipt = Receipt.parse(head)
        commit_log_offset = int(tail)
    except ValueError as exc:
        raise ProxyError(pb.INVALID_RECEIPT_HANDLE, f"receipt handle {text!r}: {exc}") from None
    if receipt.queue_offset is None:
        raise ProxyError(pb.INVALID_RECEIPT_HANDLE, f"receipt handle {text!r} names no offset")
    return Handle(receipt, commit_log_offset)

"""Pop receipts: the ``extraInfo`` strings of RocketMQ 5's POP / ACK / CHANGE_INVISIBLETIME.

RocketMQ counterpart: ``ExtraInfoUtil`` and ``KeyBuilder.buildPopRetryTopicV1`` (5.x). A
receipt is space-separated: ``ckQueueOffset popTime invisibleTime reviveQid topicType
brokerName queueId [queueOffset]``, topicType 0 for the topic itself, 1 for the group's pop
retry topic ``%RETRY%<group>_<topic>``, 2 for the v2 form ``%RETRY%<group>+<topic>``. The pop
response's startOffsetInfo and msgOffsetInfo are ``;``-joined ``topicType queueId value``
triples (msgOffsetInfo's value a ``,``-joined offset list). Shared by the broker and the SDK.
"""

from __future__ import annotations

from dataclasses import dataclass

RETRY_PREFIX = "%RETRY%"
NORMAL, RETRY_V1, RETRY_V2 = "0", "1", "2"


def pop_retry_topic(group: str, topic: str) -> str:
    """``KeyBuilder.buildPopRetryTopicV1``: where a pop group's un-acked messages come back."""
    return f"{RETRY_PREFIX}{group}_{topic}"


def topic_type(topic: str) -> str:
    if topic.startswith(RETRY_PREFIX):
        return RETRY_V2 if "+" in topic else RETRY_V1
    return NORMAL


def real_topic(kind: str, topic: str, group: str) -> str:
    """The topic a receipt's message is stored in, from the topic the client names."""
    if kind == RETRY_V1:
        return pop_retry_topic(group, topic)
    if kind == RETRY_V2:
        return f"{RETRY_PREFIX}{group}+{topic}"
    if kind == NORMAL:
        return topic
    raise ValueError(f"topic type {kind!r} is none of 0, 1, 2")


@dataclass(frozen=True, slots=True)
class Receipt:
    ck_queue_offset: int  # where the popped batch began in its queue: names the checkpoint
    pop_time: int
    invisible_time: int
    revive_qid: int
    kind: str  # topic type
    broker_name: str
    queue_id: int
    queue_offset: int | None = None  # the message's own offset (5.x clients add it)

    @classmethod
    def parse(cls, text: str) -> Receipt:
        """Raises ValueError naming what is wrong."""
        parts = text.split(" ")
        if len(parts) < 7:
            raise ValueError(f"extraInfo {text!r} has {len(parts)} fields, 7 or 8 expected")
        try:
            receipt = cls(
                ck_queue_offset=int(parts[0]),
                pop_time=int(parts[1]),
                invisible_time=int(parts[2]),
                revive_qid=int(parts[3]),
                kind=parts[4],
                broker_name=parts[5],
                queue_id=int(parts[6]),
                queue_offset=int(parts[7]) if len(parts) > 7 else None,
            )
        except ValueError:
            raise ValueError(f"extraInfo {text!r} has a field that is not a number") from None
        if receipt.kind not in (NORMAL, RETRY_V1, RETRY_V2):
            raise ValueError(f"extraInfo {text!r}: topic type {receipt.kind!r} is none of 0, 1, 2")
        return receipt

    def __str__(self) -> str:
        fields = [
            self.ck_queue_offset,
            self.pop_time,
            self.invisible_time,
            self.revive_qid,
            self.kind,
            self.broker_name,
            self.queue_id,
        ]
        if self.queue_offset is not None:
            fields.append(self.queue_offset)
        return " ".join(str(f) for f in fields)


def popped_receipt(
    starts: dict[tuple[str, int], str],
    *,
    pop_time: int,
    invisible_time: int,
    revive_qid: int,
    broker_name: str,
    topic: str,
    queue_id: int,
    queue_offset: int,
) -> Receipt:
    """The receipt of one popped message (``processPopResponse`` / the proxy's
    ``createHandle``): its checkpoint starts where its pop read that queue (``starts``, the
    answer's parsed startOffsetInfo), the answer's pop time, invisible time and revive queue,
    the message's own queue and offset."""
    kind = topic_type(topic)
    return Receipt(
        ck_queue_offset=int(starts.get((kind, queue_id), queue_offset)),
        pop_time=pop_time,
        invisible_time=invisible_time,
        revive_qid=revive_qid,
        kind=kind,
        broker_name=broker_name,
        queue_id=queue_id,
        queue_offset=queue_offset,
    )


def join_offset_info(entries: list[tuple[str, int, str]]) -> str:
    """``buildStartOffsetInfo`` / ``buildMsgOffsetInfo``: (topic, queueId, value) triples."""
    return ";".join(f"{topic_type(t)} {q} {v}" for t, q, v in entries)


def parse_offset_info(text: str | None) -> dict[tuple[str, int], str]:
    """``parseStartOffsetInfo`` / ``parseMsgOffsetInfo``: (topic type, queueId) → value."""
    out: dict[tuple[str, int], str] = {}
    if not text:
        return out
    for one in text.split(";"):
        parts = one.split(" ")
        if len(parts) != 3:
            raise ValueError(f"offset info {text!r} is not 'type queueId value' triples")
        out[(parts[0], int(parts[1]))] = parts[2]
    return out

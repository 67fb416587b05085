"""Messages as the broker hands them to the store.

RocketMQ counterpart: ``MessageExtBrokerInner`` (here ``MessageInner``), ``MessageExtBatch``
(``MessageBatch``) and ``MessageDecoder.decode`` of a stored record back into one.
"""

from __future__ import annotations

from dataclasses import dataclass

from codec.record import Host, RecordInfo, decode_record, read_int
from codec.sysflag import BORNHOST_V6_FLAG

# Delayed messages wait here, with their deliver time as the tags code
# (TopicValidator.RMQ_SYS_SCHEDULE_TOPIC).
SCHEDULE_TOPIC = "SCHEDULE_TOPIC_XXXX"

_ANY_HOST: Host = (b"\x00\x00\x00\x00", 0)


@dataclass(slots=True)
class MessageInner:
    """A message as the broker hands it to the store (RocketMQ ``MessageExtBrokerInner``).

    ``properties`` is the encoded properties string exactly as it will be stored.
    """

    topic: str
    queue_id: int
    body: bytes | memoryview
    properties: str = ""
    flag: int = 0
    sys_flag: int = 0
    born_timestamp: int = 0
    born_host: Host = _ANY_HOST
    store_host: Host = _ANY_HOST
    reconsume_times: int = 0
    prepared_transaction_offset: int = 0
    wait_store_msg_ok: bool = True  # the WAIT property: sync flush waits only when true
    # The DELAY level as the broker read it (Java's in-memory delayTimeLevel). > 0 parks the
    # message in SCHEDULE_TOPIC_XXXX; the schedule service re-stores it with 0 even though
    # the stored DELAY property stays, as RocketMQ does.
    delay_level: int = 0


@dataclass(slots=True)
class MessageBatch:
    """A batch as sent (RocketMQ ``MessageExtBatch``): ``body`` is the batch encoding, one
    entry per message (TOTALSIZE, MAGIC, BODYCRC, FLAG, BODYLEN, BODY, PROPLEN, PROPERTIES);
    ``properties`` are batch-level and appended to every message's own."""

    topic: str
    queue_id: int
    body: bytes | memoryview
    properties: str = ""
    sys_flag: int = 0
    born_timestamp: int = 0
    born_host: Host = _ANY_HOST
    store_host: Host = _ANY_HOST
    wait_store_msg_ok: bool = True


def inner_from_record(record: bytes) -> tuple[RecordInfo, MessageInner]:
    """A stored record (as ``look_message_by_offset`` returns it) back as a message to store
    again: same body, flag, properties string, sysFlag, born time and host, reconsume times.
    The caller sets topic, queue, store host and what else changes.

    Raises:
        RecordError: the bytes are not one record.
    """
    info = decode_record(record, 0)
    born_len = 16 if info.sys_flag & BORNHOST_V6_FLAG else 4
    born_host: Host = (record[48 : 48 + born_len], read_int(record, 48 + born_len))
    body = record[info.body_offset : info.body_offset + info.body_length]
    inner = MessageInner(
        topic=info.topic,
        queue_id=info.queue_id,
        body=body,
        properties=info.properties,
        flag=info.flag,
        sys_flag=info.sys_flag,
        born_timestamp=info.born_timestamp,
        born_host=born_host,
        reconsume_times=info.reconsume_times,
        prepared_transaction_offset=info.prepared_transaction_offset,
    )
    return info, inner

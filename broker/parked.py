"""Putting a parked message back where it was sent: the delay-level schedule and the timer
wheel both hold messages in a system topic with their target in REAL_TOPIC / REAL_QID.

RocketMQ counterpart: ``ScheduleMessageService.messageTimeup`` and the 5.x
``TimerMessageStore.convertMessage`` — read the parked record, store it again for its real
topic and queue, without waiting for a flush.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import TYPE_CHECKING

import structlog

from store.message_codec import (
    PROPERTY_REAL_QUEUE_ID,
    PROPERTY_REAL_TOPIC,
    RecordError,
    decode_properties,
    encode_properties,
    inner_from_record,
)

if TYPE_CHECKING:
    from broker.broker import Broker

log = structlog.get_logger(__name__)


async def put_back(
    broker: Broker, commit_log_offset: int, *, what: str, strip: Iterable[str] | None = None
) -> tuple[bool, str | None]:
    """Store the parked record at ``commit_log_offset`` again for its REAL_TOPIC / REAL_QID.

    Args:
        what: names the log events (``{what}_message_missing``, ``…_unreadable``,
            ``…_without_target``, ``{what}_delivery_refused``).
        strip: properties to drop from the stored copy (REAL_TOPIC and REAL_QID go too);
            None keeps the property string unchanged, as 4.9's schedule service does.

    Returns:
        (done, topic): done is False only when the store refused (try again later); a
        message gone or unreadable is done, with nothing to deliver.
    """
    store = broker.store
    record = store.look_message_by_offset(commit_log_offset)
    if record is None:
        log.warning(f"{what}_message_missing", offset=commit_log_offset)  # aged out
        return True, None
    try:
        info, inner = inner_from_record(record)
    except RecordError as exc:
        log.warning(f"{what}_message_unreadable", offset=commit_log_offset, error=str(exc))
        return True, None
    props = decode_properties(info.properties)
    real_topic = props.get(PROPERTY_REAL_TOPIC)
    real_qid = props.get(PROPERTY_REAL_QUEUE_ID, "")
    if not real_topic or not real_qid.isdigit():
        log.error(f"{what}_message_without_target", offset=commit_log_offset)
        return True, None
    if strip is not None:
        for key in (PROPERTY_REAL_TOPIC, PROPERTY_REAL_QUEUE_ID, *strip):
            props.pop(key, None)
        inner.properties = encode_properties(props)
    inner.topic = real_topic
    inner.queue_id = int(real_qid)
    inner.store_host = broker.store_host
    inner.wait_store_msg_ok = False
    inner.delay_level = 0
    result = await store.put_message(inner)
    if not result.status.stored:
        log.warning(
            f"{what}_delivery_refused",
            topic=real_topic,
            status=result.status.name,
            remark=result.remark,
        )
        return False, real_topic
    return True, real_topic

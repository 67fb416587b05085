"""Putting a parked message back where it was sent: the delay-level schedule and the timer
wheel both hold messages in a system topic with their target in REAL_TOPIC / REAL_QID.

RocketMQ counterpart: ``ScheduleMessageService.messageTimeup`` and the 5.x
``TimerMessageStore.convertMessage`` — read the parked record, store it again for its real
topic and queue, without waiting for a flush.

A put the store refuses for good (``refused_for_good``: a topic it does not take, a body over
``maxMessageSize``, properties over 32 KiB) *sets the message aside*: it is logged as
``{what}_message_set_aside`` and left where it is parked, readable by its msgId, so that it
does not hold up every message behind it (RocketMQ 4.9 tries it again every 100 ms, forever).
Any other refusal (a full disk, a store shutting down) is tried again later.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from enum import Enum

import structlog

from broker.facets import StoreAccess
from codec import (
    PROPERTY_REAL_QUEUE_ID,
    PROPERTY_REAL_TOPIC,
    Host,
    MessageInner,
    RecordError,
    decode_properties,
    encode_properties,
    inner_from_record,
    offset_msg_id,
)
from store.message_store import MessageStore
from store.results import PutMessageStatus

log = structlog.get_logger(__name__)

# Refusals about the message itself: putting it again meets them again. The others (disk
# full, store not running, dispatch failed, a failed write or segment) pass with time.
_REFUSED_FOR_GOOD = frozenset(
    {PutMessageStatus.MESSAGE_ILLEGAL, PutMessageStatus.PROPERTIES_SIZE_EXCEEDED}
)


def refused_for_good(status: PutMessageStatus) -> bool:
    """Whether a put refused with ``status`` would be refused again however often it is
    tried, so that the loop which made it sets the message aside instead of waiting on it."""
    return status in _REFUSED_FOR_GOOD


class Delivery(Enum):
    """What ``put_back`` did with a parked message."""

    DELIVERED = "delivered"
    NOTHING = "nothing"  # gone (aged out) or unreadable: there is nothing to deliver
    SET_ASIDE = "set_aside"  # can never be delivered: left where it is parked
    REFUSED = "refused"  # the store refused for now: try again later

    @property
    def done(self) -> bool:
        """The loop moves past the message."""
        return self is not Delivery.REFUSED


async def put_back(
    broker: StoreAccess,
    commit_log_offset: int,
    *,
    what: str,
    strip: Iterable[str] | None = None,
    where: Mapping[str, int] | None = None,
) -> tuple[Delivery, str | None]:
    """Store the parked record at ``commit_log_offset`` again for its REAL_TOPIC / REAL_QID.

    Args:
        what: names the log events (``{what}_message_missing``, ``…_unreadable``,
            ``…_set_aside``, ``{what}_delivery_refused``).
        strip: properties to drop from the stored copy (REAL_TOPIC and REAL_QID go too);
            None keeps the property string unchanged, as 4.9's schedule service does.
        where: more fields for the set-aside line (the delay level, the queue offset).

    Returns:
        (delivery, topic): what was done, and the real topic when the record names one.
    """
    parked = _read_parked(broker.store, commit_log_offset, what)
    if parked is None:
        return Delivery.NOTHING, None
    inner, props = parked
    real_topic = props.get(PROPERTY_REAL_TOPIC)
    real_qid = props.get(PROPERTY_REAL_QUEUE_ID, "")
    if not real_topic or not real_qid.isdigit():
        status, reason = "NO_TARGET", "no REAL_TOPIC / REAL_QID to deliver it to"
    else:
        _retarget(inner, props, real_topic, int(real_qid), strip=strip, host=broker.store_host)
        result = await broker.store.put_message(inner)
        if result.status.stored:
            return Delivery.DELIVERED, real_topic
        if not refused_for_good(result.status):
            log.warning(
                f"{what}_delivery_refused",
                topic=real_topic,
                status=result.status.name,
                remark=result.remark,
            )
            return Delivery.REFUSED, real_topic
        status, reason = result.status.name, result.remark
    log.error(
        f"{what}_message_set_aside",
        topic=real_topic,
        msg_id=offset_msg_id(broker.store_host, commit_log_offset),
        uniq_key=props.get("UNIQ_KEY"),
        commit_log_offset=commit_log_offset,
        status=status,
        reason=reason,
        **(where or {}),
    )
    return Delivery.SET_ASIDE, real_topic


def _read_parked(
    store: MessageStore, commit_log_offset: int, what: str
) -> tuple[MessageInner, dict[str, str]] | None:
    """The parked record as a message to store again, and its properties; None (logged)
    when it is gone or unreadable."""
    record = store.look_message_by_offset(commit_log_offset)
    if record is None:
        log.warning(f"{what}_message_missing", offset=commit_log_offset)  # aged out
        return None
    try:
        info, inner = inner_from_record(record)
    except RecordError as exc:
        log.warning(f"{what}_message_unreadable", offset=commit_log_offset, error=str(exc))
        return None
    return inner, decode_properties(info.properties)


def _retarget(
    inner: MessageInner,
    props: dict[str, str],
    topic: str,
    queue_id: int,
    *,
    strip: Iterable[str] | None,
    host: Host,
) -> None:
    """Point the parked copy at its real topic and queue, stored without waiting."""
    if strip is not None:
        for key in (PROPERTY_REAL_TOPIC, PROPERTY_REAL_QUEUE_ID, *strip):
            props.pop(key, None)
        inner.properties = encode_properties(props)
    inner.topic = topic
    inner.queue_id = queue_id
    inner.store_host = host
    inner.wait_store_msg_ok = False
    inner.delay_level = 0

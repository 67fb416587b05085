"""The console's message pages against a real broker: search by key, id and time, the
detail's body views and consume status, resend to a group, and dead letters."""

from __future__ import annotations

import html
import socket
import time
from datetime import datetime

import pytest

from broker.broker import Broker
from broker.namesrv.server import NameServer
from client import ConsumeFromWhere, ConsumeResult, Message, MessageView, Producer, PushConsumer
from client.dashboard.server import ConsoleServer
from tests.client.conftest import Received, create_topic
from tests.dashboard.conftest import Web
from tests.support import wait_dispatched, wait_until

TOPIC = "ConsoleMessages"
FIRST = ConsumeFromWhere.CONSUME_FROM_FIRST_OFFSET


async def _send(namesrv: NameServer, *msgs: Message) -> list[str]:
    async with Producer("pg-console-msgs", namesrv.address) as producer:
        return [(await producer.send(m)).msg_id for m in msgs]


async def _sent(namesrv: NameServer, broker: Broker, *msgs: Message) -> list[str]:
    await create_topic(broker, TOPIC, queues=2)
    ids = await _send(namesrv, *msgs)
    await wait_dispatched(broker)
    return ids


async def test_a_message_found_by_key_shows_its_body(
    web: Web, namesrv: NameServer, broker: Broker
) -> None:
    (msg_id,) = await _sent(namesrv, broker, Message(TOPIC, b"hello by key", keys=["order-7"]))
    status, page = await web.get("/messages", by="key", topic=TOPIC, key="order-7")
    assert status == 200
    assert msg_id in page and "1 message" in page
    status, page = await web.get("/messages/view", topic=TOPIC, id=msg_id)
    assert status == 200
    assert '<pre class="body" id="message-body">hello by key</pre>' in page


async def test_either_kind_of_id_opens_the_message(
    web: Web, namesrv: NameServer, broker: Broker
) -> None:
    (msg_id,) = await _sent(namesrv, broker, Message(TOPIC, b"by id", tags="T1"))
    async with web.session.get(
        web.base + "/messages",
        params={"by": "id", "topic": TOPIC, "id": msg_id},
        allow_redirects=False,
    ) as r:
        assert r.status == 303
        assert r.headers["Location"] == f"/messages/view?topic={TOPIC}&id={msg_id}"
    status, page = await web.get("/messages/view", topic=TOPIC, id=msg_id)
    offset_id = page.split("<dt>Offset id</dt><dd>", 1)[1].split("<", 1)[0]
    assert len(offset_id) == 32 and offset_id != msg_id
    status, by_offset = await web.get("/messages/view", topic=TOPIC, id=offset_id)
    assert status == 200 and f'<h1>Message <span class="mono">{msg_id}</span></h1>' in by_offset


@pytest.mark.parametrize(
    ("query", "said"),
    [
        ({"topic": TOPIC, "id": "xyz"}, "a RocketMQ message id is 32 hex digits"),
        ({"topic": TOPIC, "id": "0" * 32}, f"no message {'0' * 32} in topic {TOPIC}"),
        ({"topic": "bad topic!", "id": "0" * 32}, "topic 'bad topic!'"),
        ({"topic": "", "id": "0" * 32}, "name a topic"),
    ],
)
async def test_a_bad_or_unknown_id_says_why(
    web: Web, namesrv: NameServer, broker: Broker, query: dict[str, str], said: str
) -> None:
    await _sent(namesrv, broker, Message(TOPIC, b"x"))
    status, page = await web.get("/messages/view", **query)
    assert status == 422, page
    assert said in html.unescape(page)
    assert "Traceback" not in page


async def test_a_time_search_finds_what_was_stored_in_the_range(
    web: Web, namesrv: NameServer, broker: Broker
) -> None:
    before = int(time.time() * 1000) - 1000
    ids = await _sent(namesrv, broker, *(Message(TOPIC, f"t{n}".encode()) for n in range(5)))
    after = int(time.time() * 1000) + 1000
    status, page = await web.get(
        "/messages", by="time", topic=TOPIC, begin=str(before), end=str(after)
    )
    assert status == 200
    assert all(i in page for i in ids) and "5 messages" in page
    status, page = await web.get(
        "/messages", by="time", topic=TOPIC, begin=str(after), end=str(after + 60_000)
    )
    assert "0 messages" in page and not any(i in page for i in ids)
    local = datetime.fromtimestamp(before / 1000).strftime("%Y-%m-%dT%H:%M")
    status, page = await web.get("/messages", by="time", topic=TOPIC, begin=local)
    assert status == 200 and all(i in page for i in ids)


@pytest.mark.parametrize(
    ("query", "said"),
    [
        ({"begin": "2000", "end": "1000"}, "the end of the time range is before its beginning"),
        ({"begin": "yesterday"}, "'yesterday' is not a time"),
        ({"by": "colour"}, "by time, key or id"),
    ],
)
async def test_a_bad_search_says_why(
    web: Web, namesrv: NameServer, broker: Broker, query: dict[str, str], said: str
) -> None:
    await _sent(namesrv, broker, Message(TOPIC, b"x"))
    status, page = await web.get("/messages", **{"by": "time", "topic": TOPIC, **query})
    assert status == 422
    assert said in html.unescape(page)


async def test_the_body_is_shown_as_text_hex_or_json_and_always_escaped(
    web: Web, namesrv: NameServer, broker: Broker
) -> None:
    json_id, binary_id, markup_id = await _sent(
        namesrv,
        broker,
        Message(TOPIC, b'{"order": 7, "items": ["a"]}'),
        Message(TOPIC, bytes(range(256))),
        Message(TOPIC, b"<script>alert(1)</script>"),
    )
    _, page = await web.get("/messages/view", topic=TOPIC, id=json_id, **{"as": "json"})
    assert '{\n  "order": 7,\n  "items": [\n    "a"\n  ]\n}' in html.unescape(page)
    _, page = await web.get("/messages/view", topic=TOPIC, id=binary_id, **{"as": "hex"})
    assert "00 01 02 03 04 05 06 07 08 09 0a 0b 0c 0d 0e 0f 10 11" in page
    _, page = await web.get("/messages/view", topic=TOPIC, id=binary_id, **{"as": "json"})
    assert "The body is not JSON" in page
    _, page = await web.get("/messages/view", topic=TOPIC, id=markup_id)
    assert "<script>alert(1)" not in page
    assert "&lt;script&gt;alert(1)&lt;/script&gt;" in page
    status, _ = await web.get("/messages/view", topic=TOPIC, id=markup_id, **{"as": "xml"})
    assert status == 422


async def test_the_detail_says_which_group_consumed_it(
    web: Web, namesrv: NameServer, broker: Broker
) -> None:
    (msg_id,) = await _sent(namesrv, broker, Message(TOPIC, b"tracked"))
    received = Received()
    consumer = PushConsumer("cg-tracked", namesrv.address, consume_from_where=FIRST)
    consumer.subscribe(TOPIC)(received.add)
    async with consumer:
        await received.wait_for(1, timeout_s=10)
        await consumer.persist_offsets()
        _, page = await web.get("/messages/view", topic=TOPIC, id=msg_id)
    row = page.split('<table id="tracks">', 1)[1].split("</table>", 1)[0]
    assert "cg-tracked" in row and "CONSUMED" in row


async def _dead_letter(namesrv: NameServer, broker: Broker, group: str) -> str:
    """A message that ``group`` failed to consume until it went to %DLQ%<group>."""
    (msg_id,) = await _sent(namesrv, broker, Message(TOPIC, b"poison", tags="TagD", keys=["d-1"]))
    failing = PushConsumer(group, namesrv.address, consume_from_where=FIRST, max_reconsume_times=1)
    tries = Received()

    def fail(m: MessageView) -> ConsumeResult:
        tries.add(m)
        return ConsumeResult.RECONSUME_LATER

    failing.subscribe(TOPIC)(fail)
    dlq = f"%DLQ%{group}"
    async with failing:
        await wait_until(
            lambda: broker.store.get_max_offset(dlq, 0) >= 1,
            "the message in the dead-letter queue",
            20,
        )
    return msg_id


async def test_a_dead_letter_resent_reaches_its_group_under_its_first_topic(
    web: Web, namesrv: NameServer, broker: Broker, console: ConsoleServer
) -> None:
    group = "cg-dead"
    msg_id = await _dead_letter(namesrv, broker, group)
    await console.sampler.sample_once()
    status, page = await web.get("/dlq", group=group)
    assert status == 200 and msg_id in page and "1 dead letter" in page
    assert "Log in" in page and 'id="resend-form"' not in page
    status, _ = await web.post("/dlq/resend", {"group": group, "id": msg_id}, csrf=False)
    assert status == 401  # nothing changes without a login
    await web.login()
    status, page = await web.post("/dlq/resend", {"group": group, "id": msg_id})
    assert status == 200, page
    assert f"1 message(s) sent to %RETRY%{group}" in page
    healed = Received()
    consumer = PushConsumer(group, namesrv.address, consume_from_where=FIRST)
    consumer.subscribe(TOPIC)(healed.add)
    async with consumer:
        await healed.wait_for(1, timeout_s=15)
    (m,) = healed.messages
    assert (m.topic, m.body, m.tags, m.keys) == (TOPIC, b"poison", "TagD", ["d-1"])
    # as the broker's send-back set it: the first message's offset id
    original = await console.admin.query_by_unique_key(TOPIC, msg_id)
    assert original is not None
    assert m.properties["ORIGIN_MESSAGE_ID"] == original.offset_msg_id


async def test_a_group_without_dead_letters_says_so(web: Web) -> None:
    status, page = await web.get("/dlq", group="cg-never-failed")
    assert status == 200
    assert "No dead letters for cg-never-failed" in page
    status, page = await web.get("/dlq", group="cg bad")
    assert status == 422


async def test_a_message_resent_from_its_page_goes_to_that_group_only(
    web: Web, namesrv: NameServer, broker: Broker
) -> None:
    (msg_id,) = await _sent(namesrv, broker, Message(TOPIC, b"again"))
    seen = {"cg-one": Received(), "cg-two": Received()}
    consumers = []
    for group, received in seen.items():
        c = PushConsumer(group, namesrv.address, consume_from_where=FIRST)
        c.subscribe(TOPIC)(received.add)
        consumers.append(c)
    async with consumers[0], consumers[1]:
        for received in seen.values():
            await received.wait_for(1, timeout_s=10)
        await web.login()
        status, page = await web.post(
            "/messages/resend", {"topic": TOPIC, "id": msg_id, "group": "cg-one"}
        )
        assert status == 200, page
        await seen["cg-one"].wait_for(2, timeout_s=15)
    assert len(seen["cg-two"]) == 1
    assert seen["cg-one"].bodies() == [b"again", b"again"]


async def test_a_client_of_the_group_consumes_a_message_from_its_page(
    web: Web, namesrv: NameServer, broker: Broker
) -> None:
    """rocketmq-dashboard's resend: an online client's listener takes the message now
    (CONSUME_MESSAGE_DIRECTLY) and the page says how it went."""
    (msg_id,) = await _sent(namesrv, broker, Message(TOPIC, b"take it now", tags="TagC"))
    seen = Received()
    outcomes = iter([ConsumeResult.SUCCESS, ConsumeResult.RECONSUME_LATER])

    def listener(m: MessageView) -> ConsumeResult:
        seen.add(m)
        return next(outcomes)

    consumer = PushConsumer("cg-direct-page", namesrv.address)
    # A tag nothing carries: only the page's hand gives the listener the message.
    consumer.subscribe(TOPIC, "TagNobodySends")(listener)
    form = {"topic": TOPIC, "id": msg_id, "group": "cg-direct-page"}
    async with consumer:
        status, page = await web.get("/messages/view", topic=TOPIC, id=msg_id)
        assert 'id="consume-form"' not in page  # only after a login
        status, _ = await web.post("/messages/consume", form, csrf=False)
        assert status == 401 and not seen.messages
        await web.login()
        status, page = await web.get("/messages/view", topic=TOPIC, id=msg_id)
        assert 'id="consume-form"' in page and "cg-direct-page" in page
        status, page = await web.post("/messages/consume", form)
        assert status == 200, page
        assert f"consumed {msg_id}: CR_SUCCESS in" in page
        status, page = await web.post("/messages/consume", {**form, "client": ""})
        assert status == 200 and "CR_LATER" in page and "did not consume" in page
        status, page = await web.post("/messages/consume", {**form, "client": "1.2.3.4@gone"})
        assert status == 422 and "not online" in html.unescape(page)
    assert seen.bodies() == [b"take it now"] * 2
    assert seen.messages[0].topic == TOPIC
    status, page = await web.post("/messages/consume", form)  # the consumer has gone
    assert status == 422 and "no client of cg-direct-page is online" in page


async def test_an_offset_id_naming_another_address_is_never_dialled(
    web: Web, namesrv: NameServer, broker: Broker
) -> None:
    """Reading needs no login: a link must not make the console connect where it says."""
    await _sent(namesrv, broker, Message(TOPIC, b"x"))
    bait = socket.socket()
    bait.bind(("127.0.0.1", 0))
    bait.listen()
    bait.setblocking(False)
    try:
        port = bait.getsockname()[1]
        offset_id = f"7F000001{port:08X}{0:016X}"
        status, page = await web.get("/messages/view", topic=TOPIC, id=offset_id)
        assert status == 422 and f"no message {offset_id} in topic {TOPIC}" in page
        with pytest.raises(BlockingIOError):
            bait.accept()  # nobody came
    finally:
        bait.close()

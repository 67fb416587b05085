"""The console's topic pages over real HTTP against a real broker (tests/dashboard/conftest.py):
the list and its filters, creating, updating and deleting through the forms, a test message,
and one topic's queues, route and consuming groups."""

from __future__ import annotations

import asyncio
import html
import re
import urllib.parse
from collections.abc import AsyncIterator

import pytest

from broker.broker import Broker
from broker.namesrv.server import NameServer
from client import ConsumeFromWhere, Message, Producer, PushConsumer
from client.admin import ORDER_NS, Admin
from remoting.bodies import PERM_READ, PERM_WRITE
from tests.client.conftest import Received, create_topic
from tests.dashboard.conftest import Web
from tests.support import wait_dispatched

ROW = re.compile(
    r'<td class="mono"><a href="(?P<url>[^"]+)">(?P<topic>[^<]+)</a></td>\s*'
    r'<td><span class="badge (?P<kind>\w+)">'
)
NOTICE = re.compile(r'<div class="notice (\w+)"[^>]*>([^<]*)</div>')


def listed(page: str) -> dict[str, str]:
    """Topic → kind badge, from the list's rows."""
    table = page.split('<table id="topics">', 1)[1].split("</table>", 1)[0]
    return {html.unescape(m["topic"]): m["kind"] for m in ROW.finditer(table)}


def notice(page: str) -> str:
    found = NOTICE.findall(page)
    assert found, "no notice on the page"
    return html.unescape(found[0][1])


def url_of(topic: str) -> str:
    return "/topics/" + urllib.parse.quote(topic, safe="")


@pytest.fixture
async def admin(namesrv: NameServer) -> AsyncIterator[Admin]:
    async with Admin(namesrv.address, instance_name="topics-test") as a:
        yield a


async def topic_form(web: Web, topic: str, **fields: str) -> tuple[int, str]:
    data = {"topic": topic, "writeQueueNums": "4", "readQueueNums": "4", "perm": "6", **fields}
    return await web.post("/topics", data)


async def total_max_offset(admin: Admin, topic: str) -> int:
    return sum(o.max_offset for o in (await admin.topic_stats(topic)).values())


# ------------------------------------------------------------------------------ the list


async def test_the_list_shows_each_topic_with_its_kind_and_filters(
    web: Web, broker: Broker
) -> None:
    await create_topic(broker, "TopicListed", queues=3)
    await create_topic(broker, "%RETRY%cg-listed", queues=1)
    await create_topic(broker, "%DLQ%cg-listed", queues=1)
    cluster, name = broker.config.broker_cluster_name, broker.config.broker_name

    status, page = await web.get("/topics")
    assert status == 200
    rows = listed(page)
    assert rows["TopicListed"] == "normal"  # by default normal topics only, as the dashboard
    assert "%RETRY%cg-listed" not in rows and "TBW102" not in rows
    row = page.split(">TopicListed</a>", 1)[1].split("</tr>", 1)[0]
    assert re.findall(r'<td class="num">(\d+)</td>', row) == ["3", "3"]
    assert ">RW<" in row and name in row

    _, page = await web.get("/topics", kind="retry")
    assert listed(page) == {"%RETRY%cg-listed": "retry"}
    _, page = await web.get("/topics", kind="dlq")
    assert listed(page) == {"%DLQ%cg-listed": "dlq"}
    _, page = await web.get("/topics", kind="system")
    system = listed(page)
    for topic in ("TBW102", "SCHEDULE_TOPIC_XXXX", "OFFSET_MOVED_EVENT", cluster, name):
        assert system.get(topic) == "system", topic
    assert "TopicListed" not in system

    async with web.session.get(
        web.base + "/topics", params=[("kind", "normal"), ("kind", "retry"), ("q", "LISTED")]
    ) as r:
        both = listed(await r.text())
    assert both == {"TopicListed": "normal", "%RETRY%cg-listed": "retry"}
    _, page = await web.get("/topics", q="no-such-thing")
    assert listed(page) == {} and "No topic matches" in page

    status, page = await web.get("/topics", kind="bogus")
    assert status == 422 and "unknown topic kind" in page

    # a retry topic's name holds '%': the list's link reaches its page
    _, page = await web.get("/topics", kind="retry")
    (link,) = [html.unescape(m["url"]) for m in ROW.finditer(page)]
    assert link == "/topics/%25RETRY%25cg-listed"
    status, page = await web.get(link)
    assert status == 200 and "%RETRY%cg-listed" in page and "badge retry" in page


async def test_a_system_topic_is_shown_read_only(web: Web, broker: Broker) -> None:
    await web.login()
    status, page = await web.get(url_of("TBW102"))
    assert status == 200
    assert "badge system" in page and "read only" in page
    assert 'id="topic-delete"' not in page and 'id="topic-send"' not in page
    assert 'id="topic-form"' not in page
    name = broker.config.broker_name
    status, page = await web.post(url_of(name) + "/delete", {"confirm": name})
    assert status == 422 and "system topic" in page
    assert broker.topics.get(name) is not None
    status, page = await topic_form(web, "SCHEDULE_TOPIC_XXXX", broker=name)
    assert status == 422 and "system topic" in page


# ------------------------------------------------------------------- create and update


async def test_creating_and_updating_through_the_form(
    web: Web, broker: Broker, admin: Admin
) -> None:
    await web.login()
    cluster, name = broker.config.broker_cluster_name, broker.config.broker_name
    _, page = await web.get("/topics")
    assert 'id="topic-form"' in page

    status, page = await topic_form(
        web, "TopicMade", cluster=cluster, writeQueueNums="3", readQueueNums="3"
    )
    assert status == 200, page
    assert notice(page).startswith(f"Topic TopicMade created on {name}: 3 write and 3 read")
    assert "<h1>Topic <span" in page  # landed on the topic's own page
    route = await admin.topic_route("TopicMade")
    ((qd,),) = [route.queue_datas]
    assert (qd.write_queue_nums, qd.read_queue_nums, qd.perm) == (3, 3, 6)
    assert "TopicMade" in await admin.topic_list()
    _, page = await web.get("/topics")
    assert listed(page)["TopicMade"] == "normal"

    # the update form on the topic's page is prefilled with what the topic has
    _, page = await web.get(url_of("TopicMade"))
    form = page.split('id="topic-form"', 1)[1].split("</form>", 1)[0]
    assert 'name="writeQueueNums" type="number" min="1" max="1024" required value="3"' in form
    assert f'value="{name}" checked' in form and '<option value="6" selected>' in form

    status, page = await topic_form(
        web,
        "TopicMade",
        broker=name,
        writeQueueNums="5",
        readQueueNums="6",
        perm="4",
        order="true",
    )
    assert status == 200, page
    assert "Topic TopicMade updated" in notice(page) and "perm R, ordered" in notice(page)
    config = broker.topics.get("TopicMade")
    assert config is not None
    assert (config.write_queue_nums, config.read_queue_nums, config.perm) == (5, 6, PERM_READ)
    assert config.order
    assert (await admin.topic_route("TopicMade")).queue_datas[0].write_queue_nums == 5
    assert await admin.get_kv(ORDER_NS, "TopicMade") == f"{name}:5"


async def test_a_change_without_a_login_is_refused_and_changes_nothing(
    web: Web, broker: Broker, admin: Admin
) -> None:
    await create_topic(broker, "TopicKept", queues=2)
    status, page = await topic_form(web, "TopicNotMade", broker=broker.config.broker_name)
    assert status == 401 and "needs a login" in page
    assert broker.topics.get("TopicNotMade") is None
    assert "TopicNotMade" not in await admin.topic_list()
    status, _ = await web.post(url_of("TopicKept") + "/delete", {"confirm": "TopicKept"})
    assert status == 401
    status, _ = await web.post(url_of("TopicKept") + "/send", {"body": "x"})
    assert status == 401
    assert broker.topics.get("TopicKept") is not None
    assert await total_max_offset(admin, "TopicKept") == 0
    _, page = await web.get(url_of("TopicKept"))
    assert 'id="topic-delete"' not in page and "Log in</a> to update" in page


@pytest.mark.parametrize(
    ("fields", "said"),
    [
        ({"topic": "bad topic!"}, "contains illegal characters"),
        ({"topic": ""}, "the specified topic is blank"),
        ({"topic": "x" * 128}, "longer than topic max length"),
        ({"writeQueueNums": "0"}, "writeQueueNums must be a whole number from 1 to 1024, not '0'"),
        ({"readQueueNums": "abc"}, "readQueueNums must be a whole number from 1 to 1024"),
        ({"readQueueNums": "1025"}, "from 1 to 1024"),
        ({"writeQueueNums": "-3"}, "from 1 to 1024"),
        ({"perm": "3"}, "perm must be W (2), R (4) or RW (6)"),
        ({"broker": ""}, "choose a cluster or at least one broker"),
        ({"broker": "", "cluster": "NoSuchCluster"}, "no cluster 'NoSuchCluster'"),
        ({"broker": "no-such-broker"}, "no broker 'no-such-broker' is registered"),
    ],
)
async def test_bad_form_input_is_explained_and_nothing_is_created(
    web: Web, broker: Broker, fields: dict[str, str], said: str
) -> None:
    await web.login()
    data = {"topic": "TopicBad", "broker": broker.config.broker_name, **fields}
    status, page = await topic_form(web, **data)
    assert status == 422, page
    assert said in html.unescape(page)
    assert broker.topics.get(data["topic"]) is None
    assert broker.topics.get("TopicBad") is None


async def test_an_unknown_or_illegal_topic_page_says_so(web: Web, broker: Broker) -> None:
    status, page = await web.get("/topics/NoSuchTopic")
    assert status == 422
    assert "no topic &#39;NoSuchTopic&#39;" in page
    status, page = await web.get(url_of("bad name!"))
    assert status == 422 and "illegal characters" in page
    await web.login()
    status, page = await web.post("/topics/NoSuchTopic/delete", {"confirm": "NoSuchTopic"})
    assert status == 422 and "no topic" in page


# ----------------------------------------------------------------------------- delete


async def test_delete_needs_the_name_typed(web: Web, broker: Broker, admin: Admin) -> None:
    await create_topic(broker, "TopicDoomed", queues=2)
    await web.login()
    status, page = await web.post(url_of("TopicDoomed") + "/delete", {"confirm": "topicdoomed"})
    assert status == 422
    assert "type the topic name to confirm" in page
    assert broker.topics.get("TopicDoomed") is not None
    assert "TopicDoomed" in await admin.topic_list()

    status, page = await web.post(url_of("TopicDoomed") + "/delete", {"confirm": "TopicDoomed"})
    assert status == 200, page
    assert notice(page) == (
        f"Topic TopicDoomed deleted from {broker.address} and from the name server"
    )
    assert broker.topics.get("TopicDoomed") is None
    assert "TopicDoomed" not in await admin.topic_list()
    assert "TopicDoomed" not in listed(page)  # back on the list
    status, page = await web.get(url_of("TopicDoomed"))
    assert status == 422 and "no topic" in page


# ------------------------------------------------------------------------ test message


async def test_a_test_message_is_sent_and_stored(web: Web, broker: Broker, admin: Admin) -> None:
    await create_topic(broker, "TopicProbe", queues=2)
    await web.login()
    _, page = await web.get(url_of("TopicProbe"))
    assert '<th class="num" id="topic-max-offset">0</th>' in page

    status, page = await web.post(
        url_of("TopicProbe") + "/send", {"tag": "TagA", "keys": "k1 k2", "body": "hello"}
    )
    assert status == 200, page
    text = notice(page)
    assert text.startswith("Sent to TopicProbe: SEND_OK on ")
    offset_id = text.rsplit("offsetMsgId ", 1)[1]
    msg_id = re.findall(r"msgId (\w+),", text)[0]
    await wait_dispatched(broker)
    seen = await admin.view_message(offset_id)
    assert (seen.topic, seen.body, seen.tags) == ("TopicProbe", b"hello", "TagA")
    assert seen.keys == ["k1", "k2"]
    assert seen.msg_id == msg_id
    assert await total_max_offset(admin, "TopicProbe") == 1
    assert '<th class="num" id="topic-max-offset">1</th>' in page  # the page after the send

    status, page = await web.post(url_of("TopicProbe") + "/send", {"body": ""})
    assert status == 422 and "needs a body" in page
    # a topic the name server does not know is not created by a test message
    status, page = await web.post("/topics/TopicNowhere/send", {"body": "x"})
    assert status == 422 and "no topic" in page
    assert broker.topics.get("TopicNowhere") is None
    status, page = await web.post("/topics/TBW102/send", {"body": "x"})
    assert status == 422 and "TBW102 is a system topic" in page
    status, page = await web.post("/topics/SCHEDULE_TOPIC_XXXX/send", {"body": "x"})
    assert status == 422 and "sending message to topic[SCHEDULE_TOPIC_XXXX] is forbidden" in page


# ------------------------------------------------------------------------- one topic


async def wait_consumed(admin: Admin, group: str, topic: str, count: int) -> None:
    """Until the group's committed offsets in ``topic`` add up to ``count`` (10 s at most)."""
    async with asyncio.timeout(10):
        while True:
            _, table = await admin.consume_stats(group, topic)
            if sum(w.consumer_offset for mq, w in table.items() if mq.topic == topic) >= count:
                return
            await asyncio.sleep(0.05)


async def test_the_topic_page_shows_queues_route_and_consuming_groups(
    web: Web, broker: Broker, namesrv: NameServer, admin: Admin
) -> None:
    topic, group = "TopicWatched", "cg-watched-topic"
    await create_topic(broker, topic, queues=2, perm=PERM_READ | PERM_WRITE)
    received = Received()
    consumer = PushConsumer(
        group, namesrv.address, consume_from_where=ConsumeFromWhere.CONSUME_FROM_FIRST_OFFSET
    )
    consumer.subscribe(topic)(received.add)
    async with Producer("pg-watched", namesrv.address) as producer:
        async with consumer:
            for n in range(6):
                await producer.send(Message(topic, f"m{n}".encode()))
            await received.wait_for(6)
            await consumer.persist_offsets()
            await wait_consumed(admin, group, topic, 6)
        for n in range(4):  # sent while nobody consumes: the group lags by 4
            await producer.send(Message(topic, f"late{n}".encode()))
    await wait_dispatched(broker)

    status, page = await web.get(url_of(topic))
    assert status == 200
    name = broker.config.broker_name
    queues = page.split('<table id="topic-queues">', 1)[1].split("</table>", 1)[0]
    assert len(re.findall(rf"<td>{name}</td>", queues)) == 2
    assert '<th class="num" id="topic-max-offset">10</th>' in queues
    assert "/metric?family=rocketmq_producer_offset&amp;topic=TopicWatched" in queues
    route = page.split('<table id="topic-brokers">', 1)[1].split("</table>", 1)[0]
    assert broker.address in route and broker.config.broker_cluster_name in route
    queue_data = page.split('<table id="topic-queue-data">', 1)[1].split("</table>", 1)[0]
    assert re.search(
        r'<td class="num">2</td>\s*<td class="num">2</td>\s*<td class="mono">RW', queue_data
    )

    consumers = page.split('<table id="topic-consumers">', 1)[1].split("</table>", 1)[0]
    row = consumers.split(f">{group}</a>", 1)[1].split("</tr>", 1)[0]
    link = html.escape(f"/metric?family=rocketmq_group_diff&group={group}&topic={topic}")
    live = f"topiclag.{group}.{topic}"
    assert f'<a class="metric" href="{link}" data-live="{live}">4</a>' in row
    assert f'data-live="group.{group}.tps"' in row
    per_queue = page.split('<table id="topic-consumer-queues"', 1)[1].split("</table>", 1)[0]
    lags = re.findall(rf'data-live="queue\.{group}\.{topic}\.{name}\.(\d)">(\d+)<', per_queue)
    assert sorted(q for q, _ in lags) == ["0", "1"]
    assert sum(int(v) for _, v in lags) == 4
    assert f'data-chart="lag.{group} "' in page

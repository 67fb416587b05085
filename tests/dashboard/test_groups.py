"""The console's consumer group pages, over real HTTP against a real broker
(tests/dashboard/conftest.py): the list with its clients, a group's lag as its consumer
reads, the heat map and chart, and resetting, skipping, creating and deleting groups."""

from __future__ import annotations

import html
import re
from datetime import datetime, timedelta

import pytest

from broker.broker import Broker
from broker.namesrv.server import NameServer
from client import ConsumeFromWhere, Message, MessageView, Producer, PushConsumer
from client.dashboard.pages_groups import SKIP_TO_END, heat_level, reset_offline
from client.dashboard.server import ConsoleServer
from tests.client.conftest import Received, create_topic
from tests.dashboard.conftest import Web
from tests.support import wait_until

TOPIC = "ConsoleGroups"
QUEUES = 2
BACKLOG = 10
WAIT_S = 20.0  # a consumer's offsets reach the broker with its next pull or its 5 s persist


def row_of(page: str, group: str) -> str:
    """The list's row of ``group`` (its cells' text, tags kept)."""
    found = re.search(rf'<tr data-group="{re.escape(group)}">(.*?)</tr>', page, re.S)
    assert found, f"no row of {group} in the list"
    return found.group(1)


def page_lag(page: str) -> str:
    found = re.search(r'id="group-lag">([^<]*)<', page)
    assert found, "no lag on the group page"
    return found.group(1)


def lag_of(console: ConsoleServer, group: str) -> int | None:
    sample = console.sampler.groups.get(group)
    return None if sample is None or sample.error else sample.lag


async def send(namesrv: NameServer, count: int, prefix: str) -> None:
    async with Producer(f"pg-{prefix}", namesrv.address) as producer:
        for n in range(count):
            await producer.send(Message(TOPIC, f"{prefix}{n}".encode()))


async def consume(namesrv: NameServer, group: str, count: int) -> list[MessageView]:
    """Start a consumer of ``group``, wait for ``count`` messages, and stop it (its offsets
    persisted)."""
    received = Received()
    consumer = PushConsumer(
        group, namesrv.address, consume_from_where=ConsumeFromWhere.CONSUME_FROM_FIRST_OFFSET
    )
    consumer.subscribe(TOPIC)(received.add)
    async with consumer:
        await received.wait_for(count, timeout_s=WAIT_S)
        await consumer.persist_offsets()
    return received.messages


async def wait_lag(console: ConsoleServer, group: str, lag: int) -> None:
    await wait_until(
        lambda: lag_of(console, group) == lag,
        f"the sampler's lag of {group} to be {lag} (is {lag_of(console, group)})",
        WAIT_S,
    )


# ------------------------------------------------------------------------ the list


async def test_a_consuming_group_is_listed_with_its_clients(
    web: Web, namesrv: NameServer, broker: Broker, console: ConsoleServer
) -> None:
    group = "cg-listed"
    await create_topic(broker, TOPIC, QUEUES)
    consumer = PushConsumer(group, namesrv.address)
    consumer.subscribe(TOPIC)(lambda _m: None)
    async with consumer:
        await wait_until(lambda: group in console.sampler.groups, f"{group} sampled", WAIT_S)
        status, page = await web.get("/groups")
        assert status == 200
        row = row_of(page, group)
        cells = [html.unescape(c) for c in re.findall(r"<td[^>]*>(.*?)</td>", row, re.S)]
        assert cells[1:5] == ["1", "V4_9_8", '<span title="CONSUME_PASSIVELY">push</span>',
                              "CLUSTERING"]  # fmt: skip
        assert f'data-live="group.{group}.tps"' in row
        assert f'data-live="group.{group}.lag"' in row
        assert "/metric?family=rocketmq_group_diff&amp;group=cg-listed" in row
        # the filter box: a part of the name, any case
        _, page = await web.get("/groups", q="LISTED")
        assert f'data-group="{group}"' in page
        _, page = await web.get("/groups", q="nothing-like-it")
        assert f'data-group="{group}"' not in page
        assert "No consumer group matches" in page
    # its last client gone, the group stays, and says so instead of failing
    await wait_until(lambda: not broker.consumers.get(group), "the consumer unregistered")
    status, page = await web.get("/groups")
    assert status == 200
    assert "no client online" in row_of(page, group)


async def test_system_groups_show_only_when_asked(web: Web, broker: Broker) -> None:
    _, page = await web.get("/groups")
    assert 'data-group="TOOLS_CONSUMER"' not in page
    assert 'data-group="CLIENT_INNER_PRODUCER"' not in page
    assert "system groups hidden" in page
    _, page = await web.get("/groups", system="on")
    row = row_of(page, "TOOLS_CONSUMER")
    assert '<span class="badge system">system</span>' in row
    assert 'data-group="CLIENT_INNER_PRODUCER"' in page


# ----------------------------------------------------------------- lag, reset, skip


async def lagging_group(
    namesrv: NameServer, broker: Broker, console: ConsoleServer, group: str
) -> list[MessageView]:
    """``group`` with offsets (it read 2 early messages) and BACKLOG messages sent while no
    consumer of it runs; the early messages."""
    await create_topic(broker, TOPIC, QUEUES)
    await send(namesrv, 2, "early")
    early = await consume(namesrv, group, 2)
    await send(namesrv, BACKLOG, "late")
    await wait_lag(console, group, BACKLOG)
    return early


async def test_lag_drops_to_zero_as_the_consumer_reads(
    web: Web, namesrv: NameServer, broker: Broker, console: ConsoleServer
) -> None:
    group = "cg-lagging"
    await lagging_group(namesrv, broker, console, group)
    page = await group_page(web, group)
    assert page_lag(page) == str(BACKLOG)
    check_heat_map(page, group, broker)
    live = console.sampler.snapshot()["live"]
    assert all(f"queue.{group}.{TOPIC}.{broker.config.broker_name}.{q}" in live for q in (0, 1))

    await consume(namesrv, group, BACKLOG)
    await wait_lag(console, group, 0)
    assert page_lag(await group_page(web, group)) == "0"


async def test_reset_to_a_time_brings_the_backlog_back_and_skip_drops_it(
    web: Web, namesrv: NameServer, broker: Broker, console: ConsoleServer
) -> None:
    group = "cg-reset"
    early = await lagging_group(namesrv, broker, console, group)
    before = max(m.store_timestamp for m in early) + 1
    await consume(namesrv, group, BACKLOG)
    await wait_lag(console, group, 0)

    await web.login()
    status, page = await web.post(f"/groups/{group}/reset", {"topic": TOPIC, "ms": str(before)})
    assert status == 200, page
    assert f"Offsets of {group} reset" in page
    # each queue to its first late message: past its early ones
    shown = [int(n) for n in re.findall(r'<td class="num" data-offset>(\d+)</td>', page)]
    early_in = {q: sum(1 for m in early if m.queue_id == q) for q in range(QUEUES)}
    assert sorted(shown) == sorted(early_in.values())
    assert {q: broker.offsets.query(group, TOPIC, q) for q in range(QUEUES)} == early_in
    await wait_lag(console, group, BACKLOG)

    status, page = await web.post(f"/groups/{group}/skip", {"topic": ""})  # every topic
    assert status == 200, page
    assert f"Backlog of {group} skipped" in page
    await wait_lag(console, group, 0)

    # a local date and time, before every message (unforced: only ever moved back) ...
    await web.post(f"/groups/{group}/reset", {"topic": TOPIC, "at": "1970-01-02T00:00"})
    await wait_lag(console, group, BACKLOG + 2)
    # ... and one in the future, allowed as in RocketMQ: each queue goes to its end
    later = (datetime.now() + timedelta(days=1)).strftime("%Y-%m-%dT%H:%M")
    status, _ = await web.post(f"/groups/{group}/reset", {"at": later, "force": "on"})
    assert status == 200
    await wait_lag(console, group, 0)


async def test_the_consoles_own_reset_commits_each_queues_offset(
    namesrv: NameServer, broker: Broker, console: ConsoleServer
) -> None:
    """The fallback for a RocketMQ 4.x broker, which refuses to reset a group with no client
    online (ours resets it, so the page never needs it here; tests/interop/
    test_console_apache.py goes through the page against Apache's broker): each queue's
    offset at the time is committed by the console, as mqadmin does."""
    group = "cg-offline"
    await lagging_group(namesrv, broker, console, group)
    early = round(datetime(1970, 1, 2).timestamp() * 1000)
    rows = await reset_offline(console.admin, group, TOPIC, early, force=True)
    assert sorted(r.queue_id for r in rows) == list(range(QUEUES))
    assert all(broker.offsets.query(group, TOPIC, q) == 0 for q in range(QUEUES))
    await wait_lag(console, group, BACKLOG + 2)

    await reset_offline(console.admin, group, TOPIC, SKIP_TO_END, force=True)
    ends = {q: broker.store.get_max_offset(TOPIC, q) for q in range(QUEUES)}
    assert {q: broker.offsets.query(group, TOPIC, q) for q in range(QUEUES)} == ends
    await wait_lag(console, group, 0)


async def group_page(web: Web, group: str) -> str:
    status, page = await web.get(f"/groups/{group}")
    assert status == 200, page
    return page


def check_heat_map(page: str, group: str, broker: Broker) -> None:
    """One row per topic@broker, a cell per queue keyed as the sampler pushes it, shaded
    by its share of the largest lag; and the lag chart over the last hour."""
    name = broker.config.broker_name
    assert re.search(r'<table class="heat" data-heatmap id="heat">', page)
    assert f"{TOPIC} @ {name}" in page
    cells = re.findall(r'<td class="cell heat(\d)" data-live="([^"]+)"[^>]*>([\d,]+)</td>', page)
    shown = {key: (int(level), int(lag.replace(",", ""))) for level, key, lag in cells}
    keys = [f"queue.{group}.{TOPIC}.{name}.{q}" for q in range(QUEUES)]
    assert set(keys) <= set(shown)
    lags = {
        q: broker.store.get_max_offset(TOPIC, q) - broker.offsets.query(group, TOPIC, q)
        for q in range(QUEUES)
    }
    assert [shown[k][1] for k in keys] == [lags[q] for q in range(QUEUES)]
    top = max(lag for _, lag in shown.values())
    assert all(level == heat_level(lag, top) for level, lag in shown.values())
    assert sum(lags.values()) == BACKLOG and top > 0
    for k in keys:  # the per-queue table carries the same live keys
        assert page.count(f'data-live="{k}"') == 2
    assert (
        f'<div class="chart" data-chart="lag.{group}" data-labels="{group}" '
        f'data-title="Lag of {group}, last hour"></div>'
    ) in page


async def test_a_group_page_shows_its_clients_and_subscriptions(
    web: Web, namesrv: NameServer, broker: Broker
) -> None:
    group = "cg-detail"
    await create_topic(broker, TOPIC, QUEUES)
    consumer = PushConsumer(group, namesrv.address)
    consumer.subscribe(TOPIC, "TagA || TagB")(lambda _m: None)
    async with consumer:
        await wait_until(lambda: bool(broker.consumers.get(group)), "the consumer registered")
        page = html.unescape(await group_page(web, group))
    clients = page.split('id="clients"', 1)[1].split("</table>", 1)[0]
    assert "PYTHON" in clients and "V4_9_8" in clients and "@" in clients
    subs = page.split('id="subscriptions"', 1)[1].split("</table>", 1)[0]
    assert TOPIC in subs and "TagA || TagB" in subs and "TAG" in subs
    summary = page.split('id="group-summary"', 1)[1].split("</dl>", 1)[0]
    assert "push" in summary and "CLUSTERING" in summary
    assert "CONSUME_FROM_LAST_OFFSET" in summary


# ---------------------------------------------------------------- create / delete


async def test_a_group_is_created_updated_and_deleted_everywhere(
    web: Web, namesrv: NameServer, broker: Broker, console: ConsoleServer
) -> None:
    group = "cg-made"
    await web.login()
    status, page = await web.post(
        "/groups", {"groupName": group, "retryMaxTimes": "5", "consumeMessageOrderly": "on"}
    )
    assert status == 200, page
    assert f"Consumer group {group} created on {broker.address}" in page
    made = broker.subscription_groups.table[group]
    assert (made.retry_max_times, made.consume_enable, made.consume_message_orderly) == (
        5, False, True,
    )  # fmt: skip
    assert 'id="group-configs"' in page and "No client of this group is online" in page

    made.retry_queue_nums = 3  # set another way: an update through the console keeps it
    status, page = await web.post(
        "/groups", {"groupName": group, "retryMaxTimes": "7", "consumeEnable": "on"}
    )
    assert f"Consumer group {group} updated" in page
    made = broker.subscription_groups.table[group]
    assert (made.retry_max_times, made.consume_enable, made.retry_queue_nums) == (7, True, 3)

    await create_topic(broker, TOPIC, QUEUES)
    await send(namesrv, 2, "d")
    await consume(namesrv, group, 2)  # offsets, and its retry topic
    assert broker.offsets.query(group, TOPIC, 0) >= 0
    assert f"%RETRY%{group}" in broker.topics.table
    await wait_until(lambda: group in console.sampler.groups, f"{group} sampled", WAIT_S)

    status, page = await web.post(f"/groups/{group}/delete", {"confirm": "cg-mad"})
    assert status == 422
    assert f"type its name ({group})" in page
    assert group in broker.subscription_groups.table

    status, page = await web.post(f"/groups/{group}/delete", {"confirm": group, "topics": "on"})
    assert status == 200, page
    assert f"Consumer group {group} deleted from {broker.address}" in html.unescape(page)
    assert group not in broker.subscription_groups.table
    assert all(broker.offsets.query(group, TOPIC, q) == -1 for q in range(QUEUES))
    assert f"%RETRY%{group}" not in broker.topics.table
    assert f'data-group="{group}"' not in page  # the list it lands on
    status, page = await web.get(f"/groups/{group}")
    assert status == 404
    assert f"No consumer group {group}" in page


async def test_changes_need_a_login(web: Web, broker: Broker) -> None:
    group = "cg-guarded"
    for path, form in [
        ("/groups", {"groupName": group}),
        (f"/groups/{group}/reset", {"topic": TOPIC, "ms": "0"}),
        (f"/groups/{group}/skip", {"topic": TOPIC}),
        (f"/groups/{group}/delete", {"confirm": group}),
    ]:
        status, page = await web.post(path, form, csrf=False)
        assert status == 401, path
        assert "needs a login" in page
    assert group not in broker.subscription_groups.table
    _, page = await web.get("/groups")
    assert 'id="group-form"' not in page and "to create, change, reset or delete" in page


# ---------------------------------------------------------------------- bad input


async def test_unknown_and_illegal_groups_say_why(web: Web, broker: Broker) -> None:
    status, page = await web.get("/groups/NoSuchGroupHere")
    assert status == 404
    assert "No consumer group NoSuchGroupHere" in page
    status, page = await web.get("/groups/CID%25odd%7Cname")  # % and | are legal, quoted
    assert status == 404
    assert "No consumer group CID%odd|name" in page
    status, page = await web.get("/groups/bad%20name")
    assert status == 422
    assert "contains illegal characters" in html.unescape(page)


@pytest.mark.parametrize(
    ("path", "form", "said"),
    [
        ("/groups", {"groupName": ""}, "the specified group is blank"),
        ("/groups", {"groupName": "a b"}, "contains illegal characters"),
        ("/groups", {"groupName": "g" * 300}, "longer than"),
        ("/groups", {"groupName": "cg-x", "retryMaxTimes": "many"}, "retryMaxTimes must be"),
        ("/groups", {"groupName": "cg-x", "retryMaxTimes": "9" * 5000}, "retryMaxTimes must be"),
        ("/groups", {"groupName": "cg-x", "consumeEnable": "maybe"}, "must be ticked or not"),
        ("/groups/cg-x/reset", {"topic": TOPIC}, "say when to reset to"),
        ("/groups/cg-x/reset", {"topic": TOPIC, "at": "yesterday"}, "is not a date and time"),
        ("/groups/cg-x/reset", {"topic": TOPIC, "at": "2024-13-01T00:00"}, "not a date and time"),
        ("/groups/cg-x/reset", {"topic": TOPIC, "at": "1969-12-30T00:00"}, "before 1970"),
        ("/groups/cg-x/reset", {"topic": TOPIC, "at": "2024-01-01T00:00", "ms": "1"}, "not both"),
        ("/groups/cg-x/reset", {"topic": TOPIC, "ms": "-5"}, "epoch milliseconds must be"),
        ("/groups/cg-x/reset", {"topic": TOPIC, "ms": "9" * 30}, "epoch milliseconds must be"),
        ("/groups/cg-x/reset", {"topic": "bad topic", "ms": "0"}, "illegal characters"),
        ("/groups/cg-x/reset", {"topic": "", "ms": "0"}, "no offsets and no subscription"),
        ("/groups/cg-x/reset", {"topic": "NoSuchTopicHere", "ms": "0"}, "Not reset: "),
        ("/groups/cg-x/delete", {"confirm": "cg-x"}, "no broker has a consumer group cg-x"),
        ("/groups/cg-x/delete", {}, "type its name (cg-x)"),
        ("/groups/a%20b/skip", {}, "contains illegal characters"),
    ],
)
async def test_bad_input_gets_a_clear_message(
    web: Web, broker: Broker, path: str, form: dict[str, str], said: str
) -> None:
    await web.login()
    status, page = await web.post(path, form)
    assert status == 422, page
    assert said in html.unescape(page)
    assert "Traceback" not in page and "Something went wrong" not in page


def test_heat_levels_are_ninths_of_the_largest_lag_rounded_up() -> None:
    assert [heat_level(lag, 9) for lag in (0, 1, 5, 9)] == [0, 1, 5, 9]
    assert heat_level(1, 1000) == 1 and heat_level(999, 1000) == 9
    assert heat_level(0, 0) == 0 and heat_level(3, 0) == 0

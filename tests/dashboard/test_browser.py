"""The console in a real browser: headless Chromium (tests/dashboard/browser.py) against an
``aerolite standalone`` process that serves it on ``dashboardPort=0``, as ``make run`` does on
8080. What a user does with the mouse and keyboard, and what the page then shows.

The broker and console are one process per module; each test uses names of its own and a
browser of its own.
"""

from __future__ import annotations

import asyncio
import json
import re
import sys
from collections.abc import AsyncIterator, Iterator

import pytest
from playwright.async_api import Page, expect

from client import ConsumeFromWhere, ConsumeResult, Message, MessageView, Producer, PushConsumer
from client.admin import Admin
from client.errors import RocketMQError
from tests.dashboard.browser import (
    BROWSER_PASSWORD,
    BROWSER_USER,
    CONSOLE_SETTINGS,
    chromium,
    require_chromium,
)
from tests.processes import StandaloneBroker, start_standalone, unique
from tests.support import wait_until

pytestmark = pytest.mark.slow

USER, PASSWORD = BROWSER_USER, BROWSER_PASSWORD
WAIT_MS = 20_000
FIRST = ConsumeFromWhere.CONSUME_FROM_FIRST_OFFSET
# a figure on an open page follows the console's samples (every 5 s): allow a few
expect.set_options(timeout=WAIT_MS)


@pytest.fixture(scope="module")
def standalone(tmp_path_factory: pytest.TempPathFactory) -> Iterator[StandaloneBroker]:
    root = tmp_path_factory.mktemp("console")
    broker = start_standalone(root, CONSOLE_SETTINGS)
    try:
        assert broker.dashboard is not None, "the ready line has no dashboard= field"
        yield broker
    finally:
        broker.stop()


@pytest.fixture
async def page(standalone: StandaloneBroker) -> AsyncIterator[Page]:
    async with chromium(require_chromium()) as browser:
        context = await browser.new_context(
            base_url=standalone.dashboard, viewport={"width": 1400, "height": 900}
        )
        context.set_default_timeout(WAIT_MS)
        page = await context.new_page()
        errors: list[str] = []
        page.on("pageerror", lambda exc: errors.append(str(exc)))
        # a console error is a page mistake too (a CSP refusal, a pattern that does not
        # parse); a refusal the test provokes (a 401, a 422) is logged as one and is not
        page.on("console", lambda m: errors.append(m.text) if _mistake(m.type, m.text) else None)
        yield page
        await context.close()
    assert not errors, f"script errors on the page: {errors}"


def _mistake(kind: str, text: str) -> bool:
    return kind == "error" and not text.startswith(
        "Failed to load resource: the server responded with a status of 4"
    )


async def log_in(page: Page) -> None:
    await page.goto("/login")
    await page.get_by_label("User").fill(USER)
    await page.get_by_label("Password").fill(PASSWORD)
    await page.get_by_role("button", name="Log in").click()
    await expect(page.locator("span.user")).to_have_text(USER)


async def test_the_overview_shows_the_broker_live(page: Page, standalone: StandaloneBroker) -> None:
    await page.goto("/")
    row = page.locator("#brokers tbody tr").first
    await expect(row).to_contain_text("broker-a")
    await expect(row).to_contain_text("master")
    await expect(row).to_contain_text(standalone.broker)
    # the figures follow the server-sent events: the status line says when the last came
    await expect(page.locator("[data-live-status]")).to_have_text(re.compile(r"live · sampled"))
    await expect(page.locator(".chart .uplot").first).to_be_visible()


async def test_a_change_without_a_login_is_refused(
    page: Page, standalone: StandaloneBroker
) -> None:
    await page.goto("/")
    # a POST from the console's own origin, with no session: refused, nothing done
    answer = await page.request.post(
        f"{standalone.dashboard}/logout",
        headers={"Origin": standalone.dashboard or ""},
        form={"csrf_token": "x"},
    )
    assert answer.status == 401
    assert "needs a login" in await answer.text()


async def test_a_wrong_password_says_so_and_the_right_one_logs_in(page: Page) -> None:
    await page.goto("/login")
    await page.get_by_label("User").fill(USER)
    await page.get_by_label("Password").fill("not it")
    await page.get_by_role("button", name="Log in").click()
    await expect(page.locator(".notice.error")).to_have_text("Wrong user name or password.")
    await log_in(page)
    await page.get_by_role("button", name="Log out").click()
    await expect(page.get_by_role("link", name="Log in")).to_be_visible()


async def _send(namesrv: str, topic: str, count: int, **fields: object) -> None:
    async with Producer("pg-browser", namesrv) as producer:
        for n in range(count):
            await producer.send(Message(topic, f"m{n}".encode(), **fields))  # type: ignore[arg-type]


def _consumer(namesrv: str, group: str, topic: str, received: list[MessageView]) -> PushConsumer:
    consumer = PushConsumer(group, namesrv, consume_from_where=FIRST)

    def listener(m: MessageView) -> ConsumeResult:
        received.append(m)
        return ConsumeResult.SUCCESS

    consumer.subscribe(topic)(listener)
    return consumer


async def test_a_groups_lag_drops_to_zero_on_the_open_page_as_its_consumer_reads(
    page: Page, standalone: StandaloneBroker
) -> None:
    topic, group = unique("LagTopic"), unique("cg_lag")
    received: list[MessageView] = []
    await _send(standalone.namesrv, topic, 1)
    async with _consumer(standalone.namesrv, group, topic, received) as consumer:
        await wait_until(lambda: len(received) == 1, "the first message", 20)
        await consumer.persist_offsets()
    await _send(standalone.namesrv, topic, 25)
    await page.goto(f"/groups/{group}")
    lag = page.locator("#group-lag")
    await expect(lag).to_have_text("25")
    # the heat map shades the queues holding the backlog
    await expect(page.locator("table.heat td.cell").first).to_be_visible()
    async with _consumer(standalone.namesrv, group, topic, received):
        # no reload: the next samples reach the page as server-sent events
        await expect(lag).to_have_text("0")
    assert len(received) == 26


async def test_a_topic_created_in_the_form_is_listed_and_known_to_mqadmin(
    page: Page, standalone: StandaloneBroker
) -> None:
    topic = unique("BrowserTopic")
    await log_in(page)
    await page.goto("/topics")
    form = page.locator("#topic-form")
    await form.get_by_label("Topic").fill(topic)
    await form.get_by_label("Every master of cluster").select_option("DefaultCluster")
    await form.get_by_label("Write queues").fill("3")
    await form.get_by_label("Read queues").fill("3")
    await form.get_by_role("button", name="Create or update").click()
    await expect(page.locator(".notice.ok")).to_contain_text(topic)
    await page.goto("/topics")
    await expect(page.locator("#topics")).to_contain_text(topic)
    # typing filters the list in place (htmx swaps the table; the page is not reloaded)
    await page.evaluate("window.notReloaded = true")
    await page.get_by_label("Name contains").fill(topic.lower())
    await expect(page.locator("#topics tbody tr")).to_have_count(1)
    await expect(page.locator("#topic-count")).to_have_text(re.compile(r"^1 of "))
    assert await page.evaluate("window.notReloaded === true")
    # and the cluster itself has it, as an operator's other tool sees it
    done = await asyncio.create_subprocess_exec(
        sys.executable,
        "-m",
        "client.admin_cli",
        "topicRoute",
        "-n",
        standalone.namesrv,
        "-t",
        topic,
        "--json",
        stdout=asyncio.subprocess.PIPE,
    )
    out, _ = await done.communicate()
    assert done.returncode == 0
    route = json.loads(out)
    assert [q["writeQueueNums"] for q in route["queueDatas"]] == [3]


async def _search_until_found(page: Page, topic: str, key: str) -> None:
    """Search by key until the index has the message (it is built moments after the send)."""
    for _ in range(40):
        await page.goto(f"/messages?by=key&topic={topic}&key={key}")
        if await page.locator("#messages tbody tr a").count():
            return
        await asyncio.sleep(0.25)
    pytest.fail(f"key {key} of {topic} was never found")


async def test_a_message_found_by_key_shows_its_body(
    page: Page, standalone: StandaloneBroker
) -> None:
    topic, key = unique("KeyTopic"), unique("order")
    await _send_one(standalone.namesrv, Message(topic, b'{"found": "by key"}', keys=[key]))
    await page.goto("/messages?by=key")
    form = page.locator("#search-form")
    await form.get_by_label("Topic").fill(topic)
    await form.get_by_label("Key").fill(key)
    await form.get_by_role("button", name="Search").click()
    await _search_until_found(page, topic, key)
    await page.locator("#messages tbody tr a").first.click()
    await expect(page.locator("#message-body")).to_have_text('{"found": "by key"}')
    await page.get_by_role("link", name="JSON").click()
    await expect(page.locator("#message-body")).to_have_text('{\n  "found": "by key"\n}')


async def _send_one(namesrv: str, msg: Message) -> str:
    async with Producer("pg-browser", namesrv) as producer:
        return (await producer.send(msg)).msg_id


async def _dead_letters(namesrv: str, group: str) -> int:
    async with Admin(namesrv) as admin:
        try:
            stats = await admin.topic_stats(f"%DLQ%{group}")
        except RocketMQError:
            return 0  # not made yet: the first dead letter makes it
    return sum(s.max_offset for s in stats.values())


async def test_a_dead_letter_resent_from_the_page_reaches_its_group(
    page: Page, standalone: StandaloneBroker
) -> None:
    topic, group = unique("DlqTopic"), unique("cg_dlq")
    msg_id = await _send_one(standalone.namesrv, Message(topic, b"poison pill", tags="P"))
    failing = PushConsumer(
        group, standalone.namesrv, consume_from_where=FIRST, max_reconsume_times=1
    )
    failing.subscribe(topic)(lambda _m: ConsumeResult.RECONSUME_LATER)
    async with failing:
        deadline = asyncio.get_running_loop().time() + 30
        while await _dead_letters(standalone.namesrv, group) < 1:
            assert asyncio.get_running_loop().time() < deadline, "no dead letter in 30 s"
            await asyncio.sleep(0.2)
    await log_in(page)
    await page.goto(f"/dlq?group={group}")
    row = page.locator("#messages tbody tr", has_text=msg_id)
    await expect(row).to_have_count(1)
    await row.get_by_role("checkbox").check()
    page.once("dialog", lambda dialog: asyncio.ensure_future(dialog.accept()))
    await page.get_by_role("button", name=f"Resend the ticked to {group}").click()
    await expect(page.locator(".notice.ok")).to_contain_text(f"sent to %RETRY%{group}")
    healed: list[MessageView] = []
    async with _consumer(standalone.namesrv, group, topic, healed):
        await wait_until(lambda: len(healed) == 1, "the resent dead letter", 20)
    assert (healed[0].topic, healed[0].body) == (topic, b"poison pill")

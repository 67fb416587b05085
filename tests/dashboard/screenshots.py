"""The console's screenshots in docs/: ``make screenshots``.

A standalone broker with the console on a free port, a little traffic (an order topic, a
group that keeps up, one that fell behind, and dead letters), then headless Chromium takes
each main page. Bounded: a fixed number of messages, every wait with a deadline.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import shutil
import tempfile
from pathlib import Path

from playwright.async_api import Page

from client import ConsumeFromWhere, ConsumeResult, Message, MessageView, Producer, PushConsumer
from tests.dashboard.browser import CONSOLE_SETTINGS, chromium, require_chromium
from tests.processes import StandaloneBroker, start_standalone

DOCS = Path(__file__).resolve().parents[2] / "docs"
TOPIC = "Orders"
FIRST = ConsumeFromWhere.CONSUME_FROM_FIRST_OFFSET
SETTLE_S = 7.0  # a sample every 5 s: the charts have a few points, the figures are live


async def traffic(namesrv: str) -> None:
    """300 orders; billing reads them all, audit stopped halfway (its lag shows), and a
    refund listener that always fails sends its messages to the dead-letter queue."""
    async with Producer("order-service", namesrv) as producer:
        for n in range(300):
            body = f'{{"order": {n}, "amount": {n * 7 % 500}.50, "currency": "EUR"}}'
            msg = Message(TOPIC, body.encode(), tags="created", keys=[f"order-{n}"])
            await producer.send(msg)
    billing = PushConsumer("billing", namesrv, consume_from_where=FIRST)
    billing.subscribe(TOPIC)(lambda _m: ConsumeResult.SUCCESS)
    seen: list[MessageView] = []
    halfway = asyncio.Event()
    loop = asyncio.get_running_loop()

    def audit_listener(m: MessageView) -> ConsumeResult:
        seen.append(m)
        if len(seen) >= 150:
            loop.call_soon_threadsafe(halfway.set)
        return ConsumeResult.SUCCESS

    audit = PushConsumer("audit", namesrv, consume_from_where=FIRST, consume_concurrency=1)
    audit.subscribe(TOPIC)(audit_listener)
    refunds = PushConsumer("refunds", namesrv, consume_from_where=FIRST, max_reconsume_times=1)
    refunds.subscribe(TOPIC, "created")(lambda _m: ConsumeResult.RECONSUME_LATER)
    async with billing, audit:
        with contextlib.suppress(TimeoutError):
            await asyncio.wait_for(halfway.wait(), 30)
    async with refunds:
        await asyncio.sleep(8)


async def steady_orders(namesrv: str, stop: asyncio.Event) -> None:
    """Orders at about 20 a second while the pages are taken (at most 3,000), so the charts
    and TPS figures move."""
    async with Producer("order-service", namesrv) as producer:
        for n in range(3000):
            if stop.is_set():
                return
            await producer.send(Message(TOPIC, f'{{"order": {1000 + n}}}'.encode(), tags="created"))
            await asyncio.sleep(0.05)


async def shoot(
    page: Page, path: str, name: str, into: Path, *, full: bool = True, click: str = ""
) -> None:
    """The page at ``path`` (then the first link matching ``click``, if given), once its live
    figures have come; ``full=False`` keeps to the window (a long list)."""
    await page.goto(path, wait_until="load")
    if click:
        await page.locator(click).first.click()
        await page.wait_for_load_state("load")
    await asyncio.sleep(SETTLE_S)
    await page.screenshot(path=str(into / f"console-{name}.png"), full_page=full)
    print(f"console-{name}.png  {page.url.split('/', 3)[-1]}")


async def run(into: Path) -> None:
    root = Path(tempfile.mkdtemp(prefix="aerolite-shots-"))
    broker: StandaloneBroker | None = None
    try:
        broker = start_standalone(root, CONSOLE_SETTINGS)
        await traffic(broker.namesrv)
        stop = asyncio.Event()
        steady = asyncio.create_task(steady_orders(broker.namesrv, stop))
        billing = PushConsumer("billing", broker.namesrv, consume_from_where=FIRST)
        billing.subscribe(TOPIC)(lambda _m: ConsumeResult.SUCCESS)
        async with billing, chromium(require_chromium()) as browser:
            page = await browser.new_page(
                base_url=broker.dashboard, viewport={"width": 1400, "height": 860}
            )
            await shoot(page, "/topics", "topics", into)
            await shoot(page, f"/topics/{TOPIC}", "topic", into)
            await shoot(page, "/groups", "groups", into)
            await shoot(page, "/groups/audit", "group", into)
            found = f"/messages?by=key&topic={TOPIC}&key=order-42"
            await shoot(page, found, "message", into, click="#messages tbody a")
            await shoot(page, "/dlq?group=refunds", "dlq", into, full=False)
            # last: by now the charts hold a minute of traffic
            await shoot(page, "/", "overview", into)
        stop.set()
        await steady
    finally:
        if broker is not None:
            broker.stop()
        shutil.rmtree(root, ignore_errors=True)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--into", type=Path, default=DOCS, help="where the PNGs go (docs/)")
    args = parser.parse_args()
    args.into.mkdir(parents=True, exist_ok=True)
    asyncio.run(run(args.into))


if __name__ == "__main__":
    main()

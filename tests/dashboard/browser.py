"""Headless Chromium for the console's browser tests and its screenshots.

Debian's ``chromium`` (``make install`` installs it where it can) driven by Playwright's
async Python API through ``executable_path``: Playwright's own browser downloads are never used
(its download hosts may be unreachable, and a system package is what an operator has).
"""

from __future__ import annotations

import os
import shutil
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager

import pytest
from playwright.async_api import Browser, async_playwright

# Chromium reaches for Google's services at start; on a closed network that is noise and
# delay, so every background connection is off.
CHROMIUM_ARGS = [
    "--disable-gpu",
    "--disable-quic",
    "--disable-sync",
    "--disable-background-networking",
    "--disable-component-update",
    "--no-first-run",
]


# A standalone broker with its console for the browser's tests and the screenshots: a free
# port, the test's user, small segments, and retries in a blink (every level 200 ms) so that
# dead letters come within seconds.
BROWSER_USER, BROWSER_PASSWORD = "ops", "browser-pass-1"
CONSOLE_SETTINGS = {
    "enableDashboard": "true",
    "dashboardPort": "0",
    "dashboardUsers": f"{BROWSER_USER}:{BROWSER_PASSWORD}",
    "autoCreateTopicEnable": "true",
    "mappedFileSizeCommitLog": str(4 << 20),
    "messageDelayLevel": " ".join(["200ms"] * 18),
}


def chromium_path() -> str | None:
    for name in ("chromium", "chromium-browser"):
        found = shutil.which(name)
        if found:
            return found
    return None


def require_chromium() -> str:
    """The browser's path. Without one the tests fail where ``make install`` could have
    installed it (root with apt, as CI is) or ``CI`` is set, and are skipped elsewhere."""
    path = chromium_path()
    if path is None:
        could_install = os.geteuid() == 0 and shutil.which("apt-get") is not None
        if could_install or os.environ.get("CI"):
            pytest.fail("no chromium: make install puts Debian's chromium package there")
        pytest.skip("no chromium (apt-get install chromium; make install does it as root)")
    return path


@asynccontextmanager
async def chromium(path: str) -> AsyncIterator[Browser]:
    """Playwright's async API on the running loop: its sync API runs a loop of its own on
    the calling thread, which pytest-asyncio's fixtures cannot share."""
    async with async_playwright() as playwright:
        browser = await playwright.chromium.launch(executable_path=path, args=CHROMIUM_ARGS)
        try:
            yield browser
        finally:
            await browser.close()

"""``bench serve --targets page``: one live page open on ``/ui`` in headless Chromium while
the trace runs, so the page's cost to the server is measured against ``swapos`` alone.

The page stays open and connected (its event stream live) from before the clock starts until
the trace ends; then its screenshot (``page.png``) and its text (``page.txt``, what the
screenshot shows, for the docs) go to the run's folder, with the browser's log.
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path

import anyio

from swapos.errors import SwapOSError

LIVE = "document.getElementById('conn').dataset.status === 'live'"
"""The page has its first state and its event stream is open."""
SHOWN = "document.querySelectorAll('#models tr').length > 0"


@asynccontextmanager
async def page_open(api_url: str, folder: Path) -> AsyncIterator[None]:
    """``/ui`` of the server at ``api_url`` (its ``.../v1`` base) open in headless Chromium
    while the body runs; its screenshot and text into ``folder`` as the body ends.

    Raises:
        SwapOSError: the ``browser`` extra or Debian's ``chromium`` is missing.
    """
    try:
        from swapos.bench.browser import INSTALL, Browser, chromium
    except ImportError as exc:
        raise SwapOSError(f"--targets page needs the browser extra: {exc}") from exc
    if chromium() is None:
        raise SwapOSError(f"--targets page needs chromium: {INSTALL}")
    await anyio.Path(folder).mkdir(parents=True, exist_ok=True)
    browser = await anyio.to_thread.run_sync(Browser, folder)
    try:
        url = api_url.removesuffix("/v1") + "/ui"
        await anyio.to_thread.run_sync(browser.goto, url)
        await anyio.to_thread.run_sync(lambda: browser.wait_for(f"{LIVE} && {SHOWN}", 60.0))
        yield
        await anyio.sleep(1.5)  # the stream's last state and bars reach the page
        await anyio.to_thread.run_sync(browser.screenshot, folder / "page.png")
        text = await anyio.to_thread.run_sync(browser.evaluate, "document.body.innerText")
        await anyio.Path(folder / "page.txt").write_text(str(text), "utf-8")
    finally:
        await anyio.to_thread.run_sync(browser.close)

"""The live page (``/ui``) in headless Chromium: a swap seen as it happens, read from the DOM.

Skipped when Debian's ``chromium`` is not installed (``apt-get install -y chromium``;
.ci/run installs it). The browser is driven over the DevTools protocol
(swapos/bench/browser.py); the screenshots are left in the test's ``tmp_path``, never
committed.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import anyio
import pytest
from serve_fakes import Served, advance_until, chat, in_thread, over_http, wait_until

from swapos.backends.fake import FakeModelScript
from swapos.bench.browser import INSTALL, Browser, chromium
from swapos.serve import ServeSettings
from swapos.testing import FakeClock

pytestmark = pytest.mark.skipif(chromium() is None, reason=f"no chromium: {INSTALL}")

KEY = "sekrit"
XSS_NAME = '<img src=x onerror="window.__xss=1">'
SCRIPTS = {
    "a": FakeModelScript(reply="one two three four five", load_s=2.0, token_s=1.0),
    "b": FakeModelScript(reply="ok", load_s=8.0, token_s=1.0),
    XSS_NAME: FakeModelScript(reply="<script>window.__xss=2</script> done", load_s=1.0),
}
"""Footprints of 100 bytes each under a budget of 200: two fit, never three."""

HELPERS = """
window.T = {
  row: (n) => [...document.querySelectorAll('#models tr')].find((r) => r.dataset.model === n),
  state: (n) => { const r = T.row(n); return r ? r.dataset.state : null; },
  cell: (n, c) => T.row(n).querySelector('.' + c).textContent,
  bars: (lane, kind) => [...document.querySelectorAll('#tl g.bar')]
    .filter((g) => g.dataset.lane === lane && g.dataset.kind === kind).length,
};
true
"""


def _progress(s: Served, model: str) -> float:
    """How far ``model``'s load has gone, as the Loader reports it (0 when it is not loading)."""
    row = s.system.residency().get(model)
    return (row.load_progress or 0.0) if row is not None else 0.0


def js(value: str) -> str:
    """``value`` as a JavaScript string literal."""
    return json.dumps(value)


async def test_the_live_page_shows_a_swap_as_it_happens(tmp_path: Path) -> None:
    clock = FakeClock()  # still until the test lets it run: the page sees the load in flight
    settings = ServeSettings(api_key=KEY)
    with anyio.fail_after(240):
        async with over_http(SCRIPTS, budget=200, clock=clock, settings=settings) as s:
            browser = await in_thread(lambda: Browser(tmp_path))
            try:
                await _drive(browser, s, clock, tmp_path)
            finally:
                await in_thread(lambda: browser.screenshot(tmp_path / "ui-end.png"))
                await in_thread(browser.close)
    assert (tmp_path / "ui-end.png").stat().st_size > 0


async def _drive(browser: Browser, s: Served, clock: FakeClock, tmp_path: Path) -> None:
    async def page(expression: str) -> Any:
        """Wait until ``expression`` holds in the page; its value."""
        return await in_thread(lambda: browser.wait_for(expression))

    async def run_js(expression: str) -> Any:
        return await in_thread(lambda: browser.evaluate(expression))

    # The page holds no data, so it loads without the key; then it asks for it.
    await in_thread(lambda: browser.goto(s.base_url + "/ui"))
    await page("document.getElementById('keyform').dataset.open === 'yes'")
    await in_thread(
        lambda: browser.evaluate(
            f"document.getElementById('key').value = {js(KEY)};"
            "document.getElementById('keyform').requestSubmit(); true"
        )
    )
    await page("document.getElementById('conn').dataset.status === 'live'")
    await in_thread(lambda: browser.evaluate(HELPERS))
    await page("document.querySelectorAll('#models tr').length === 3")

    replies: dict[str, dict[str, Any]] = {}
    auth = {"Authorization": f"Bearer {KEY}"}

    async def ask(model: str) -> None:
        r = await s.client.post("/v1/chat/completions", json=chat(model), headers=auth, timeout=120)
        assert r.status_code == 200, r.text
        replies[model] = r.json()["swapos"]

    # a then b: both paid loads; the server learns that b follows a.
    async with clock.autojump():
        await ask("a")
        await ask("b")
    await page("T.bars('a', 'paid') === 1 && T.bars('b', 'paid') === 1 && T.state('b') === 'ready'")
    await page("document.getElementById('transitions').textContent.includes('ab1')")

    # The unload buttons (the key is sent, the request is same-origin) evict both.
    for name in ("a", "b"):
        await run_js(f"T.row({js(name)}).querySelector('.unload').click(); true")
        await page(f"T.state({js(name)}) === 'absent' && T.bars({js(name)}, 'evict') === 1")
    assert s.system.residency().ready() == frozenset()
    assert "unloaded" in await in_thread(
        lambda: browser.evaluate("document.getElementById('status').textContent")
    )

    replies.clear()
    async with anyio.create_task_group() as tg:
        tg.start_soon(ask, "a")
        await wait_until(lambda: s.system.residency().state("a") == "loading")
        # The clock stands still but where the test moves it: the page shows the load in
        # flight and its progress as the backend reports it (the fake: each quarter).
        await page("T.state('a') === 'loading'")
        await advance_until(clock, lambda: _progress(s, "a") >= 0.5)
        await page("T.cell('a', 'progress-text').startsWith(' 50%')")
        # a's request publishes b (learned) as its next use: b is prefetched while a
        # generates, and b's request, queued behind a, joins that load.
        tg.start_soon(ask, "b")
        await wait_until(
            lambda: any(q.model == "b" and q.waiting for q in s.server.scheduler.snapshot())
        )
        await page("T.cell('b', 'waiting') === '1'")
        await in_thread(lambda: browser.screenshot(tmp_path / "ui-loading.png"))
        async with clock.autojump():
            await wait_until(
                lambda: len(replies) == 2 and s.system.residency().state("b") == "ready"
            )
    assert replies["b"]["load_hidden_s"] > 0 and replies["b"]["load_s"] > 0  # part hidden
    await page(
        "T.bars('b', 'hidden') === 1 && T.bars('b', 'paid') === 2 && T.state('b') === 'ready'"
    )

    # A hostile model name and a hostile answer are shown as text, never run as markup.
    await in_thread(
        lambda: browser.evaluate(
            f"document.getElementById('chat-model').value = {js(XSS_NAME)};"
            "document.getElementById('chat-send').click(); true"
        )
    )
    async with clock.autojump():  # its load evicts a or b: two fit, never three
        await page("document.getElementById('chat-info').textContent.includes('tok/s')")
    out = await in_thread(
        lambda: browser.evaluate("document.getElementById('chat-out').textContent")
    )
    assert "<script>window.__xss=2</script>" in out
    assert await in_thread(
        lambda: browser.evaluate(
            "window.__xss === undefined && document.scripts.length === 1"
            " && document.querySelectorAll('img').length === 0"
            f" && T.row({js(XSS_NAME)}).querySelector('.name').textContent === {js(XSS_NAME)}"
        )
    )

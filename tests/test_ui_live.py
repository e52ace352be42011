"""The live page's routes without a browser: the page is self-contained and locked down, its
buttons need the key and refuse other sites, its state is the Recorder's events folded,
and a page that stops reading is told to resync instead of being buffered for."""

from __future__ import annotations

import re
from functools import partial
from pathlib import Path
from typing import Any

import anyio
import httpx
import msgspec
from fakes import fake_system
from serve_fakes import advance_until, chat, in_process, wait_until

from swapos.backends.fake import FakeModelScript
from swapos.bench.replay import load_events
from swapos.data.residency import ModelState
from swapos.models.profile import ModelConfig, Profile
from swapos.records.timeline import timeline
from swapos.serve import ServeSettings, app
from swapos.serve.ui_events import EventHub
from swapos.testing import FakeClock

KEY = "sekrit"
SCRIPTS = {
    "a": FakeModelScript(reply="one two three four five", load_s=2.0, token_s=1.0),
    "b": FakeModelScript(reply="ok", load_s=3.0, token_s=1.0),
}
AUTH = {"Authorization": f"Bearer {KEY}"}
A0 = ModelState(model="a", state="absent", leases=0, footprint_bytes=0)
OWN = {"Origin": "http://swapos.test", "Sec-Fetch-Site": "same-origin"}


async def test_the_page_is_self_contained_and_runs_only_its_own_script() -> None:
    clock = FakeClock()
    settings = ServeSettings(api_key=KEY)
    with anyio.fail_after(60):
        async with (
            clock.autojump(),
            in_process(SCRIPTS, budget=200, clock=clock, settings=settings) as s,
        ):
            r = await s.client.get("/ui")  # no key: the page holds no data
            assert r.status_code == 200 and r.headers["content-type"].startswith("text/html")
            page = r.text
            assert not re.search(r"""(?:src|href|action)\s*=\s*["']?\s*(?:https?:)?//""", page)
            assert "https://" not in page and "<link" not in page and "@import" not in page
            assert "innerHTML" not in page  # data goes in as text, never as markup
            csp = r.headers["content-security-policy"]
            assert "script-src 'sha256-" in csp and "unsafe-inline" not in csp
            assert "connect-src 'self'" in csp and "default-src 'none'" in csp
            for path in ("/ui/state", "/ui/events"):
                assert (await s.client.get(path)).status_code == 401


async def test_the_buttons_need_the_key_and_refuse_another_sites_requests() -> None:
    clock = FakeClock()
    settings = ServeSettings(api_key=KEY)
    with anyio.fail_after(60):
        async with (
            clock.autojump(),
            in_process(SCRIPTS, budget=200, clock=clock, settings=settings) as s,
        ):

            async def press(path: str, headers: dict[str, str], **kw: Any) -> httpx.Response:
                return await s.client.post(path, headers=headers, **kw)

            body = {"json": {"model": "a"}}
            assert (await press("/ui/load", OWN, **body)).status_code == 401
            evil = {**AUTH, "Origin": "http://evil.example"}
            r = await press("/ui/load", evil, **body)
            assert r.status_code == 403 and "Origin: http://evil.example" in r.text
            r = await press("/ui/load", {**AUTH, "Sec-Fetch-Site": "cross-site"}, **body)
            assert r.status_code == 403 and "cross-site" in r.text
            # A form post (no preflight for a browser) is refused whatever it claims.
            form = {**AUTH, **OWN, "Content-Type": "text/plain"}
            r = await press("/ui/load", form, content=b'{"model": "a"}')
            assert r.status_code == 415
            r = await press("/ui/load", {**AUTH, **OWN}, json={"model": "zzz"})
            assert r.status_code == 404 and "models are: a, b" in r.text
            assert s.system.residency().ready() == frozenset()

            r = await press("/ui/load", {**AUTH, **OWN}, **body)
            assert r.status_code == 200 and r.json() == {"loaded": ["a"]}
            assert s.system.residency().ready() == {"a"}
            assert (
                await press("/ui/unload", {**AUTH, "Origin": "http://evil.example"}, **body)
            ).status_code == 403
            assert (await press("/ui/unload", OWN, **body)).status_code == 401
            assert s.system.residency().ready() == {"a"}
            # The same request without browser headers (curl, a script): the key is enough.
            r = await press("/ui/unload", AUTH, **body)
            assert r.status_code == 200 and r.json() == {"unloaded": ["a"], "skipped": {}}
            assert s.system.residency().ready() == frozenset()


async def test_the_pages_state_is_the_recorders_events_folded(tmp_path: Path) -> None:
    clock = FakeClock()
    log = tmp_path / "events.jsonl"
    with anyio.fail_after(60):
        async with (
            clock.autojump(),
            in_process(SCRIPTS, budget=100, clock=clock, event_log=log) as s,
        ):
            for model in "aba":
                assert (
                    await s.client.post("/v1/chat/completions", json=chat(model))
                ).status_code == 200
            state = (await s.client.get("/ui/state")).json()
            events, _ = load_events(log)
        assert state["bars"] == msgspec.to_builtins(list(timeline(events).bars.values()))
        kinds = [(b["lane"], b["kind"]) for b in state["bars"]]
        assert (
            kinds.count(("a", "paid")) == 2 and ("a", "evict") in kinds and ("b", "evict") in kinds
        )
        rows = {m["name"]: m for m in state["models"]}
        assert rows["a"]["state"] == "ready" and rows["a"]["bytes"] == 100
        assert rows["b"]["state"] == "absent"
        memory = state["memory"]
        assert (memory["budget_bytes"], memory["used_bytes"]) == (100, 100)
        assert {(t["src"], t["to"], t["count"]) for t in state["transitions"]} == {
            ("a", "b", 1),
            ("b", "a", 1),
        }
        assert state["predicted"] == {"a": "b", "b": "a"}


async def test_a_page_that_stops_reading_is_told_to_resync_instead_of_buffered_for() -> None:
    clock = FakeClock()
    with anyio.fail_after(60):
        async with clock.autojump(), fake_system(SCRIPTS, budget=100, clock=clock) as (system, _):
            asgi = app(system)
            live = asgi.state.live
            live.hub.close()
            live.hub = EventHub(system.watch, buffer=4)
            chunks: list[bytes] = []
            reading = anyio.Event()

            async def emit(chunk: bytes) -> None:
                chunks.append(chunk)
                if len(chunks) > 1:  # the page reads the first state, then stops reading
                    await reading.wait()

            transport = httpx.ASGITransport(app=asgi)
            async with (
                anyio.create_task_group() as tg,
                httpx.AsyncClient(transport=transport, base_url="http://swapos.test") as client,
            ):
                tg.start_soon(live.stream, emit)
                await wait_until(lambda: live.hub.subscribers == 1)
                for model in "abab":
                    assert (
                        await client.post("/v1/chat/completions", json=chat(model))
                    ).status_code == 200
                assert live.hub.backlog() == 0  # emptied when it overflowed: never more than 4
                assert len(chunks) <= 2  # the first state, and maybe the write that stalled
                reading.set()
                await wait_until(lambda: any(b"event: resync" in c for c in chunks))
                resync = next(c for c in chunks if b"event: resync" in c)
                full = msgspec.json.decode(resync.split(b"event: state\ndata: ")[1])
                assert full["bars"] is not None and len(full["bars"]) > 4
                tg.cancel_scope.cancel()
            assert live.hub.subscribers == 0
        assert chunks[0].startswith(b"event: state\ndata: ") and b'"bars":[' in chunks[0]


async def test_a_rows_pin_ttl_aliases_and_load_progress_come_from_the_server() -> None:
    clock = FakeClock()
    profile = Profile(
        name="fake",
        budget=1000,
        models={
            "a": ModelConfig(path="/nonexistent/a.gguf", pin=True, aliases=["alpha"]),
            "b": ModelConfig(path="/nonexistent/b.gguf", ttl="5m"),
        },
    )
    with anyio.fail_after(60):
        await _pin_ttl_aliases(clock, profile)


async def _pin_ttl_aliases(clock: FakeClock, profile: Profile) -> None:
    async with in_process(SCRIPTS, budget=300, clock=clock, profile=profile) as s:

        async def rows() -> dict[str, Any]:
            state = (await s.client.get("/ui/state")).json()
            return {m["name"]: m for m in state["models"]}

        async with anyio.create_task_group() as tg:
            tg.start_soon(partial(s.client.post, "/ui/load", json={"model": "alpha"}))
            await wait_until(lambda: s.system.residency().state("a") == "loading")
            # The fake reports each quarter of its 2 s read.
            await advance_until(
                clock, lambda: (s.system.residency().get("a") or A0).load_progress == 0.25
            )
            row = (await rows())["a"]
            assert (row["state"], row["load_progress"], row["aliases"]) == (
                "loading",
                0.25,
                ["alpha"],
            )
            async with clock.autojump():
                await wait_until(lambda: s.system.residency().state("a") == "ready")
        async with anyio.create_task_group() as tg:  # by hand: b's ttl must not run out
            tg.start_soon(partial(s.client.post, "/ui/load", json={"model": "b"}))
            await advance_until(clock, lambda: s.system.residency().state("b") == "ready")
        got = await rows()
        assert (
            got["a"]["pinned"] and got["a"]["ttl_s"] is None and got["a"]["load_progress"] is None
        )
        assert got["b"]["ttl_s"] == 300.0 and got["b"]["expires_in_s"] == 300.0  # idle from now
        assert not got["b"]["pinned"] and got["b"]["slots"] == 1

"""The real ``ollama`` client against ``swapos serve``'s Ollama routes on loopback
(Hypercorn on the test's event loop, asyncio and trio; the client in a worker thread), on the
fake backend; and every Ollama error case, in one table."""

from __future__ import annotations

import datetime as dt
from collections.abc import Callable, Iterator
from typing import Any

import anyio
import httpx
import ollama
import pytest
from serve_fakes import Served, in_process, in_thread, over_http, wait_until

from swapos.backends.fake_script import FakeModelScript
from swapos.serve import ServeSettings
from swapos.serve import ollama as ollama_routes
from swapos.serve.completions import Prepared
from swapos.testing import FakeClock

SCRIPTS = {
    "a": FakeModelScript(reply="alpha beta gamma", load_s=2.0, token_s=0.5, footprint_bytes=100),
    "b": FakeModelScript(reply="bravo", load_s=3.0, token_s=0.5, footprint_bytes=60),
}
HELLO = [{"role": "user", "content": "hello"}]


async def call(s: Served, fn: Callable[[ollama.Client], Any]) -> Any:
    """``fn(client)`` in a worker thread, with a client of its own (closed after; a streamed
    answer is read whole first)."""

    def run() -> Any:
        with ollama.Client(host=s.base_url, timeout=30) as c:
            out = fn(c)
            return list(out) if isinstance(out, Iterator) else out

    return await in_thread(run)


async def resident(s: Served) -> list[str]:
    return sorted(m.model for m in await s.system.models() if m.state == "ready")


async def test_chat_whole_and_streamed_with_ollamas_counters() -> None:
    clock = FakeClock()
    with anyio.fail_after(60):
        async with clock.autojump(), over_http(SCRIPTS, budget=100, clock=clock) as s:
            whole = await call(s, lambda c: c.chat(model="a", messages=HELLO))
            assert whole.message.role == "assistant"
            assert whole.message.content == "alpha beta gamma"
            assert whole.done is True
            assert whole.done_reason == "stop"
            assert whole.model == "a"
            assert whole.load_duration == 2_000_000_000  # nanoseconds: the 2 s load
            assert whole.eval_count == 3
            assert whole.eval_duration == 1_500_000_000  # 3 tokens x 0.5 s
            assert whole.total_duration == 3_500_000_000  # load + generation, virtual time
            dt.datetime.fromisoformat(whole.created_at or "")

            parts = await call(
                s,
                lambda c: c.chat(
                    model="a:latest", messages=HELLO, stream=True, options={"num_predict": 2}
                ),
            )
            assert [p.done for p in parts] == [False, False, True]
            assert "".join(p.message.content or "" for p in parts).split() == ["alpha", "beta"]
            last = parts[-1]
            assert last.done_reason == "length"
            assert last.model == "a:latest"  # echoed as asked
            assert last.eval_count == 2
            assert last.load_duration == 0  # a stayed resident


async def test_total_duration_counts_the_queue_wait_load_duration_the_swap() -> None:
    clock = FakeClock()  # driven by hand until b's request is queued behind a's
    scripts = {
        "a": FakeModelScript(reply="x y z", load_s=0.0, token_s=1.0, footprint_bytes=100),
        "b": FakeModelScript(reply="w", load_s=2.0, token_s=0.0, footprint_bytes=100),
    }
    got: dict[str, Any] = {}
    with anyio.fail_after(60):
        async with over_http(scripts, budget=100, clock=clock) as s:

            async def one(model: str) -> None:
                got[model] = await call(s, lambda c: c.chat(model=model, messages=HELLO))

            async with anyio.create_task_group() as tg:
                tg.start_soon(one, "a")
                await wait_until(lambda: s.backend.generations.get("a") == 1)
                tg.start_soon(one, "b")  # waits for a's request: the two do not fit together
                await wait_until(lambda: any(q.waiting for q in s.server.scheduler.snapshot()))
                clock.start_driver(tg)
                await wait_until(lambda: len(got) == 2)
                tg.cancel_scope.cancel()
    a, b = got["a"], got["b"]
    assert a.total_duration == 3_000_000_000  # 3 tokens x 1 s
    assert b.load_duration == 2_000_000_000  # its 2 s load (a's eviction takes no time here)
    unexplained = b.total_duration - b.load_duration - b.prompt_eval_duration - b.eval_duration
    assert unexplained == 3_000_000_000  # the wait for a's turn to end


async def test_options_become_the_sampling_parameters(monkeypatch: pytest.MonkeyPatch) -> None:
    seen: list[Prepared] = []
    original = ollama_routes.run

    async def recording(server: Any, prep: Prepared, *args: Any, **kwargs: Any) -> Any:
        seen.append(prep)
        return await original(server, prep, *args, **kwargs)

    monkeypatch.setattr(ollama_routes, "run", recording)
    options = {"num_predict": 7, "temperature": 0.7, "top_p": 0.5, "top_k": 3, "seed": 42}
    clock = FakeClock()
    with anyio.fail_after(60):
        async with clock.autojump(), in_process(SCRIPTS, budget=100, clock=clock) as s:
            r = await s.client.post(
                "/api/chat",
                json={"model": "a", "messages": HELLO, "stream": False,
                      "options": {**options, "stop": "gamma"}},
            )  # fmt: skip
            assert r.json()["message"]["content"].split() == ["alpha", "beta"]  # cut at "gamma"
            r = await s.client.post(
                "/api/generate",
                json={"model": "a", "prompt": "x", "stream": False,
                      "options": {"num_predict": -1, "stop": ["beta", "gamma"]}},
            )  # fmt: skip
            assert r.json()["response"].split() == ["alpha"]
    chat, generate = (p.params for p in seen)
    assert (chat.max_tokens, chat.temperature, chat.top_p, chat.top_k, chat.seed) == (
        7, 0.7, 0.5, 3, 42,
    )  # fmt: skip
    assert chat.stop == ("gamma",)
    assert generate.stop == ("beta", "gamma")
    assert generate.max_tokens == 2048 - seen[1].prompt_tokens  # -1: the room in the context
    assert (generate.temperature, generate.seed) == (0.0, 0)  # SwapOS's defaults: greedy


async def test_generate_whole_and_streamed() -> None:
    clock = FakeClock()
    with anyio.fail_after(60):
        async with clock.autojump(), over_http(SCRIPTS, budget=100, clock=clock) as s:
            whole = await call(s, lambda c: c.generate(model="b", prompt="say it"))
            assert whole.response == "bravo"
            assert whole.done and whole.done_reason == "stop"
            assert whole.load_duration == 3_000_000_000
            assert whole.eval_count == 1
            parts = await call(
                s, lambda c: c.generate(model="a", prompt="go", stream=True, raw=True)
            )
            assert "".join(p.response or "" for p in parts).split() == ["alpha", "beta", "gamma"]
            assert parts[-1].done and parts[-1].eval_count == 3
            assert parts[-1].load_duration >= 2_000_000_000  # b evicted, a loaded


async def test_list_and_ps() -> None:
    clock = FakeClock()  # not driven: these models take no time, so keep-alives never run out
    scripts = {
        "a": FakeModelScript(reply="x", load_s=0.0, token_s=0.0, footprint_bytes=100),
        "b": FakeModelScript(reply="y", load_s=0.0, token_s=0.0, footprint_bytes=60),
    }
    with anyio.fail_after(60):
        async with over_http(scripts, budget=200, clock=clock) as s:
            listed = await call(s, lambda c: c.list())
            assert [m.model for m in listed.models] == ["a:latest", "b:latest"]
            assert (await call(s, lambda c: c.ps())).models == []

            await call(s, lambda c: c.chat(model="b", messages=HELLO))
            await call(s, lambda c: c.chat(model="a", messages=HELLO, keep_alive="1h"))
            running = (await call(s, lambda c: c.ps())).models
            assert [m.model for m in running] == ["b:latest", "a:latest"]  # latest expiry first
            b, a = running
            assert (a.size, b.size) == (100, 60)  # measured footprints
            assert a.context_length == 2048
            now = dt.datetime.now(dt.UTC)
            assert a.expires_at is not None and b.expires_at is not None
            assert abs((a.expires_at - now).total_seconds() - 3600) < 60
            assert b.expires_at - now > dt.timedelta(days=365 * 100)  # no keep_alive: "forever"


async def test_keep_alive_zero_unloads_after_the_request() -> None:
    clock = FakeClock()
    with anyio.fail_after(60):
        async with clock.autojump(), over_http(SCRIPTS, budget=200, clock=clock) as s:
            r = await call(s, lambda c: c.chat(model="a", messages=HELLO, keep_alive=0))
            assert r.message.content == "alpha beta gamma"
            assert await resident(s) == []  # unloaded before the answer was sent
            parts = await call(
                s, lambda c: c.generate(model="b", prompt="x", stream=True, keep_alive=0)
            )
            assert parts[-1].done
            assert await resident(s) == []
            assert (await call(s, lambda c: c.ps())).models == []


async def test_an_empty_request_loads_or_unloads_the_model() -> None:
    clock = FakeClock()
    with anyio.fail_after(60):
        async with clock.autojump(), over_http(SCRIPTS, budget=200, clock=clock) as s:
            loaded = await call(s, lambda c: c.generate(model="a"))
            assert (loaded.done, loaded.done_reason) == (True, "load")
            assert await resident(s) == ["a"]
            gone = await call(s, lambda c: c.chat(model="a", messages=[], keep_alive=0))
            assert (gone.done, gone.done_reason) == (True, "unload")
            assert await resident(s) == []


async def test_a_keep_alive_duration_unloads_the_model_once_it_has_been_idle_that_long() -> None:
    clock = FakeClock()  # advanced by hand: the models load and answer in no time
    scripts = {"a": FakeModelScript(reply="x", load_s=0.0, token_s=0.0)}
    with anyio.fail_after(60):
        async with over_http(scripts, budget=200, clock=clock) as s:
            await call(s, lambda c: c.chat(model="a", messages=HELLO, keep_alive="30s"))
            assert await resident(s) == ["a"]
            clock.advance(29.0)
            await anyio.wait_all_tasks_blocked()
            assert await resident(s) == ["a"]
            clock.advance(1.0)  # 30 s idle: the sweeper unloads it
            await wait_until(lambda: s.system.statistics()["loader"].evictions == 1)
            assert await resident(s) == []


async def test_the_ollama_client_gets_ollamas_errors() -> None:
    clock = FakeClock()
    with anyio.fail_after(60):
        async with clock.autojump(), over_http(SCRIPTS, budget=100, clock=clock) as s:
            with pytest.raises(ollama.ResponseError) as info:
                await call(s, lambda c: c.chat(model="nope", messages=HELLO))
            assert info.value.status_code == 404
            assert info.value.error.startswith('model "nope" not found, try pulling it first')
            with pytest.raises(ollama.ResponseError) as info:
                await call(s, lambda c: c.show("nope"))
            assert info.value.status_code == 404
            shown = await call(s, lambda c: c.show("a"))
            assert shown.parameters == "num_ctx 2048"
            assert shown.modelinfo is not None
            assert shown.modelinfo["general.context_length"] == 2048


KEY = "sekret"
LONG = " ".join(["word"] * 3000)
ERRORS: list[tuple[str, str, str, Any, int, str]] = [
    # (case, method, path, body (bytes, JSON value or None), status, message starts with)
    ("malformed JSON", "POST", "/api/chat", b"{", 400, "malformed JSON"),
    ("no body", "POST", "/api/chat", None, 400, "missing request body"),
    ("no model", "POST", "/api/chat", {"messages": HELLO}, 400, "model is required"),
    ("unknown model", "POST", "/api/chat", {"model": "zz", "messages": HELLO}, 404,
     'model "zz" not found, try pulling it first'),
    ("unknown tag", "POST", "/api/chat", {"model": "a:7b", "messages": HELLO}, 404,
     'model "a:7b" not found'),
    ("wrong shape", "POST", "/api/chat", {"model": "a", "messages": "hi"}, 400,
     "invalid request"),
    ("unsupported role", "POST", "/api/chat",
     {"model": "a", "messages": [{"role": "robot", "content": "x"}]}, 400, "messages[0].role"),
    ("tools on a model without a tools template", "POST", "/api/chat",
     {"model": "a", "messages": HELLO,
      "tools": [{"type": "function", "function": {"name": "f"}}]},
     400, "'a' cannot take tools"),
    ("thinking", "POST", "/api/chat", {"model": "a", "messages": HELLO, "think": True}, 400,
     "think is not supported"),
    ("format neither json nor a schema", "POST", "/api/chat",
     {"model": "a", "messages": HELLO, "format": "yaml"}, 400, 'format must be "json"'),
    ("images", "POST", "/api/chat",
     {"model": "a", "messages": [{"role": "user", "content": "x", "images": ["AA=="]}]}, 400,
     "messages[0].images"),
    ("a load option", "POST", "/api/chat",
     {"model": "a", "messages": HELLO, "options": {"num_thread": 4}}, 400,
     "options.num_thread is not supported"),
    ("num_ctx below 1", "POST", "/api/chat",
     {"model": "a", "messages": HELLO, "options": {"num_ctx": 0}}, 400,
     "options.num_ctx must be at least 1"),
    ("bad keep_alive", "POST", "/api/chat",
     {"model": "a", "messages": HELLO, "keep_alive": "soon"}, 400,
     'keep_alive: invalid duration "soon"'),
    ("num_predict 0", "POST", "/api/chat",
     {"model": "a", "messages": HELLO, "options": {"num_predict": 0}}, 400,
     "options.num_predict"),
    ("option of the wrong type", "POST", "/api/chat",
     {"model": "a", "messages": HELLO, "options": {"temperature": "hot"}}, 400,
     "invalid request"),
    ("prompt longer than n_ctx", "POST", "/api/chat",
     {"model": "a", "messages": [{"role": "user", "content": LONG}]}, 400,
     "This model's maximum context length is 2048 tokens"),
    ("generation failed", "POST", "/api/chat",
     {"model": "bad", "messages": HELLO, "stream": False}, 500, "generation failed"),
    ("generate: no model", "POST", "/api/generate", {"prompt": "x"}, 400, "model is required"),
    ("generate: unknown model", "POST", "/api/generate", {"model": "zz", "prompt": "x"}, 404,
     'model "zz" not found'),
    ("generate: suffix without FIM tokens", "POST", "/api/generate",
     {"model": "a", "prompt": "x", "suffix": "y"}, 400, "'a' cannot fill in the middle"),
    ("generate: context", "POST", "/api/generate",
     {"model": "a", "prompt": "x", "context": [1, 2]}, 400, "context"),
    ("generate: raw with system", "POST", "/api/generate",
     {"model": "a", "prompt": "x", "raw": True, "system": "s"}, 400, "raw mode does not support"),
    ("show: no model", "POST", "/api/show", {}, 400, "model is required"),
    ("show: unknown model", "POST", "/api/show", {"model": "zz"}, 404, "model 'zz' not found"),
    ("show: no body", "POST", "/api/show", None, 400, "missing request body"),
    ("wrong method", "GET", "/api/chat", None, 405, "GET /api/chat: Method Not Allowed"),
    ("unknown route", "GET", "/api/nothing", None, 404, "GET /api/nothing: Not Found"),
    ("body too large", "POST", "/api/chat", {"model": "a", "messages": HELLO, "pad": "x" * 40_000},
     413, "request body of"),
    ("wrong key", "POST", "/api/chat", {"model": "a", "messages": HELLO}, 401,
     "Incorrect or missing API key"),
]  # fmt: skip


@pytest.mark.parametrize("row", ERRORS, ids=[e[0] for e in ERRORS])
async def test_errors_have_ollamas_shape_and_status(
    row: tuple[str, str, str, Any, int, str],
) -> None:
    case, method, path, body, status, message = row
    clock = FakeClock()
    scripts = {**SCRIPTS, "bad": FakeModelScript(reply="x", fail_generations=(0,))}
    settings = ServeSettings(api_key=KEY, max_body_bytes=32_768)
    key = "wrong" if case == "wrong key" else KEY
    headers = {"authorization": f"Bearer {key}"}
    with anyio.fail_after(60):
        async with (
            clock.autojump(),
            in_process(scripts, budget=200, clock=clock, settings=settings) as s,
        ):
            content = body if isinstance(body, bytes) or body is None else None
            r = await s.client.request(
                method,
                path,
                content=content,
                json=None if content is not None or body is None else body,
                headers=headers,
            )
            assert r.status_code == status, r.text
            assert r.headers["content-type"].startswith("application/json")
            payload = r.json()
            assert list(payload) == ["error"], payload
            assert payload["error"].startswith(message), payload
            ok = await s.client.post(
                "/api/chat", json={"model": "a", "messages": HELLO, "stream": False},
                headers={"authorization": f"Bearer {KEY}"},
            )  # fmt: skip
            assert ok.status_code == 200  # and the server goes on serving


async def test_a_streamed_generation_that_fails_ends_with_an_error_line() -> None:
    clock = FakeClock()
    scripts = {"bad": FakeModelScript(reply="x", fail_generations=(0,))}
    with anyio.fail_after(60):
        async with clock.autojump(), in_process(scripts, budget=200, clock=clock) as s:
            r = await s.client.post("/api/chat", json={"model": "bad", "messages": HELLO})
            assert r.status_code == 200
            assert r.headers["content-type"] == "application/x-ndjson"
            lines = [httpx.Response(200, content=line).json() for line in r.text.splitlines()]
            assert list(lines[-1]) == ["error"]
            assert lines[-1]["error"].startswith("generation failed")


async def test_version() -> None:
    clock = FakeClock()
    with anyio.fail_after(60):
        async with clock.autojump(), in_process(SCRIPTS, budget=100, clock=clock) as s:
            body = (await s.client.get("/api/version")).json()
            assert body["version"] == "0.5.0"
            assert body["swapos_version"]


async def test_a_client_hanging_up_mid_stream_frees_the_lease() -> None:
    clock = FakeClock()  # driven by hand: no token comes unless the test advances time
    scripts = {"a": FakeModelScript(reply=" ".join(["tok"] * 50), load_s=0.0, token_s=1.0)}
    with anyio.fail_after(60):
        async with over_http(scripts, budget=100, clock=clock) as s:
            first: list[Any] = []

            def read_one() -> None:
                with ollama.Client(host=s.base_url, timeout=30) as c:
                    parts = c.chat(model="a", messages=HELLO, stream=True)
                    first.append(next(p for p in parts if p.message.content))  # not a status
                    parts.close()  # and hang up

            async def reader() -> None:
                await in_thread(read_one)

            async with anyio.create_task_group() as tg:
                tg.start_soon(reader)
                await wait_until(lambda: s.backend.generations.get("a") == 1)
                clock.advance(1.0)  # the first token; the second never comes
            assert (first[0].message.content or "").strip() == "tok"
            assert first[0].done is False
            await wait_until(lambda: s.system.statistics()["generator"].cancelled == 1)
            assert {m.model: m.leases for m in await s.system.models()} == {"a": 0}

"""The real ``openai`` client against ``swapos serve`` on loopback (Hypercorn on the test's
event loop, asyncio and trio; the client runs in a worker thread), on the fake backend."""

from __future__ import annotations

from typing import Any

import anyio
import httpx
import openai
import pytest
from serve_fakes import Served, chat, in_thread, over_http, wait_until

from swapos.backends.fake_script import FakeModelScript
from swapos.messages.events import AnyEvent, ModelEvicted, PhaseFinished
from swapos.serve import ServeSettings
from swapos.testing import FakeClock

SCRIPTS = {
    "a": FakeModelScript(reply="alpha beta gamma", load_s=2.0, token_s=0.5, footprint_bytes=100),
    "b": FakeModelScript(reply="bravo", load_s=3.0, token_s=0.5, footprint_bytes=100),
}


def client(s: Served, api_key: str = "none") -> openai.OpenAI:
    return openai.OpenAI(base_url=s.base_url + "/v1", api_key=api_key, max_retries=0, timeout=30)


def _ask(s: Served, model: str, **extra: Any) -> Any:
    """One whole chat completion (a client per call, closed after it)."""
    text = extra.pop("messages_text", "hello")
    with client(s, extra.pop("api_key", "none")) as c:
        return c.chat.completions.create(
            model=model, messages=[{"role": "user", "content": text}], **extra
        )


def _stream(s: Served, model: str, *, until_content: bool = False, **extra: Any) -> list[Any]:
    """A streamed chat's chunks (all of them, or up to the first with content, then the
    client hangs up)."""
    got = []
    with (
        client(s) as c,
        c.chat.completions.create(
            model=model, messages=[{"role": "user", "content": "hello"}], stream=True, **extra
        ) as events,
    ):
        for chunk in events:
            got.append(chunk)
            if until_content and chunk.choices and chunk.choices[0].delta.content:
                break
    return got


async def test_chat_whole_and_streamed() -> None:
    clock = FakeClock()
    with anyio.fail_after(60):
        async with clock.autojump(), over_http(SCRIPTS, budget=100, clock=clock) as s:
            whole = await in_thread(lambda: _ask(s, "a"))
            assert whole.choices[0].message.content == "alpha beta gamma"
            assert whole.choices[0].finish_reason == "stop"
            assert whole.usage.completion_tokens == 3
            timings = whole.model_extra["swapos"]
            assert timings["load_s"] == pytest.approx(2.0)
            assert whole.model_extra["load_duration"] == 2_000_000_000  # Ollama: nanoseconds
            assert whole.model_extra["eval_count"] == 3

            chunks = await in_thread(lambda: _stream(s, "a", max_tokens=2))
            text = "".join(c.choices[0].delta.content or "" for c in chunks if c.choices)
            assert text.split() == ["alpha", "beta"]
            last = chunks[-1]
            assert last.choices[0].finish_reason == "length"
            assert last.usage.completion_tokens == 2
            assert last.model_extra["swapos"]["load_s"] == 0  # a stayed resident
            assert last.model_extra["swapos"]["queue_wait_s"] == 0


async def test_two_clients_asking_for_models_that_do_not_fit_together_both_succeed() -> None:
    clock = FakeClock()
    replies: dict[str, str] = {}
    with anyio.fail_after(60):
        async with clock.autojump(), over_http(SCRIPTS, budget=100, clock=clock) as s:

            async def one(model: str) -> None:
                r = await in_thread(lambda: _ask(s, model))
                replies[model] = r.choices[0].message.content

            async with anyio.create_task_group() as tg:
                tg.start_soon(one, "a")
                tg.start_soon(one, "b")
            assert replies == {"a": "alpha beta gamma", "b": "bravo"}
            assert s.backend.peak_resident_bytes <= 100  # never both at once


async def test_a_client_disconnecting_mid_stream_frees_the_lease() -> None:
    clock = FakeClock()  # driven by hand: no token comes unless the test advances time
    scripts = {"a": FakeModelScript(reply=" ".join(["tok"] * 50), load_s=0.0, token_s=1.0)}
    with anyio.fail_after(60):
        async with over_http(scripts, budget=100, clock=clock) as s:
            got: list[str] = []

            async def reader() -> None:
                chunks = await in_thread(lambda: _stream(s, "a", until_content=True))
                got.append(chunks[-1].choices[0].delta.content)

            async with anyio.create_task_group() as tg:
                tg.start_soon(reader)
                await wait_until(lambda: s.backend.generations.get("a") == 1)
                clock.advance(1.0)  # the first token; the second never comes
            assert got == ["tok"]
            await wait_until(lambda: s.system.statistics()["generator"].cancelled == 1)
            states = {m.model: m for m in await s.system.models()}
            assert states["a"].leases == 0
            assert s.system.statistics()["generator"].finished == 0  # it did not run on
            await wait_until(lambda: bool(s.system.summary().results))
            result = s.system.summary().results[-1]
            assert result.phases[0].outcome == "cancelled"
            assert s.server.scheduler.snapshot()[0].running == 0
            async with clock.autojump():  # and the server goes on serving
                r = await s.client.post("/v1/chat/completions", json=chat("a", max_tokens=2))
            assert r.json()["choices"][0]["message"]["content"] == "tok tok"


async def test_unload_waits_for_the_request_in_flight() -> None:
    clock = FakeClock()
    events: list[AnyEvent] = []
    scripts = {"a": FakeModelScript(reply="x y z", load_s=0.0, token_s=1.0)}
    with anyio.fail_after(60):
        async with over_http(scripts, budget=100, clock=clock, on_event=events.append) as s:
            done: dict[str, Any] = {}

            async def request() -> None:
                done["chat"] = await in_thread(lambda: _ask(s, "a"))

            async def unload() -> None:
                done["unload"] = (await s.client.post("/unload", json={"model": "a"})).json()

            async with anyio.create_task_group() as tg:
                tg.start_soon(request)
                await wait_until(lambda: s.backend.generations.get("a") == 1)
                tg.start_soon(unload)
                await wait_until(lambda: any(q.held for q in s.server.scheduler.snapshot()))
                assert done == {}  # the unload waits while the request generates
                async with clock.autojump():
                    await wait_until(lambda: len(done) == 2)
            assert done["chat"].choices[0].message.content == "x y z"
            assert done["unload"] == {"unloaded": ["a"], "skipped": {}}
            kinds = [type(e) for e in events if isinstance(e, PhaseFinished | ModelEvicted)]
            assert kinds == [PhaseFinished, ModelEvicted]
            assert not s.backend.open_models


async def test_bad_requests_get_clear_errors_and_the_server_keeps_serving() -> None:
    clock = FakeClock()
    settings = ServeSettings(max_body_bytes=64 * 1024)
    with anyio.fail_after(60):
        async with (
            clock.autojump(),
            over_http(SCRIPTS, budget=100, clock=clock, settings=settings) as s,
        ):

            async def still_serving() -> None:
                r = await in_thread(lambda: _ask(s, "b"))
                assert r.choices[0].message.content == "bravo"

            with pytest.raises(openai.NotFoundError) as missing:
                await in_thread(lambda: _ask(s, "nope"))
            err = missing.value.body
            assert isinstance(err, dict)
            assert err["code"] == "model_not_found" and err["param"] == "model"
            assert "'nope' does not exist" in err["message"] and "a, b" in err["message"]
            await still_serving()

            bad = await s.client.post(
                "/v1/chat/completions",
                content=b'{"model": "a", "messages": [',
                headers={"content-type": "application/json"},
            )
            assert bad.status_code == 400
            assert bad.json()["error"]["type"] == "invalid_request_error"
            assert "malformed JSON" in bad.json()["error"]["message"]
            await still_serving()

            wrong = await s.client.post("/v1/chat/completions", json={"model": "a"})
            assert wrong.status_code == 400
            assert "messages" in wrong.json()["error"]["message"]

            with pytest.raises(openai.BadRequestError) as too_long:
                await in_thread(lambda: _ask(s, "a", messages_text="x" * 3000))
            err = too_long.value.body
            assert isinstance(err, dict) and err["code"] == "context_length_exceeded"
            assert "maximum context length is 2048 tokens" in err["message"]
            await still_serving()

            huge = await s.client.post("/v1/chat/completions", json=chat("a", "x" * 100_000))
            assert huge.status_code == 413
            assert "exceeds the limit of 65536 bytes" in huge.json()["error"]["message"]
            await still_serving()


async def test_a_bearer_key_is_required_when_set() -> None:
    clock = FakeClock()
    with anyio.fail_after(60):
        async with (
            clock.autojump(),
            over_http(
                SCRIPTS, budget=100, clock=clock, settings=ServeSettings(api_key="sekret")
            ) as s,
        ):
            with pytest.raises(openai.AuthenticationError) as refused:
                await in_thread(lambda: _ask(s, "a"))
            assert refused.value.status_code == 401
            assert (await s.client.get("/health")).status_code == 200  # open for probes
            ok = await in_thread(lambda: _ask(s, "a", api_key="sekret"))
            assert ok.choices[0].message.content == "alpha beta gamma"
            assert (await s.client.get("/v1/models")).status_code == 401


async def test_models_running_and_metrics() -> None:
    clock = FakeClock()
    with anyio.fail_after(60):
        async with clock.autojump(), over_http(SCRIPTS, budget=100, clock=clock) as s:

            def list_models() -> Any:
                with client(s) as c:
                    return c.models.list()

            listed = await in_thread(list_models)
            assert [m.id for m in listed.data] == ["a", "b"]
            await in_thread(lambda: _ask(s, "a"))
            models = (await s.client.get("/v1/models")).json()["data"]
            assert [m["swapos"]["state"] for m in models] == ["ready", "absent"]
            running = (await s.client.get("/running")).json()
            assert running["budget_bytes"] == 100 and running["used_bytes"] == 100
            assert [(m["model"], m["state"], m["leases"]) for m in running["models"]] == [
                ("a", "ready", 0),
                ("b", "absent", 0),
            ]
            text = (await s.client.get("/metrics")).text
            assert 'swapos_requests_total{model="a",outcome="ok"} 1\n' in text
            assert 'swapos_load_seconds_total{model="a"} 2\n' in text
            assert 'swapos_generated_tokens_total{model="a"} 3\n' in text
            assert "swapos_model_loads_total 1\n" in text
            assert "# TYPE swapos_decode_tokens_per_second gauge" in text


def test_the_openai_client_sees_the_error_shape() -> None:
    """The error body the client parses is OpenAI's (decoded without a server)."""
    from swapos.serve.errors import RequestError

    body = httpx.Response(404, content=RequestError(404, "gone", "model").body()).json()
    assert body == {
        "error": {
            "message": "gone",
            "type": "invalid_request_error",
            "param": "model",
            "code": None,
        }
    }

"""Contexts as requests need them (fake backend, virtual time): a model loads with its start
context, a request that needs more reloads it with a larger one up to its cap (a swap like
any other, in the event log and under the budget), a prompt past the cap is a 400 with both
numbers, and Ollama's ``num_ctx`` grows the context instead of being refused."""

from __future__ import annotations

from typing import Any

import anyio
from serve_fakes import Served, chat, in_process

from swapos.backends.fake_script import FakeModelScript
from swapos.messages.events import (
    AnyEvent,
    LeaseGranted,
    ModelEvicted,
    ModelLoaded,
    ModelLoadStarted,
)
from swapos.models.spec import ModelSpec
from swapos.serve import ServeSettings
from swapos.testing import FakeClock

START, CAP = 1024, 8192
SCRIPT = FakeModelScript(reply="alpha beta", load_s=1.0, token_s=0.1, footprint_bytes=100,
                         ctx_bytes_per_token=1)  # fmt: skip
"""A fake model whose KV cache takes a byte per token of context (tokens are characters)."""


def spec(name: str, *, start: int = START, cap: int = CAP) -> ModelSpec:
    return ModelSpec(name=name, path=f"/nonexistent/{name}.gguf", n_ctx=start, max_ctx=cap,
                     trained_ctx=32768)  # fmt: skip


def served(names: list[str], *, budget: int, clock: FakeClock, events: list[AnyEvent]) -> Any:
    return in_process(
        dict.fromkeys(names, SCRIPT),
        budget=budget,
        clock=clock,
        specs={n: spec(n) for n in names},
        on_event=events.append,
    )


async def ask(s: Served, model: str, text: str, **extra: Any) -> Any:
    return await s.client.post("/v1/chat/completions", json=chat(model, text, **extra))


def loads(events: list[AnyEvent], model: str) -> list[int]:
    """The contexts ``model`` was loaded with, in order."""
    return [e.n_ctx for e in events if isinstance(e, ModelLoaded) and e.model == model]


def evictions(events: list[AnyEvent]) -> list[tuple[str, str]]:
    """``(model, reason)`` of every eviction before the system shut down."""
    return [
        (e.model, e.reason)
        for e in events
        if isinstance(e, ModelEvicted) and e.reason != "shutdown"
    ]


async def test_a_long_prompt_grows_the_context_once() -> None:
    clock, events = FakeClock(), list[AnyEvent]()
    with anyio.fail_after(30):
        async with clock.autojump(), served(["a"], budget=100_000, clock=clock, events=events) as s:
            short = await ask(s, "a", "hi", max_tokens=16)
            assert short.status_code == 200, short.text
            assert loads(events, "a") == [START]
            long = await ask(s, "a", "x" * 3000, max_tokens=16)
            assert long.status_code == 200, long.text
            assert long.json()["choices"][0]["message"]["content"] == "alpha beta"
            again = await ask(s, "a", "y" * 2000, max_tokens=16)  # fits the grown context
            assert again.status_code == 200, again.text
            (state,) = await s.system.models()
            assert state.n_ctx == 4096
            cards = (await s.client.get("/v1/models")).json()["data"]
            contexts = {"n_ctx": 4096, "n_ctx_max": CAP, "n_ctx_train": 32768}
            assert contexts.items() <= cards[0]["swapos"].items()
    assert loads(events, "a") == [START, 4096]  # one reload, none for the third request
    assert evictions(events) == [("a", "reload with a context of 4096 tokens")]
    started = [e.n_ctx for e in events if isinstance(e, ModelLoadStarted)]
    assert started == [START, 4096]
    assert s.backend.loads == ["a", "a"]


async def test_a_prompt_past_the_cap_is_refused_with_both_numbers() -> None:
    clock, events = FakeClock(), list[AnyEvent]()
    with anyio.fail_after(30):
        async with clock.autojump(), served(["a"], budget=100_000, clock=clock, events=events) as s:
            r = await ask(s, "a", "x" * 9000)
            assert r.status_code == 400
            err = r.json()["error"]
            assert err["code"] == "context_length_exceeded" and err["param"] == "messages"
            assert "maximum context length is 8192 tokens" in err["message"]
            assert s.backend.prompts == []  # nothing ran
            assert "the prompt has 90" in err["message"]  # 9000 characters and the template
            ok = await ask(s, "a", "x" * 8000)  # under the cap: the answer is cut to fit
            assert ok.status_code == 200, ok.text
    assert loads(events, "a") == [CAP]


async def test_a_grown_context_evicts_what_no_longer_fits_beside_it() -> None:
    clock, events = FakeClock(), list[AnyEvent]()
    budget = 5000  # a and b at 1024 (1124 bytes each) fit; a at 4096 (4196) and b do not
    with anyio.fail_after(30):
        async with clock.autojump(), served(["a", "b"], budget=budget, clock=clock,
                                            events=events) as s:  # fmt: skip
            for model in ("a", "b"):
                r = await ask(s, model, "hi", max_tokens=16)
                assert r.status_code == 200, r.text
            assert s.backend.resident_bytes == 2 * (100 + START)
            r = await ask(s, "a", "x" * 3000, max_tokens=16)
            assert r.status_code == 200, r.text
            states = {m.model: m.state for m in await s.system.models()}
            assert states == {"a": "ready", "b": "absent"}
            assert s.system.statistics()["loader"].peak_used_bytes <= budget
    assert evictions(events) == [("a", "reload with a context of 4096 tokens"), ("b", "room for a")]
    assert s.backend.peak_resident_bytes <= budget
    assert loads(events, "a") == [START, 4096]


async def test_a_context_the_budget_can_never_hold_is_a_400_and_keeps_the_model() -> None:
    clock, events = FakeClock(), list[AnyEvent]()
    with anyio.fail_after(30):
        async with clock.autojump(), served(["a"], budget=3000, clock=clock, events=events) as s:
            assert (await ask(s, "a", "hi", max_tokens=16)).status_code == 200
            r = await ask(s, "a", "x" * 3000, max_tokens=16)
            assert r.status_code == 400
            err = r.json()["error"]
            assert err["code"] == "context_length_exceeded"
            assert "cannot hold a context of 4096 tokens" in err["message"]
            assert [m.state for m in await s.system.models()] == ["ready"]
    assert loads(events, "a") == [START]


async def test_a_need_the_budget_holds_but_not_its_power_of_two_loads_with_the_need() -> None:
    clock, events = FakeClock(), list[AnyEvent]()
    with anyio.fail_after(30):  # a at 4096 (4196 bytes) does not fit 3500; a at the need does
        async with clock.autojump(), served(["a"], budget=3500, clock=clock, events=events) as s:
            assert (await ask(s, "a", "hi", max_tokens=16)).status_code == 200
            r = await ask(s, "a", "x" * 3000, max_tokens=16)
            assert r.status_code == 200, r.text
            need = r.json()["usage"]["prompt_tokens"] + 16
    assert loads(events, "a") == [START, need]
    assert evictions(events) == [("a", f"reload with a context of {need} tokens")]
    assert s.backend.peak_resident_bytes <= 3500


async def test_ollamas_num_ctx_grows_the_context_up_to_the_cap() -> None:
    clock, events = FakeClock(), list[AnyEvent]()
    hello = [{"role": "user", "content": "hi"}]
    with anyio.fail_after(30):
        async with clock.autojump(), served(["a"], budget=100_000, clock=clock, events=events) as s:
            r = await s.client.post("/api/chat", json={"model": "a", "messages": hello,
                                    "stream": False, "options": {"num_ctx": 3000}})  # fmt: skip
            assert r.status_code == 200, r.text
            (running,) = (await s.client.get("/api/ps")).json()["models"]
            assert running["context_length"] == 4096
            r = await s.client.post("/api/generate", json={"model": "a", "prompt": "hi",
                                    "stream": False, "options": {"num_ctx": 65536}})  # fmt: skip
            assert r.status_code == 200, r.text  # more than the cap: the cap
            shown = (await s.client.post("/api/show", json={"model": "a"})).json()
            assert shown["model_info"]["general.context_length"] == CAP
            assert shown["parameters"] == f"num_ctx {START}"
    assert loads(events, "a") == [4096, CAP]


async def test_a_reload_waits_for_the_request_the_model_is_serving() -> None:
    clock, events = FakeClock(), list[AnyEvent]()
    slow = FakeModelScript(reply="one two three four five six", token_s=2.0, load_s=1.0)
    leased = anyio.Event()
    answers: dict[str, Any] = {}

    def seen(event: AnyEvent) -> None:
        events.append(event)
        if isinstance(event, LeaseGranted):
            leased.set()

    async def send(name: str, text: str) -> None:
        answers[name] = await ask(s, "a", text, max_tokens=16)

    with anyio.fail_after(30):
        settings = ServeSettings(parallel=2)
        served = in_process(
            {"a": slow}, budget=100_000, clock=clock, specs={"a": spec("a")}, on_event=seen,
            settings=settings,
        )  # fmt: skip
        async with clock.autojump(), served as s, anyio.create_task_group() as tg:
            tg.start_soon(send, "short", "hi")
            await leased.wait()
            tg.start_soon(send, "long", "x" * 3000)
    assert answers["short"].json()["choices"][0]["message"]["content"].split()[-1] == "six"
    assert answers["long"].status_code == 200, answers["long"].text
    kinds = [(type(e).__name__, getattr(e, "reason", "")) for e in events]
    second = [i for i, k in enumerate(kinds) if k[0] == "PhaseStarted"][1]
    released = kinds.index(("LeaseReleased", ""))
    reload = kinds.index(("ModelEvictStarted", "reload with a context of 4096 tokens"))
    assert second < released < reload  # asked while the first ran; reloaded once it ended
    assert loads(events, "a") == [START, 4096]

"""Swap-aware scheduling through the app, in virtual time (FakeClock), on asyncio and trio:
requests are batched by model, the starvation bound holds, and a learned transition
prefetches the next model so its load is hidden."""

from __future__ import annotations

from typing import Any

import anyio
from serve_fakes import Served, chat, in_process

from swapos.backends.fake_script import FakeModelScript
from swapos.serve import ServeSettings
from swapos.serve.scheduler import Scheduler
from swapos.testing import FakeClock

THREE_TOKENS = FakeModelScript(reply="x y z", load_s=1.0, token_s=1.0, footprint_bytes=100)


async def _submit(s: Served, clock: FakeClock, models: list[str]) -> list[dict[str, Any]]:
    """Post one chat per model, 0.1 s of virtual time apart; their responses, in order."""
    out: list[dict[str, Any]] = [{} for _ in models]

    async def post(i: int, model: str) -> None:
        r = await s.client.post("/v1/chat/completions", json=chat(model, f"request {i}"))
        assert r.status_code == 200, r.text
        out[i] = r.json()

    async with anyio.create_task_group() as tg:
        for i, model in enumerate(models):
            tg.start_soon(post, i, model)
            await clock.sleep(0.1)
    return out


async def _run(models: list[str], *, max_wait: float) -> tuple[list[str], list[str], Served]:
    clock = FakeClock()
    scripts = {m: THREE_TOKENS for m in "abc"}
    with anyio.fail_after(30):
        async with (
            clock.autojump(),
            in_process(
                scripts, budget=100, clock=clock, settings=ServeSettings(max_wait=max_wait)
            ) as s,
        ):
            responses = await _submit(s, clock, models)
            assert all(r["choices"][0]["message"]["content"] == "x y z" for r in responses)
            order = [a.model for a in s.server.scheduler.admissions]
            return order, list(s.backend.loads), s


async def test_requests_are_batched_by_model() -> None:
    order, loads, _ = await _run(list("abacab"), max_wait=100.0)
    assert order == list("aaabbc")
    assert loads == ["a", "b", "c"]  # FIFO order would load six times


async def test_without_a_bound_to_spare_requests_run_in_arrival_order() -> None:
    order, loads, _ = await _run(list("abacab"), max_wait=0.0)
    assert order == list("abacab")
    assert loads == list("abacab")


async def test_the_starvation_bound_holds_under_a_stream_of_resident_requests() -> None:
    # a's requests keep coming; b's single request must not wait behind all of them.
    order, _, s = await _run(["a", "b", "a", "a", "a", "a", "a"], max_wait=5.0)
    # t=0 a (cold, until 4); t=4 b has waited 3.9 < 5: a again (until 7); t=7 b has
    # waited 6.9 >= 5 and arrived before every queued a: b goes next.
    assert order == ["a", "a", "b", "a", "a", "a", "a"]
    admissions = list(s.server.scheduler.admissions)
    for i, r in enumerate(admissions):
        for q in admissions[i + 1 :]:
            if r.admitted - q.arrived >= 5.0:  # q was starving when r went ahead of it
                assert q.arrived >= r.arrived, (r, q)
    b = next(a for a in admissions if a.model == "b")
    assert b.admitted - b.arrived < 5.0 + 3.0 + 1e-9  # the bound plus one warm request


async def test_a_learned_transition_hides_the_next_models_load() -> None:
    clock = FakeClock()
    scripts = {
        "a": FakeModelScript(reply="one two three four five", load_s=2.0, token_s=1.0),
        "b": FakeModelScript(reply="ok", load_s=2.0, token_s=1.0),
    }
    with anyio.fail_after(30):
        async with clock.autojump(), in_process(scripts, budget=200, clock=clock) as s:

            async def ask(model: str) -> dict[str, Any]:
                r = await s.client.post("/v1/chat/completions", json=chat(model))
                assert r.status_code == 200, r.text
                return dict(r.json()["swapos"])

            # Unlearned: after a, nothing is predicted, so b pays its load.
            await ask("a")
            assert (await s.client.post("/unload", json={})).json()["unloaded"] == ["a"]
            first_b = await ask("b")
            assert first_b["load_s"] > 0 and first_b["load_hidden_s"] == 0
            # a -> b has now been seen: a's request publishes b as its next use.
            await s.client.post("/unload", json={})
            a = await ask("a")
            assert a["predicted_next"] == "b"
            b = await ask("b")
            assert b["load_s"] == 0
            assert b["load_hidden_s"] > 0


async def test_a_request_cancelled_while_queued_leaves_its_queue() -> None:
    clock = FakeClock()
    scheduler = Scheduler(clock, max_wait=10.0)
    entered: list[str] = []

    async def wait_for_b() -> None:
        async with scheduler.turn("b"):
            entered.append("b")

    with anyio.fail_after(10):
        async with scheduler.turn("a"), anyio.create_task_group() as tg:
            tg.start_soon(wait_for_b)
            await anyio.wait_all_tasks_blocked()
            assert [(q.model, q.waiting) for q in scheduler.snapshot()] == [
                ("a", 0),
                ("b", 1),
            ]
            tg.cancel_scope.cancel()
        snapshot = [(q.model, q.waiting, q.running) for q in scheduler.snapshot()]
        assert snapshot == [("a", 0, 0), ("b", 0, 0)]
        async with scheduler.turn("c"):  # the next request is admitted at once
            pass
    assert entered == []
    assert [a.model for a in scheduler.admissions] == ["a", "c"]

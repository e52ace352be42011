"""Slots on the fake backend, in virtual time (FakeClock), on asyncio and trio: requests of one
model side by side in shared steps (``backends/fake_slots.py``, as the llama engine decodes
them), a request joining mid-decode, one slot cancelled alone, each slot's KV prefix reuse,
and the server admitting a model's slots at once."""

from __future__ import annotations

from typing import Any

import anyio
import msgspec
import pytest
from fakes import fake_system
from serve_fakes import chat, in_process

from swapos.backends.fake import FakeBackend
from swapos.backends.fake_model import FakeModel
from swapos.backends.fake_script import FakeModelScript
from swapos.data.sampling import SamplingParams
from swapos.messages.commands import PhaseSpec
from swapos.models.spec import ModelSpec
from swapos.policies.slots import predicted_speedup
from swapos.records.schema import PhaseRecord
from swapos.testing import FakeClock

FOUR = FakeModelScript(reply="a b c d", token_s=1.0, draw_step_cost=(1.0, 1.5, 2.0))
GATHER = 1e-6  # the fake's steps gather their generations for 1e-9 s each


async def _model(clock: FakeClock, script: FakeModelScript, slots: int) -> FakeModel:
    backend = FakeBackend(clock, {"m": script})
    return await backend.load(ModelSpec(name="m", path="/nonexistent/m.gguf", slots=slots))


async def _generate(
    model: FakeModel, clock: FakeClock, out: dict[str, Any], key: str, max_tokens: int = 16
) -> None:
    pieces: list[str] = []
    got = await model.generate([ord(c) for c in key], SamplingParams(max_tokens=max_tokens),
                               on_token=pieces.append)  # fmt: skip
    out[key] = (got.text, "".join(pieces), clock.now(), got.stats)


async def test_requests_side_by_side_take_the_cost_curves_time_not_one_each() -> None:
    clock = FakeClock()
    out: dict[str, Any] = {}
    with anyio.fail_after(10):
        async with clock.autojump():
            model = await _model(clock, FOUR, slots=3)
            start = clock.now()
            async with anyio.create_task_group() as tg:
                for key in "xyz":
                    tg.start_soon(_generate, model, clock, out, key)
    wall = max(end for _, _, end, _ in out.values()) - start
    assert all(text == streamed == "a b c d" for text, streamed, _, _ in out.values())
    assert wall == pytest.approx(4 * 2.0, abs=GATHER)  # 4 steps of 3 at x2.0, not 3 x 4 s
    assert model._lockstep is not None and model._lockstep.widths == [3, 3, 3, 3]
    one_at_a_time = 3 * 4 * 1.0
    speedup = predicted_speedup({2: 1.5, 3: 2.0}, clients=3, slots=3)
    assert one_at_a_time / wall == pytest.approx(speedup, rel=1e-6)


async def test_a_request_joins_between_steps_and_the_step_widens() -> None:
    clock = FakeClock()
    out: dict[str, Any] = {}
    with anyio.fail_after(10):
        async with clock.autojump():
            script = FakeModelScript(reply="a b c d e f", token_s=1.0, draw_step_cost=(1.0, 1.5))
            model = await _model(clock, script, slots=2)
            start = clock.now()
            async with anyio.create_task_group() as tg:
                tg.start_soon(_generate, model, clock, out, "x")
                await clock.sleep(2.5)  # mid-step: x's third token is being made
                tg.start_soon(_generate, model, clock, out, "y")
    assert model._lockstep is not None
    # x alone for 3 steps (the third was running when y came), then both for 3 more.
    assert model._lockstep.widths == [1, 1, 1, 2, 2, 2, 1, 1, 1]
    assert out["x"][0] == out["y"][0] == "a b c d e f"
    assert out["x"][2] - start == pytest.approx(3 * 1.0 + 3 * 1.5, abs=GATHER)
    assert out["y"][2] - start == pytest.approx(3 + 3 * 1.5 + 3 * 1.0, abs=GATHER)
    assert out["y"][3].ttft_s == pytest.approx(3 + 1.5 - 2.5, abs=GATHER)


async def test_cancelling_one_slot_leaves_the_others_text_and_frees_its_slot() -> None:
    clock = FakeClock()
    out: dict[str, Any] = {}
    with anyio.fail_after(10):
        async with clock.autojump():
            model = await _model(clock, FOUR, slots=3)
            async with anyio.create_task_group() as tg:
                tg.start_soon(_generate, model, clock, out, "x")
                doomed = anyio.CancelScope()
                tg.start_soon(_generate_in, doomed, model, clock, out, "y")
                tg.start_soon(_generate, model, clock, out, "z")
                tg.start_soon(_generate, model, clock, out, "w")  # waits: 3 slots taken
                await clock.sleep(3.0)  # past x, y, z's first step (x2.0)
                doomed.cancel()
    assert "y" not in out
    assert out["x"][0] == out["z"][0] == out["w"][0] == "a b c d"
    assert model._lockstep is not None
    assert model._lockstep.widths[:2] == [3, 3]  # x, y, z; then w takes y's slot
    assert out["w"][3].ttft_s < 4 * 2.0  # it did not wait for x and z to end


async def _generate_in(
    scope: anyio.CancelScope, model: FakeModel, clock: FakeClock, out: dict[str, Any], key: str
) -> None:
    with scope:
        await _generate(model, clock, out, key)


async def test_a_curve_that_does_not_pay_at_two_decodes_them_in_turn() -> None:
    clock = FakeClock()
    out: dict[str, Any] = {}
    steep = FakeModelScript(reply="a b c", token_s=1.0, draw_step_cost=(1.0, 3.0, 3.2, 3.4))
    with anyio.fail_after(10):
        async with clock.autojump():
            model = await _model(clock, steep, slots=4)
            start = clock.now()
            async with anyio.create_task_group() as tg:
                for key in "xy":
                    tg.start_soon(_generate, model, clock, out, key)
    assert model._lockstep is not None and set(model._lockstep.widths) == {1}
    assert max(end for _, _, end, _ in out.values()) - start == pytest.approx(6.0, abs=GATHER)
    ends = sorted(end - start for _, _, end, _ in out.values())
    assert ends == pytest.approx([3.0, 6.0], abs=GATHER)  # the first admitted ends first


async def test_each_slot_restores_its_own_prefix_through_the_system() -> None:
    clock = FakeClock()
    script = FakeModelScript(reply="ok", token_s=1.0, prefill_s_per_token=0.01)
    prefixes = {k: f"conversation {k}: " + k * 200 for k in "xyz"}
    with anyio.fail_after(30):
        async with (
            clock.autojump(),
            fake_system({"m": script}, budget=1000, clock=clock, slots=3) as (system, _),
        ):
            for k, prefix in prefixes.items():  # each conversation's first turn, one by one
                first = PhaseSpec(
                    phase="chat", model="m", prompt=prefix + "hi", stable_prefix=prefix
                )
                await system.generate(f"first-{k}", first)
            records: dict[str, PhaseRecord] = {}

            async def second(k: str) -> None:
                done = await system.generate(f"second-{k}", PhaseSpec(
                    phase="chat", model="m", prompt=prefixes[k] + "hi ok again",
                    stable_prefix=prefixes[k] + "hi ok"))  # fmt: skip
                records[k] = done.records[-1]

            async with anyio.create_task_group() as tg:
                for k in prefixes:
                    tg.start_soon(second, k)
    for k, prefix in prefixes.items():
        assert records[k].kv_restored_tokens >= len(prefix + "hi"), k


async def test_the_server_admits_a_models_slots_at_once() -> None:
    clock = FakeClock()
    with anyio.fail_after(30):
        async with (
            clock.autojump(),
            in_process({"m": FOUR}, budget=1000, clock=clock, slots=3) as s,
        ):
            answers: list[str] = []

            async def post(i: int) -> None:
                r = await s.client.post("/v1/chat/completions", json=chat("m", f"q{i}"))
                assert r.status_code == 200, r.text
                answers.append(r.json()["choices"][0]["message"]["content"])

            async with anyio.create_task_group() as tg:
                for i in range(4):
                    tg.start_soon(post, i)
            admitted = [a.admitted - a.arrived for a in s.server.scheduler.admissions]
            metrics = (await s.client.get("/metrics")).text
    assert answers == ["a b c d"] * 4
    assert admitted[:3] == [0.0, 0.0, 0.0] and admitted[3] > 0  # the fourth waits for a slot
    assert 'swapos_slots{model="m"} 3' in metrics


async def test_slots_zero_is_planned_from_the_cost_curve_when_the_system_opens() -> None:
    clock = FakeClock()
    with anyio.fail_after(10):
        async with (
            clock.autojump(),
            fake_system(
                {"m": FOUR, "flat": FakeModelScript()}, budget=1000, clock=clock, slots=0
            ) as (system, _),  # fmt: skip
        ):
            slots = {name: spec.slots for name, spec in system.specs.items()}
    assert slots == {"m": 3, "flat": 1}  # x1.5 for 2, x2.0 for 3 (capped there); unmeasured: 1


async def test_the_planned_slots_fit_the_budget_that_holds_the_model() -> None:
    """The curve pays for 3 slots; the budget holds the model with 2 (2048 cells a slot)."""
    script = msgspec.structs.replace(FOUR, footprint_bytes=100, ctx_bytes_per_token=1)
    clock = FakeClock()
    with anyio.fail_after(10):
        async with (
            clock.autojump(),
            fake_system({"m": script}, budget=100 + 2 * 2048, clock=clock, slots=0) as (s, _),
        ):
            assert s.specs["m"].slots == 2
            done = await s.generate("t", PhaseSpec(phase="chat", model="m", prompt="hi"))
    assert done.error is None and done.outputs == ["a b c d"]

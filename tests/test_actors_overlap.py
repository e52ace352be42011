"""The actor system on the fake backend, in virtual time."""

from __future__ import annotations

import anyio
import pytest

from swapos.backends.fake_script import FakeModelScript
from swapos.data.sampling import SamplingParams
from swapos.messages.commands import PhaseSpec
from swapos.messages.events import AnyEvent, FirstToken, PrefetchStarted
from swapos.testing import FakeClock
from tests.fakes import fake_system

pytestmark = pytest.mark.anyio

TEN_TOKENS = " ".join(f"w{i}" for i in range(10))


def phase(model: str, name: str = "gen") -> PhaseSpec:
    return PhaseSpec(
        phase=name, model=model, prompt=f"prompt for {model}", params=SamplingParams(max_tokens=100)
    )


async def test_load_of_next_model_overlaps_current_generation() -> None:
    clock = FakeClock()
    scripts = {
        "a": FakeModelScript(load_s=2.0, token_s=0.3, reply=TEN_TOKENS, footprint_bytes=100),
        "b": FakeModelScript(load_s=2.0, token_s=0.3, reply=TEN_TOKENS, footprint_bytes=100),
    }
    with anyio.fail_after(10):
        async with clock.autojump(), fake_system(scripts, budget=200, clock=clock) as (sys, _):
            out = await sys.run_phases("t1", [phase("a"), phase("b")])
    assert out.error is None
    first, second = out.records
    assert first.load_s == pytest.approx(2.0)
    # b was loaded during a's 3 s generation: nothing left to pay.
    assert second.load_s == 0.0
    assert second.load_hidden_s == pytest.approx(2.0)
    assert sys.summary().load_hidden_fraction == pytest.approx(0.5)


async def test_the_next_model_loads_after_the_prefill_not_beside_it() -> None:
    # a prefills for 3 s (a 3-token prompt at 1 s a token), then decodes 10 tokens in 3 s.
    # The speculative load of b (2 s) starts at a's first token, so it never shares the CPU
    # with the prefill, and it still ends before b is needed.
    clock = FakeClock()
    seen: list[AnyEvent] = []
    scripts = {
        "a": FakeModelScript(
            load_s=2.0, prefill_s_per_token=1.0, token_s=0.3, reply=TEN_TOKENS,
            footprint_bytes=100,
        ),
        "b": FakeModelScript(load_s=2.0, token_s=0.3, reply=TEN_TOKENS, footprint_bytes=100),
    }  # fmt: skip
    with anyio.fail_after(10):
        async with (
            clock.autojump(),
            fake_system(scripts, budget=200, clock=clock, on_event=seen.append) as (sys, _),
        ):
            out = await sys.run_phases("t1", [phase("a"), phase("b")])
    assert out.error is None
    first_token = next(e.t for e in seen if isinstance(e, FirstToken))
    prefetch = next(e for e in seen if isinstance(e, PrefetchStarted) and e.model == "b")
    assert prefetch.t == pytest.approx(first_token)
    assert first_token - out.records[0].started_t >= 3.0 + out.records[0].load_s - 1e-9
    assert out.records[1].load_s == 0.0


async def test_two_requests_for_one_model_share_one_load() -> None:
    clock = FakeClock()
    scripts = {"a": FakeModelScript(load_s=2.0, token_s=0.1, reply="x y")}
    with anyio.fail_after(10):
        async with clock.autojump(), fake_system(scripts, budget=200, clock=clock) as (sys, fb):
            results: list[object] = []

            async def run(tid: str) -> None:
                results.append(await sys.run_phases(tid, [phase("a")]))

            async with anyio.create_task_group() as tg:
                tg.start_soon(run, "t1")
                tg.start_soon(run, "t2")
    assert fb.loads == ["a"]
    assert len(results) == 2


async def test_warm_up_shortens_paid_load_when_room_holds_one_model() -> None:
    clock = FakeClock()
    scripts = {
        "a": FakeModelScript(load_s=2.0, token_s=0.3, reply=TEN_TOKENS, footprint_bytes=100),
        "b": FakeModelScript(
            load_s=2.0,
            warm_load_s=0.5,
            warm_s=1.0,
            token_s=0.3,
            reply=TEN_TOKENS,
            footprint_bytes=100,
        ),
    }
    with anyio.fail_after(10):
        async with clock.autojump(), fake_system(scripts, budget=100, clock=clock) as (sys, fb):
            out = await sys.run_phases("t1", [phase("a"), phase("b")])
    assert out.error is None
    assert "b" in fb.warmed
    second = out.records[1]
    assert second.load_s == pytest.approx(0.5)  # 2.0 scripted, 1.5 saved by the warm-up
    assert second.evict_s == pytest.approx(0.0)
    assert fb.peak_resident_bytes <= 100


async def test_leased_model_is_never_evicted_urgent_load_waits() -> None:
    clock = FakeClock()
    scripts = {
        "a": FakeModelScript(load_s=1.0, token_s=0.5, reply=TEN_TOKENS, footprint_bytes=100),
        "b": FakeModelScript(load_s=1.0, token_s=0.1, reply="x", footprint_bytes=100),
    }
    with anyio.fail_after(10):
        async with clock.autojump(), fake_system(scripts, budget=100, clock=clock) as (sys, fb):
            results = {}

            async def run(tid: str, model: str, delay: float) -> None:
                await clock.sleep(delay)
                results[tid] = await sys.run_phases(tid, [phase(model)])

            async with anyio.create_task_group() as tg:
                tg.start_soon(run, "t1", "a", 0.0)
                tg.start_soon(run, "t2", "b", 2.0)
    assert results["t1"].error is None and results["t1"].outputs[0].startswith("w0")
    b = results["t2"].records[0]
    # a generates from t=1 to t=6; b asked at t=2 and had to wait for a's lease.
    assert b.evict_s == pytest.approx(4.0)
    assert b.load_s == pytest.approx(1.0)
    assert fb.peak_resident_bytes <= 100


async def test_wrong_prediction_is_cancelled_without_delaying_urgent_load() -> None:
    clock = FakeClock()
    scripts = {
        "a": FakeModelScript(load_s=2.0, token_s=0.3, reply=TEN_TOKENS, footprint_bytes=100),
        "b": FakeModelScript(load_s=2.0, token_s=0.1, reply="x", footprint_bytes=100),
        "c": FakeModelScript(load_s=2.0, token_s=0.1, reply="x", footprint_bytes=100),
    }
    with anyio.fail_after(10):
        async with clock.autojump(), fake_system(scripts, budget=200, clock=clock) as (sys, fb):
            results = {}

            async def run(tid: str, models: list[str], delay: float) -> None:
                await clock.sleep(delay)
                results[tid] = await sys.run_phases(tid, [phase(m) for m in models])

            async with anyio.create_task_group() as tg:
                tg.start_soon(run, "t1", ["a", "b"], 0.0)  # b is prefetched from t=2
                tg.start_soon(run, "t2", ["c"], 3.0)  # urgent c at t=3: b must give way
    c = results["t2"].records[0]
    assert c.load_s == pytest.approx(2.0)
    assert c.evict_s == pytest.approx(0.0)
    assert results["t1"].error is None
    assert fb.peak_resident_bytes <= 200
    stats = sys.statistics()
    assert stats["loader"].peak_used_bytes <= 200


async def test_model_larger_than_budget_fails_the_phase_with_a_reason() -> None:
    clock = FakeClock()
    scripts = {
        "big": FakeModelScript(footprint_bytes=500),
        "a": FakeModelScript(load_s=1.0, reply="ok", footprint_bytes=100),
    }
    with anyio.fail_after(10):
        async with clock.autojump(), fake_system(scripts, budget=200, clock=clock) as (sys, _):
            bad = await sys.run_phases("t1", [phase("big")])
            good = await sys.run_phases("t2", [phase("a")])
    assert bad.error is not None and "budget" in bad.error and "big" in bad.error
    assert good.error is None  # the rest of the system is undisturbed


async def test_failing_load_is_a_reply_not_a_crash() -> None:
    clock = FakeClock()
    scripts = {"a": FakeModelScript(fail_load="model file /x/a.gguf is truncated")}
    with anyio.fail_after(10):
        async with clock.autojump(), fake_system(scripts, budget=200, clock=clock) as (sys, _):
            out = await sys.run_phases("t1", [phase("a")])
    assert out.error is not None and "truncated" in out.error


async def test_a_generation_that_says_nothing_still_hands_on_its_schedule() -> None:
    # a answers with no token at all, so no first token ever comes: the schedule it carried
    # for the Prefetcher goes out when the generation ends, and b is still prefetched.
    clock = FakeClock()
    seen: list[AnyEvent] = []
    scripts = {
        "a": FakeModelScript(load_s=2.0, prefill_s_per_token=1.0, reply="", footprint_bytes=100),
        "b": FakeModelScript(load_s=2.0, token_s=0.3, reply=TEN_TOKENS, footprint_bytes=100),
    }
    with anyio.fail_after(10):
        async with (
            clock.autojump(),
            fake_system(scripts, budget=200, clock=clock, on_event=seen.append) as (sys, _),
        ):
            out = await sys.run_phases("t1", [phase("a"), phase("b")])
    assert out.error is None and out.records[0].tokens == 0
    assert not any(isinstance(e, FirstToken) for e in seen if e.model == "a")
    assert any(isinstance(e, PrefetchStarted) and e.model == "b" for e in seen)

"""The cost-aware prefetch policy: pure decisions, and its effect in virtual time."""

from __future__ import annotations

import anyio
import pytest

from swapos.backends.fake_script import FakeModelScript
from swapos.data.sampling import SamplingParams
from swapos.messages.commands import PhaseSpec
from swapos.policies.prefetch import CostModel
from swapos.testing import FakeClock
from tests.fakes import fake_system

TOKENS = " ".join(f"w{i}" for i in range(20))


def test_explores_a_load_then_a_warm_up_before_deciding() -> None:
    costs = CostModel()
    assert costs.decide("b", "a").kind == "load"
    costs.observe_generation("a", 21, 4.0, overlapped=True)
    assert costs.decide("b", "a").kind == "warm"


def test_warms_when_contention_makes_a_full_load_cost_more_than_it_saves() -> None:
    costs = CostModel()
    costs.observe_speculative_load("b", 1.0)
    costs.observe_generation("a", 21, 2.0, overlapped=False)  # 10 tok/s alone
    costs.observe_generation("a", 21, 20.0, overlapped=True)  # 1 tok/s under a load
    costs.observe_paid_load("b", 0.2)  # what b costs once warmed
    decision = costs.decide("b", "a")
    assert decision.kind == "warm"
    assert costs.overlap_cost_s("a") == pytest.approx(18.0)
    assert "slow a ~18.00s" in decision.reason


def test_loads_when_generation_does_not_suffer() -> None:
    costs = CostModel()
    costs.observe_speculative_load("b", 1.0)
    costs.observe_generation("a", 21, 2.0, overlapped=False)
    costs.observe_generation("a", 21, 2.1, overlapped=True)
    assert costs.decide("b", "a").kind == "load"


def phases(sequence: str) -> list[PhaseSpec]:
    return [
        PhaseSpec(phase="gen", model=m, prompt="p", params=SamplingParams(max_tokens=50))
        for m in sequence
    ]


def scripts() -> dict[str, FakeModelScript]:
    return {
        m: FakeModelScript(
            load_s=1.0, warm_load_s=0.2, token_s=0.1, reply=TOKENS, footprint_bytes=100
        )
        for m in "abc"
    }


async def wall(mode: str, prefetch: str | None, contention: float) -> float:
    clock = FakeClock()
    with anyio.fail_after(20):
        async with (
            clock.autojump(),
            fake_system(
                scripts(),
                budget=200,
                clock=clock,
                mode=mode,
                prefetch=prefetch,
                contention=contention,
            ) as (system, _),
        ):
            out = await system.run_phases("t", phases("abcabcabc"))
            assert out.error is None
            return system.summary().results[0].wall_clock_s


@pytest.mark.anyio
async def test_auto_policy_is_never_slower_than_sequential_under_heavy_contention() -> None:
    sequential = await wall("sequential", None, 0.95)
    always_load = await wall("overlap", "load", 0.95)
    auto = await wall("overlap", "auto", 0.95)
    assert always_load > sequential  # blind prefetching hurts on a contended CPU
    assert auto <= sequential
    assert auto < always_load


@pytest.mark.anyio
async def test_auto_policy_hides_loads_when_there_is_no_contention() -> None:
    sequential = await wall("sequential", None, 0.0)
    auto = await wall("overlap", "auto", 0.0)
    assert auto <= sequential - 7.0  # 8 of the 9 loads (1 s each) are hidden

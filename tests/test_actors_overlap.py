"""The actor system on the fake backend, in virtual time."""

from __future__ import annotations

import anyio
import pytest

from swapos.backends.base import SamplingParams
from swapos.backends.fake import FakeModelScript
from swapos.messages.commands import PhaseSpec
from swapos.testing import FakeClock
from tests.fakes import fake_system

pytestmark = pytest.mark.anyio

TEN_TOKENS = " ".join(f"w{i}" for i in range(10))


def phase(model: str, name: str = "gen") -> PhaseSpec:
    return PhaseSpec(phase=name, model=model, prompt=f"prompt for {model}",
                     params=SamplingParams(max_tokens=100))


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

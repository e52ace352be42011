"""How many messages one phase costs: the counts the architecture issue tracks.

A regression guard: a change that adds hops to the data path changes these numbers and must
say so here (and in docs/architecture.md). Events to the Recorder are not messages.
"""

from __future__ import annotations

import anyio
import pytest

from swapos.backends.fake_script import FakeModelScript
from swapos.data.sampling import SamplingParams
from swapos.messages.commands import PhaseSpec
from swapos.testing import FakeClock
from tests.fakes import fake_system

pytestmark = pytest.mark.anyio

ROOM = {"PlanRoom", "RoomPlanned"}


def phase(model: str) -> PhaseSpec:
    return PhaseSpec(phase="gen", model=model, prompt="p", params=SamplingParams(max_tokens=4))


async def test_messages_of_a_cold_load_and_of_a_warm_phase() -> None:
    clock = FakeClock()
    scripts = {
        m: FakeModelScript(load_s=1.0, token_s=0.1, reply="a b c", footprint_bytes=100)
        for m in "ab"
    }
    with anyio.fail_after(10):
        async with (
            clock.autojump(),
            fake_system(scripts, budget=100, clock=clock, prefetch="off") as (system, _),
        ):
            await system.run_phases("first", [phase("a")])
            before = system.message_counts()
            await system.run_phases("cold", [phase("b")])  # loads b, evicting a
            middle = system.message_counts()
            await system.run_phases("warm", [phase("b")])  # b is resident
            after = system.message_counts()
    cold = {k: middle.get(k, 0) - before.get(k, 0) for k in middle}
    warm = {k: after.get(k, 0) - middle.get(k, 0) for k in after}
    cold = {k: v for k, v in cold.items() if v}
    warm = {k: v for k, v in warm.items() if v}
    assert sum(cold.values()) == 15, cold
    assert sum(warm.values()) == 13, warm
    # The Loader owns residency: a cold load asks the Evictor for a plan (one round trip) and
    # nothing else crosses between them; a warm phase asks nothing. (Before the ledger had one
    # owner, a cold load cost 19 messages, 6 of them notices keeping two copies in step, and a
    # warm phase 15.)
    assert {k: cold[k] for k in ROOM} == {"PlanRoom": 1, "RoomPlanned": 1}
    assert not ROOM & warm.keys()

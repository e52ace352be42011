"""The memory ledger (swapos/policies/ledger.py): the one record of residency, owned by the
Loader; and the Loader's check of an Evictor plan against it."""

from __future__ import annotations

import anyio
import pytest

from swapos.backends.fake_script import FakeModelScript
from swapos.data.lifecycle import Lifecycle
from swapos.data.residency import RoomPlan
from swapos.data.sampling import SamplingParams
from swapos.messages.commands import PhaseSpec
from swapos.messages.events import LeaseReleased, ModelEvicted
from swapos.policies.eviction import plan_room
from swapos.policies.ledger import Ledger
from swapos.testing import FakeClock
from tests.fakes import fake_system

EMPTY = RoomPlan(victims=[], cancel=[])


def resident(ledger: Ledger, model: str, nbytes: int, *, now: float = 0.0) -> None:
    ledger.want(model, speculative=False, now=now)
    ledger.reserve(model, EMPTY, nbytes)
    ledger.loaded(model, nbytes)


def test_a_load_holds_no_room_until_it_is_reserved() -> None:
    ledger = Ledger(100)
    ledger.want("a", speculative=False, now=0.0)
    assert ledger.status("a") is Lifecycle.WAITING
    assert ledger.used_bytes() == 0
    assert ledger.claims(excluding="b") == []  # the Evictor never sees a waiting load
    ledger.reserve("a", EMPTY, 60)
    assert (ledger.status("a"), ledger.used_bytes()) == (Lifecycle.LOADING, 60)
    ledger.loaded("a", 40)  # the measured footprint replaces the estimate
    assert (ledger.status("a"), ledger.used_bytes(), ledger.peak_used_bytes) == (
        Lifecycle.READY,
        40,
        60,
    )


def test_a_plan_made_stale_by_a_lease_is_not_admitted() -> None:
    ledger = Ledger(100)
    resident(ledger, "a", 100)
    plan = plan_room(
        ledger.claims(excluding="b"), model="b", nbytes=100, budget=100, urgent=True, schedule=[]
    )
    assert plan == RoomPlan(victims=["a"], cancel=[])
    assert ledger.admits("b", 100, plan)
    ledger.lease("a", now=1.0)  # granted while the plan travelled
    assert not ledger.admits("b", 100, plan)
    assert ledger.release("a") == 0
    assert ledger.admits("b", 100, plan)


def test_two_plans_for_the_same_free_room_are_not_both_admitted() -> None:
    ledger = Ledger(100)
    for model in "bc":
        ledger.want(model, speculative=False, now=0.0)
    assert ledger.admits("b", 70, EMPTY) and ledger.admits("c", 70, EMPTY)  # both asked at once
    ledger.reserve("b", EMPTY, 70)
    assert not ledger.admits("c", 70, EMPTY)  # the second answer is checked against the first


def _a_ready_and_a_prefetch_loading() -> Ledger:
    ledger = Ledger(100)
    resident(ledger, "a", 50)
    ledger.want("p", speculative=True, now=0.0)
    ledger.reserve("p", EMPTY, 50)
    ledger.want("b", speculative=False, now=0.0)
    return ledger


def test_an_upgraded_prefetch_is_no_longer_a_load_to_cancel() -> None:
    ledger = _a_ready_and_a_prefetch_loading()
    plan = RoomPlan(victims=["a"], cancel=["p"])
    assert ledger.admits("b", 100, plan)
    ledger.upgrade("p")  # an urgent waiter joined the prefetch: it may no longer be cancelled
    assert not ledger.admits("b", 100, plan)


def test_reserving_marks_victims_and_cancelled_loads_evicting() -> None:
    ledger = _a_ready_and_a_prefetch_loading()
    plan = RoomPlan(victims=["a"], cancel=["p"])
    ledger.reserve("b", plan, 100)
    assert (ledger.status("a"), ledger.status("p"), ledger.status("b")) == (
        Lifecycle.EVICTING,
        Lifecycle.EVICTING,
        Lifecycle.LOADING,
    )
    for model in "ap":
        ledger.forget(model)
    assert ledger.used_bytes() == 100 == ledger.peak_used_bytes


def phase(model: str, tokens: int) -> PhaseSpec:
    return PhaseSpec(
        phase="gen", model=model, prompt=model, params=SamplingParams(max_tokens=tokens)
    )


@pytest.mark.anyio
async def test_a_model_leased_while_room_is_planned_is_not_evicted_under_its_lease() -> None:
    """b needs a's room while a phase on a starts: b waits for a's lease to end, whatever the
    order in which the plan and the lease arrive, and the budget is never exceeded."""
    clock = FakeClock()
    scripts = {
        m: FakeModelScript(load_s=1.0, token_s=0.5, reply="x y z w", footprint_bytes=100)
        for m in "ab"
    }
    evicted_at: list[float] = []
    released_at: list[float] = []

    def watch(event: object) -> None:
        if isinstance(event, ModelEvicted) and event.model == "a":
            evicted_at.append(event.t)
        if isinstance(event, LeaseReleased) and event.model == "a":
            released_at.append(event.t)

    with anyio.fail_after(30):
        async with (
            clock.autojump(),
            fake_system(scripts, budget=100, clock=clock, prefetch="off", on_event=watch) as (
                system,
                _,
            ),
        ):
            await system.run_phases("warm-a", [phase("a", 1)])

            outs = []

            async def run(task_id: str, model: str, tokens: int) -> None:
                outs.append(await system.run_phases(task_id, [phase(model, tokens)]))

            async with anyio.create_task_group() as tg:
                tg.start_soon(run, "on-b", "b", 1)
                tg.start_soon(run, "on-a", "a", 4)
            stats = system.statistics()
    assert [o.error for o in outs] == [None, None]
    assert stats["loader"].peak_used_bytes <= 100
    assert stats["loader"].states == {"a": "absent", "b": "ready"}
    assert len(evicted_at) == 1
    assert evicted_at[0] >= released_at[-1]  # never closed under a lease

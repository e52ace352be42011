"""The handles of work under way on a model (swapos/actors/loads.py): created once, finished
once, joined by every waiter."""

from __future__ import annotations

import anyio
import pytest

from swapos.actors.loads import Eviction, Load


@pytest.mark.anyio
async def test_every_waiter_of_a_load_wakes_once_it_finishes_with_its_verdict() -> None:
    load = Load(speculative=True)
    woke: list[str | None] = []

    async def waiter() -> None:
        await load.wait()
        woke.append(load.outcome)

    with anyio.fail_after(5):
        async with anyio.create_task_group() as tg:
            for _ in range(3):
                tg.start_soon(waiter)
            await anyio.sleep(0.01)
            assert woke == [] and not load.finished
            load.decide("failed", "no such file")
            load.finish()
    assert woke == ["failed"] * 3
    assert (load.failure, load.started_speculative) == ("no such file", True)
    await load.wait()  # a late joiner returns at once


@pytest.mark.anyio
async def test_a_load_finished_without_a_verdict_was_cancelled() -> None:
    load = Load(speculative=False)
    load.finish()
    assert (load.outcome, load.failure) == ("cancelled", "")


@pytest.mark.anyio
async def test_a_load_finished_twice_is_a_bug() -> None:
    load = Load(speculative=False)
    load.decide("loaded")
    load.finish()
    with pytest.raises(RuntimeError, match="finished twice"):
        load.finish()


@pytest.mark.anyio
async def test_a_second_verdict_is_a_bug() -> None:
    load = Load(speculative=False)
    load.decide("denied", "no room")
    with pytest.raises(RuntimeError, match="second verdict"):
        load.decide("loaded")
    assert (load.outcome, load.failure) == ("denied", "no room")


@pytest.mark.anyio
async def test_the_hidden_credit_goes_to_the_first_lease_only() -> None:
    load = Load(speculative=True)
    load.hidden_credit_s = 2.5
    assert (load.take_hidden_credit(), load.take_hidden_credit()) == (2.5, 0.0)


@pytest.mark.anyio
async def test_an_eviction_wakes_its_waiters_once() -> None:
    eviction = Eviction()
    with anyio.fail_after(5):
        async with anyio.create_task_group() as tg:
            tg.start_soon(eviction.wait)
            await anyio.sleep(0.01)
            eviction.finish()
    assert eviction.finished
    with pytest.raises(RuntimeError, match="finished twice"):
        eviction.finish()

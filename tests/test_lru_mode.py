"""The ``lru`` mode: what Ollama and the llama.cpp router do, as the honest peer of overlap.

Load on demand, keep models while they fit the budget, evict the least recently used idle
model when room is needed, never prefetch. The victim choice is pure
(:func:`swapos.policies.eviction.lru_victims`); the actors must make exactly the loads a
plain LRU cache makes on the same schedule.
"""

from __future__ import annotations

from collections import OrderedDict
from collections.abc import Mapping, Sequence

import anyio
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from swapos.actors.system import MODE_SETTINGS
from swapos.backends.fake_script import FakeModelScript
from swapos.data.lifecycle import Lifecycle
from swapos.data.sampling import SamplingParams
from swapos.messages.commands import PhaseSpec
from swapos.models.profile import MODES
from swapos.policies.eviction import LedgerEntry, count_loads, lru_victims, plan_room
from swapos.testing import FakeClock
from tests.fakes import fake_system


def idle(model: str, last_used: float, nbytes: int = 100, leases: int = 0) -> LedgerEntry:
    return LedgerEntry(
        model=model, nbytes=nbytes, status=Lifecycle.READY, leases=leases, last_used=last_used
    )


def ollama_lru(uses: Sequence[str], sizes: Mapping[str, int], budget: int) -> list[str]:
    """A plain LRU cache of models under a byte budget, written independently of SwapOS:
    the loads it makes, in order."""
    cache: OrderedDict[str, int] = OrderedDict()
    loads: list[str] = []
    for model in uses:
        if model in cache:
            cache.move_to_end(model)
            continue
        while sum(cache.values()) + sizes[model] > budget:
            cache.popitem(last=False)
        cache[model] = sizes[model]
        loads.append(model)
    return loads


# --- the pure decision --------------------------------------------------------------------


def test_lru_evicts_nothing_while_the_request_fits() -> None:
    assert lru_victims([idle("a", 1.0)], nbytes=100, budget=200) == []


def test_lru_evicts_the_least_recently_used_idle_model_first() -> None:
    entries = [idle("a", 5.0), idle("b", 1.0), idle("c", 3.0)]
    assert lru_victims(entries, nbytes=100, budget=300) == ["b"]


def test_lru_evicts_only_as_many_models_as_needed() -> None:
    entries = [idle("a", 5.0), idle("b", 1.0), idle("c", 3.0)]
    assert lru_victims(entries, nbytes=200, budget=300) == ["b", "c"]


def test_lru_never_evicts_a_leased_model() -> None:
    entries = [idle("old", 0.0, leases=1), idle("new", 9.0)]
    assert lru_victims(entries, nbytes=100, budget=200) == ["new"]
    assert lru_victims([idle("old", 0.0, leases=1)], nbytes=100, budget=100) is None


def test_lru_counts_models_being_evicted_as_freed() -> None:
    going = LedgerEntry(model="a", nbytes=100, status=Lifecycle.EVICTING, last_used=0.0)
    assert lru_victims([going], nbytes=100, budget=100) == []


def test_lru_ignores_the_schedule() -> None:
    entries = [idle("soon", 1.0), idle("never", 2.0)]
    plan = plan_room(
        entries, model="x", nbytes=100, budget=200, urgent=True, schedule=["x", "soon"], rule="lru"
    )
    assert plan is not None and plan.victims == ["soon"]  # next_use would evict "never"


def test_lru_request_larger_than_the_budget_never_fits() -> None:
    assert lru_victims([], nbytes=300, budget=200) is None


@given(
    uses=st.lists(st.sampled_from("abcd"), min_size=1, max_size=30),
    sizes=st.fixed_dictionaries({m: st.integers(50, 150) for m in "abcd"}),
    extra=st.integers(0, 300),
)
@settings(max_examples=200, deadline=None)
def test_lru_replay_makes_the_loads_of_a_plain_lru_cache(
    uses: list[str], sizes: dict[str, int], extra: int
) -> None:
    budget = max(sizes.values()) + extra
    assert count_loads(uses, sizes, budget, "lru") == len(ollama_lru(uses, sizes, budget))


# --- the mode -----------------------------------------------------------------------------


def test_modes_are_listed_once_with_lru_right_after_overlap() -> None:
    assert MODES[:2] == ("overlap", "lru")
    assert set(MODE_SETTINGS) == set(MODES)
    lru = MODE_SETTINGS["lru"]
    assert (lru.rule, lru.prefetch, lru.preload, lru.unlimited_budget) == (
        "lru",
        "off",
        False,
        False,
    )


SCHEDULES = [
    ("A B C B C A", {"A": 100, "B": 100, "C": 100}, 200),
    ("A B A C A B C C B A", {"A": 100, "B": 100, "C": 100}, 200),
    ("A B C D A B E A B C D E", {m: 100 for m in "ABCDE"}, 300),
    ("A B C A B", {"A": 150, "B": 100, "C": 100}, 250),
]


@pytest.mark.anyio
@pytest.mark.parametrize(("schedule", "sizes", "budget"), SCHEDULES)
async def test_lru_mode_makes_exactly_the_loads_of_an_ollama_style_lru(
    schedule: str, sizes: dict[str, int], budget: int
) -> None:
    uses = schedule.split()
    clock = FakeClock()
    scripts = {
        m: FakeModelScript(load_s=1.0, token_s=0.5, reply="x y z", footprint_bytes=n)
        for m, n in sizes.items()
    }
    phases = [
        PhaseSpec(phase=f"p{i}", model=m, prompt=f"p{i}", params=SamplingParams(max_tokens=5))
        for i, m in enumerate(uses)
    ]
    with anyio.fail_after(20):
        async with (
            clock.autojump(),
            fake_system(scripts, budget=budget, clock=clock, mode="lru") as (sys, fb),
        ):
            out = await sys.run_phases("t", phases)
    assert out.error is None
    expected = ollama_lru(uses, sizes, budget)
    assert fb.loads == expected
    assert not fb.warmed  # no prefetch of any kind
    assert all(r.load_hidden_s == 0.0 for r in out.records)
    paid = [r.load_s for r in out.records]
    assert sum(1 for s in paid if s > 0) == len(expected)  # every load on a critical path
    assert fb.peak_resident_bytes <= budget


@pytest.mark.anyio
async def test_lru_keeps_what_fits_where_sequential_reloads() -> None:
    """A B A B with room for both: lru loads twice, sequential four times."""
    scripts = {m: FakeModelScript(load_s=1.0, reply="x", footprint_bytes=100) for m in "AB"}
    phases = [
        PhaseSpec(phase="p", model=m, prompt="p", params=SamplingParams(max_tokens=2))
        for m in "ABAB"
    ]
    loads = {}
    for mode in ("lru", "sequential"):
        clock = FakeClock()
        with anyio.fail_after(20):
            async with (
                clock.autojump(),
                fake_system(scripts, budget=200, clock=clock, mode=mode) as (sys, fb),
            ):
                assert (await sys.run_phases("t", phases)).error is None
        loads[mode] = fb.loads
    assert loads == {"lru": ["A", "B"], "sequential": ["A", "B", "A", "B"]}

"""Pinned models (a profile's ``pin = true``): never a victim, under every eviction rule."""

from __future__ import annotations

import anyio
import pytest

from swapos.backends.fake_script import FakeModelScript
from swapos.data.lifecycle import Lifecycle
from swapos.data.residency import LedgerEntry
from swapos.data.sampling import SamplingParams
from swapos.messages.commands import PhaseSpec
from swapos.models.profile import ModelConfig, Profile
from swapos.policies.eviction import EvictionRule, evictable, lru_victims, plan_room
from swapos.policies.ledger import Ledger, pinned_bytes
from swapos.testing import FakeClock
from tests.fakes import fake_system


def entry(model: str, *, pinned: bool = False, last_used: float = 0.0) -> LedgerEntry:
    return LedgerEntry(
        model=model, nbytes=100, status=Lifecycle.READY, last_used=last_used, pinned=pinned
    )


# (rule, entries, room for the newcomer "c", victims or None when it cannot fit now)
PLANS: list[tuple[EvictionRule, list[LedgerEntry], int, list[str] | None]] = [
    # the pinned "a" is the least recently used and needed farthest: still not a victim
    ("next_use", [entry("a", pinned=True), entry("b", last_used=5)], 200, ["b"]),
    ("lru", [entry("a", pinned=True), entry("b", last_used=5)], 200, ["b"]),
    ("all_idle", [entry("a", pinned=True), entry("b", last_used=5)], 300, ["b"]),
    # nothing but the pinned model could make room: no plan (an urgent load waits)
    ("next_use", [entry("a", pinned=True)], 100, None),
    ("lru", [entry("a", pinned=True)], 100, None),
    ("all_idle", [entry("a", pinned=True)], 100, None),
    # unpinned, the same "a" goes first
    ("next_use", [entry("a"), entry("b", last_used=5)], 200, ["a"]),
    ("lru", [entry("a"), entry("b", last_used=5)], 200, ["a"]),
]


@pytest.mark.parametrize(("rule", "entries", "budget", "victims"), PLANS)
def test_a_pinned_model_is_never_a_victim(
    rule: EvictionRule, entries: list[LedgerEntry], budget: int, victims: list[str] | None
) -> None:
    plan = plan_room(
        entries, model="c", nbytes=100, budget=budget, urgent=True, schedule=["c", "b"], rule=rule
    )
    assert (plan.victims if plan is not None else None) == victims


def test_lru_victims_skip_pinned_models_and_evictable_says_why() -> None:
    entries = [entry("a", pinned=True), entry("b", last_used=5)]
    assert lru_victims(entries, nbytes=100, budget=200) == ["b"]
    assert lru_victims(entries[:1], nbytes=100, budget=100) is None
    assert not evictable(entries[0]) and evictable(entries[1])
    assert pinned_bytes(entries) == 100


def test_the_ledger_marks_the_entries_of_pinned_models() -> None:
    ledger = Ledger(1000, pinned=frozenset({"a"}))
    ledger.want("a", speculative=False, now=0.0)
    ledger.want("b", speculative=False, now=0.0)
    assert ledger.entry("a").pinned and not ledger.entry("b").pinned  # type: ignore[union-attr]


def profile(pinned: str) -> Profile:
    return Profile(
        name="fake",
        models={
            n: ModelConfig(path=f"/nonexistent/{n}.gguf", pin=n == pinned) for n in ("a", "b", "c")
        },
    )


def phase(model: str) -> PhaseSpec:
    return PhaseSpec(phase="p", model=model, prompt="x", params=SamplingParams(max_tokens=2))


async def test_the_loader_keeps_a_pinned_model_and_refuses_what_cannot_fit_beside_it() -> None:
    scripts = {n: FakeModelScript(load_s=1.0, token_s=0.1, footprint_bytes=100) for n in "abc"}
    clock = FakeClock()
    with anyio.fail_after(30):
        async with (
            clock.autojump(),
            fake_system(scripts, budget=200, clock=clock, profile=profile("a")) as (system, fb),
        ):
            for i, model in enumerate(["a", "b", "c", "b", "c"]):
                assert (await system.run_phases(f"t{i}", [phase(model)])).error is None
                assert "a" in system.residency().ready()  # c evicts b, never the older a
            assert fb.loads == ["a", "b", "c", "b", "c"]
        async with (
            clock.autojump(),
            fake_system(scripts, budget=100, clock=clock, profile=profile("a")) as (system, fb),
        ):
            assert (await system.run_phases("t", [phase("a")])).error is None
            out = await system.run_phases("u", [phase("b")])
            assert out.error is not None and "pinned models hold" in out.error
            assert fb.loads == ["a"]

"""One memory budget that means what it says (issue 29, part 3): the process's fixed
overhead, the models and the KV cache's RAM tier share ``budget``; the tier yields first."""

from __future__ import annotations

import anyio
import pytest
from hypothesis import given
from hypothesis import strategies as st

from swapos.backends.fake_script import FakeModelScript
from swapos.data.residency import RoomPlan
from swapos.data.sampling import SamplingParams
from swapos.messages.commands import PhaseSpec
from swapos.messages.events import AnyEvent, KVDropped
from swapos.policies.ledger import Ledger, kv_room
from swapos.testing import FakeClock
from tests.fakes import fake_system


@given(
    budget=st.integers(0, 10_000),
    overhead=st.integers(0, 5_000),
    models=st.integers(0, 10_000),
    cap=st.integers(0, 5_000),
)
def test_kv_room_with_the_overhead_and_the_models_never_exceeds_the_budget(
    budget: int, overhead: int, models: int, cap: int
) -> None:
    room = kv_room(budget, overhead=overhead, models=models, cap=cap)
    assert 0 <= room <= cap
    if overhead + models <= budget:
        assert overhead + models + room <= budget
        assert room == min(cap, budget - overhead - models)  # all that is left, up to its cap


def test_models_share_the_budget_less_the_overhead() -> None:
    ledger = Ledger(1000, overhead_bytes=300)
    assert ledger.budget("host") == 700
    ledger.want("a", speculative=False, now=0.0)
    empty = RoomPlan(victims=[], cancel=[])
    assert ledger.admits("a", 700, empty)
    assert not ledger.admits("a", 701, empty)


def phase(model: str, i: int) -> PhaseSpec:
    prompt = f"prompt {i} for {model}"
    return PhaseSpec(
        phase="gen", model=model, prompt=prompt, stable_prefix=prompt,
        params=SamplingParams(max_tokens=4),
    )  # fmt: skip


@pytest.mark.anyio
async def test_the_kv_tier_yields_its_room_to_a_model_under_the_process_budget() -> None:
    # budget 1000 = 100 of overhead + two models of 420 + what is left (60) for KV states.
    clock = FakeClock()
    scripts = {
        m: FakeModelScript(load_s=1.0, token_s=0.1, reply="a b c", footprint_bytes=420)
        for m in ("a", "b")
    }
    seen: list[AnyEvent] = []
    with anyio.fail_after(30):
        async with (
            clock.autojump(),
            fake_system(
                scripts, budget=1000, clock=clock, process_budget=True, overhead_bytes=100,
                kv_cache_bytes=500, on_event=seen.append,
            ) as (sys, _),
        ):  # fmt: skip
            out = await sys.run_phases("t1", [phase("a", i) for i in range(8)])
            assert out.error is None
            kv = sys.statistics()["kvcache"]
            assert kv.budget_bytes == 480  # 1000 - 100 - 420: with one model, all the rest
            held_before = kv.bytes
            out = await sys.run_phases("t2", [phase("b", 0)])
            assert out.error is None
            kv = sys.statistics()["kvcache"]
            loader = sys.statistics()["loader"]
            summary = sys.summary()
    assert held_before > 60  # the states of a's eight phases did not fit in 60 bytes...
    assert kv.budget_bytes == 60  # ...which is all b's load left
    assert kv.bytes <= 60
    assert kv.yielded >= 1
    assert loader.used_bytes + loader.overhead_bytes + kv.budget_bytes <= 1000
    yielded = [e for e in seen if isinstance(e, KVDropped) and "yielded" in e.reason]
    assert len(yielded) == kv.yielded == summary.kv_yielded  # counted in the run summary
    assert summary.overhead_bytes == 100  # the fixed share, from the log's header


@pytest.mark.anyio
async def test_without_a_process_budget_the_kv_tier_is_outside_it() -> None:
    clock = FakeClock()
    scripts = {"a": FakeModelScript(load_s=1.0, reply="x", footprint_bytes=900)}
    with anyio.fail_after(10):
        async with (
            clock.autojump(),
            fake_system(scripts, budget=1000, clock=clock, kv_cache_bytes=500) as (sys, _),
        ):
            out = await sys.run_phases("t1", [phase("a", 0)])
            kv = sys.statistics()["kvcache"]
    assert out.error is None
    assert kv.budget_bytes == 500


def test_every_run_summary_reports_peak_rss_against_the_budget() -> None:
    from swapos.records.schema import PhaseRecord, RunInfo, TaskResult
    from swapos.records.summary import summarize

    phases = [
        PhaseRecord(task_id="t", phase_id=f"p{n}", phase="code", peak_rss_bytes=n)
        for n in (600, 900)
    ]
    result = TaskResult(task_id="t", phases=phases)
    assert summarize([result], RunInfo(budget_bytes=1000)).peak_rss_of_budget == 0.9
    assert summarize([result], RunInfo(budget_bytes=2**62)).peak_rss_of_budget == 0.0


@pytest.mark.real_model
@pytest.mark.anyio
async def test_a_process_budget_on_the_llama_backend_shares_it_with_overhead_and_kv() -> None:
    # Two swaps of the tiny Gemma files under 700 MiB, 4 tokens a phase: the overhead and
    # the KV tier share the budget with the models, and the states survive the swaps (the
    # tier yields only what a load needs). The overhead is given: this test process holds
    # whatever earlier tests left, which a measured baseline would count.
    import msgspec

    from swapos.actors.system import open_system
    from swapos.models.bundled import resolve_profile

    profile = msgspec.structs.replace(resolve_profile("tiny"), budget="700MiB")
    names = sorted(profile.models)[:2]
    prompt = "def add(a, b):\n"
    phases = [
        PhaseSpec(phase="gen", model=m, prompt=prompt, stable_prefix=prompt,
                  params=SamplingParams(max_tokens=4))
        for m in names * 2
    ]  # fmt: skip
    with anyio.fail_after(300):
        async with open_system(profile, process_budget=True, overhead_bytes=64 * 2**20) as system:
            out = await system.run_phases("t", phases)
            loader = system.statistics()["loader"]
            kv = system.statistics()["kvcache"]
            summary = system.summary()
    assert out.error is None
    assert loader.overhead_bytes == 64 * 2**20 and loader.kv_ram_bytes is not None
    assert loader.used_bytes + loader.overhead_bytes + loader.kv_ram_bytes <= 700 * 2**20
    assert kv.budget_bytes == loader.kv_ram_bytes
    assert kv.hits >= 1  # a state saved before a swap was restored after it
    assert summary.peak_rss_of_budget > 0


def test_the_process_baseline_is_measured_once() -> None:
    from swapos.sysinfo import process_baseline_bytes, rss_bytes

    first = process_baseline_bytes()
    assert 0 < first <= max(rss_bytes(), first)
    grown = bytearray(32 * 2**20)  # the process grows; its baseline does not
    assert process_baseline_bytes() == first
    del grown


@pytest.mark.anyio
async def test_a_library_callers_budget_stays_the_models_by_default() -> None:
    clock = FakeClock()
    scripts = {"a": FakeModelScript(load_s=1.0, reply="x", footprint_bytes=900)}
    with anyio.fail_after(10):
        async with clock.autojump(), fake_system(scripts, budget=1000, clock=clock) as (sys, _):
            loader = sys.statistics()["loader"]
    assert (loader.overhead_bytes, loader.kv_ram_bytes) == (0, None)


async def _tiers_after_phases(scripts: dict[str, FakeModelScript], n: int) -> tuple[list[int], int]:
    """The KV tier's size after each of ``n`` phases of model ``a`` under a 1000-byte
    process budget (overhead 100), and the Loader's ``unseen_bytes`` at the end."""
    clock = FakeClock()
    with anyio.fail_after(30):
        async with (
            clock.autojump(),
            fake_system(
                scripts, budget=1000, clock=clock, process_budget=True, kv_cache_bytes=500
            ) as (sys, _),
        ):
            tiers = []
            for i in range(n):
                out = await sys.run_phases(f"t{i}", [phase("a", i)])
                assert out.error is None
                await anyio.sleep(0.1)  # let the resize reach the KV cache
                tiers.append(sys.statistics()["kvcache"].budget_bytes)
            return tiers, sys.statistics()["loader"].unseen_bytes


@pytest.mark.anyio
async def test_rss_above_the_budget_at_a_release_comes_off_the_kv_tier(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """With a measured overhead (the process is SwapOS's own), what the process holds above
    the budget when a generation ends is memory the ledger does not see (weights paged in
    after the load): the KV tier gives it up, and keeps it given up."""
    import swapos.actors.accounting as accounting_module
    import swapos.actors.system as system_module

    monkeypatch.setattr(system_module, "process_baseline_bytes", lambda: 100)
    rss = iter([1000, 1150, 1100, 900])  # at each release: within, 150 over, 100 over, under
    monkeypatch.setattr(accounting_module, "rss_bytes", lambda: next(rss))
    monkeypatch.setattr(accounting_module, "peak_rss_bytes", lambda: 0)
    scripts = {"a": FakeModelScript(load_s=1.0, token_s=0.1, reply="a b", footprint_bytes=420)}
    tiers, unseen = await _tiers_after_phases(scripts, 4)
    assert tiers == [480, 330, 230, 230]  # 1000 - 100 - 420, less 150, less 100; never back
    assert unseen == 250


@pytest.mark.anyio
async def test_a_peak_above_the_budget_during_a_phase_comes_off_the_kv_tier(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """A transient (a state saved while the tier is full) is gone by the release: the
    phase's peak RSS is what counts."""
    import swapos.actors.accounting as accounting_module
    import swapos.actors.system as system_module

    monkeypatch.setattr(system_module, "process_baseline_bytes", lambda: 100)
    monkeypatch.setattr(accounting_module, "rss_bytes", lambda: 900)
    peaks = iter([1150, 1000])  # the first phase peaks 150 over, the second within
    monkeypatch.setattr(accounting_module, "peak_rss_bytes", lambda: next(peaks))
    scripts = {"a": FakeModelScript(load_s=1.0, token_s=0.1, reply="a b", footprint_bytes=420)}
    tiers, unseen = await _tiers_after_phases(scripts, 2)
    assert (tiers, unseen) == ([330, 330], 150)


@pytest.mark.anyio
async def test_the_kv_tier_leaves_room_for_the_largest_state_a_held_model_saves(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    import swapos.actors.accounting as accounting_module
    import swapos.actors.system as system_module

    monkeypatch.setattr(system_module, "process_baseline_bytes", lambda: 100)
    monkeypatch.setattr(accounting_module, "rss_bytes", lambda: 0)
    monkeypatch.setattr(accounting_module, "peak_rss_bytes", lambda: 0)
    a = FakeModelScript(load_s=1.0, token_s=0.1, reply="a b", footprint_bytes=420, state_bytes=60)
    tiers, _ = await _tiers_after_phases({"a": a}, 1)
    assert tiers == [1000 - 100 - 420 - 60]


@pytest.mark.anyio
async def test_a_given_overhead_means_the_rss_is_not_watched(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    import swapos.actors.accounting as accounting_module

    monkeypatch.setattr(accounting_module, "rss_bytes", lambda: 10**12)  # far over any budget
    clock = FakeClock()
    scripts = {"a": FakeModelScript(load_s=1.0, token_s=0.1, reply="a b", footprint_bytes=420)}
    with anyio.fail_after(30):
        async with (
            clock.autojump(),
            fake_system(
                scripts, budget=1000, clock=clock, process_budget=True, overhead_bytes=100,
                kv_cache_bytes=500,
            ) as (sys, _),
        ):  # fmt: skip
            assert (await sys.run_phases("t", [phase("a", 0)])).error is None
            loader = sys.statistics()["loader"]
    assert loader.unseen_bytes == 0

"""GPU offload on the fake backend, in virtual time: two budgets, one ledger (issue 27).

The fake GPU (``FakeBackend(gpu=..., device_memory=...)``) holds scripted device footprints
and takes scripted upload times, so what a machine with a GPU does is tested here: swaps by
next use under a device budget, a partly offloaded model on both budgets, the refusal of a
CPU-only build before any phase, and the prefetcher learning a load's upload.
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from typing import Any

import anyio
import msgspec
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from swapos.actors.system import System, open_system
from swapos.backends.fake import FakeBackend
from swapos.backends.fake_script import FakeModelScript
from swapos.data.lifecycle import Lifecycle
from swapos.data.residency import LedgerEntry, RoomPlan
from swapos.data.sampling import SamplingParams
from swapos.errors import ProfileError
from swapos.messages.commands import PhaseSpec
from swapos.messages.events import AnyEvent, ModelLoaded, PhaseStarted, ReservationMade
from swapos.models.profile import (
    DEVICE_MARGIN_MIN,
    ModelConfig,
    Profile,
    decode_profile,
    device_budget_bytes,
    parse_device_budget,
)
from swapos.models.spec import ModelSpec
from swapos.policies.eviction import count_loads, lru_victims, plan_room
from swapos.policies.ledger import Ledger
from swapos.policies.prefetch import CostModel
from swapos.testing import FakeClock

TEN_TOKENS = " ".join(f"w{i}" for i in range(10))


def phase(model: str) -> PhaseSpec:
    return PhaseSpec(
        phase="gen", model=model, prompt=f"prompt for {model}", params=SamplingParams(max_tokens=50)
    )


@asynccontextmanager
async def gpu_system(
    scripts: dict[str, FakeModelScript],
    *,
    clock: FakeClock,
    budget: int = 10_000,
    device_budget: int | str = 1_000,
    gpu_layers: dict[str, int] | None = None,
    gpu: bool = True,
    device_memory: int | None = None,
    **kwargs: Any,
) -> AsyncIterator[tuple[System, FakeBackend]]:
    """A system on the fake backend whose models offload ``gpu_layers`` (default: all)."""
    layers = gpu_layers if gpu_layers is not None else {n: -1 for n in scripts}
    backend = FakeBackend(clock, scripts, gpu=gpu, device_memory=device_memory)
    specs = {
        n: ModelSpec(name=n, path=f"/nonexistent/{n}.gguf", gpu_layers=layers.get(n, 0))
        for n in scripts
    }
    profile = Profile(
        name="gpu",
        budget=budget,
        device_budget=device_budget,
        models={n: ModelConfig(path=f"/nonexistent/{n}.gguf") for n in scripts},
    )
    async with open_system(
        profile, backend=backend, specs=specs, clock=clock, budget_bytes=budget, **kwargs
    ) as system:
        yield system, backend


# --- the fake backend, on FakeClock, asyncio and trio --------------------------------------


@pytest.mark.anyio
async def test_device_budget_holding_one_of_two_models_swaps_them_by_next_use() -> None:
    # Host memory holds both; the GPU holds one: every alternation is a device swap, and
    # the device budget (and the fake GPU's memory) is never exceeded.
    clock = FakeClock()
    scripts = {
        m: FakeModelScript(
            load_s=0.5, upload_s=1.0, token_s=0.1, reply=TEN_TOKENS,
            footprint_bytes=100, device_bytes=600,
        )
        for m in ("a", "b")
    }  # fmt: skip
    seen: list[AnyEvent] = []
    with anyio.fail_after(30):
        async with (
            clock.autojump(),
            gpu_system(
                scripts, clock=clock, device_budget=1000, device_memory=1000, on_event=seen.append
            ) as (sys, fb),
        ):
            out = await sys.run_phases("t1", [phase("a"), phase("b"), phase("a"), phase("b")])
            stats = sys.statistics()["loader"]
    assert out.error is None
    assert fb.loads == ["a", "b", "a", "b"]
    assert fb.peak_device_bytes == 600  # never both on the device
    assert stats.peak_device_bytes <= 1000
    assert stats.device_budget_bytes == 1000
    assert fb.peak_resident_bytes == 100  # an evicted model leaves both memories
    reservations = [e for e in seen if isinstance(e, ReservationMade)]
    assert all(e.device_budget_bytes == 1000 for e in reservations)
    assert [e.victims for e in reservations] == [[], ["a"], ["b"], ["a"]]
    # The measured upload is recorded with each load.
    loads = [e for e in seen if isinstance(e, ModelLoaded)]
    assert [e.upload_s for e in loads] == [1.0] * 4
    assert {e.device for e in loads} == {"FakeGPU0"}


@pytest.mark.anyio
async def test_next_use_keeps_the_model_needed_soonest_on_the_device() -> None:
    # Three models, the device holds two: when c comes in, a (needed next) stays and b
    # (never needed again) goes; host memory holds all three.
    clock = FakeClock()
    scripts = {
        m: FakeModelScript(load_s=0.2, token_s=0.1, reply="x y", device_bytes=400)
        for m in ("a", "b", "c")
    }
    with anyio.fail_after(30):
        async with (
            clock.autojump(),
            gpu_system(scripts, clock=clock, device_budget=800, prefetch="off") as (sys, fb),
        ):
            out = await sys.run_phases("t1", [phase("a"), phase("b"), phase("c"), phase("a")])
    assert out.error is None
    assert fb.loads == ["a", "b", "c"]  # a was never reloaded
    assert fb.peak_device_bytes <= 800


@pytest.mark.anyio
async def test_partly_offloaded_model_claims_both_budgets() -> None:
    clock = FakeClock()
    scripts = {
        "half": FakeModelScript(
            load_s=1.0, upload_s=0.5, reply="x", footprint_bytes=300, device_bytes=200
        ),
        "cpu": FakeModelScript(load_s=1.0, reply="x", footprint_bytes=400, device_bytes=999),
    }
    seen: list[AnyEvent] = []
    with anyio.fail_after(10):
        async with (
            clock.autojump(),
            gpu_system(scripts, clock=clock, gpu_layers={"half": 12}, on_event=seen.append) as (
                sys,
                fb,
            ),
        ):
            out = await sys.run_phases("t1", [phase("half"), phase("cpu")])
            stats = sys.statistics()["loader"]
    assert out.error is None
    assert stats.used_bytes == 700  # host: both models
    assert stats.device_used_bytes == 200  # device: only the offloaded one
    reservation = next(e for e in seen if isinstance(e, ReservationMade) and e.model == "half")
    assert (reservation.nbytes, reservation.device_nbytes) == (300, 200)
    cpu = next(e for e in seen if isinstance(e, ReservationMade) and e.model == "cpu")
    assert cpu.device_nbytes == 0  # gpu_layers = 0: its scripted device bytes do not apply
    loaded = next(e for e in seen if isinstance(e, ModelLoaded) and e.model == "half")
    assert (loaded.measured_bytes, loaded.measured_device_bytes) == (300, 200)
    assert fb.device_resident_bytes == 0  # closed on exit


@pytest.mark.anyio
async def test_profile_asking_for_layers_on_a_cpu_only_build_fails_before_any_phase() -> None:
    clock = FakeClock()
    scripts = {"a": FakeModelScript(load_s=1.0, reply="x", device_bytes=10)}
    seen: list[AnyEvent] = []
    with anyio.fail_after(10), pytest.raises(ProfileError) as info:
        async with gpu_system(scripts, clock=clock, gpu=False, on_event=seen.append) as (sys, _):
            await sys.run_phases("t1", [phase("a")])
    message = str(info.value)
    assert "\n" not in message  # one line
    assert '`models.a.gpu_layers` = "all"' in message
    assert 'CMAKE_ARGS="-DGGML_CUDA=on"' in message and "docs/gpu.md" in message
    assert not any(isinstance(e, PhaseStarted) for e in seen)


@pytest.mark.anyio
async def test_a_model_bigger_than_the_device_budget_fails_its_phase_naming_it() -> None:
    clock = FakeClock()
    scripts = {"a": FakeModelScript(load_s=1.0, reply="x", device_bytes=5000)}
    with anyio.fail_after(10):
        async with (
            clock.autojump(),
            gpu_system(scripts, clock=clock, device_budget=1000) as (
                sys,
                fb,
            ),
        ):
            out = await sys.run_phases("t1", [phase("a")])
    assert out.error is not None and "`device_budget`" in out.error
    assert fb.loads == []


@pytest.mark.anyio
async def test_prefetch_under_a_device_budget_loads_the_next_model_while_one_generates() -> None:
    # The device holds both: b's read and upload are hidden behind a's generation (a GPU's
    # copy engine and disk against its compute: no contention).
    clock = FakeClock()
    scripts = {
        m: FakeModelScript(
            load_s=0.5, upload_s=1.0, token_s=0.3, reply=TEN_TOKENS, device_bytes=400
        )
        for m in ("a", "b")
    }
    with anyio.fail_after(10):
        async with (
            clock.autojump(),
            gpu_system(scripts, clock=clock, device_budget=800) as (sys, _),
        ):
            out = await sys.run_phases("t1", [phase("a"), phase("b")])
            costs = sys.statistics()["prefetcher"]
    assert out.error is None
    first, second = out.records
    assert first.load_s == pytest.approx(1.5)  # read + upload, paid
    assert second.load_s == 0.0
    assert second.load_hidden_s == pytest.approx(1.5)
    assert costs.read_s["b"] == pytest.approx(0.5)
    assert costs.upload_s["b"]["FakeGPU0"] == pytest.approx(1.0)
    assert costs.load_estimate_s["b"] == pytest.approx(1.5)


def test_checked_specs_refuse_layers_on_this_cpu_only_build_with_the_install_hint() -> None:
    # What the command lines call before any phase: one line, exit 2.
    from swapos.models.resolve import checked_model_specs
    from swapos.sysinfo import gpu_offload_supported

    if gpu_offload_supported():
        pytest.skip("this llama-cpp-python is a GPU build")
    profile = decode_profile(BASE + "gpu_layers = 8")
    with pytest.raises(ProfileError, match=r"`models\.m\.gpu_layers` = 8, .*CPU-only") as info:
        checked_model_specs(profile)
    assert 'CMAKE_ARGS="-DGGML_CUDA=on"' in str(info.value)
    assert "\n" not in str(info.value)


# --- the pure policies ---------------------------------------------------------------------


def entry(model: str, host: int, device: int, **kw: Any) -> LedgerEntry:
    return LedgerEntry(model=model, nbytes=host, device_bytes=device, status=Lifecycle.READY, **kw)


def test_a_load_lacking_only_device_memory_evicts_only_for_device_memory() -> None:
    entries = [
        entry("host_only", 500, 0, last_used=0.0),  # farthest, but frees no device memory
        entry("on_gpu", 100, 600, last_used=1.0),
    ]
    plan = plan_room(
        entries, model="new", nbytes=100, budget=10_000, urgent=True,
        schedule=["new", "on_gpu"], device_nbytes=600, device_budget=1000,
    )  # fmt: skip
    assert plan == RoomPlan(victims=["on_gpu"], cancel=[])


def test_a_load_lacking_only_host_memory_evicts_only_for_host_memory() -> None:
    # gpu_only (least recently used) holds no host memory: evicting it would not help.
    entries = [entry("gpu_only", 0, 900, last_used=0.0), entry("host_heavy", 900, 0)]
    plan = plan_room(
        entries, model="new", nbytes=500, budget=1000, urgent=True, schedule=[],
        device_nbytes=50, device_budget=1000,
    )  # fmt: skip
    assert plan == RoomPlan(victims=["host_heavy"], cancel=[])
    lru = lru_victims(entries, nbytes=500, budget=1000, device_nbytes=50, device_budget=1000)
    assert lru == ["host_heavy"]


def test_a_claim_bigger_than_the_device_budget_never_fits() -> None:
    plan = plan_room(
        [], model="m", nbytes=1, budget=10, urgent=True, schedule=[],
        device_nbytes=11, device_budget=10,
    )  # fmt: skip
    assert plan is None


def test_ledger_admits_a_plan_only_when_it_fits_both_budgets() -> None:
    ledger = Ledger(1000, device_budget_bytes=1000)
    ledger.want("a", speculative=False, now=0.0)
    ledger.reserve("a", RoomPlan(victims=[], cancel=[]), 100, 800)
    ledger.loaded("a", 100, 700)  # measured device bytes replace the estimate
    assert (ledger.used_bytes(), ledger.used_bytes("device")) == (100, 700)
    ledger.want("b", speculative=False, now=1.0)
    empty = RoomPlan(victims=[], cancel=[])
    assert ledger.admits("b", 100, empty, device_bytes=300)
    assert not ledger.admits("b", 100, empty, device_bytes=301)
    assert ledger.admits("b", 100, RoomPlan(victims=["a"], cancel=[]), device_bytes=1000)
    assert ledger.peak_device_bytes == 800


CLAIMS = st.lists(
    st.tuples(
        st.integers(0, 600),  # host bytes
        st.integers(0, 600),  # device bytes
        st.integers(0, 2),  # leases
        st.sampled_from([Lifecycle.READY, Lifecycle.LOADING, Lifecycle.EVICTING]),
        st.booleans(),  # speculative
    ),
    max_size=6,
)


@settings(max_examples=300, deadline=None)
@given(
    claims=CLAIMS,
    want=st.tuples(st.integers(0, 1200), st.integers(0, 1200)),
    budgets=st.tuples(st.integers(1, 2000), st.integers(0, 2000)),
    urgent=st.booleans(),
    rule=st.sampled_from(["next_use", "lru", "all_idle"]),
    schedule=st.permutations([f"m{i}" for i in range(7)]),
)
def test_plan_room_never_exceeds_either_budget_and_never_evicts_a_leased_model(  # noqa: PLR0917
    claims: list[tuple[int, int, int, Lifecycle, bool]],
    want: tuple[int, int],
    budgets: tuple[int, int],
    urgent: bool,
    rule: Any,
    schedule: list[str],
) -> None:
    budget, device_budget = budgets
    entries = []
    for i, (host, device, leases, status, speculative) in enumerate(claims):
        entries.append(
            LedgerEntry(
                model=f"m{i}", nbytes=host, device_bytes=device, status=status,
                leases=leases if status is Lifecycle.READY else 0,
                speculative=speculative and status is Lifecycle.LOADING, last_used=float(i),
            )
        )  # fmt: skip
    # Only a ledger that holds its budgets is a valid starting point.
    held = [e for e in entries if e.status.holds_room]
    if sum(e.nbytes for e in held) > budget or sum(e.device_bytes for e in held) > device_budget:
        return
    plan = plan_room(
        entries, model="new", nbytes=want[0], budget=budget, urgent=urgent,
        schedule=schedule, rule=rule, device_nbytes=want[1], device_budget=device_budget,
    )  # fmt: skip
    if plan is None:
        return
    by_name = {e.model: e for e in entries}
    for victim in plan.victims:
        assert by_name[victim].status is Lifecycle.READY and by_name[victim].leases == 0
    for cancelled in plan.cancel:
        assert by_name[cancelled].status is Lifecycle.LOADING and by_name[cancelled].speculative
    going = set(plan.victims) | set(plan.cancel)
    staying = [e for e in entries if e.model not in going and e.status is not Lifecycle.EVICTING]
    assert sum(e.nbytes for e in staying) + want[0] <= budget
    assert sum(e.device_bytes for e in staying) + want[1] <= device_budget


@settings(max_examples=200, deadline=None)
@given(
    uses=st.lists(st.sampled_from("abcd"), min_size=1, max_size=30),
    device=st.fixed_dictionaries({m: st.sampled_from([0, 200]) for m in "abcd"}),
)
def test_next_use_needs_no_more_loads_than_lru_under_a_device_budget(
    uses: list[str], device: dict[str, int]
) -> None:
    # Host memory holds everything; the device holds two offloaded models (equal sizes, as
    # Belady's optimality needs): models on the CPU never compete for it.
    sizes = dict.fromkeys("abcd", 1)
    kw: dict[str, Any] = {"device_sizes": device, "device_budget": 500}
    assert count_loads(uses, sizes, 100, "next_use", **kw) <= count_loads(
        uses, sizes, 100, "lru", **kw
    )


# --- the cost model ------------------------------------------------------------------------


def test_cost_model_learns_a_load_as_read_plus_upload_per_device() -> None:
    costs = CostModel()
    assert costs.load_estimate_s("m") is None
    costs.observe_load_parts("m", read_s=0.4, upload_s=2.0, device="CUDA0")
    assert costs.load_estimate_s("m") == pytest.approx(2.4)
    assert costs.upload_estimate_s("m") == pytest.approx(2.0)
    costs.observe_load_parts("m", read_s=0.4, upload_s=0.0, device="")  # now on the CPU
    assert costs.load_estimate_s("m") == pytest.approx(0.4)
    assert costs.upload_s[("m", "CUDA0")] == pytest.approx(2.0)  # per device, kept


def test_a_full_prefetch_is_chosen_when_the_upload_a_warm_up_cannot_do_outweighs_its_cost() -> None:
    costs = CostModel()
    for overlapped in (True, False):  # the running model is measured with and without a load
        costs.observe_generation("run", 11, 2.0 if overlapped else 1.9, overlapped=overlapped)
    costs.observe_load_parts("next", read_s=0.05, upload_s=1.5, device="CUDA0")
    decision = costs.decide("next", "run")
    assert decision.kind == "load"
    assert "upload" in decision.reason


# --- profile fields ------------------------------------------------------------------------

BASE = '[models.m]\npath = "/m.gguf"\n'


@pytest.mark.parametrize(
    ("toml", "field"),
    [
        (BASE + 'gpu_layers = "most"', "models.m.gpu_layers"),
        (BASE + "gpu_layers = -1", "models.m.gpu_layers"),
        (BASE + "gpu_layers = 1.5", "gpu_layers"),
        (BASE + "main_gpu = -1\ngpu_layers = 2", "models.m.main_gpu"),
        (BASE + "main_gpu = 1", "models.m.main_gpu"),  # a GPU for no layers
        ('device_budget = "lots"\n' + BASE, "device_budget"),
        ("device_budget = 0\n" + BASE, "device_budget"),
        (
            '[models.r]\napi_base = "http://127.0.0.1:1/v1"\napi_model = "x"\ngpu_layers = 4\n',
            "models.r.gpu_layers",
        ),
    ],
)
def test_bad_gpu_fields_are_errors_naming_the_field(toml: str, field: str) -> None:
    with pytest.raises(ProfileError, match=field.replace(".", r"\.")):
        decode_profile(toml)


def test_gpu_fields_decode() -> None:
    p = decode_profile('device_budget = "6GiB"\n' + BASE + 'gpu_layers = "all"\nmain_gpu = 1\n')
    assert p.models["m"].gpu_layers == "all" and p.models["m"].main_gpu == 1
    assert device_budget_bytes(p, offloading=True) == 6 * 2**30
    assert device_budget_bytes(p, offloading=False) == 0  # nothing asks for the device
    assert decode_profile(BASE).models["m"].gpu_layers == 0  # the default


def test_auto_device_budget_is_the_free_device_memory_less_a_margin() -> None:
    free = 10 * 2**30
    assert parse_device_budget("auto", free=lambda: free) == free - free // 10
    assert parse_device_budget("auto", free=lambda: DEVICE_MARGIN_MIN // 2) == 0
    assert parse_device_budget("auto", free=lambda: 0) == 0  # no GPU


def test_resolved_specs_carry_the_offload_setting() -> None:
    from swapos.models.resolve import model_specs

    p = decode_profile(BASE + 'gpu_layers = "all"\n[models.n]\npath = "/n.gguf"\ngpu_layers = 7')
    specs = model_specs(p)
    assert (specs["m"].gpu_layers, specs["n"].gpu_layers) == (-1, 7)
    assert msgspec.json.decode(msgspec.json.encode(specs["n"]), type=ModelSpec) == specs["n"]

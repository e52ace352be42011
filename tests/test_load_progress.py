"""A loading model's progress, as the residency snapshot shows it (``swapos serve``'s
``/running``): the fake backend reports it on its clock, llama.cpp through its callback."""

from __future__ import annotations

import anyio
import pytest

from swapos.backends.fake_script import FakeModelScript
from swapos.backends.llama import LlamaBackend
from swapos.data.sampling import SamplingParams
from swapos.messages.commands import PhaseSpec
from swapos.models.bundled import bundled_model_path
from swapos.models.spec import ModelSpec
from swapos.testing import FakeClock
from tests.fakes import fake_system


async def test_the_residency_snapshot_shows_how_far_a_load_has_gone() -> None:
    clock = FakeClock()  # driven by hand: the test looks between the load's reports
    scripts = {"a": FakeModelScript(load_s=4.0, token_s=0.0)}
    with anyio.fail_after(30):
        async with fake_system(scripts, budget=100, clock=clock) as (system, _):
            phase = PhaseSpec(phase="p", model="a", prompt="x", params=SamplingParams())
            seen: list[tuple[str, float | None]] = []

            def look() -> None:
                row = system.residency().get("a")
                assert row is not None
                seen.append((row.state, row.load_progress))

            async with anyio.create_task_group() as tg:
                tg.start_soon(system.run_phases, "t", [phase])
                await anyio.wait_all_tasks_blocked()  # the load is under way, at t=0
                look()
                for _ in range(3):
                    clock.advance(1.0)
                    await anyio.wait_all_tasks_blocked()
                    look()
                clock.advance(1.0)
            look()
    assert seen == [
        ("loading", 0.0),
        ("loading", 0.25),
        ("loading", 0.5),
        ("loading", 0.75),
        ("ready", None),
    ]


@pytest.mark.real_model
async def test_llama_cpp_reports_its_load_progress() -> None:
    spec = ModelSpec(name="g", path=str(bundled_model_path("gemma3-270m-q4_k_m")))
    reports: list[float] = []
    with anyio.fail_after(60):
        model = await LlamaBackend().load(spec, progress=reports.append)
        await model.close()
    assert reports and reports[-1] == 1.0
    assert reports == sorted(reports) and all(0.0 <= r <= 1.0 for r in reports)

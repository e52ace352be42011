"""The honest baseline: ``single:<model>``, one shot of any model of the profile."""

from __future__ import annotations

from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path

import anyio
import pytest

from swapos.actors.system import System
from swapos.backends.fake import FakeModelScript
from swapos.bench import report
from swapos.bench.compare import compare
from swapos.bench.suite.arms import arm_choices, arm_profile
from swapos.bench.suite.command import parse_choices, run_bench
from swapos.data.task import Task, TaskMeta
from swapos.errors import SwapOSError
from swapos.models.profile import Mode, Profile
from swapos.testing import FakeClock
from tests.fakes import fake_system
from tests.fakes import pipeline_profile as profile

pytestmark = pytest.mark.anyio

GOOD = "def add(a, b):\n    return a + b\n```"
BAD = "def add(a, b):\n    return a * b\n```"


def test_every_model_of_the_profile_has_a_single_arm() -> None:
    assert arm_choices(profile()) == (
        "pipeline",
        "single",
        "single:planner",
        "single:coder",
        "single:critic",
    )
    assert parse_choices("pipeline,single,single:planner", arm_choices(profile()), "arm") == [
        "pipeline",
        "single",
        "single:planner",
    ]
    with pytest.raises(SwapOSError, match="single:planner"):
        parse_choices("single:nope", arm_choices(profile()), "arm")


def test_a_single_model_arm_is_one_shot_of_that_model() -> None:
    one = arm_profile(profile(), "single:planner")
    assert one.roles["code"] == "planner" and one.roles["fix"] == "planner"
    assert one.pipeline == arm_profile(profile(), "single").pipeline
    assert one.pipeline.max_attempts == 1
    assert {k: v for k, v in one.roles.items() if k not in ("code", "fix")} == {
        "reason": "planner",
        "critic": "critic",
    }
    with pytest.raises(SwapOSError, match="no model 'nope'"):
        arm_profile(profile(), "single:nope")


def task(i: int) -> Task:
    return Task(
        meta=TaskMeta(task_id=f"add{i}", category="bugfix", difficulty=3, description="fix"),
        root="",
        problem="`add(a, b)` should return the sum of a and b.",
        starter="def add(a, b):\n    return a - b\n",
        tests={
            "test_add.py": "from solution import add\n\n\ndef test_add():\n"
            "    assert add(2, 3) == 5\n"
        },
    )


async def test_the_larger_models_one_shot_is_run_compared_and_reported(tmp_path: Path) -> None:
    """The coder writes a wrong first attempt, the planner a right one: ``single`` (the
    coder's one shot) fails, ``single:planner`` passes, and the comparison pairs every arm."""
    clock = FakeClock()
    scripts = {
        "planner": FakeModelScript(load_s=1.0, token_s=0.01, reply=GOOD),
        "coder": FakeModelScript(load_s=1.0, token_s=0.01, reply=BAD),
        "critic": FakeModelScript(load_s=1.0, token_s=0.01, reply="fine\n\n"),
    }
    coders: dict[str, str] = {}

    @asynccontextmanager
    async def factory(prof: Profile, mode: Mode, events: Path) -> AsyncIterator[System]:
        coders[events.parent.name] = prof.roles["code"]
        async with fake_system(
            scripts, budget=250, clock=clock, profile=prof, mode=mode, event_log=events
        ) as (system, _):
            yield system

    with anyio.fail_after(120):
        async with clock.autojump():
            summaries = await run_bench(
                [task(0), task(1)],
                profile(),
                out=tmp_path,
                modes=["overlap"],
                arms=["pipeline", "single", "single:planner"],
                factory=factory,
                clock=clock,
            )
    assert coders == {
        "overlap-pipeline": "coder",
        "overlap-single": "coder",
        "overlap-single:planner": "planner",
    }
    passed = {arm: s.tasks_passed for (_, arm), s in summaries.items()}
    assert passed["single"] == 0 and passed["single:planner"] == 2
    assert all(r.iterations == 1 for r in summaries[("overlap", "single:planner")].results)
    assert report.load_results(tmp_path) == summaries
    pairs = {(m.a, m.b) for m in compare(summaries).mcnemar_arms}
    assert ("overlap-pipeline", "overlap-single:planner") in pairs
    assert ("overlap-single", "overlap-single:planner") in pairs

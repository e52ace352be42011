"""The honest baseline: ``single:<model>``, one shot of any model of the profile; and
``pipeline:<knobs>``, the pipeline with one lever changed, interleaved with it."""

from __future__ import annotations

from collections.abc import AsyncIterator, Callable
from contextlib import asynccontextmanager
from pathlib import Path

import anyio
import msgspec
import pytest

from swapos.actors.system import System
from swapos.backends.fake_script import FakeModelScript
from swapos.bench import report
from swapos.bench.compare import compare
from swapos.bench.suite.arms import arm_choices, arm_profile, parse_arms
from swapos.bench.suite.command import parse_choices
from swapos.bench.suite.session import run_bench
from swapos.data.task import Task, TaskMeta
from swapos.errors import SwapOSError
from swapos.models.profile import Mode, Profile
from swapos.records.schema import RunSummary
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
    }
    with pytest.raises(SwapOSError, match="no model 'nope'"):
        arm_profile(profile(), "single:nope")


def test_a_knob_arm_is_the_pipeline_with_those_knobs_set() -> None:
    base = profile()
    arm = arm_profile(base, "pipeline:side_by_side=false+draws=3+selfcheck=0")
    assert (arm.pipeline.side_by_side, arm.pipeline.draws, arm.pipeline.selfcheck) == (
        False,
        3,
        False,
    )
    assert arm.roles == base.roles and arm.models == base.models
    changed = {"side_by_side", "draws", "selfcheck"}
    assert {k: v for k, v in msgspec.structs.asdict(arm.pipeline).items() if k not in changed} == {
        k: v for k, v in msgspec.structs.asdict(base.pipeline).items() if k not in changed
    }
    assert parse_arms("pipeline, pipeline:draws=2", base) == ["pipeline", "pipeline:draws=2"]
    for bad, says in [
        ("pipeline:nope=1", "not KNOB=VALUE with a \\[pipeline\\] knob"),
        ("pipeline:critic=true", "`critic` was removed"),
        ("pipeline:draws", "not KNOB=VALUE"),
        ("pipeline:draws=many", "draws"),
        ("pipelines", "unknown arm 'pipelines'"),
    ]:
        with pytest.raises(SwapOSError, match=says):
            parse_arms(bad, base)


def test_a_list_knob_takes_its_items_separated_by_slashes() -> None:
    base = profile()
    assert arm_profile(base, "pipeline:passes=").pipeline.passes == []  # the core alone
    two = arm_profile(base, "pipeline:passes=examples/restore_dropped+draws=2")
    assert (two.pipeline.passes, two.pipeline.draws) == (["examples", "restore_dropped"], 2)
    with pytest.raises(SwapOSError, match="passes"):
        parse_arms("pipeline:passes=examples/critic", base)


def test_a_model_knob_is_set_on_every_model_and_the_rest_on_the_pipeline() -> None:
    base = profile()
    plain = arm_profile(base, "pipeline:draft=off")
    assert {m.draft for m in plain.models.values()} == {"off"}
    assert plain.pipeline == base.pipeline and plain.roles == base.roles
    both = arm_profile(base, "pipeline:draft=off+side_by_side=false")
    assert both.pipeline.side_by_side is False and set(both.models) == set(base.models)
    assert all(
        msgspec.structs.replace(m, draft=None) == base.models[name]
        for name, m in both.models.items()
    )
    assert parse_arms("pipeline,pipeline:draft=off", base) == ["pipeline", "pipeline:draft=off"]
    with pytest.raises(SwapOSError, match=r"a model knob or a role; the knobs: .*draft.*roles\."):
        parse_arms("pipeline:drafts=off", base)


def test_a_role_knob_sets_that_role_and_nothing_else() -> None:
    base = profile()
    arm = arm_profile(base, "pipeline:roles.open=planner+draws=2")
    assert arm.roles == {**base.roles, "open": "planner"}
    assert arm.pipeline.draws == 2 and arm.models == base.models
    assert arm_profile(base, "pipeline:roles.code=critic").roles["code"] == "critic"
    # a one-shot arm is its code model's, whatever the task: no open role
    assert "open" not in arm_profile(arm, "single").roles
    assert arm_profile(arm, "single:critic").roles == {
        **base.roles,
        "code": "critic",
        "fix": "critic",
    }
    for bad, says in [
        ("pipeline:roles.open=nope", "no model 'nope'; roles name one of planner"),
        ("pipeline:roles.=planner", "not KNOB=VALUE"),
    ]:
        with pytest.raises(SwapOSError, match=says):
            parse_arms(bad, base)


async def bench_run(
    scripts: dict[str, FakeModelScript],
    arms: list[str],
    tmp_path: Path,
    tasks: list[Task],
    *,
    seen: Callable[[Profile], object],
    saw: dict[str, object],
) -> dict[tuple[str, str], RunSummary]:
    """Run ``tasks`` in ``arms`` (overlap) on fake systems; ``saw[folder] = seen(profile)``
    for each arm's system."""
    clock = FakeClock()

    @asynccontextmanager
    async def factory(prof: Profile, mode: Mode, events: Path) -> AsyncIterator[System]:
        saw[events.parent.name] = seen(prof)
        async with fake_system(
            scripts, budget=250, clock=clock, profile=prof, mode=mode, event_log=events
        ) as (system, _):
            yield system

    with anyio.fail_after(120):
        async with clock.autojump():
            return await run_bench(
                tasks, profile(), out=tmp_path, modes=["overlap"], arms=arms, factory=factory,
                clock=clock,
            )  # fmt: skip


async def test_a_knob_arm_runs_beside_the_pipeline_and_its_wall_is_compared(
    tmp_path: Path,
) -> None:
    scripts = {
        "planner": FakeModelScript(load_s=1.0, token_s=0.01, reply="plan\n\n"),
        "coder": FakeModelScript(load_s=1.0, token_s=0.01, replies=(BAD, GOOD)),
        "critic": FakeModelScript(load_s=1.0, token_s=0.01, reply="fine\n\n"),
    }
    attempts: dict[str, object] = {}
    arms = ["pipeline", "pipeline:max_attempts=1"]
    summaries = await bench_run(
        scripts, arms, tmp_path, [task(0)], seen=lambda p: p.pipeline.max_attempts, saw=attempts
    )
    assert attempts == {"overlap-pipeline": 2, "overlap-pipeline:max_attempts=1": 1}
    phases = {arm: [p.phase for p in s.results[0].phases] for (_, arm), s in summaries.items()}
    assert phases["pipeline"].count("code") == 2
    assert phases["pipeline:max_attempts=1"].count("code") == 1
    ratios = compare(summaries).wall_ratios["pipeline:max_attempts=1"]
    assert list(ratios) == ["overlap: pipeline:max_attempts=1/pipeline"]


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
    scripts = {
        "planner": FakeModelScript(load_s=1.0, token_s=0.01, reply=GOOD),
        "coder": FakeModelScript(load_s=1.0, token_s=0.01, reply=BAD),
        "critic": FakeModelScript(load_s=1.0, token_s=0.01, reply="fine\n\n"),
    }
    coders: dict[str, object] = {}
    arms = ["pipeline", "single", "single:planner"]
    summaries = await bench_run(
        scripts, arms, tmp_path, [task(0), task(1)], seen=lambda p: p.roles["code"], saw=coders
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

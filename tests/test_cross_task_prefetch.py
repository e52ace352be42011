"""Cross-task prefetch: a caller that announces the next task gets its first model early.

``System.run_task(task, next_task=...)`` makes the next task's first model (``reason``'s
when its plan has one, else ``code``'s) the last use of this task's schedule, so in
``overlap`` mode the next task's first phase is a swap like any other.
"""

from __future__ import annotations

import anyio
import pytest

from swapos.actors.prefetcher import upcoming_models
from swapos.backends.fake_script import FakeModelScript
from swapos.data.task import Task, TaskMeta
from swapos.messages.commands import ModelUse
from swapos.messages.events import AnyEvent, PrefetchStarted, TaskStarted
from swapos.models.profile import Mode, ModelConfig, PipelineConfig, Profile
from swapos.pipeline.routing import first_use
from swapos.records.schema import PhaseRecord
from swapos.testing import FakeClock
from tests.fakes import PLAIN, fake_system

pytestmark = pytest.mark.anyio

GOOD = "def add(a, b):\n    return a + b\n```"
PLANNER_LOAD_S = 2.0


def task(task_id: str, difficulty: int) -> Task:
    return Task(
        meta=TaskMeta(task_id=task_id, category="bugfix", difficulty=difficulty, description=""),
        root="",
        problem="`add(a, b)` should return the sum of a and b.",
        starter="def add(a, b):\n    return a - b\n",
        tests={
            "test_add.py": "from solution import add\n\n\ndef test_add():\n"
            "    assert add(2, 3) == 5\n"
        },
    )


EASY = task("easy", difficulty=1)  # no plan: code first
HARD = task("hard", difficulty=3)  # plans first: reason on the planner


def profile(fixer: str = "coder") -> Profile:
    names = ["planner", "coder", "fixer"]
    return Profile(
        name="fake",
        budget=1000,
        models={n: ModelConfig(path=f"/nonexistent/{n}.gguf", n_ctx=4096) for n in names},
        roles={"reason": "planner", "code": "coder", "fix": fixer},
        pipeline=PipelineConfig(**{**PLAIN, "max_attempts": 2, "skip_reason_max_difficulty": 1}),
    )


def scripts(code_token_s: float) -> dict[str, FakeModelScript]:
    return {
        "planner": FakeModelScript(
            load_s=PLANNER_LOAD_S, token_s=0.05, reply="Return a plus b.\n\n", footprint_bytes=100
        ),
        "coder": FakeModelScript(load_s=1.0, token_s=code_token_s, reply=GOOD, footprint_bytes=100),
        "fixer": FakeModelScript(load_s=1.0, token_s=0.05, reply=GOOD, footprint_bytes=100),
    }


async def run_two(
    *,
    announce: bool,
    mode: Mode = "overlap",
    budget: int = 200,
    fixer: str = "coder",
    code_token_s: float = 0.5,
) -> tuple[PhaseRecord, list[AnyEvent], set[str]]:
    """Run EASY then HARD; HARD's first phase record, every event, the warmed models."""
    clock = FakeClock()
    seen: list[AnyEvent] = []
    with anyio.fail_after(60):
        async with (
            clock.autojump(),
            fake_system(
                scripts(code_token_s),
                budget=budget,
                clock=clock,
                profile=profile(fixer),
                mode=mode,
                on_event=seen.append,
            ) as (sys, fb),
        ):
            first = await sys.run_task(EASY, next_task=HARD if announce else None)
            second = await sys.run_task(HARD)
    assert first.result.passed and second.result.passed
    reason = second.result.phases[0]
    assert (reason.phase, reason.model) == ("reason", "planner")
    return reason, seen, fb.warmed


def test_first_use_is_reason_when_the_plan_has_one_else_code() -> None:
    assert first_use(HARD, profile()) == ("reason", "planner")
    assert first_use(EASY, profile()) == ("code", "coder")


def test_prefetch_candidates_are_upcoming_models_in_order_without_the_running_ones() -> None:
    uses = [
        ModelUse(model=m, order=i, task_id="t") for i, m in enumerate(["a", "b", "a", "b", "c"])
    ]
    assert upcoming_models(uses) == ["b", "c"]
    assert upcoming_models([u for u in uses if u.order > 0]) == ["b", "a", "c"]


async def test_announced_next_task_pays_no_load_when_the_generation_outlasts_it() -> None:
    reason, _, _ = await run_two(announce=True)
    # The code phase of EASY generates for ~5 s; the planner's 2 s load ran under it.
    assert reason.load_s == 0.0
    assert reason.load_hidden_s == pytest.approx(PLANNER_LOAD_S)


async def test_unannounced_next_task_pays_its_first_load() -> None:
    reason, events, _ = await run_two(announce=False)
    assert reason.load_s == pytest.approx(PLANNER_LOAD_S)
    assert reason.load_hidden_s == 0.0
    assert not any(isinstance(e, PrefetchStarted) and e.model == "planner" for e in events)


async def test_generation_shorter_than_the_load_still_hides_part_of_it() -> None:
    # ~10 tokens x 0.1 s = 1 s of generation hides at least 1 s of the 2 s load. (The grade
    # runs in a worker thread, during which the virtual clock may run on and finish the
    # load: how much more is hidden depends on that, so only the bound is asserted.)
    reason, _, _ = await run_two(announce=True, code_token_s=0.1)
    assert reason.load_s <= PLANNER_LOAD_S - 1.0 + 1e-9
    assert reason.load_hidden_s >= 1.0 - 1e-9


@pytest.mark.parametrize("mode", ["lru", "sequential"])
async def test_modes_without_prefetch_ignore_the_announcement(mode: Mode) -> None:
    reason, events, warmed = await run_two(announce=True, mode=mode)
    assert reason.load_s == pytest.approx(PLANNER_LOAD_S)
    assert reason.load_hidden_s == 0.0
    assert not warmed
    assert not any(isinstance(e, PrefetchStarted) for e in events)


async def test_next_tasks_model_is_prefetched_during_the_grade_behind_a_resident_fixer() -> None:
    # The code phase prefetches the fixer (needed if the grade fails); when the grade
    # starts the fixer is resident, so the Prefetcher goes on to the next task's planner.
    _, events, _ = await run_two(announce=True, budget=300, fixer="fixer")
    order = [
        ("prefetch", e.model) if isinstance(e, PrefetchStarted) else ("task", e.task_id)
        for e in events
        if isinstance(e, PrefetchStarted | TaskStarted)
    ]
    assert order.index(("prefetch", "fixer")) < order.index(("prefetch", "planner"))
    assert order.index(("prefetch", "planner")) < order.index(("task", "hard"))


async def test_once_candidates_mostly_pass_the_grade_keeps_the_coder_for_the_next_task() -> None:
    # A budget for one model; every candidate passes. While candidates are as likely to fail
    # as to pass (no grades yet), the grade window brings in the fixer, and the next task
    # loads the coder again. Once they mostly pass, the coder stays for the next task.
    clock = FakeClock()
    seen: list[AnyEvent] = []
    tasks = [task(f"t{i}", difficulty=1) for i in range(4)]
    with anyio.fail_after(60):
        async with (
            clock.autojump(),
            fake_system(
                scripts(0.5), budget=100, clock=clock, profile=profile("fixer"),
                on_event=seen.append,
            ) as (sys, _),
        ):  # fmt: skip
            results = [
                await sys.run_task(t, next_task=tasks[i + 1] if i + 1 < len(tasks) else None)
                for i, t in enumerate(tasks)
            ]
    assert all(r.result.passed for r in results)
    fixer_prefetches = [e for e in seen if isinstance(e, PrefetchStarted) and e.model == "fixer"]
    assert {e.kind for e in fixer_prefetches} >= {"load"}
    loads = [r.result.phases[0].load_s for r in results]
    assert loads[1] > 0  # after the first task the fixer had displaced the coder
    assert loads[2:] == [0.0, 0.0]  # the coder stayed: nothing to load
    second_started = next(e.t for e in seen if isinstance(e, TaskStarted) and e.task_id == "t1")
    assert [e for e in fixer_prefetches if e.t >= second_started] == []

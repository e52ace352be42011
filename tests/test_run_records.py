"""A run records what happened to it: cancelled runs say so, whoever cancelled them.

Each test here was written against a bug found by reading the Router (issue 24, item 3) and
failed before the fix, on asyncio and trio.
"""

from __future__ import annotations

import threading
from typing import Any

import anyio
import pytest
from anyio.streams.memory import MemoryObjectReceiveStream

from swapos.actors.base import Events, Outbox, Pending
from swapos.actors.run_context import RunContext
from swapos.actors.schedules import Schedules
from swapos.actors.task_run import TaskRun
from swapos.actors.texts import ModelTexts
from swapos.backends.fake import FakeBackend
from swapos.backends.fake_script import FakeModelScript
from swapos.data.sampling import SamplingParams
from swapos.grader import GradeResult
from swapos.messages.commands import CancelTask, PhaseSpec, RunTask
from swapos.messages.events import (
    AnyEvent,
    FirstToken,
    GradeFinished,
    GradeStarted,
    PhaseFinished,
    PhaseStarted,
    TaskFinished,
)
from swapos.testing import FakeClock
from tests.fakes import ADD_TASK, coder_only_profile, fake_system

pytestmark = pytest.mark.anyio

LONG = " ".join(f"w{i}" for i in range(200))
HANG = "import time\n\n\ndef add(a, b):\n    time.sleep(60)\n    return a + b\n```"


async def test_phases_cut_short_by_shutdown_are_recorded_cancelled() -> None:
    """The system closes mid-phase (an outer cancel, not a CancelTask): the run did not pass."""
    clock = FakeClock()
    scripts = {"coder": FakeModelScript(load_s=1.0, token_s=1.0, reply=LONG)}
    events: list[AnyEvent] = []
    generating = anyio.Event()

    def on_event(ev: AnyEvent) -> None:
        events.append(ev)
        if isinstance(ev, FirstToken):
            generating.set()

    phase = PhaseSpec(phase="code", model="coder", prompt="p")
    with anyio.fail_after(30):
        async with (
            clock.autojump(),
            fake_system(scripts, budget=1000, clock=clock, on_event=on_event) as (sys, _),
            anyio.create_task_group() as tg,
        ):
            tg.start_soon(sys.run_phases, "t", [phase])
            await generating.wait()
            await clock.sleep(3.0)
            tg.cancel_scope.cancel()  # stops waiting; the phase runs on until the close
    [finished] = [ev for ev in events if isinstance(ev, TaskFinished)]
    assert not finished.passed and finished.error == "cancelled", finished
    [result] = sys.summary().results
    assert not result.passed and result.error == "cancelled"


async def test_a_cancel_task_right_behind_its_run_task_cancels_it() -> None:
    """The Router handles ``RunTask`` then ``CancelTask`` with no checkpoint between them (the
    run's own task has not started yet): the run is cancelled, not run to the end."""
    clock = FakeClock()
    scripts = {"coder": FakeModelScript(load_s=1.0, token_s=1.0, reply=LONG)}
    events: list[AnyEvent] = []
    with anyio.fail_after(30):
        async with (
            clock.autojump(),
            fake_system(
                scripts,
                budget=1000,
                clock=clock,
                profile=coder_only_profile(),
                on_event=events.append,
            ) as (sys, _),
        ):
            router = sys._actors.router  # white-box: drive its handler directly
            request = RunTask(request_id="req-x", reply_to="client", task=ADD_TASK)
            await router._handle(request)  # both in the inbox, handled back to back
            await router._handle(CancelTask(request_id="req-x"))
            while router.statistics().tasks_done < 1:  # run to its end, it takes 200+ s
                await clock.sleep(1.0)
            stats = sys.statistics()
    assert not any(isinstance(ev, PhaseStarted) for ev in events), "it ran a phase"
    [finished] = [ev for ev in events if isinstance(ev, TaskFinished)]
    assert finished.run_id == request.run_id
    assert not finished.passed and finished.error == "cancelled", finished
    assert stats["router"].tasks_running == 0


async def test_a_cancelled_grade_is_recorded_cancelled() -> None:
    """Cancelled mid-grade, the grade phase ends with ``GradeFinished`` and ``PhaseFinished``
    (outcome ``cancelled``, its wall time), like a cancelled generate phase."""
    clock = FakeClock()
    scripts = {"coder": FakeModelScript(load_s=0.0, token_s=0.0, reply=HANG)}
    events: list[AnyEvent] = []
    grading, finished = anyio.Event(), anyio.Event()

    def on_event(ev: AnyEvent) -> None:
        events.append(ev)
        if isinstance(ev, GradeStarted):
            grading.set()
        if isinstance(ev, TaskFinished):
            finished.set()

    with anyio.fail_after(30):
        async with fake_system(
            scripts, budget=1000, clock=clock, profile=coder_only_profile(), on_event=on_event
        ) as (sys, _):
            async with anyio.create_task_group() as tg:
                tg.start_soon(sys.run_task, ADD_TASK)
                await grading.wait()
                clock.advance(2.0)  # the grade ran 2 s (virtual) before the cancel
                tg.cancel_scope.cancel()
            await finished.wait()  # its record lands once the sandbox is dead
    [graded] = [ev for ev in events if isinstance(ev, GradeFinished)]
    assert graded.outcome == "cancelled" and not graded.passed
    phase_ids = {ev.phase_id for ev in events if isinstance(ev, PhaseFinished)}
    assert graded.phase_id in phase_ids, "no PhaseFinished for the grade"
    [result] = sys.summary().results
    grade = result.phases[-1]
    assert grade.phase == "grade" and grade.outcome == "cancelled", grade
    assert grade.total_s == pytest.approx(2.0), grade


async def test_a_cancelled_task_says_cancelled_not_just_failed() -> None:
    clock = FakeClock()
    scripts = {"coder": FakeModelScript(load_s=1.0, token_s=1.0, reply=LONG)}
    generating = anyio.Event()

    def on_event(ev: AnyEvent) -> None:
        if isinstance(ev, FirstToken):
            generating.set()

    with anyio.fail_after(30):
        async with (
            clock.autojump(),
            fake_system(
                scripts, budget=1000, clock=clock, profile=coder_only_profile(), on_event=on_event
            ) as (sys, _),
        ):
            async with anyio.create_task_group() as tg:
                tg.start_soon(sys.run_task, ADD_TASK)
                await generating.wait()
                tg.cancel_scope.cancel()  # System.run_task sends CancelTask
            while not sys.summary().results:
                await clock.sleep(1.0)
    [result] = sys.summary().results
    assert not result.passed and result.error == "cancelled", result


async def test_a_task_cut_short_by_shutdown_says_cancelled() -> None:
    clock = FakeClock()
    scripts = {"coder": FakeModelScript(load_s=1.0, token_s=1.0, reply=LONG)}
    generating = anyio.Event()

    def on_event(ev: AnyEvent) -> None:
        if isinstance(ev, FirstToken):
            generating.set()

    with anyio.fail_after(30):
        async with clock.autojump(), anyio.create_task_group() as tg:
            async with fake_system(
                scripts, budget=1000, clock=clock, profile=coder_only_profile(), on_event=on_event
            ) as (sys, _):
                tg.start_soon(sys.run_task, ADD_TASK)
                await generating.wait()
            # the system closed under the running task (no CancelTask); its caller gives up
            tg.cancel_scope.cancel()
    [result] = sys.summary().results
    assert not result.passed and result.error == "cancelled", result


def _lone_run() -> tuple[TaskRun, Outbox, MemoryObjectReceiveStream[Any]]:
    """A TaskRun whose events land in a stream the test reads (no other actor runs)."""
    sends = {a: anyio.create_memory_object_stream[Any](64) for a in ("recorder", "evictor")}
    outbox = Outbox({a: s for a, (s, _) in sends.items()})
    events = Events(outbox, FakeClock(), 0.0)
    profile = coder_only_profile()
    ctx = RunContext(
        outbox=outbox,
        events=events,
        pending=Pending(),
        schedules=Schedules(outbox, events),
        texts=ModelTexts(backend=FakeBackend(FakeClock(), {}), specs={}, profile=profile),
        profile=profile,
        grade_limiter=anyio.CapacityLimiter(1),
    )
    for a, (_, r) in sends.items():
        if a != "recorder":
            r.close()
    return TaskRun(ctx, "run-x"), outbox, sends["recorder"][1]


@pytest.mark.parametrize("phase", ["code", "grade"])
async def test_a_phase_cancelled_as_it_starts_still_ends_in_the_log(phase: str) -> None:
    """The cancel lands on the ``PhaseStarted`` send itself (the event is out, then the
    checkpoint raises): its ``PhaseFinished`` (outcome ``cancelled``) follows all the same."""
    run, outbox, log = _lone_run()

    def never(_: threading.Event) -> GradeResult:
        raise AssertionError("a cancelled grade never runs its work")

    with anyio.fail_after(5), log:
        with anyio.CancelScope() as scope:
            scope.cancel()
            if phase == "grade":
                await run.grade_phase(task_id="t", attempt=1, work=never)
            else:
                await run.generate_phase(
                    task_id="t",
                    phase=phase,
                    model="coder",
                    prompt="p",
                    stable_prefix="",
                    params=SamplingParams(),
                    attempt=1,
                    upcoming=[],
                )
        await outbox.aclose()
        got = [ev async for ev in log]
    started = [ev for ev in got if isinstance(ev, PhaseStarted)]
    ended = [ev for ev in got if isinstance(ev, PhaseFinished)]
    assert len(started) == 1, got
    assert [(ev.phase_id, ev.outcome) for ev in ended] == [(started[0].phase_id, "cancelled")]

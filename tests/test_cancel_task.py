"""Cancelling ``System.run_task`` stops the task: generation, lease and grading."""

from __future__ import annotations

import time

import anyio
import msgspec
import pytest

from swapos.backends.fake_script import FakeModelScript
from swapos.messages.events import AnyEvent, FirstToken
from swapos.testing import FakeClock
from tests.fakes import ADD_TASK, coder_only_profile, fake_system

pytestmark = pytest.mark.anyio

LONG = " ".join(f"w{i}" for i in range(200))


async def test_cancelling_run_task_stops_its_generation_and_frees_the_model() -> None:
    clock = FakeClock()
    good = "def add(a, b):\n    return a + b\n```"
    scripts = {"coder": FakeModelScript(load_s=1.0, token_s=1.0, replies=(LONG, good))}
    generating = anyio.Event()

    def on_event(ev: AnyEvent) -> None:
        if isinstance(ev, FirstToken) and ev.task_id == "add":
            generating.set()

    again = msgspec.structs.replace(
        ADD_TASK, meta=msgspec.structs.replace(ADD_TASK.meta, task_id="again")
    )
    with anyio.fail_after(30):
        async with (
            clock.autojump(),
            fake_system(
                scripts, budget=1000, clock=clock, profile=coder_only_profile(), on_event=on_event
            ) as (
                sys,
                _,
            ),
        ):
            async with anyio.create_task_group() as tg:
                tg.start_soon(sys.run_task, ADD_TASK)
                await generating.wait()
                await clock.sleep(3.0)  # 3 of its 200 tokens
                tg.cancel_scope.cancel()
            cancelled_at = clock.now()
            outcome = await sys.run_task(again)  # the model is free at once
            took = clock.now() - cancelled_at
            stats = sys.statistics()
    assert outcome.result.passed
    assert took < 60, took  # not after the 200 s the cancelled generation would have taken
    first = sys.summary().results[0]
    assert first.task_id == "add" and not first.passed
    assert first.phases[-1].tokens < 10  # stopped within a token of the cancel, not 200
    assert stats["router"].tasks_running == 0 and stats["generator"].running == 0
    assert not any(stats["loader"].leases.values()), stats["loader"]


async def test_cancelling_run_task_during_grading_kills_the_sandbox_at_once() -> None:
    hang = "import time\n\n\ndef add(a, b):\n    time.sleep(60)\n    return a + b\n```"
    scripts = {"coder": FakeModelScript(load_s=0.0, token_s=0.0, reply=hang)}
    task = ADD_TASK
    with anyio.fail_after(30):
        async with fake_system(
            scripts, budget=1000, clock=FakeClock(), profile=coder_only_profile()
        ) as (
            sys,
            _,
        ):
            started = time.monotonic()
            with anyio.move_on_after(2.0):
                await sys.run_task(task)
            stopped = time.monotonic() - started
    assert stopped < 6.0, stopped  # the grade timeout is 30 s; the test's sleep 60 s


async def test_closing_the_system_mid_task_ends_quietly() -> None:
    """Ctrl-C / SIGTERM in a CLI: everything is cancelled at once, the Recorder included; the
    task's last events are dropped, not raised as SystemClosedError."""
    clock = FakeClock()
    scripts = {"coder": FakeModelScript(load_s=1.0, token_s=1.0, reply=LONG)}
    with anyio.fail_after(30):
        async with clock.autojump():
            with anyio.CancelScope() as outer:
                async with (
                    fake_system(
                        scripts, budget=1000, clock=clock, profile=coder_only_profile()
                    ) as (sys, fb),
                    anyio.create_task_group() as tg,
                ):
                    tg.start_soon(sys.run_task, ADD_TASK)
                    await clock.sleep(5.0)
                    outer.cancel()
    assert outer.cancelled_caught
    assert fb.open_models == set()

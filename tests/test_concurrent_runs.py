"""Concurrent runs of one task id are kept apart: records are keyed by a run id."""

from __future__ import annotations

from pathlib import Path

import anyio
import msgspec
import pytest

from swapos.actors.system import PhasesOutcome, TaskOutcome
from swapos.backends.fake_script import FakeModelScript
from swapos.bench.replay import replay
from swapos.messages.commands import PhaseSpec
from swapos.messages.events import PhaseStarted, TaskFinished, TaskStarted
from swapos.testing import FakeClock
from tests.fakes import ADD_TASK, coder_only_profile, fake_system

pytestmark = pytest.mark.anyio

GOOD = "def add(a, b):\n    return a + b\n```"


async def test_two_concurrent_runs_of_one_task_id_each_get_their_own_phases() -> None:
    clock = FakeClock()
    scripts = {"coder": FakeModelScript(load_s=1.0, token_s=0.5, reply=GOOD)}
    outcomes: list[TaskOutcome] = []

    async def run() -> None:
        outcomes.append(await sys.run_task(ADD_TASK))

    with anyio.fail_after(60):
        async with (
            clock.autojump(),
            fake_system(scripts, budget=1000, clock=clock, profile=coder_only_profile()) as (
                sys,
                _,
            ),
        ):
            async with anyio.create_task_group() as tg:
                tg.start_soon(run)
                tg.start_soon(run)
            summary = sys.summary()
    first, second = (o.result for o in outcomes)
    for result in (first, second):
        assert result.task_id == "add" and result.passed
        assert [p.phase for p in result.phases] == ["code", "grade"], result.phases
    assert first.run_id != second.run_id
    assert not {p.phase_id for p in first.phases} & {p.phase_id for p in second.phases}
    assert sorted(r.run_id for r in summary.results) == sorted([first.run_id, second.run_id])
    assert summary.tasks_total == 2 and summary.phases_total == 4


async def test_two_concurrent_phase_runs_of_one_task_id_keep_their_records_apart(
    tmp_path: Path,
) -> None:
    clock = FakeClock()
    scripts = {
        "a": FakeModelScript(load_s=1.0, token_s=0.5, reply="one two three"),
        "b": FakeModelScript(load_s=2.0, token_s=0.25, reply="four five"),
    }
    seen: list[TaskStarted | TaskFinished | PhaseStarted] = []
    outcomes: list[PhasesOutcome] = []

    def on_event(ev: object) -> None:
        if isinstance(ev, TaskStarted | TaskFinished | PhaseStarted):
            seen.append(ev)

    async def run(models: list[str]) -> None:
        phases = [PhaseSpec(phase="code", model=m, prompt=f"p {m}") for m in models]
        outcomes.append(await sys.run_phases("same", phases))

    with anyio.fail_after(60):
        async with (
            clock.autojump(),
            fake_system(
                scripts, budget=1000, clock=clock, on_event=on_event, event_log=tmp_path / "e.jsonl"
            ) as (sys, _),
            anyio.create_task_group() as tg,
        ):
            tg.start_soon(run, ["a", "b", "a"])
            tg.start_soon(run, ["b"])
    by_len = sorted(outcomes, key=lambda o: len(o.records))
    assert [r.model for r in by_len[0].records] == ["b"]
    assert [r.model for r in by_len[1].records] == ["a", "b", "a"]
    run_ids = {ev.run_id for ev in seen}
    assert len(run_ids) == 2 and None not in run_ids  # every task-level event names its run
    assert all(ev.task_id == "same" for ev in seen)  # the task id stays, for humans
    replayed = replay(tmp_path / "e.jsonl")  # the log alone tells the runs apart too
    assert msgspec.to_builtins(replayed) == msgspec.to_builtins(sys.summary())
    assert sorted(len(r.phases) for r in replayed.results) == [1, 3]

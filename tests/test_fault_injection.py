"""The whole system under injected faults: loads, generations, KV saves and restores fail or
stall at random (seeded) while hypothesis-chosen operations run at once and are cancelled.

A ``RuleBasedStateMachine`` runs its rules synchronously, one after another; the system is
async and its interesting states are *overlapping* operations, so each example is instead a
hypothesis-drawn scenario: a list of operations, each started after a delay and perhaps
cancelled after another, all on one system on a :class:`FakeClock`, on both anyio backends.

Invariants, checked through the public ``System`` API, the fake backend and the event log:
no deadlock (a watchdog in virtual time; grading, which runs real subprocesses, does not
count), the budget is never exceeded (the backend's peak resident bytes), every operation
that was not cancelled returns, every started run is recorded as finished, nothing is
running when the operations are over, and at close every model is closed, every lease
released and no grading sandbox is left.
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path

import anyio
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from swapos.actors.system import System, open_system
from swapos.backends.fake import FakeBackend
from swapos.backends.fake_script import FakeFaults, FakeModelScript
from swapos.data.sampling import SamplingParams
from swapos.messages.commands import PhaseSpec
from swapos.messages.events import (
    AnyEvent,
    GradeFinished,
    GradeStarted,
    LeaseGranted,
    LeaseReleased,
    ModelEvicted,
    ModelLoadCancelled,
    ModelLoaded,
    ModelLoadFailed,
    ModelLoadStarted,
    TaskFinished,
    TaskStarted,
)
from swapos.models.spec import ModelSpec
from swapos.records.aggregate import run_key
from swapos.testing import FakeClock
from tests.fakes import ADD_TASK, pipeline_profile

MODELS = ("planner", "coder", "critic")
BUDGET = 250  # two of the three 100-byte models
DEADLINE_S = 50_000.0
"""Virtual seconds of non-grading time a scenario may take: far more than its scripted work
and stalls (a few hundred seconds each), far less than forever."""
STEP_S, STEP_REAL_S = 100.0, 0.004
"""The watchdog's step in virtual seconds, and the real time it waits per step (so the
deadline lasts at least 2 s of real time)."""
QUIET_S = 2 * 600.0 + 100.0
"""Longer than any load can take (one stall of ``hang_s`` plus its scripted time)."""
STABLE = "You are a careful coder. Here is the brief and the starter code. " * 2
GOOD = "def add(a, b):\n    return a + b\n```"
FAULTS = {
    "load_fail": 0.15,
    "load_hang": 0.1,
    "generate_fail": 0.15,
    "generate_hang": 0.1,
    "save_fail": 0.2,
    "save_hang": 0.1,
    "restore_fail": 0.3,
    "restore_hang": 0.1,
}


@dataclass(frozen=True)
class Phases:
    models: tuple[str, ...]
    delay: int
    cancel_after: int | None


@dataclass(frozen=True)
class Preload:
    models: tuple[str, ...]
    delay: int
    cancel_after: int | None


@dataclass(frozen=True)
class RunTask:
    delay: int
    cancel_after: int | None


Op = Phases | Preload | RunTask

delays = st.integers(0, 20)
cancels = st.none() | st.integers(0, 400)
ops = st.lists(
    st.one_of(
        st.builds(Phases, st.lists(st.sampled_from(MODELS), min_size=1, max_size=3).map(tuple),
                  delays, cancels),
        st.builds(Preload, st.lists(st.sampled_from(MODELS), max_size=3, unique=True).map(tuple),
                  delays, cancels),
    ),
    min_size=1,
    max_size=6,
)  # fmt: skip
run_tasks = st.lists(st.builds(RunTask, delays, cancels), max_size=1)


def scripts() -> dict[str, FakeModelScript]:
    return {
        m: FakeModelScript(
            load_s=5.0, token_s=0.5, prefill_s_per_token=0.001, reply=GOOD, footprint_bytes=100
        )
        for m in MODELS
    }


def phase(model: str, i: int) -> PhaseSpec:
    return PhaseSpec(
        phase="code",
        model=model,
        prompt=f"{STABLE}step {i}",
        stable_prefix=STABLE,
        params=SamplingParams(max_tokens=8),
    )


class Scenario:
    """One system, its operations, and what was seen."""

    def __init__(self, seed: int) -> None:
        self.clock = FakeClock()
        self.backend = FakeBackend(self.clock, scripts(), faults=FakeFaults(seed=seed, **FAULTS))
        self.events: list[AnyEvent] = []
        self.grading = 0
        self.idle: anyio.Event | None = None
        self.deadlocked = False
        self.returned: dict[int, object] = {}
        self.cancelled: set[int] = set()
        self.stats_at_deadline: dict[str, object] = {}

    def on_event(self, ev: AnyEvent) -> None:
        self.events.append(ev)
        if isinstance(ev, GradeStarted):
            self.grading += 1
            self.idle = anyio.Event()
        elif isinstance(ev, GradeFinished):
            self.grading -= 1
            if self.grading == 0 and self.idle is not None:
                self.idle.set()

    async def watchdog(self, scope: anyio.CancelScope, system: System) -> None:
        """Cancel ``scope`` once ``DEADLINE_S`` of virtual time passed outside grading
        (a grade is a real subprocess: the clock jumps while it runs).

        Each step also waits a little real time, so the deadline is never less than
        ``DEADLINE_S / STEP_S * STEP_REAL_S`` real seconds: the clock jumps whenever every
        task is blocked, and a task waiting on a worker thread (building a prompt, reading a
        tokenizer) counts as blocked, so without it a few milliseconds of thread work could
        burn the whole virtual deadline."""
        spent = 0.0
        while spent < DEADLINE_S:
            if self.idle is not None:
                await self.idle.wait()
            await self.clock.sleep(STEP_S)
            await anyio.sleep(STEP_REAL_S)
            if self.grading == 0:
                spent += STEP_S
        self.deadlocked = True
        self.stats_at_deadline = system.statistics()
        scope.cancel()

    def outstanding_leases(self) -> set[str]:
        granted = {e.lease_id for e in self.events if isinstance(e, LeaseGranted)}
        return granted - {e.lease_id for e in self.events if isinstance(e, LeaseReleased)}

    def settled(self, system: System) -> bool:
        """No run, generation or lease left."""
        stats = system.statistics()
        busy = stats["router"].tasks_running or stats["generator"].running
        return not busy and not self.outstanding_leases()

    async def settle(self, system: System) -> None:
        """Wait until the system stays settled for :data:`QUIET_S`: a cancelled wait leaves
        work going (a run, or a load for a requester that gave up, whose lease is returned
        when it lands)."""
        while True:
            while not self.settled(system):
                await self.clock.sleep(1.0)
            await self.clock.sleep(QUIET_S)
            if self.settled(system):
                return

    async def perform(self, system: System, i: int, op: Op) -> None:
        await self.clock.sleep(op.delay)
        async with anyio.create_task_group() as tg:
            if op.cancel_after is not None:
                tg.start_soon(self._cancel_after, tg.cancel_scope, op.cancel_after, i)
            match op:
                case Phases():
                    specs = [phase(m, j) for j, m in enumerate(op.models)]
                    self.returned[i] = await system.run_phases(f"t{i}", specs)
                case Preload():
                    self.returned[i] = await system.preload(op.models)
                case RunTask():
                    self.returned[i] = await system.run_task(ADD_TASK, max_attempts=1)
            tg.cancel_scope.cancel()  # the operation is done: stop its cancel timer

    async def _cancel_after(self, scope: anyio.CancelScope, delay: int, i: int) -> None:
        await self.clock.sleep(delay)
        self.cancelled.add(i)
        scope.cancel()

    async def run(self, operations: list[Op]) -> None:
        """Run ``operations`` at once on a fresh system; a real-time ``fail_after`` guards
        against the watchdog itself hanging."""
        specs = {m: ModelSpec(name=m, path=f"/nonexistent/{m}.gguf", n_ctx=4096) for m in MODELS}
        with anyio.fail_after(120):
            await self._run(operations, specs)

    async def _run(self, operations: list[Op], specs: dict[str, ModelSpec]) -> None:
        async with (
            self.clock.autojump(),
            open_system(
                pipeline_profile(),
                backend=self.backend,
                specs=specs,
                clock=self.clock,
                budget_bytes=BUDGET,
                on_event=self.on_event,
            ) as system,
        ):
            # The watchdog starts once the system is up: startup reads tokenizers in
            # worker threads, during which virtual time would jump as it does in a grade.
            with anyio.CancelScope() as guard:
                async with anyio.create_task_group() as dog:
                    dog.start_soon(self.watchdog, guard, system)
                    async with anyio.create_task_group() as tg:
                        for i, op in enumerate(operations):
                            tg.start_soon(self.perform, system, i, op)
                    await self.settle(system)
                    dog.cancel_scope.cancel()


def _children() -> list[int]:
    """Child processes of this one (grading sandboxes left running)."""
    path = Path(f"/proc/{os.getpid()}/task/{os.getpid()}/children")
    return [int(p) for p in path.read_text().split()] if path.exists() else []


def check(scenario: Scenario, operations: list[Op]) -> None:
    assert not scenario.deadlocked, (
        "no progress within the virtual deadline",
        scenario.outstanding_leases(),
        scenario.stats_at_deadline,
    )
    backend, events = scenario.backend, scenario.events
    assert backend.peak_resident_bytes <= BUDGET, backend.peak_resident_bytes
    for i in range(len(operations)):
        assert i in scenario.returned or i in scenario.cancelled, (i, operations[i])
    started = {run_key(e) for e in events if isinstance(e, TaskStarted)}
    finished = [run_key(e) for e in events if isinstance(e, TaskFinished)]
    assert sorted(finished) == sorted(started)  # every run recorded as finished, once
    assert backend.open_models == set() and backend.resident_bytes == 0
    loaded = sum(isinstance(e, ModelLoaded) for e in events)
    assert loaded == sum(isinstance(e, ModelEvicted) for e in events)
    leases = [e.lease_id for e in events if isinstance(e, LeaseGranted)]
    released = [e.lease_id for e in events if isinstance(e, LeaseReleased)]
    assert sorted(leases) == sorted(released)  # each released exactly once
    ends = (ModelLoaded, ModelLoadFailed, ModelLoadCancelled)
    # every load started ends in the log (a prefetch denied room included)
    assert sum(isinstance(e, ModelLoadStarted) for e in events) == sum(
        isinstance(e, ends) for e in events
    )
    assert _children() == []


@settings(
    max_examples=12,
    deadline=None,
    derandomize=True,
    database=None,
    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
)
@given(seed=st.integers(0, 2**32 - 1), operations=ops, tasks=run_tasks)
def test_the_system_survives_random_faults_and_cancellations(
    anyio_backend: str, seed: int, operations: list[Op], tasks: list[RunTask]
) -> None:
    everything: list[Op] = [*operations, *tasks]
    scenario = Scenario(seed)
    anyio.run(scenario.run, everything, backend=anyio_backend)
    check(scenario, everything)


@pytest.mark.anyio
async def test_every_fault_kind_is_injected_and_survived() -> None:
    """A fixed busy scenario: proves the faults really fire (a property test whose faults
    never fired would prove nothing) and the invariants still hold."""
    operations: list[Op] = [
        Phases(models=(MODELS[d % 3],) * 3, delay=d, cancel_after=None) for d in range(40)
    ]
    operations += [Preload(models=MODELS, delay=3, cancel_after=None)]
    operations += [Phases(models=("coder",) * 4, delay=1, cancel_after=30)]
    scenario = Scenario(seed=7)
    await scenario.run(operations)
    check(scenario, operations)
    assert set(scenario.backend.injected) == set(FAULTS), scenario.backend.injected

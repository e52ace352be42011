"""The local session of the suite benchmark: every mode x arm on the same tasks, in one process.

Each mode/arm gets one long-lived system, opened once and kept open across tasks so models
stay resident between tasks, as they would in a real deployment. All of them are open at
once: with the default profile that is up to ~9 GiB of models for four modes x two arms
(resident holds every model). For each task, every mode/arm runs it in turn, in an order
rotated by the task's index so that machine drift spreads over all of them. After every
task the mode/arm's ``results.json`` is rewritten atomically, so an interrupted run keeps
what it finished and ``--resume`` continues it without running or counting anything twice.
Each system is told which task it runs next (``run_task(..., next_task=...)``), so the
overlap mode prefetches the next task's first model while the current task finishes.
The command line (``bench run``) is :mod:`swapos.bench.suite.command`; see
``docs/reports.md``.
"""

from __future__ import annotations

from collections.abc import Sequence
from contextlib import AbstractAsyncContextManager, AsyncExitStack
from pathlib import Path
from typing import cast

import structlog

from swapos.actors.system import System, open_system
from swapos.bench.compare import Key, label, ordered
from swapos.bench.results import info_of
from swapos.bench.suite.arms import SystemFactory, arm_profile, run_triple
from swapos.bench.suite.progress import Reporter
from swapos.bench.suite.scoreboard import Scoreboard, rotated
from swapos.bench.swap.coldcache import ColdCache
from swapos.clock import Clock, MonotonicClock
from swapos.data.task import Task
from swapos.models.profile import Mode, Profile
from swapos.records.schema import RunSummary

log = structlog.get_logger(__name__)


def events_path(folder: Path) -> Path:
    """``events.jsonl``, or ``events-<n>.jsonl`` for the n-th resumed session (every session
    opens a new system, and an event log holds exactly one run)."""
    path, n = folder / "events.jsonl", 1
    while path.exists():
        n += 1
        path = folder / f"events-{n}.jsonl"
    return path


def open_llama(
    profile: Profile, mode: Mode, events: Path, *, process_budget: bool = True
) -> AbstractAsyncContextManager[System]:
    """The real :data:`SystemFactory`: llama-cpp-python models, a monotonic clock; the
    budget is the process's (its RSS), as ``swapos run`` holds it. A run of several systems
    in one process passes ``process_budget=False``: each budget then holds its system's
    models and KV tier only, since the process's RSS holds every system's (each would read
    the others' models as memory of its own and shrink its KV tier for them)."""
    return open_system(profile, mode=mode, event_log=events, process_budget=process_budget)


class _Session:
    """The systems a local run keeps open, one per mode/arm, and the time spent in each."""

    def __init__(self, clock: Clock) -> None:
        self.clock = clock
        self.systems: dict[Key, System] = {}
        self.wall: dict[Key, float] = {}


async def _open_systems(
    stack: AsyncExitStack,
    session: _Session,
    *,
    keys: Sequence[Key],
    profile: Profile,
    out: Path,
    factory: SystemFactory,
) -> None:
    """Step 2: open one system per mode/arm in ``keys`` (its opening counts as its time)."""
    for key in keys:
        t0 = session.clock.now()
        folder = out / label(key)
        folder.mkdir(parents=True, exist_ok=True)
        cm = factory(arm_profile(profile, key[1]), cast(Mode, key[0]), events_path(folder))
        session.systems[key] = await stack.enter_async_context(cm)
        session.wall[key] = session.clock.now() - t0
        log.info("bench.system_opened", key=label(key), open_s=session.wall[key])


async def _run_task_everywhere(
    session: _Session,
    board: Scoreboard,
    task: Task,
    order: Sequence[Key],
    following: dict[Key, dict[str, Task | None]],
    *,
    max_attempts: int | None,
    cold: ColdCache | None,
    reporter: Reporter | None,
) -> None:
    """Step 3, for one task: run it in every mode/arm of ``order`` that has not finished it,
    committing each result as it comes."""
    for key in board.pending(task, order):
        if cold is not None:
            await cold.drop()
        t0 = session.clock.now()
        outcome = await run_triple(
            session.systems[key],
            task,
            key[1],
            max_attempts=max_attempts,
            next_task=following[key][task.task_id],
        )
        session.wall[key] += session.clock.now() - t0
        live = info_of(session.systems[key].summary())
        live.wall_clock_s = session.wall[key]
        board.commit(key, outcome.result, live, capsule=outcome.capsule_json)
        if reporter is not None:
            reporter.advance(key, outcome.result)


async def run_bench(
    tasks: Sequence[Task],
    profile: Profile,
    *,
    out: Path,
    modes: Sequence[str],
    arms: Sequence[str],
    factory: SystemFactory = open_llama,
    max_attempts: int | None = None,
    resume: bool = False,
    cold: ColdCache | None = None,
    clock: Clock | None = None,
    reporter: Reporter | None = None,
) -> dict[Key, RunSummary]:
    """Run every task in every mode x arm, interleaved; write results after every task.

    The steps: read what ``out`` already holds
    (:class:`~swapos.bench.suite.scoreboard.Scoreboard`), open one system per mode/arm with
    work left, then for each task run every mode/arm that has not finished it, in an order
    rotated by the task's index, committing each result.

    Args:
        tasks: the suite, in order (its index rotates the mode/arm order).
        profile: the profile of the ``pipeline`` arm (see
            :func:`~swapos.bench.suite.arms.arm_profile`).
        out: output folder; ``<mode>-<arm>/results.json``, ``events*.jsonl`` and
            ``capsules/<task_id>.json`` (each task's final capsule) go there.
            Each task run announces the next task that system will run.
        modes, arms: what to compare (validated by
            :func:`~swapos.bench.suite.command.parse_choices`).
        factory: opens one mode/arm's system (tests pass fake systems).
        max_attempts: code attempts of the ``pipeline`` arm (default: the profile's).
        resume: continue the results in ``out``, skipping finished (task, mode, arm).
        cold: drops the page cache before every task run, where allowed.
        clock: measures the time spent in each system (default: monotonic).
        reporter: told the total and every finished task.

    Returns:
        The summary of every mode/arm, old and new tasks together.

    Raises:
        SwapOSError: ``out`` holds a run and ``resume`` is False; a results file is
            corrupt or from another mode; a system cannot open. Results written so far
            stay on disk. Cancellation stops after the task runs in flight; nothing
            finished is lost.
    """
    keys = ordered([(m, a) for m in modes for a in arms])
    board = Scoreboard.open(out, keys, tasks, resume)
    todo = board.todo(tasks)
    # The task each system runs after each one: announced so overlap prefetches its model.
    following = {k: _following(v) for k, v in todo.items()}
    if reporter is not None:
        reporter.start(board.remaining(tasks), keys)
    session = _Session(clock or MonotonicClock())
    async with AsyncExitStack() as stack:
        await _open_systems(
            stack,
            session,
            keys=[k for k in keys if todo[k]],
            profile=profile,
            out=out,
            factory=factory,
        )
        for i, task in enumerate(tasks):
            await _run_task_everywhere(
                session,
                board,
                task,
                rotated(keys, i),
                following,
                max_attempts=max_attempts,
                cold=cold,
                reporter=reporter,
            )
    return board.summaries


def _following(tasks: Sequence[Task]) -> dict[str, Task | None]:
    """Each task's id -> the task after it (None for the last)."""
    return {t.task_id: tasks[i + 1] if i + 1 < len(tasks) else None for i, t in enumerate(tasks)}

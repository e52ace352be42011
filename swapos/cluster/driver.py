"""The driver of a cluster run: one queue of tasks, one loop per worker, one scoreboard.

``python -m swapos.bench run ... --ray [ADDRESS] [--workers N]`` comes here. The driver
reads what ``--out`` already holds (the same
:class:`~swapos.bench.suite.scoreboard.Scoreboard` as a local run), starts the workers
(:class:`WorkerPool`: Ray actors in :mod:`swapos.cluster.ray_pool`), and runs one loop per
worker that pulls the next task from the :class:`WorkQueue`, hands it over with the
mode/arms it still needs, and commits every (task, mode, arm) result the
worker streams back, rewriting that mode/arm's ``results.json`` through the same
:func:`~swapos.bench.results.summarize` as a local run. So ``--resume`` after a driver
restart finds exactly the finished triples and never runs one again.

Faults: a worker that dies (process killed, node lost) has its task put back with the
mode/arms that did not finish, for another worker; a worker that cannot open its systems
(e.g. a model file missing on its node) is reported and takes no task. Both are in the
returned :class:`ClusterReport`, which ``bench run`` writes into ``bench.json``.
"""

from __future__ import annotations

import time
from collections.abc import AsyncIterator, Sequence
from pathlib import Path
from typing import Protocol

import anyio
import msgspec
import sniffio
import structlog

from swapos.bench.compare import Key, label, ordered
from swapos.bench.results import write_atomic
from swapos.bench.suite.progress import Reporter
from swapos.bench.suite.scoreboard import Scoreboard, rotated
from swapos.cluster.protocol import (
    OpenReply,
    TripleDone,
    WorkerClosed,
    WorkerConfig,
    WorkerFailed,
    WorkItem,
)
from swapos.cluster.queue import DEFAULT_MAX_LOSSES, Item, WorkQueue
from swapos.cluster.worker import log_name
from swapos.data.task import Task
from swapos.errors import SwapOSError
from swapos.models.profile import Profile
from swapos.records.schema import RunSummary

log = structlog.get_logger(__name__)

DEFAULT_OPEN_TIMEOUT_S = 1800.0
"""How long a worker may take to start and open its systems (the first use of a bundled
model on a node assembles it into that node's cache: minutes for the larger ones)."""


class WorkerLost(SwapOSError):
    """A worker's process died (killed, out of memory, node lost) or cannot be reached."""


class RemoteWorker(Protocol):
    """A worker as the driver sees it (a Ray actor behind :mod:`swapos.cluster.ray_pool`)."""

    name: str

    async def open(self) -> OpenReply:
        """Open the worker's systems. Raises :class:`WorkerLost`."""
        ...

    def run(self, item: WorkItem) -> AsyncIterator[TripleDone]:
        """Each finished mode/arm of ``item``, as it finishes. Raises :class:`WorkerLost`."""
        ...

    async def close(self) -> WorkerClosed:
        """Close the worker's systems; its logs. Raises :class:`WorkerLost`."""
        ...

    async def kill(self) -> None:
        """End the worker's process now."""
        ...


class WorkerPool(Protocol):
    """Starts the workers of a run."""

    async def start(self, config: WorkerConfig) -> list[RemoteWorker]:
        """Workers for ``config`` (the pool names each and sets its CPUs)."""
        ...


class WorkerStatus(msgspec.Struct, kw_only=True):
    """What became of one worker. ``state``: ``closed`` (ran to the end), ``failed`` (could
    not open its systems: ``reason``), ``lost`` (died: ``reason``), or ``started``."""

    name: str
    node: str = ""
    state: str = "started"
    reason: str = ""
    tasks: int = 0
    triples: int = 0
    logs: list[str] = msgspec.field(default_factory=list)


class ClusterReport(msgspec.Struct, kw_only=True):
    """A cluster session: its workers, the re-runs, and Ray's overhead per task.

    ``overhead_s``: per task run to completion on one worker, the driver's time from
    handing it over to receiving its last result, minus the worker's own time in
    ``run_task`` (scheduling, (de)serialization, transfer, the worker's event-loop hops).
    ``reruns``: tasks put back after their worker died. ``given_up``: task ids that took
    down too many workers, or that no worker was left to run (left for ``--resume``).
    """

    workers: list[WorkerStatus] = msgspec.field(default_factory=list)
    reruns: int = 0
    given_up: list[str] = msgspec.field(default_factory=list)
    overhead_s: list[float] = msgspec.field(default_factory=list)
    wall_s: float = 0.0


def work_items(board: Scoreboard, tasks: Sequence[Task]) -> list[Item]:
    """The queue's items: each task with the mode/arms it still needs, in the order rotated
    by its index (as a local run orders them)."""
    items = [
        Item(index=i, task=t, keys=board.pending(t, rotated(board.keys, i)))
        for i, t in enumerate(tasks)
    ]
    return [item for item in items if item.keys]


class _Run:
    """The shared state of the worker loops of one session."""

    def __init__(
        self,
        board: Scoreboard,
        queue: WorkQueue,
        *,
        reporter: Reporter | None,
        shared_logs: bool,
        open_timeout_s: float,
    ) -> None:
        self.board = board
        self.queue = queue
        self.report = ClusterReport()
        self.reporter = reporter
        self.shared_logs = shared_logs
        self.open_timeout_s = open_timeout_s

    async def serve(self, worker: RemoteWorker) -> None:
        """One worker's loop: open, take tasks until the queue is finished, close."""
        status = WorkerStatus(name=worker.name)
        self.report.workers.append(status)
        if not await self._open(worker, status):
            await worker.kill()
            return
        try:
            while (item := await self.queue.wait_for_work()) is not None:
                await self._run_item(worker, item, status)
            closed = await worker.close()
        except WorkerLost as exc:
            status.state, status.reason = "lost", str(exc)
            log.warning("cluster.worker_lost", worker=worker.name, reason=str(exc))
            return
        status.logs = self._write_logs(closed)
        status.state = "closed"

    async def _open(self, worker: RemoteWorker, status: WorkerStatus) -> bool:
        try:
            with anyio.fail_after(self.open_timeout_s):
                reply = await worker.open()
        except TimeoutError:
            status.state = "failed"
            status.reason = f"did not start within {self.open_timeout_s:.0f} s"
            return False
        except WorkerLost as exc:
            status.state, status.reason = "lost", str(exc)
            return False
        status.node = reply.node
        if isinstance(reply, WorkerFailed):
            status.state, status.reason = "failed", reply.reason
            log.warning("cluster.worker_failed", worker=worker.name, reason=reply.reason)
            return False
        log.info("cluster.worker_ready", worker=worker.name, node=reply.node, open_s=reply.open_s)
        return True

    async def _run_item(self, worker: RemoteWorker, item: Item, status: WorkerStatus) -> None:
        """Run ``item`` on ``worker``, committing each triple; on :class:`WorkerLost`, put
        back what did not finish and re-raise."""
        remaining = list(item.keys)
        work = WorkItem(task=item.task, keys=list(item.keys), next_task=self.queue.peek())
        t0, worker_s = time.perf_counter(), 0.0
        try:
            async for done in worker.run(work):
                self.board.commit(
                    done.key, done.result, done.live, source=worker.name, capsule=done.capsule
                )
                remaining.remove(done.key)
                worker_s += done.run_s
                status.triples += 1
                if self.reporter is not None:
                    self.reporter.advance(done.key, done.result)
        except WorkerLost:
            requeued = self.queue.lost(item, remaining)
            if not requeued and remaining:
                self.report.given_up.append(item.task.task_id)
            log.warning(
                "cluster.task_requeued" if requeued else "cluster.task_given_up",
                task_id=item.task.task_id,
                keys=[label(k) for k in remaining],
                worker=worker.name,
            )
            raise
        self.report.overhead_s.append(time.perf_counter() - t0 - worker_s)
        self.queue.done(item)
        status.tasks += 1

    def _write_logs(self, closed: WorkerClosed) -> list[str]:
        written = []
        for log_file in closed.logs:
            path = log_name(self.board.out / label(log_file.key), closed.name)
            write_atomic(path, log_file.data)
            written.append(str(path))
        return written


def _worker_config(
    profile: Profile, keys: list[Key], out: Path, shared_logs: bool, max_attempts: int | None
) -> WorkerConfig:
    """The workers' common config (the pool names each); makes the mode/arm folders."""
    for key in keys:
        (out / label(key)).mkdir(parents=True, exist_ok=True)
    return WorkerConfig(
        name="",
        profile=profile,
        keys=keys,
        async_backend=sniffio.current_async_library(),
        log_dir=str(out.resolve()) if shared_logs else "",
        max_attempts=max_attempts,
    )


async def run_cluster(
    tasks: Sequence[Task],
    profile: Profile,
    *,
    out: Path,
    modes: Sequence[str],
    arms: Sequence[str],
    pool: WorkerPool,
    max_attempts: int | None = None,
    resume: bool = False,
    shared_logs: bool = False,
    reporter: Reporter | None = None,
    max_losses: int = DEFAULT_MAX_LOSSES,
    open_timeout_s: float = DEFAULT_OPEN_TIMEOUT_S,
) -> tuple[dict[Key, RunSummary], ClusterReport]:
    """Run every task in every mode x arm on the pool's workers; write results per triple.

    Args:
        tasks, profile, out, modes, arms, max_attempts, resume, reporter: as for
            :func:`swapos.bench.suite.session.run_bench`.
        pool: starts the workers (only when work is left).
        shared_logs: ``out`` is a folder every node mounts: workers write their event logs
            into it directly (a killed worker's log then survives up to its last flush).
            Otherwise each worker hands its logs back when it closes.
        max_losses: workers one task may take down before it is given up.
        open_timeout_s: how long a worker may take to start and open its systems.

    Returns:
        The summary of every mode/arm (old and new triples) and the session's report.

    Raises:
        SwapOSError: ``out`` holds a run and ``resume`` is False, or a results file is
            corrupt (nothing runs); no worker could open its systems, or every worker
            died, with work left (the results so far stay on disk: ``--resume``).
            Cancellation stops the workers' loops; every committed triple stays on disk.
    """
    t0 = time.perf_counter()
    keys = ordered([(m, a) for m in modes for a in arms])
    board = Scoreboard.open(out, keys, tasks, resume)
    items = work_items(board, tasks)
    if reporter is not None:
        reporter.start(board.remaining(tasks), keys)
    if not items:
        return board.summaries, ClusterReport()
    needed = [k for k in keys if any(k in item.keys for item in items)]
    config = _worker_config(profile, needed, out, shared_logs, max_attempts)
    queue = WorkQueue(items, max_losses=max_losses)
    run = _Run(
        board, queue, reporter=reporter, shared_logs=shared_logs, open_timeout_s=open_timeout_s
    )
    workers = await pool.start(config)
    async with anyio.create_task_group() as tg:
        for worker in workers:
            tg.start_soon(run.serve, worker)
    report = run.report
    report.reruns = queue.reruns
    report.wall_s = time.perf_counter() - t0
    left = queue.abandon()
    if left:
        report.given_up += [item.task.task_id for item in left]
        reasons = "; ".join(f"{w.name} ({w.node}): {w.state}, {w.reason}" for w in report.workers)
        raise SwapOSError(
            f"no worker is left to run {len(left)} task(s) ({reasons}); the finished ones "
            f"are in {out}: fix the nodes and rerun with --resume"
        )
    return board.summaries, report

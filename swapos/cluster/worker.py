"""The worker side of a cluster run: one process, its own SwapOS systems, tasks on demand.

:class:`BenchWorker` is a plain class (it never imports ``ray``): the driver turns it into a
Ray actor (:mod:`swapos.cluster.ray_pool`), so every method runs in that actor's process.
Its systems (one per mode/arm, kept open across tasks so models stay resident, as in a
local run) live on an anyio event loop in a thread of their own (a blocking portal); Ray
calls the methods from its own thread, and each method waits for the loop.

Lifecycle: ``open`` (opens every system; a failure, such as a model file missing on this
node, is a :class:`~swapos.cluster.protocol.WorkerFailed` reply, not a crash), then ``run``
once per task (a generator: one :class:`~swapos.cluster.protocol.TripleDone` per mode/arm,
streamed back as each finishes), then ``close`` (closes the systems, hands back the logs).
"""

from __future__ import annotations

import os
import platform
import time
from collections.abc import AsyncIterator, Iterator
from contextlib import AbstractAsyncContextManager, ExitStack, asynccontextmanager
from functools import partial
from pathlib import Path
from typing import cast

import anyio
import anyio.from_thread
import msgspec
import structlog

from swapos.actors.system import System, open_system
from swapos.bench.compare import label
from swapos.bench.results import RunInfo, info_of
from swapos.bench.suite.arms import SystemFactory, arm_profile, run_triple
from swapos.cluster.protocol import (
    CONFIG,
    ITEM,
    Key,
    LogFile,
    TripleDone,
    WorkerClosed,
    WorkerFailed,
    WorkerReady,
    encode,
)
from swapos.errors import SwapOSError
from swapos.models.profile import Mode, Profile
from swapos.models.resolve import checked_model_specs
from swapos.sysinfo import NODE_ENV
from swapos.tempdirs import owned_tempdir, remove_tree

log = structlog.get_logger(__name__)


def profile_for_cpus(profile: Profile, cpus: int) -> Profile:
    """``profile`` with every model that does not pin ``threads`` using ``cpus`` threads
    (the CPUs Ray gave this worker, not every core of its machine)."""
    models = {
        name: cfg if cfg.threads is not None else msgspec.structs.replace(cfg, threads=cpus)
        for name, cfg in profile.models.items()
    }
    return msgspec.structs.replace(profile, models=models)


@asynccontextmanager
async def open_checked(profile: Profile, mode: Mode, events: Path) -> AsyncIterator[System]:
    """The real :data:`~swapos.bench.suite.arms.SystemFactory` of a worker: the profile's model
    files are resolved on this node (bundled models assembled into its cache) and opened
    first, so a node that lacks one fails here, before it takes any task.

    Raises:
        ModelFileError, ProfileError: a model file missing or invalid on this node.
    """
    specs = await anyio.to_thread.run_sync(checked_model_specs, profile)
    async with open_system(
        profile, mode=mode, event_log=events, specs=specs, process_budget=True
    ) as system:
        yield system


def _live_info(system: System) -> RunInfo:
    return info_of(system.summary())


def node_label(name: str) -> str:
    """``<worker>@<hostname>``: the ``node`` of a worker's event-log headers."""
    return f"{name}@{platform.node()}"


def log_name(folder: Path, worker: str) -> Path:
    """``events-<worker>.jsonl`` in ``folder``, or ``events-<worker>-<n>.jsonl`` when a
    previous session left one (an event log holds one run)."""
    path, n = folder / f"events-{worker}.jsonl", 1
    while path.exists():
        n += 1
        path = folder / f"events-{worker}-{n}.jsonl"
    return path


class BenchWorker:
    """One worker of a cluster run (see the module docstring).

    Args:
        config: an encoded :class:`~swapos.cluster.protocol.WorkerConfig`.
        factory: opens one mode/arm's system (default :func:`open_checked`; tests pass
            fake systems). It must be importable on every node.
    """

    def __init__(self, config: bytes, factory: SystemFactory | None = None) -> None:
        self.config = CONFIG.decode(config)
        self.node = node_label(self.config.name)
        os.environ[NODE_ENV] = self.node  # the header of every log this process writes
        self._factory: SystemFactory = factory or open_checked
        self._tmp = ExitStack()  # the local log folder: closed after the systems
        if self.config.log_dir:
            self._log_root = Path(self.config.log_dir)
        else:
            self._log_root = owned_tempdir("swapos-worker-")
            self._tmp.callback(remove_tree, self._log_root)
        self._stack = ExitStack()
        self._portal = self._stack.enter_context(
            anyio.from_thread.start_blocking_portal(self.config.async_backend)
        )
        self._systems: dict[Key, System] = {}
        self._logs: dict[Key, Path] = {}
        self._wall: dict[Key, float] = {}

    def open(self) -> bytes:
        """Open a system per mode/arm; an encoded ``WorkerReady`` or ``WorkerFailed``.

        A :class:`~swapos.errors.SwapOSError` (a missing model file, a bad profile) is the
        ``WorkerFailed`` reason, and the systems opened so far are closed; anything else is
        a bug and propagates.
        """
        t0 = time.perf_counter()
        profile = profile_for_cpus(self.config.profile, self.config.cpus)
        try:
            for key in self.config.keys:
                self._open_one(key, profile)
        except SwapOSError as exc:
            log.warning("cluster.worker_open_failed", node=self.node, reason=str(exc))
            self._stack.close()
            return encode(WorkerFailed(name=self.config.name, node=self.node, reason=str(exc)))
        return encode(
            WorkerReady(name=self.config.name, node=self.node, open_s=time.perf_counter() - t0)
        )

    def _open_one(self, key: Key, profile: Profile) -> None:
        t0 = time.perf_counter()
        folder = self._log_root / label(key)
        folder.mkdir(parents=True, exist_ok=True)
        path = log_name(folder, self.config.name)
        cm: AbstractAsyncContextManager[System] = self._factory(
            arm_profile(profile, key[1]), cast(Mode, key[0]), path
        )
        self._systems[key] = self._stack.enter_context(self._portal.wrap_async_context_manager(cm))
        self._logs[key] = path
        self._wall[key] = time.perf_counter() - t0

    def run(self, item: bytes) -> Iterator[bytes]:
        """Run an encoded ``WorkItem``: yields an encoded ``TripleDone`` per mode/arm, in the
        item's order, each as soon as it finishes."""
        work = ITEM.decode(item)
        for key in work.keys:
            system = self._systems[key]
            attempts = self.config.max_attempts
            t0 = time.perf_counter()
            outcome = self._portal.call(
                partial(run_triple, system, work.task, key[1], max_attempts=attempts,
                        next_task=work.next_task)
            )  # fmt: skip
            run_s = time.perf_counter() - t0
            self._wall[key] += run_s
            live = self._portal.call(partial(_live_info, system))
            live.wall_clock_s = self._wall[key]
            yield encode(
                TripleDone(
                    key=key, result=outcome.result, live=live, run_s=run_s, node=self.node,
                    capsule=outcome.capsule_json,
                )
            )  # fmt: skip

    def close(self) -> bytes:
        """Close every system (logs flushed, ``RunFinished`` written); an encoded
        ``WorkerClosed`` carrying the logs unless they went to a shared ``log_dir``."""
        self._systems.clear()
        try:
            self._stack.close()  # the systems, then the portal's event loop
            logs = [
                LogFile(key=key, data=path.read_bytes())
                for key, path in self._logs.items()
                if not self.config.log_dir and path.exists()
            ]
        finally:
            self._tmp.close()
        return encode(WorkerClosed(name=self.config.name, logs=logs))

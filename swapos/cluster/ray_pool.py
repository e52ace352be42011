"""Workers as Ray actors: the only module that talks to ``ray`` (an optional extra).

``ray`` is imported when a pool starts, never at import time, and everything it hands back
is treated as ``Any`` here, at the edge. Each worker is one actor (``max_restarts=0``: a
dead worker stays dead and its task is re-run elsewhere by the driver) running a
:class:`~swapos.cluster.worker.BenchWorker`. Blocking Ray calls (``ray.get``, the next item
of a streaming generator) run in worker threads so the driver's event loop (asyncio or
trio) never blocks.
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Callable, Mapping, Sequence
from typing import Any, TypeVar

import anyio
import msgspec

from swapos.bench.suite.arms import SystemFactory
from swapos.cluster.driver import RemoteWorker, WorkerLost
from swapos.cluster.protocol import (
    CLOSED,
    OPEN_REPLY,
    TRIPLE,
    OpenReply,
    TripleDone,
    WorkerClosed,
    WorkerConfig,
    WorkItem,
    encode,
)
from swapos.errors import SwapOSError

T = TypeVar("T")


def import_ray() -> Any:
    """The ``ray`` module.

    Raises:
        SwapOSError: Ray is not installed (the message says how to install it).
    """
    try:
        import ray
    except ImportError as exc:
        raise SwapOSError(
            "--ray needs Ray, which is not installed: pip install 'swapos[ray]'"
        ) from exc
    return ray


class NodeInfo(msgspec.Struct, frozen=True, kw_only=True):
    node_id: str
    address: str
    cpus: int


class Placement(msgspec.Struct, frozen=True, kw_only=True):
    """One worker to start: its name, its CPUs, and the node it is pinned to (None: Ray
    places it)."""

    name: str
    cpus: int
    node_id: str | None = None


def plan_workers(nodes: Sequence[NodeInfo], workers: int | None) -> list[Placement]:
    """Where the workers go.

    Without ``workers``: one per node with CPUs, pinned to it, with all of its CPUs. With
    ``workers = N``: N workers of ``total CPUs // N`` CPUs each, placed by Ray.

    Raises:
        SwapOSError: no node has a CPU, or ``N`` is more than the cluster's CPUs (the
            extra actors would wait for CPUs forever).
    """
    usable = [n for n in nodes if n.cpus >= 1]
    total = sum(n.cpus for n in usable)
    if not usable:
        raise SwapOSError("the Ray cluster has no node with a CPU: check `ray status`")
    if workers is None:
        return [
            Placement(name=f"w{i}", cpus=n.cpus, node_id=n.node_id) for i, n in enumerate(usable)
        ]
    if workers > total:
        raise SwapOSError(
            f"--workers {workers} needs {workers} CPUs and the Ray cluster has {total}: "
            "lower --workers or add nodes"
        )
    return [Placement(name=f"w{i}", cpus=total // workers) for i in range(workers)]


def alive_nodes(ray: Any) -> list[NodeInfo]:
    """The cluster's live nodes and their CPUs."""
    return [
        NodeInfo(
            node_id=str(n["NodeID"]),
            address=str(n.get("NodeManagerAddress", "")),
            cpus=int(n.get("Resources", {}).get("CPU", 0)),
        )
        for n in ray.nodes()
        if n.get("Alive")
    ]


class RayWorker:
    """A :class:`~swapos.cluster.driver.RemoteWorker` backed by a Ray actor handle."""

    def __init__(self, ray: Any, handle: Any, name: str) -> None:
        self._ray = ray
        self._handle = handle
        self.name = name

    async def _blocking(self, fn: Callable[..., T], *args: Any) -> T:
        try:
            return await anyio.to_thread.run_sync(fn, *args, abandon_on_cancel=True)
        except self._ray.exceptions.RayActorError as exc:
            raise WorkerLost(f"worker {self.name} died: {type(exc).__name__}") from exc

    async def open(self) -> OpenReply:
        data = await self._blocking(self._ray.get, self._handle.open.remote())
        return OPEN_REPLY.decode(data)

    async def run(self, item: WorkItem) -> AsyncIterator[TripleDone]:
        stream = self._handle.run.remote(encode(item))
        while True:
            ref = await self._blocking(next, stream, None)
            if ref is None:
                return
            yield TRIPLE.decode(await self._blocking(self._ray.get, ref))

    async def close(self) -> WorkerClosed:
        data = await self._blocking(self._ray.get, self._handle.close.remote())
        closed = CLOSED.decode(data)
        await self.kill()
        return closed

    async def kill(self) -> None:
        self._ray.kill(self._handle, no_restart=True)

    @property
    def handle(self) -> Any:
        """The Ray actor handle (tests kill it)."""
        return self._handle


class RayPool:
    """Starts one Ray actor per :class:`Placement` (see :func:`plan_workers`).

    Args:
        workers: ``--workers N``, or None for one per node.
        factory: the workers' system factory (default: real models, checked on each node);
            must be importable on every node.
        options: extra ``ray.remote`` options for every actor (e.g. ``runtime_env``).

    Ray must be initialised first (:func:`connect`).
    """

    def __init__(
        self,
        *,
        workers: int | None = None,
        factory: SystemFactory | None = None,
        options: Mapping[str, Any] | None = None,
    ) -> None:
        self._workers = workers
        self._factory = factory
        self._options = dict(options or {})
        self.started: list[RayWorker] = []

    async def start(self, config: WorkerConfig) -> list[RemoteWorker]:
        ray = import_ray()
        from swapos.cluster.worker import BenchWorker

        placements = plan_workers(alive_nodes(ray), self._workers)
        actor = ray.remote(BenchWorker)
        for p in placements:
            options: dict[str, Any] = {"num_cpus": p.cpus, "max_restarts": 0, **self._options}
            if p.node_id is not None:
                from ray.util.scheduling_strategies import NodeAffinitySchedulingStrategy

                options["scheduling_strategy"] = NodeAffinitySchedulingStrategy(
                    node_id=p.node_id, soft=False
                )
            cfg = msgspec.structs.replace(config, name=p.name, cpus=p.cpus)
            handle = actor.options(**options).remote(encode(cfg), self._factory)
            self.started.append(RayWorker(ray, handle, p.name))
        return list(self.started)

    def shutdown(self) -> None:
        """Kill every actor this pool started (a no-op for those already gone)."""
        ray = import_ray()
        for worker in self.started:
            ray.kill(worker.handle, no_restart=True)


def connect(address: str | None) -> bool:
    """``ray.init`` at ``address`` ("" or None: ``RAY_ADDRESS``, or a new local Ray) unless
    Ray is initialised already; True when this call initialised it (then the caller shuts
    it down).

    Raises:
        SwapOSError: Ray is missing, or the cluster cannot be reached.
    """
    ray = import_ray()
    if ray.is_initialized():
        return False
    try:
        ray.init(address=address or None, include_dashboard=False, log_to_driver=False)
    except ConnectionError as exc:
        raise SwapOSError(
            f"cannot reach the Ray cluster at {address!r}: {exc}; is `ray start` running?"
        ) from exc
    return True

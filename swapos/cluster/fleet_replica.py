"""One replica of a fleet: one SwapOS system behind ``swapos.serve.app(system)``.

:class:`FleetReplica` knows nothing of Ray (:mod:`swapos.cluster.ray_fleet` hosts it in a
Ray Serve replica and hands it its hooks), so it runs in tests on asyncio and trio alike.
While it serves, it

- answers forwarded requests through its app (:meth:`FleetReplica.handle`,
  :mod:`swapos.cluster.fleet_bridge`);
- tells Ray Serve's router, every :data:`POLL_S`, the ids it holds
  (:func:`~swapos.policies.fleet.reported_routes` over its ledger's snapshot, its queues and
  the sessions it served), through the ``routes`` hook: its own ledger decides what it
  evicts, and the routing follows;
- reports to the fleet's shared state on every change and every :data:`HEARTBEAT_S`, sends
  it its requests' model sequence, and adopts the fleet's transition counts every
  :data:`SHARE_S`, so its prefetches follow what every client of the fleet does next.

The shared state is optional: while it cannot be reached, the replica serves on alone.
"""

from __future__ import annotations

import math
import time
from collections.abc import AsyncGenerator, AsyncIterator, Callable, Collection, Mapping, Sequence
from contextlib import AbstractAsyncContextManager, asynccontextmanager
from pathlib import Path
from typing import Protocol

import anyio
import anyio.to_thread
import msgspec
import structlog
from anyio.abc import TaskGroup
from starlette.types import ASGIApp

from swapos.actors.system import System, open_system
from swapos.cluster.fleet_bridge import AsgiCall
from swapos.cluster.fleet_protocol import (
    COUNTS,
    REQUEST,
    FleetConfig,
    FleetView,
    ForwardedRequest,
    Observation,
    ReplicaReport,
    ResponsePart,
    ResponseStart,
    encode,
)
from swapos.cluster.worker import profile_for_cpus
from swapos.errors import SwapOSError
from swapos.models.profile import Mode, Profile
from swapos.models.resolve import checked_model_specs
from swapos.policies.fleet import SESSION_MARK, SessionTable, reported_routes
from swapos.policies.serving import GLOBAL_KEY, Transitions
from swapos.serve.app import app
from swapos.serve.state import Server, ServeSettings, served_specs
from swapos.serve.transitions import NextModels

log = structlog.get_logger(__name__)

POLL_S = 0.05
"""How often a replica compares what it holds with what it last reported."""
HEARTBEAT_S = 1.0
"""A replica reports to the shared state at least this often."""
SHARE_S = 1.0
"""How often a replica sends its requests' models and adopts the fleet's counts."""


REPLICA_HEADER = b"x-swapos-replica"
"""The response header that names the replica that answered."""


class FleetStateUnavailable(SwapOSError):
    """The fleet's shared state cannot be reached (it is restarting, or gone)."""


class StateClient(Protocol):
    """The fleet's shared state as a replica calls it (:mod:`swapos.cluster.fleet_state`).
    Each call raises :class:`FleetStateUnavailable` when the state cannot be reached."""

    async def observe(self, batch: bytes) -> None: ...

    async def transitions(self) -> bytes: ...

    async def report(self, data: bytes) -> None: ...

    async def view(self) -> FleetView: ...


class ReplicaSpec(msgspec.Struct, frozen=True, kw_only=True):
    """What a replica's system is opened with."""

    profile: Profile
    mode: Mode | None
    budget_bytes: int
    settings: ServeSettings
    kv_dir: str | None = None
    event_log: str | None = None


ReplicaFactory = Callable[[ReplicaSpec], AbstractAsyncContextManager[System]]
"""Opens a replica's system (tests pass fake systems; it must be importable on every node)."""


@asynccontextmanager
async def open_replica_system(spec: ReplicaSpec) -> AsyncIterator[System]:
    """The real :data:`ReplicaFactory`: the profile's files resolved and checked on this
    node (bundled models assembled into its cache), then the system opened as ``swapos
    serve`` opens it (the process's budget, the KV disk tier).

    Raises:
        ModelFileError, ProfileError: a model file missing or invalid on this node.
    """
    specs = await anyio.to_thread.run_sync(checked_model_specs, spec.profile)
    async with open_system(
        spec.profile,
        specs=served_specs(specs, spec.settings),
        mode=spec.mode,
        budget_bytes=spec.budget_bytes,
        event_log=spec.event_log,
        process_budget=True,
        kv_disk_dir=Path(spec.kv_dir) if spec.kv_dir else None,
    ) as system:
        yield system


def replica_log(event_log: str | None, replica: str) -> str | None:
    """``<stem>-<replica><suffix>`` beside ``event_log``: each replica's own log."""
    if not event_log:
        return None
    path = Path(event_log)
    return str(path.with_name(f"{path.stem}-{replica}{path.suffix}"))


class SharedNextModels(NextModels):
    """A replica's transitions: its arrivals are sent to the fleet (:meth:`take`), and it
    predicts from the fleet's counts (:meth:`adopt`).

    A predicted model that another replica holds and this one does not is left out of the
    upcoming models (:meth:`upcoming`): Ray Serve will route its request to the holder, so
    loading it here too would only evict something this replica's own clients need.
    """

    def __init__(self, mine: Callable[[], Collection[str]] = frozenset) -> None:
        super().__init__()
        self._pending: list[Observation] = []
        self._mine = mine
        self._elsewhere: frozenset[str] = frozenset()

    def arrived(self, key: str | None, model: str) -> None:
        super().arrived(key, model)
        self._pending.append(Observation(key or GLOBAL_KEY, model))

    def take(self) -> list[Observation]:
        """The arrivals not sent yet (and forget them)."""
        taken, self._pending = self._pending, []
        return taken

    def adopt(
        self,
        counts: Mapping[str, Mapping[str, Mapping[str, int]]],
        elsewhere: Collection[str] = (),
    ) -> None:
        """Predict from the fleet's ``counts`` from now on; ``elsewhere``: the models other
        replicas hold now."""
        self.transitions = Transitions.from_counts(counts)
        self._elsewhere = frozenset(elsewhere)

    def upcoming(self, key: str | None, model: str, queued: Sequence[str]) -> list[str]:
        names = super().upcoming(key, model, queued)
        skip = self._elsewhere - set(self._mine()) - set(queued)
        return [m for m in names if m not in skip]


def held_elsewhere(view: FleetView, me: str) -> frozenset[str]:
    """The models the live replicas other than ``me`` report (ready, loading, queued)."""
    return frozenset(
        route
        for seen in view.replicas
        if seen.live and seen.report.replica != me
        for route in seen.report.routes
        if SESSION_MARK not in route
    )


class FleetReplica:
    """A fleet replica (see the module docstring).

    Args:
        config: the fleet.
        name: the replica's id (Ray Serve's).
        node: its host.
        budget_bytes: its memory budget.
        state: the fleet's shared state.
        routes: called with the ids it holds, every :data:`POLL_S` (Ray Serve's
            multiplexing is told of them).
        factory: opens its system (default :func:`open_replica_system`).

    Lifecycle: :meth:`serve` opens the system and serves until :meth:`stop`; ``ready`` is
    set once it serves. Cancelling :meth:`serve` ends every request it runs.
    """

    def __init__(  # noqa: PLR0917
        self,
        config: FleetConfig,
        name: str,
        node: str,
        budget_bytes: int,
        state: StateClient,
        routes: Callable[[frozenset[str]], None],
        factory: ReplicaFactory | None = None,
    ) -> None:
        self.config = config
        self.name = name
        self._id = name.encode()
        self.node = node
        self.budget_bytes = budget_bytes
        self._state = state
        self._routes = routes
        self._factory: ReplicaFactory = factory or open_replica_system
        self.ready = anyio.Event()
        self._stop = anyio.Event()
        self._sessions = SessionTable()
        self._next = SharedNextModels(self._ready)
        self._requests = 0
        self._tg: TaskGroup | None = None
        self._asgi: ASGIApp | None = None
        self._server: Server | None = None

    def spec(self) -> ReplicaSpec:
        """What its system is opened with (threads: its CPUs, at least one)."""
        cpus = max(1, math.floor(self.config.replica_cpus))
        return ReplicaSpec(
            profile=profile_for_cpus(self.config.profile, cpus),
            mode=self.config.mode,
            budget_bytes=self.budget_bytes,
            settings=self.config.settings,
            kv_dir=self.config.kv_dir,
            event_log=replica_log(self.config.event_log, self.name),
        )

    async def serve(self) -> None:
        """Open the system, load the preloads, serve until :meth:`stop`.

        Raises:
            SwapOSError: the system cannot be opened here, or a preload failed.
        """
        async with self._factory(self.spec()) as system:
            asgi = app(system, self.config.settings, next_models=self._next)
            server: Server = asgi.state.server
            failed = await system.preload(self.config.preload) if self.config.preload else {}
            if failed:
                why = "; ".join(f"{m}: {reason}" for m, reason in failed.items())
                raise SwapOSError(f"replica {self.name}: preload failed: {why}")
            async with server.expiry.lifespan(), anyio.create_task_group() as tg:
                self._tg, self._asgi, self._server = tg, asgi, server
                tg.start_soon(self._report_loop)
                tg.start_soon(self._share_loop)
                self.ready.set()
                log.info("fleet.replica_ready", replica=self.name, budget=self.budget_bytes)
                await self._stop.wait()
                tg.cancel_scope.cancel()

    def stop(self) -> None:
        """End :meth:`serve` (its running requests are cancelled)."""
        self._stop.set()

    async def handle(self, data: bytes) -> AsyncGenerator[bytes, None]:
        """Answer an encoded forwarded request: its response's encoded parts, in order
        (the response names this replica in :data:`REPLICA_HEADER`).

        Closing the iterator early (the client went away) cancels the request.
        """
        if self._tg is None or self._asgi is None:
            raise SwapOSError(f"replica {self.name} is not serving")
        request = REQUEST.decode(data)
        call = AsgiCall(self._asgi, request)
        self._tg.start_soon(call.run)
        try:
            async with call.parts() as parts:
                async for part in parts:
                    yield encode(self._seen(request, part))
        finally:
            call.abandon()

    def _seen(self, request: ForwardedRequest, part: ResponsePart) -> ResponsePart:
        """``part`` as sent on: a response's start counts the request, remembers its
        session when it succeeds, and names this replica."""
        if not isinstance(part, ResponseStart):
            return part
        self._requests += 1
        if part.status < 400 and request.session and request.model:
            self._sessions.served(request.session, request.model)
        return ResponseStart(
            status=part.status, headers=[*part.headers, (REPLICA_HEADER, self._id)]
        )

    def _ready(self) -> frozenset[str]:
        return self._server.system.residency().ready() if self._server else frozenset()

    def held(self) -> frozenset[str]:
        """The ids it holds now (see :func:`~swapos.policies.fleet.reported_routes`)."""
        if self._server is None:
            return frozenset()
        snapshot = self._server.system.residency()
        return reported_routes(
            ready=snapshot.ready(),
            loading=[m.model for m in snapshot.models if m.state == "loading"],
            queued=[q.model for q in self._server.scheduler.snapshot() if q.waiting or q.running],
            sessions=self._sessions.as_dict(),
        )

    def report(self, routes: frozenset[str]) -> ReplicaReport:
        """Its report to the shared state now."""
        assert self._server is not None
        system = self._server.system
        loader = system.statistics()["loader"]
        ready = system.residency().ready()
        queues = {
            q.model: q.waiting + q.running
            for q in self._server.scheduler.snapshot()
            if q.waiting or q.running
        }
        return ReplicaReport(
            replica=self.name,
            node=self.node,
            routes=sorted(routes),
            ready=sorted(ready),
            sessions={s: m for s, m in self._sessions.items() if m in ready},
            queues=queues,
            loads=loader.loads,
            evictions=loader.evictions,
            requests=self._requests,
            budget_bytes=loader.budget_bytes,
            used_bytes=loader.used_bytes,
        )

    async def _report_loop(self) -> None:
        last: ReplicaReport | None = None
        sent_at = -math.inf
        while True:
            routes = self.held()
            self._routes(routes)
            report = self.report(routes)
            now = time.monotonic()
            if report != last or now - sent_at >= HEARTBEAT_S:
                try:
                    await self._state.report(encode(report))
                    last, sent_at = report, now
                except FleetStateUnavailable as exc:
                    log.warning("fleet.state_unreachable", replica=self.name, reason=str(exc))
                    sent_at = now  # try again at the next heartbeat
            await anyio.sleep(POLL_S)

    async def _share_loop(self) -> None:
        while True:
            await anyio.sleep(SHARE_S)
            batch = self._next.take()
            try:
                if batch:
                    await self._state.observe(encode(batch))
                counts = COUNTS.decode(await self._state.transitions())
                self._next.adopt(counts, held_elsewhere(await self._state.view(), self.name))
            except FleetStateUnavailable as exc:
                log.warning("fleet.state_unreachable", replica=self.name, reason=str(exc))

"""The Loader: owns the model table, loads and evicts models, grants leases."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Literal, assert_never

import anyio
import anyio.lowlevel
import msgspec
import structlog
from anyio.abc import TaskGroup
from anyio.streams.memory import MemoryObjectReceiveStream

from swapos.actors.base import Events, Outbox, Pending, serving
from swapos.actors.residency import Residency
from swapos.backends.base import LoadedModel, ModelBackend
from swapos.errors import SwapOSError
from swapos.messages.base import new_id
from swapos.messages.commands import (
    AcquireFailed,
    AcquireModel,
    DescribeModels,
    LeaseCountChanged,
    LoadUpgraded,
    ModelFreed,
    ModelLeased,
    ModelResident,
    ModelsDescribed,
    ModelState,
    ModelsUnloaded,
    PrefetchDone,
    PrefetchModel,
    PrefetchOutcome,
    ReleaseLease,
    ReservationDenied,
    ReservationGranted,
    Reserve,
    ReturnReservation,
    UnloadModels,
)
from swapos.messages.events import (
    LeaseGranted,
    LeaseReleased,
    ModelEvicted,
    ModelEvictStarted,
    ModelLoadCancelled,
    ModelLoaded,
    ModelLoadFailed,
    ModelLoadStarted,
)
from swapos.messages.inboxes import LoaderInbox
from swapos.models.spec import ModelSpec

log = structlog.get_logger(__name__)

State = Literal["absent", "loading", "ready", "evicting"]
Outcome = Literal["none", "loaded", "failed", "denied", "cancelled", "evicted"]


class LoaderStatistics(msgspec.Struct, frozen=True, kw_only=True):
    states: dict[str, str]
    leases: dict[str, int]
    loads: int
    joined: int
    evictions: int
    failures: int


@dataclass
class _Slot:
    """One row of the model table."""

    spec: ModelSpec
    state: State = "absent"
    model: LoadedModel | None = None
    leases: int = 0
    done: anyio.Event = field(default_factory=anyio.Event)
    speculative: bool = False
    started_speculative: bool = False
    scope: anyio.CancelScope | None = None
    outcome: Outcome = "none"
    failure: str = ""
    room: tuple[float, float] = (0.0, 0.0)
    load: tuple[float, float] = (0.0, 0.0)
    hidden_credit_s: float = 0.0
    last_used: float = 0.0


def _overlap(a: tuple[float, float], b: tuple[float, float]) -> float:
    return max(0.0, min(a[1], b[1]) - max(a[0], b[0]))


class Loader:
    """Owns ``absent -> loading -> ready -> evicting -> absent`` for every model.

    With ``cold``, an evicted model's file is also dropped from the page cache, as on a
    machine whose RAM cannot hold every model (``--cold`` benchmarks).

    Loads run as tasks of the Loader's own task group, so a requester that is cancelled
    does not cancel a load others have joined. Room is asked of the Evictor before each
    load; victims it names are evicted first (closes run shielded). Speculative loads
    (prefetches) may be cancelled by an urgent reservation; a load joined by an urgent
    request is upgraded and never cancelled.
    """

    def __init__(
        self,
        *,
        inbox: MemoryObjectReceiveStream[LoaderInbox],
        outbox: Outbox,
        events: Events,
        backend: ModelBackend,
        specs: dict[str, ModelSpec],
        residency: Residency,
        cold: bool = False,
    ) -> None:
        self._cold = cold
        self._inbox = inbox
        self._outbox = outbox
        self._events = events
        self._backend = backend
        self._table = {name: _Slot(spec=spec) for name, spec in specs.items()}
        self._residency = residency
        self._lease_models: dict[str, str] = {}
        self._pending = Pending()
        self._tg: TaskGroup | None = None
        self._loads = self._joined = self._evictions = self._failures = 0

    def statistics(self) -> LoaderStatistics:
        return LoaderStatistics(
            states={n: s.state for n, s in self._table.items()},
            leases={n: s.leases for n, s in self._table.items()},
            loads=self._loads,
            joined=self._joined,
            evictions=self._evictions,
            failures=self._failures,
        )

    async def run(
        self, *, task_status: anyio.abc.TaskStatus[None] = anyio.TASK_STATUS_IGNORED
    ) -> None:
        """Serve the inbox. On exit (inbox closed or cancelled) every model is closed,
        shielded and bounded by :data:`CLEANUP_TIMEOUT_S`."""
        async with serving(self._inbox, self._outbox, cleanup=self._close_all) as self._tg:
            task_status.started()
            async for msg in self._inbox:
                await self._handle(msg)

    async def _close_all(self) -> None:
        for name, slot in self._table.items():
            if slot.model is not None:
                await self._close(name, slot, reason="shutdown")

    async def _handle(self, msg: LoaderInbox) -> None:
        assert self._tg is not None
        match msg:
            case AcquireModel():
                self._tg.start_soon(self._acquire, msg)
            case PrefetchModel():
                self._tg.start_soon(self._prefetch, msg)
            case ReleaseLease(lease_id=lease_id):
                await self._release(lease_id)
            case ReservationGranted() | ReservationDenied():
                self._pending.resolve(msg)
            case DescribeModels() | UnloadModels():
                self._tg.start_soon(self._residency_request, msg)
            case _:
                assert_never(msg)

    # --- leases ---------------------------------------------------------------------------

    async def _acquire(self, req: AcquireModel) -> None:
        slot = self._table.get(req.model)
        if slot is None:
            known = ", ".join(sorted(self._table))
            await self._reply_failed(req, f"unknown model {req.model!r} (known: {known})")
            return
        t_req = self._events.t()
        was_ready = slot.state == "ready"
        joined = False
        while slot.state != "ready":
            if slot.state == "absent":
                self._start_load(req.model, slot, urgent=True)
            else:
                joined = True
                if slot.state == "loading" and slot.speculative:
                    slot.speculative = False
                    await self._outbox.send("evictor", LoadUpgraded(model=req.model))
            await slot.done.wait()
            if slot.state == "absent" and slot.outcome == "failed":
                await self._reply_failed(req, slot.failure)
                return
        t_ready = self._events.t()
        evict_s = load_s = 0.0
        hidden = slot.hidden_credit_s  # a finished prefetch, credited to its first user only
        if not was_ready:
            evict_s = _overlap((t_req, t_ready), slot.room)
            load_s = max(0.0, t_ready - t_req - evict_s)
            if slot.started_speculative and slot.load[0] < t_req:  # joined a prefetch
                hidden = max(hidden, min(t_req, slot.load[1]) - slot.load[0])
        slot.hidden_credit_s = 0.0
        self._joined += joined
        assert slot.model is not None
        lease_id = new_id("lease")
        slot.leases += 1
        slot.last_used = t_ready
        self._lease_models[lease_id] = req.model
        self._residency.add(lease_id, slot.model)
        await self._outbox.send("evictor", LeaseCountChanged(model=req.model, leases=slot.leases))
        await self._events.emit(
            LeaseGranted(
                t=t_ready,
                task_id=req.task_id,
                phase_id=req.phase_id,
                model=req.model,
                request_id=req.request_id,
                lease_id=lease_id,
                load_s=load_s,
                evict_s=evict_s,
                load_hidden_s=hidden,
                joined=joined,
            )
        )
        await self._outbox.send(
            req.reply_to,
            ModelLeased(
                request_id=req.request_id,
                lease_id=lease_id,
                model=req.model,
                load_s=load_s,
                evict_s=evict_s,
                load_hidden_s=hidden,
                joined=joined,
            ),
        )

    async def _reply_failed(self, req: AcquireModel, reason: str) -> None:
        await self._outbox.send(
            req.reply_to, AcquireFailed(request_id=req.request_id, model=req.model, reason=reason)
        )

    async def _release(self, lease_id: str) -> None:
        name = self._lease_models.pop(lease_id, None)
        if name is None:
            return
        self._residency.remove(lease_id)
        slot = self._table[name]
        slot.leases -= 1
        await self._outbox.send("evictor", LeaseCountChanged(model=name, leases=slot.leases))
        await self._events.emit(LeaseReleased(t=self._events.t(), model=name, lease_id=lease_id))

    # --- prefetch -------------------------------------------------------------------------

    async def _prefetch(self, req: PrefetchModel) -> None:
        slot = self._table.get(req.model)
        outcome: PrefetchOutcome
        reason = ""
        if slot is None:
            outcome, reason = "failed", f"unknown model {req.model!r}"
        elif slot.state == "ready":
            outcome = "resident"
        elif slot.state in ("loading", "evicting"):
            outcome = "joined"
        elif req.warm_only:
            outcome, reason = "denied", "warm-up only"
        else:
            self._start_load(req.model, slot, urgent=False)
            await slot.done.wait()
            mapping: dict[Outcome, PrefetchOutcome] = {
                "loaded": "loaded",
                "failed": "failed",
                "denied": "denied",
                "cancelled": "cancelled",
            }
            outcome = mapping.get(slot.outcome, "cancelled")
            reason = slot.failure
        await self._outbox.send(
            req.reply_to,
            PrefetchDone(
                request_id=req.request_id, model=req.model, outcome=outcome, reason=reason
            ),
        )

    # --- loading and evicting -------------------------------------------------------------

    def _start_load(self, name: str, slot: _Slot, *, urgent: bool) -> None:
        assert self._tg is not None
        slot.state = "loading"
        slot.done = anyio.Event()
        slot.speculative = slot.started_speculative = not urgent
        slot.outcome = "none"
        slot.failure = ""
        slot.scope = anyio.CancelScope()
        self._tg.start_soon(self._load, name, slot, slot.scope)

    async def _load(self, name: str, slot: _Slot, scope: anyio.CancelScope) -> None:
        """Reserve room, evict victims, load. Always ends with ``slot.done`` set."""
        estimate = 0
        try:
            with scope:
                estimate = self._backend.estimate_footprint(slot.spec)
                await self._events.emit(
                    ModelLoadStarted(
                        t=self._events.t(),
                        model=name,
                        speculative=slot.speculative,
                        estimate_bytes=estimate,
                    )
                )
                t_room = self._events.t()
                grant = await self._reserve(name, slot, estimate)
                if grant is None:
                    return
                for other in grant.cancel:
                    await self._cancel_load(other)
                for victim in grant.victims:
                    await self._evict(victim, reason=f"room for {name}")
                slot.room = (t_room, self._events.t())
                t_load = self._events.t()
                model = await self._backend.load(slot.spec)
                slot.model = model
                slot.load = (t_load, self._events.t())
                slot.state, slot.outcome = "ready", "loaded"
                self._loads += 1
                if slot.speculative:
                    slot.hidden_credit_s = slot.load[1] - slot.load[0]
                await self._outbox.send(
                    "evictor", ModelResident(model=name, nbytes=model.footprint_bytes)
                )
                await self._events.emit(
                    ModelLoaded(
                        t=self._events.t(),
                        model=name,
                        load_s=slot.load[1] - t_load,
                        speculative=slot.started_speculative,  # started by a prefetch
                        estimate_bytes=estimate,
                        measured_bytes=model.footprint_bytes,
                    )
                )
        except SwapOSError as exc:
            slot.outcome, slot.failure = "failed", str(exc)
            self._failures += 1
            log.warning("model_load.failed", model=name, reason=str(exc))
            with anyio.CancelScope(shield=True):
                await self._events.emit(
                    ModelLoadFailed(t=self._events.t(), model=name, reason=str(exc))
                )
        finally:
            if slot.state != "ready":
                slot.state = "absent"
                if slot.outcome == "none":
                    slot.outcome = "cancelled"
                with anyio.CancelScope(shield=True):
                    await self._tell_evictor(ModelFreed(model=name))
                    if slot.outcome == "cancelled":
                        await self._events.emit(
                            ModelLoadCancelled(t=self._events.t(), model=name, reason="cancelled")
                        )
            slot.done.set()

    async def _reserve(self, name: str, slot: _Slot, nbytes: int) -> ReservationGranted | None:
        """Ask the Evictor for room until a grant is usable; None (slot updated) if denied."""
        while True:
            rid = new_id("rsv")
            reply = await self._pending.ask(
                self._outbox,
                "evictor",
                Reserve(
                    request_id=rid,
                    reply_to="loader",
                    model=name,
                    nbytes=nbytes,
                    urgent=not slot.speculative,
                ),
            )
            if isinstance(reply, ReservationDenied):
                if not slot.speculative:  # an urgent load that can never fit
                    slot.outcome, slot.failure = "failed", reply.reason
                    self._failures += 1
                else:
                    slot.outcome, slot.failure = "denied", reply.reason
                return None
            assert isinstance(reply, ReservationGranted)
            busy = [
                v for v in reply.victims if self._table[v].state != "ready" or self._table[v].leases
            ]
            busy += [
                c
                for c in reply.cancel
                if self._table[c].state != "loading" or not self._table[c].speculative
            ]
            if not busy:
                for victim in reply.victims:  # claimed now: no lease can be granted on them
                    self._table[victim].state = "evicting"
                    self._table[victim].done = anyio.Event()
                return reply
            await self._outbox.send("evictor", ReturnReservation(request_id=rid))
            await anyio.lowlevel.checkpoint()

    async def _tell_evictor(self, msg: ModelFreed) -> None:
        """One-way notice; at shutdown the Evictor may already be gone, which is fine."""
        await self._outbox.send_if_open("evictor", msg)

    async def _cancel_load(self, name: str) -> None:
        slot = self._table[name]
        if slot.state == "loading" and slot.scope is not None:
            slot.scope.cancel()
            await slot.done.wait()

    async def _evict(self, name: str, *, reason: str) -> None:
        slot = self._table[name]
        slot.state = "evicting"
        with anyio.CancelScope(shield=True):
            await self._close(name, slot, reason=reason)

    async def _close(self, name: str, slot: _Slot, *, reason: str) -> None:
        model = slot.model
        t0 = self._events.t()
        await self._events.emit(ModelEvictStarted(t=t0, model=name, reason=reason))
        if model is not None:
            await model.close()
            if self._cold:  # model a machine whose RAM cannot also cache evicted models
                await self._backend.drop_page_cache(slot.spec)
        slot.model = None
        slot.state, slot.outcome = "absent", "evicted"
        slot.hidden_credit_s = 0.0
        self._evictions += 1
        await self._tell_evictor(ModelFreed(model=name))
        await self._events.emit(
            ModelEvicted(
                t=self._events.t(), model=name, evict_s=self._events.t() - t0, reason=reason
            )
        )
        slot.done.set()

    # --- residency queries and unloads (swapos serve; kept apart from the residency core) --

    async def _residency_request(self, msg: DescribeModels | UnloadModels) -> None:
        """Describe the model table, or evict idle models on request (``POST /unload``)."""
        if isinstance(msg, UnloadModels):
            unloaded: list[str] = []
            skipped: dict[str, str] = {}
            for name in msg.models if msg.models is not None else list(self._table):
                slot = self._table.get(name)
                if slot is None:
                    skipped[name] = "unknown model"
                elif slot.state == "ready" and slot.leases == 0:
                    await self._evict(name, reason="unload requested")
                    unloaded.append(name)
                elif slot.state != "absent":
                    skipped[name] = f"{slot.state} with {slot.leases} lease(s)"
            reply: ModelsDescribed | ModelsUnloaded = ModelsUnloaded(
                request_id=msg.request_id, unloaded=unloaded, skipped=skipped
            )
        else:
            rows = [
                ModelState(
                    model=name,
                    state=slot.state,
                    leases=slot.leases,
                    footprint_bytes=slot.model.footprint_bytes if slot.model else 0,
                )
                for name, slot in self._table.items()
            ]
            reply = ModelsDescribed(request_id=msg.request_id, models=rows)
        await self._outbox.send(msg.reply_to, reply)

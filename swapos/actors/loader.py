"""The Loader: the actor that owns every model's lifecycle, and grants leases.

Its parts, one module each: the model table and its loads and evictions
(:mod:`swapos.actors.model_table`, the handles in :mod:`swapos.actors.loads`), admission
via the Evictor (:mod:`swapos.actors.admission`), the memory accounting
(:mod:`swapos.actors.accounting`), and cold runs' page cache (:mod:`swapos.actors.cold`).
This module keeps the inbox, the leases, prefetch requests, and ``swapos serve``'s
residency queries and unloads.
"""

from __future__ import annotations

from typing import assert_never

import anyio
import msgspec
from anyio.abc import TaskGroup
from anyio.streams.memory import MemoryObjectReceiveStream

from swapos.actors.accounting import MemoryAccount
from swapos.actors.admission import Admission
from swapos.actors.base import Events, Outbox, Pending, serving
from swapos.actors.cold import PageCache
from swapos.actors.loads import Eviction, Load
from swapos.actors.model_table import ModelTable, Row
from swapos.actors.residency import Residency
from swapos.backends.base import ModelBackend
from swapos.data.lifecycle import Lifecycle
from swapos.data.residency import ResidencySnapshot
from swapos.messages.base import new_id
from swapos.messages.commands import (
    AcquireFailed,
    AcquireModel,
    DescribeModels,
    KVRamResized,
    ModelLeased,
    ModelsDescribed,
    ModelsUnloaded,
    PrefetchDone,
    PrefetchModel,
    PrefetchOutcome,
    ReleaseLease,
    RoomPlanned,
    UnloadModels,
)
from swapos.messages.events import LeaseGranted, LeaseReleased
from swapos.messages.inboxes import LoaderInbox
from swapos.models.spec import ModelSpec
from swapos.policies.contexts import LoadWith, context_step, within_budget
from swapos.policies.ledger import Ledger
from swapos.policies.waits import lease_wait

CONTEXT_TOO_BIG = "the memory budget cannot hold a context of"
"""How a lease refused for its context's memory begins its reason (the server's 400)."""


class LoaderStatistics(msgspec.Struct, frozen=True, kw_only=True):
    states: dict[str, str]
    leases: dict[str, int]
    loads: int
    joined: int
    evictions: int
    failures: int
    budget_bytes: int
    used_bytes: int
    peak_used_bytes: int
    waiting_urgent: int
    granted: int
    denied: int
    victims: int
    device_budget_bytes: int = 0
    device_used_bytes: int = 0
    peak_device_bytes: int = 0
    overhead_bytes: int = 0
    kv_ram_bytes: int | None = None
    unseen_bytes: int = 0
    """Process RSS seen above the budget at lease releases (taken off the KV tier's share)."""


class Loader:
    """Owns every model's lifecycle (``absent -> waiting -> loading -> ready -> evicting ->
    absent``, swapos/data/lifecycle.py) and the memory ledger that records it.

    The ledger has two budgets: host memory (``budget_bytes``) and GPU memory
    (``device_budget_bytes``, for offloaded layers); a load is admitted when it fits both,
    and the Evictor evicts for the one it lacks. With ``kv_ram_bytes`` (the KV cache's RAM
    tier size), ``budget_bytes`` is the process's budget: ``overhead_bytes`` comes off it,
    models share the rest, and the KV tier is resized to what they leave; with
    ``watch_rss`` too, RSS above the budget comes off the tier's share
    (:class:`~swapos.actors.accounting.MemoryAccount`). With ``cold``, an evicted model's
    file is also dropped from the page cache (:class:`~swapos.actors.cold.PageCache`).
    ``pinned`` models are never evicted to make room (an unload still closes them).

    An urgent load that cannot fit waits until a lease is released or memory freed; a
    speculative one (a prefetch) is refused, and may be cancelled by an urgent plan; a load
    joined by an urgent request is upgraded and never cancelled
    (:class:`~swapos.actors.admission.Admission`).
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
        budget_bytes: int,
        device_budget_bytes: int = 0,
        overhead_bytes: int = 0,
        kv_ram_bytes: int | None = None,
        cold: bool = False,
        watch_rss: bool = False,
        pinned: frozenset[str] = frozenset(),
    ) -> None:
        self._inbox = inbox
        self._outbox = outbox
        self._events = events
        self._pending = Pending()
        ledger = Ledger(
            budget_bytes, device_budget_bytes, overhead_bytes=overhead_bytes, pinned=pinned
        )
        self._ledger = ledger
        self._memory = MemoryAccount(
            ledger, backend=backend, specs=specs, kv_ram_bytes=kv_ram_bytes, watch_rss=watch_rss
        )
        self._admission = Admission(
            memory=self._memory, outbox=outbox, pending=self._pending, events=events
        )
        self._table = ModelTable(
            specs=specs,
            backend=backend,
            events=events,
            outbox=outbox,
            pending=self._pending,
            memory=self._memory,
            admission=self._admission,
            page_cache=PageCache(backend, cold=cold),
        )
        self._residency = residency
        self._specs = specs
        self._released = anyio.Event()
        self._lease_models: dict[str, str] = {}
        self._tg: TaskGroup | None = None
        self._joined = 0

    def statistics(self) -> LoaderStatistics:
        ledger, table, admission = self._ledger, self._table, self._admission
        return LoaderStatistics(
            states={m.model: m.state for m in table.residency().models},
            leases={n: ledger.leases(n) for n in table.names()},
            loads=table.loads,
            joined=self._joined,
            evictions=table.evictions,
            failures=table.failures,
            budget_bytes=ledger.budget_bytes,
            used_bytes=ledger.used_bytes(),
            peak_used_bytes=ledger.peak_used_bytes,
            waiting_urgent=admission.urgent_waiting,
            granted=admission.granted,
            denied=admission.denied,
            victims=admission.victims,
            device_budget_bytes=ledger.device_budget_bytes,
            device_used_bytes=ledger.used_bytes("device"),
            peak_device_bytes=ledger.peak_device_bytes,
            overhead_bytes=ledger.overhead_bytes,
            kv_ram_bytes=self._memory.kv_sent,
            unseen_bytes=self._memory.unseen_bytes,
        )

    def residency(self) -> ResidencySnapshot:
        """Every model's state, leases and footprint now, as frozen data."""
        return self._table.residency()

    async def run(
        self, *, task_status: anyio.abc.TaskStatus[None] = anyio.TASK_STATUS_IGNORED
    ) -> None:
        """Serve the inbox. On exit (inbox closed or cancelled) every model is closed,
        shielded and bounded by :data:`CLEANUP_TIMEOUT_S`."""
        async with serving(self._inbox, self._outbox, cleanup=self._table.close_all) as tg:
            self._tg = tg
            task_status.started()
            self._table.room_may_have_changed()  # the KV tier's first share of the budget
            async for msg in self._inbox:
                await self._handle(msg)

    async def _handle(self, msg: LoaderInbox) -> None:
        assert self._tg is not None
        match msg:
            case AcquireModel():
                self._tg.start_soon(self._acquire, msg)
            case PrefetchModel():
                self._tg.start_soon(self._prefetch, msg)
            case ReleaseLease(lease_id=lease_id):
                await self._release(lease_id)
            case RoomPlanned() | KVRamResized():
                self._pending.resolve(msg)
            case DescribeModels():
                self._tg.start_soon(self._describe, msg)
            case UnloadModels():
                self._tg.start_soon(self._unload, msg)
            case _:
                assert_never(msg)

    # --- leases ---------------------------------------------------------------------------

    async def _acquire(self, req: AcquireModel) -> None:
        assert self._tg is not None
        table = self._table
        row = table.row(req.model)
        if row is None:
            known = ", ".join(sorted(table.names()))
            await self._reply_failed(req, f"unknown model {req.model!r} (known: {known})")
            return
        t_req = self._events.t()
        was_ready = table.state(req.model) is Lifecycle.READY
        joined = False
        while True:
            state = table.state(req.model)
            work: Load | Eviction
            if state is Lifecycle.READY:
                step = self._context_step(req, row)
                if step is None:
                    break
                if self._ledger.leases(req.model):  # reloaded once its requests are done
                    await self._released.wait()
                    continue
                if why := table.too_big_with(req.model, step.n_ctx):
                    await self._reply_failed(req, f"{CONTEXT_TOO_BIG} {step.n_ctx} tokens: {why}")
                    return
                was_ready = False
                reason = f"reload with a context of {step.n_ctx} tokens"
                await table.evict(req.model, reason=reason)
                if table.state(req.model) is not Lifecycle.ABSENT:
                    continue  # another requester started its load meanwhile: join it
                work = table.start_load(self._tg, req.model, urgent=True, n_ctx=step.n_ctx)
            elif state is Lifecycle.ABSENT:
                step = self._context_step(req, row)
                n_ctx = step.n_ctx if step is not None else 0
                work = table.start_load(self._tg, req.model, urgent=True, n_ctx=n_ctx)
            else:
                joined = True
                if state in (Lifecycle.WAITING, Lifecycle.LOADING):
                    self._ledger.upgrade(req.model)  # an urgent waiter: never cancel it
                work = table.under_way(req.model)
            await work.wait()
            if (
                isinstance(work, Load)
                and work.outcome == "failed"
                and table.state(req.model) is Lifecycle.ABSENT
            ):
                await self._reply_failed(req, work.failure)
                return
        await self._grant(req, row, t_req=t_req, was_ready=was_ready, joined=joined)

    def _context_step(self, req: AcquireModel, row: Row) -> LoadWith | None:
        """The context ``req``'s model must be loaded with first (``policies/contexts.py``),
        None when it fits the one it is loaded with (or asks for none while loaded)."""
        loaded = self._table.context(req.model)
        if req.n_ctx <= 0 and loaded is not None:
            return None
        spec = self._specs[req.model]
        step = context_step(req.n_ctx, loaded=loaded, start=spec.n_ctx, cap=spec.ctx_cap)
        if not isinstance(step, LoadWith):
            return None
        return within_budget(
            step,
            min(req.n_ctx, spec.ctx_cap),
            start=spec.n_ctx,
            fits=lambda n_ctx: not self._table.too_big_with(req.model, n_ctx),
        )

    async def _grant(
        self, req: AcquireModel, row: Row, *, t_req: float, was_ready: bool, joined: bool
    ) -> None:
        """Lease ready ``row`` to ``req``, with what the requester waited for."""
        load = row.load
        assert load is not None and row.model is not None
        t_ready = self._events.t()
        wait = lease_wait(
            requested=t_req,
            ready=t_ready,
            was_ready=was_ready,
            room=load.room,
            load=load.times,
            started_speculative=load.started_speculative,
            hidden_credit_s=load.take_hidden_credit(),
        )
        self._joined += joined
        lease_id = new_id("lease")
        self._ledger.lease(req.model, now=t_ready)
        self._lease_models[lease_id] = req.model
        self._residency.add(lease_id, row.model)
        grant = LeaseGranted(
            t=t_ready,
            task_id=req.task_id,
            phase_id=req.phase_id,
            model=req.model,
            request_id=req.request_id,
            lease_id=lease_id,
            load_s=wait.load_s,
            evict_s=wait.evict_s,
            load_hidden_s=wait.load_hidden_s,
            joined=joined,
        )
        await self._events.emit(grant)
        await self._outbox.send(req.reply_to, ModelLeased(request_id=req.request_id, grant=grant))

    async def _reply_failed(self, req: AcquireModel, reason: str) -> None:
        await self._outbox.send(
            req.reply_to, AcquireFailed(request_id=req.request_id, model=req.model, reason=reason)
        )

    async def _release(self, lease_id: str) -> None:
        name = self._lease_models.pop(lease_id, None)
        if name is None:
            return
        self._residency.remove(lease_id)
        self._ledger.release(name)
        self._released.set()  # a reload waiting for its model's leases looks again
        self._released = anyio.Event()
        self._memory.released()  # a generation just ended: the model's pages are in
        self._table.room_may_have_changed()
        await self._events.emit(LeaseReleased(t=self._events.t(), model=name, lease_id=lease_id))

    # --- prefetch -------------------------------------------------------------------------

    async def _prefetch(self, req: PrefetchModel) -> None:
        assert self._tg is not None
        row = self._table.row(req.model)
        outcome: PrefetchOutcome
        reason = ""
        state = self._table.state(req.model)
        if row is None:
            outcome, reason = "failed", f"unknown model {req.model!r}"
        elif state is Lifecycle.READY:
            outcome = "resident"
        elif state is not Lifecycle.ABSENT:
            outcome = "joined"
        elif req.warm_only:
            outcome, reason = "denied", "warm-up only"
        else:
            load = self._table.start_load(self._tg, req.model, urgent=False)
            await load.wait()
            outcome, reason = load.outcome or "cancelled", load.failure
            if outcome == "loaded" and row.load is not load:  # evicted before this woke
                outcome = "cancelled"
        parts = _load_parts(row) if row is not None and outcome == "loaded" else (0.0, 0.0, "")
        await self._outbox.send(
            req.reply_to,
            PrefetchDone(
                request_id=req.request_id,
                model=req.model,
                outcome=outcome,
                reason=reason,
                read_s=parts[0],
                upload_s=parts[1],
                device=parts[2],
            ),
        )

    # --- residency queries and unloads (swapos serve) --------------------------------------

    async def _describe(self, msg: DescribeModels) -> None:
        models = list(self._table.residency().models)
        await self._outbox.send(
            msg.reply_to, ModelsDescribed(request_id=msg.request_id, models=models)
        )

    async def _unload(self, msg: UnloadModels) -> None:
        """Evict the named idle models (all when None); name the others in ``skipped``."""
        unloaded: list[str] = []
        skipped: dict[str, str] = {}
        for name in msg.models if msg.models is not None else self._table.names():
            state, leases = self._table.state(name), self._ledger.leases(name)
            if self._table.row(name) is None:
                skipped[name] = "unknown model"
            elif state is Lifecycle.READY and leases == 0:
                await self._table.evict(name, reason="unload requested")
                unloaded.append(name)
            elif state is not Lifecycle.ABSENT:
                skipped[name] = f"{state.served} with {leases} lease(s)"
        reply = ModelsUnloaded(request_id=msg.request_id, unloaded=unloaded, skipped=skipped)
        await self._outbox.send(msg.reply_to, reply)


def _load_parts(row: Row) -> tuple[float, float, str]:
    """``(read_s, upload_s, device)`` of the load that made ``row``'s model ready."""
    load = row.load
    total = load.times[1] - load.times[0] if load is not None else 0.0
    offload = row.model.offload if row.model is not None else None
    if offload is None:
        return total, 0.0, ""
    return max(0.0, total - offload.upload_s), offload.upload_s, offload.device

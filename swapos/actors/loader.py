"""The Loader: owns the model table, loads and evicts models, grants leases."""

from __future__ import annotations

import contextlib
from dataclasses import dataclass, field
from typing import Literal, assert_never

import anyio
import msgspec
import structlog
from anyio.abc import TaskGroup
from anyio.streams.memory import MemoryObjectReceiveStream

from swapos.actors.base import Events, Outbox, Pending, serving
from swapos.actors.residency import Residency
from swapos.backends.base import LoadedModel, ModelBackend
from swapos.data.lifecycle import Lifecycle, ServedState
from swapos.data.residency import RoomPlan
from swapos.errors import SwapOSError, SystemClosedError
from swapos.messages.base import new_id
from swapos.messages.commands import (
    AcquireFailed,
    AcquireModel,
    DescribeModels,
    KVRamResized,
    ModelLeased,
    ModelsDescribed,
    ModelState,
    ModelsUnloaded,
    PlanRoom,
    PrefetchDone,
    PrefetchModel,
    PrefetchOutcome,
    ReleaseLease,
    ResizeKVRam,
    RoomPlanned,
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
    ReservationMade,
    ReservationRefused,
)
from swapos.messages.inboxes import LoaderInbox
from swapos.models.spec import ModelSpec
from swapos.policies.ledger import Ledger, kv_room
from swapos.policies.waits import lease_wait
from swapos.sysinfo import peak_rss_bytes, rss_bytes

log = structlog.get_logger(__name__)

Outcome = Literal["none", "loaded", "failed", "denied", "cancelled", "evicted"]


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


@dataclass
class _Slot:
    """One row of the model table: what a load holds besides its ledger entry."""

    spec: ModelSpec
    model: LoadedModel | None = None
    done: anyio.Event = field(default_factory=anyio.Event)
    started_speculative: bool = False
    scope: anyio.CancelScope | None = None
    outcome: Outcome = "none"
    failure: str = ""
    room: tuple[float, float] = (0.0, 0.0)
    load: tuple[float, float] = (0.0, 0.0)
    hidden_credit_s: float = 0.0
    state_bytes: int | None = None  # the largest KV state it can save (asked once)


class Loader:
    """Owns ``absent -> loading -> ready -> evicting -> absent`` for every model, and the
    memory ledger (:class:`~swapos.policies.ledger.Ledger`) that records it.

    The ledger has two budgets: host memory (``budget_bytes``) and GPU memory
    (``device_budget_bytes``, for offloaded layers); a load is admitted when it fits both,
    and the Evictor evicts for the one it lacks.

    With ``kv_ram_bytes`` (the KV cache's RAM tier size), ``budget_bytes`` is the process's
    budget: ``overhead_bytes`` (its measured fixed cost) comes off it, models share the rest,
    and the KV tier is resized to what they leave (:func:`~swapos.policies.ledger.kv_room`),
    shrunk once a reserved load's victims are closed, before it starts, and grown back when
    memory is freed: it yields to models and never makes one wait. Without it the KV tier
    is outside the budget. With ``watch_rss`` too, the process's RSS is read whenever a
    lease is released: what it holds above the budget is memory the ledger does not see
    (weights paged in after the load, the interpreter's growth), and it comes off the
    tier's share from then on (``unseen_bytes``; it only grows). The tier's share also
    leaves room for one KV state in flight (the largest a held model can save,
    ``ModelBackend.estimate_state_bytes``): a new state exists before the tier drops what it
    must to take it.

    With ``cold``, an evicted model's file is also dropped from the page cache, as on a
    machine whose RAM cannot hold every model (``--cold`` benchmarks).

    Loads run as tasks of the Loader's own task group, so a requester that is cancelled
    does not cancel a load others have joined. Before each load the Evictor is asked which
    models must go (:class:`PlanRoom`, with the ledger); the plan is checked against the
    ledger and carried out (victims evicted, closes shielded), or asked again when a lease
    granted meanwhile made it stale. An urgent load that cannot fit waits until a lease is
    released or memory freed; a speculative one (a prefetch) is refused, and may be cancelled
    by an urgent plan; a load joined by an urgent request is upgraded and never cancelled.
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
    ) -> None:
        self._cold = cold
        self._watch_rss = watch_rss and kv_ram_bytes is not None
        self._unseen = 0
        self._inbox = inbox
        self._outbox = outbox
        self._events = events
        self._backend = backend
        self._table = {name: _Slot(spec=spec) for name, spec in specs.items()}
        self._ledger = Ledger(budget_bytes, device_budget_bytes, overhead_bytes=overhead_bytes)
        self._kv_cap = kv_ram_bytes
        self._kv_sent: int | None = None
        self._room_changed = anyio.Event()
        self._urgent_waiting = 0
        self._residency = residency
        self._lease_models: dict[str, str] = {}
        self._pending = Pending()
        self._tg: TaskGroup | None = None
        self._loads = self._joined = self._evictions = self._failures = 0
        self._granted = self._denied = self._victims = 0

    def statistics(self) -> LoaderStatistics:
        return LoaderStatistics(
            states={n: self._state(n) for n in self._table},
            leases={n: self._ledger.leases(n) for n in self._table},
            loads=self._loads,
            joined=self._joined,
            evictions=self._evictions,
            failures=self._failures,
            budget_bytes=self._ledger.budget_bytes,
            used_bytes=self._ledger.used_bytes(),
            peak_used_bytes=self._ledger.peak_used_bytes,
            waiting_urgent=self._urgent_waiting,
            granted=self._granted,
            denied=self._denied,
            victims=self._victims,
            device_budget_bytes=self._ledger.device_budget_bytes,
            device_used_bytes=self._ledger.used_bytes("device"),
            peak_device_bytes=self._ledger.peak_device_bytes,
            overhead_bytes=self._ledger.overhead_bytes,
            kv_ram_bytes=self._kv_sent,
            unseen_bytes=self._unseen,
        )

    def _state(self, name: str) -> ServedState:
        return self._ledger.status(name).served

    async def run(
        self, *, task_status: anyio.abc.TaskStatus[None] = anyio.TASK_STATUS_IGNORED
    ) -> None:
        """Serve the inbox. On exit (inbox closed or cancelled) every model is closed,
        shielded and bounded by :data:`CLEANUP_TIMEOUT_S`."""
        async with serving(self._inbox, self._outbox, cleanup=self._close_all) as self._tg:
            task_status.started()
            self._room_may_have_changed()  # the KV tier's first share of the budget
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
            case RoomPlanned() | KVRamResized():
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
        was_ready = self._state(req.model) == "ready"
        joined = False
        while (state := self._state(req.model)) != "ready":
            if state == "absent":
                self._start_load(req.model, slot, urgent=True)
            else:
                joined = True
                if state == "loading":
                    self._ledger.upgrade(req.model)  # an urgent waiter: never cancel it
            await slot.done.wait()
            if self._state(req.model) == "absent" and slot.outcome == "failed":
                await self._reply_failed(req, slot.failure)
                return
        t_ready = self._events.t()
        wait = lease_wait(
            requested=t_req,
            ready=t_ready,
            was_ready=was_ready,
            room=slot.room,
            load=slot.load,
            started_speculative=slot.started_speculative,
            hidden_credit_s=slot.hidden_credit_s,
        )
        slot.hidden_credit_s = 0.0
        self._joined += joined
        assert slot.model is not None
        lease_id = new_id("lease")
        self._ledger.lease(req.model, now=t_ready)
        self._lease_models[lease_id] = req.model
        self._residency.add(lease_id, slot.model)
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
        if self._watch_rss:  # a generation just ended: the model's pages are in
            held = max(rss_bytes(), peak_rss_bytes())  # the phase's peak (reset at its start)
            self._unseen += max(0, held - self._ledger.budget_bytes)
        self._room_may_have_changed()
        await self._events.emit(LeaseReleased(t=self._events.t(), model=name, lease_id=lease_id))

    # --- prefetch -------------------------------------------------------------------------

    async def _prefetch(self, req: PrefetchModel) -> None:
        slot = self._table.get(req.model)
        outcome: PrefetchOutcome
        reason = ""
        state = self._state(req.model)
        if slot is None:
            outcome, reason = "failed", f"unknown model {req.model!r}"
        elif state == "ready":
            outcome = "resident"
        elif state in ("loading", "evicting"):
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
        parts = _load_parts(slot) if slot is not None and outcome == "loaded" else (0.0, 0.0, "")
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

    # --- loading and evicting -------------------------------------------------------------

    def _start_load(self, name: str, slot: _Slot, *, urgent: bool) -> None:
        assert self._tg is not None
        self._ledger.want(name, speculative=not urgent, now=self._events.t())
        slot.done = anyio.Event()
        slot.started_speculative = not urgent
        slot.outcome = "none"
        slot.failure = ""
        slot.scope = anyio.CancelScope()
        self._tg.start_soon(self._load, name, slot, slot.scope)

    async def _load(self, name: str, slot: _Slot, scope: anyio.CancelScope) -> None:
        """Make room, evict victims, load. Always ends with ``slot.done`` set."""
        estimate = device_estimate = 0
        try:
            with scope:
                estimate = self._backend.estimate_footprint(slot.spec)
                device_estimate = self._backend.estimate_device_footprint(slot.spec)
                await self._events.emit(
                    ModelLoadStarted(
                        t=self._events.t(),
                        model=name,
                        speculative=slot.started_speculative,
                        estimate_bytes=estimate,
                        device_estimate_bytes=device_estimate,
                    )
                )
                t_room = self._events.t()
                plan = await self._make_room(name, slot, estimate, device_estimate)
                if plan is None:
                    return
                for other in plan.cancel:
                    await self._cancel_load(other)
                for victim in plan.victims:
                    await self._evict(victim, reason=f"room for {name}")
                await self._fit_kv()  # victims are gone: the KV tier yields what is left
                slot.room = (t_room, self._events.t())
                t_load = self._events.t()
                model = await self._backend.load(slot.spec)
                if self._ledger.status(name) is Lifecycle.EVICTING:  # cancelled by an urgent plan
                    with anyio.CancelScope(shield=True):  # just as the load finished
                        await model.close()
                    return
                await self._loaded(
                    name,
                    slot,
                    model,
                    t_load=t_load,
                    estimate=estimate,
                    device_estimate=device_estimate,
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
            if self._state(name) != "ready":
                with anyio.CancelScope(shield=True):
                    await self._not_loaded(name, slot)
            slot.done.set()

    async def _loaded(
        self,
        name: str,
        slot: _Slot,
        model: LoadedModel,
        *,
        t_load: float,
        estimate: int,
        device_estimate: int,
    ) -> None:
        """Book the model ``_load`` just loaded as ready and log it."""
        slot.model = model
        slot.load = (t_load, self._events.t())
        speculative = self._speculative(name)
        offload = model.offload
        device_bytes = offload.device_bytes if offload is not None else 0
        self._ledger.loaded(name, model.footprint_bytes, device_bytes)
        self._room_may_have_changed()  # the measured footprint may be smaller
        slot.outcome = "loaded"
        self._loads += 1
        if speculative:
            slot.hidden_credit_s = slot.load[1] - slot.load[0]
        await self._events.emit(
            ModelLoaded(
                t=self._events.t(),
                model=name,
                load_s=slot.load[1] - t_load,
                speculative=slot.started_speculative,  # started by a prefetch
                estimate_bytes=estimate,
                measured_bytes=model.footprint_bytes,
                device_estimate_bytes=device_estimate,
                measured_device_bytes=device_bytes,
                upload_s=offload.upload_s if offload is not None else 0.0,
                device=offload.device if offload is not None else "",
            )
        )

    async def _not_loaded(self, name: str, slot: _Slot) -> None:
        """A load that did not end ready: forget its claim; a cancelled or refused one logs
        its end (every started load does). Call it shielded."""
        self._ledger.forget(name)
        self._room_may_have_changed()
        if slot.outcome == "none":
            slot.outcome = "cancelled"
        if slot.outcome in ("cancelled", "denied"):
            reason = "cancelled" if slot.outcome == "cancelled" else slot.failure
            await self._events.emit(
                ModelLoadCancelled(t=self._events.t(), model=name, reason=reason)
            )

    def _speculative(self, name: str) -> bool:
        entry = self._ledger.entry(name)
        return entry is not None and entry.speculative

    async def _make_room(
        self, name: str, slot: _Slot, nbytes: int, device_nbytes: int = 0
    ) -> RoomPlan | None:
        """Ask the Evictor until its plan fits the ledger (both budgets), then claim the
        room; None (and ``slot`` updated) when the load is refused."""
        budget, device_budget = self._ledger.budget("host"), self._ledger.device_budget_bytes
        too_big = _too_big(name, nbytes, budget, device_nbytes, device_budget)
        if too_big and self._ledger.overhead_bytes and nbytes > budget:
            too_big += (
                f" (the budget covers the process: {self._ledger.overhead_bytes / 2**20:.0f} "
                "MiB of it are SwapOS's own)"
            )
        if too_big:
            await self._refuse(name, slot, too_big)
            return None
        while True:
            urgent = not self._speculative(name)  # a waiting prefetch may be upgraded
            if not urgent and self._urgent_waiting:
                await self._refuse(name, slot, "urgent loads are waiting for room")
                return None
            changed = self._room_changed  # taken before asking: no change is missed
            rid = new_id("room")
            reply = await self._pending.ask(
                self._outbox,
                "evictor",
                PlanRoom(
                    request_id=rid,
                    reply_to="loader",
                    model=name,
                    nbytes=nbytes,
                    urgent=urgent,
                    claims=self._ledger.claims(excluding=name),
                    budget_bytes=budget,
                    device_nbytes=device_nbytes,
                    device_budget_bytes=device_budget,
                ),
            )
            assert isinstance(reply, RoomPlanned)
            plan = reply.plan
            if plan is not None and self._ledger.admits(name, nbytes, plan, device_nbytes):
                await self._claim(name, rid, (nbytes, device_nbytes), plan, urgent=urgent)
                return plan
            if plan is None and not urgent:
                if not self._speculative(name):  # an urgent request joined while it asked:
                    continue  # ask again as urgent (it then waits for room, never fails)
                await self._refuse(name, slot, "no room without evicting a model needed sooner")
                return None
            if plan is None:  # wait for a lease to end or memory to be freed
                self._urgent_waiting += 1
                try:
                    await changed.wait()
                finally:
                    self._urgent_waiting -= 1
            # else the plan went stale while it travelled (a victim was leased): ask again

    async def _claim(
        self, name: str, request_id: str, claim: tuple[int, int], plan: RoomPlan, *, urgent: bool
    ) -> None:
        """Record ``plan`` and the ``(host, device)`` bytes it claims in the ledger: from now
        on no lease is granted on its victims."""
        nbytes, device_nbytes = claim
        self._ledger.reserve(name, plan, nbytes, device_nbytes)
        for victim in plan.victims:
            self._table[victim].done = anyio.Event()
        self._granted += 1
        self._victims += len(plan.victims)
        await self._events.emit(
            ReservationMade(
                t=self._events.t(),
                model=name,
                request_id=request_id,
                nbytes=nbytes,
                urgent=urgent,
                victims=plan.victims,
                cancel=plan.cancel,
                used_bytes=self._ledger.used_bytes(),
                budget_bytes=self._ledger.budget_bytes,
                device_nbytes=device_nbytes,
                device_used_bytes=self._ledger.used_bytes("device"),
                device_budget_bytes=self._ledger.device_budget_bytes,
            )
        )

    async def _refuse(self, name: str, slot: _Slot, reason: str) -> None:
        """Refuse a load: an urgent one fails (it can never fit), a prefetch is denied."""
        urgent = not self._speculative(name)
        if urgent:
            slot.outcome, slot.failure = "failed", reason
            self._failures += 1
        else:
            slot.outcome, slot.failure = "denied", reason
        self._denied += 1
        await self._events.emit(
            ReservationRefused(
                t=self._events.t(),
                model=name,
                request_id=new_id("room"),
                urgent=urgent,
                reason=reason,
            )
        )
        if urgent:  # the load ends here (a denied prefetch's end is logged as cancelled)
            await self._events.emit(ModelLoadFailed(t=self._events.t(), model=name, reason=reason))

    def _room_may_have_changed(self) -> None:
        """Wake the urgent loads waiting for room (they ask the Evictor again), and give
        the KV tier what the models no longer hold."""
        self._room_changed.set()
        self._room_changed = anyio.Event()
        if self._kv_cap is not None and self._kv_target() != self._kv_sent:
            target = self._kv_target()  # no reply awaited: the models' claims already hold
            resize = ResizeKVRam(request_id=new_id("kv"), reply_to="loader", budget_bytes=target)
            if self._outbox.send_nowait("kvcache", resize):
                self._kv_sent = target  # else (full or closed) the next change tries again

    def _kv_target(self) -> int:
        assert self._kv_cap is not None
        ledger = self._ledger
        return kv_room(
            ledger.budget_bytes, overhead=ledger.overhead_bytes + self._unseen,
            models=ledger.used_bytes() + self._save_reserve(), cap=self._kv_cap,
        )  # fmt: skip

    def _save_reserve(self) -> int:
        """Room kept free for one KV state in flight: a state a resident (or reserved)
        model saves exists in full before the KV tier drops what it must to take it, so
        the largest one such a model can save is kept out of the tier's share."""
        counted = (Lifecycle.LOADING, Lifecycle.READY)
        held = (n for n in self._table if self._ledger.status(n) in counted)
        return max((self._state_bytes(n) for n in held), default=0)

    def _state_bytes(self, name: str) -> int:
        slot = self._table[name]
        if slot.state_bytes is None:
            try:
                slot.state_bytes = self._backend.estimate_state_bytes(slot.spec)
            except SwapOSError:  # an unreadable file fails its load, with its own error
                slot.state_bytes = 0
        return slot.state_bytes

    async def _fit_kv(self) -> None:
        """Resize the KV RAM tier to the process budget's room left by models (a no-op
        without ``kv_ram_bytes``) and wait until it fits (a resize sent without waiting
        may still be queued): a reserved load starts only then. A KV cache that has shut
        down holds nothing to wait for."""
        if self._kv_cap is None:
            return
        target = self._kv_target()
        self._kv_sent = target
        resize = ResizeKVRam(request_id=new_id("kv"), reply_to="loader", budget_bytes=target)
        with contextlib.suppress(SystemClosedError):
            await self._pending.ask(self._outbox, "kvcache", resize)

    async def _cancel_load(self, name: str) -> None:
        slot = self._table[name]
        if slot.scope is not None:
            slot.scope.cancel()
        await slot.done.wait()

    async def _evict(self, name: str, *, reason: str) -> None:
        slot = self._table[name]
        with anyio.CancelScope(shield=True):
            await self._close(name, slot, reason=reason)

    async def _close(self, name: str, slot: _Slot, *, reason: str) -> None:
        model = slot.model
        if self._ledger.status(name) is Lifecycle.READY:  # a victim is evicting already
            self._ledger.evicting(name)
        t0 = self._events.t()
        await self._events.emit(ModelEvictStarted(t=t0, model=name, reason=reason))
        if model is not None:
            await model.close()
            if self._cold:  # model a machine whose RAM cannot also cache evicted models
                await self._backend.drop_page_cache(slot.spec)
        slot.model = None
        slot.outcome = "evicted"
        slot.hidden_credit_s = 0.0
        self._evictions += 1
        self._ledger.forget(name)
        self._room_may_have_changed()
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
                state, leases = self._state(name), self._ledger.leases(name)
                if slot is None:
                    skipped[name] = "unknown model"
                elif state == "ready" and leases == 0:
                    slot.done = anyio.Event()  # a request arriving meanwhile waits for the close
                    await self._evict(name, reason="unload requested")
                    unloaded.append(name)
                elif state != "absent":
                    skipped[name] = f"{state} with {leases} lease(s)"
            reply: ModelsDescribed | ModelsUnloaded = ModelsUnloaded(
                request_id=msg.request_id, unloaded=unloaded, skipped=skipped
            )
        else:
            rows = [
                ModelState(
                    model=name,
                    state=self._state(name),
                    leases=self._ledger.leases(name),
                    footprint_bytes=slot.model.footprint_bytes if slot.model else 0,
                    device_footprint_bytes=_device_bytes(slot.model),
                )
                for name, slot in self._table.items()
            ]
            reply = ModelsDescribed(request_id=msg.request_id, models=rows)
        await self._outbox.send(msg.reply_to, reply)


def _too_big(name: str, nbytes: int, budget: int, device_nbytes: int, device_budget: int) -> str:
    """Why a claim can never fit (bigger than a whole budget), or ""."""
    mib = 2**20
    if nbytes > budget:
        return (
            f"model {name!r} needs ~{nbytes / mib:.0f} MiB but the models' whole budget is "
            f"{budget / mib:.0f} MiB: raise `budget` in the profile or use a smaller "
            "model/quantization"
        )
    if device_nbytes > device_budget:
        return (
            f"model {name!r} needs ~{device_nbytes / mib:.0f} MiB of GPU memory but "
            f"`device_budget` is {device_budget / mib:.0f} MiB: raise `device_budget`, or "
            "offload fewer layers (`gpu_layers`)"
        )
    return ""


def _device_bytes(model: LoadedModel | None) -> int:
    offload = model.offload if model is not None else None
    return offload.device_bytes if offload is not None else 0


def _load_parts(slot: _Slot) -> tuple[float, float, str]:
    """``(read_s, upload_s, device)`` of the load that made ``slot``'s model resident."""
    total = slot.load[1] - slot.load[0]
    offload = slot.model.offload if slot.model is not None else None
    if offload is None:
        return total, 0.0, ""
    return max(0.0, total - offload.upload_s), offload.upload_s, offload.device

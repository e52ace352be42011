"""The Evictor: owns the memory ledger and decides what must go to make room."""

from __future__ import annotations

from collections import deque
from typing import assert_never

import anyio
import msgspec
import structlog
from anyio.streams.memory import MemoryObjectReceiveStream

from swapos.actors.base import Events, Outbox, serving
from swapos.clock import Clock
from swapos.messages.commands import (
    LeaseCountChanged,
    LoadUpgraded,
    ModelFreed,
    ModelResident,
    ReservationDenied,
    ReservationGranted,
    Reserve,
    ReturnReservation,
    ScheduleUpdated,
)
from swapos.messages.events import ReservationMade, ReservationRefused
from swapos.messages.inboxes import EvictorInbox
from swapos.policies.eviction import EvictionRule, LedgerEntry, Status, plan_room, used_bytes

log = structlog.get_logger(__name__)


class EvictorStatistics(msgspec.Struct, frozen=True, kw_only=True):
    budget_bytes: int
    used_bytes: int
    peak_used_bytes: int
    waiting_urgent: int
    granted: int
    denied: int
    victims: int


class Evictor:
    """Grants reservations under a byte budget, choosing victims by next use.

    Every decision is :func:`swapos.policies.eviction.plan_room` over the ledger. Urgent
    requests that cannot fit wait (FIFO) until a lease is released or memory is freed; a
    speculative request never waits and is refused while urgent ones are waiting.
    """

    def __init__(
        self,
        *,
        inbox: MemoryObjectReceiveStream[EvictorInbox],
        outbox: Outbox,
        events: Events,
        clock: Clock,
        budget_bytes: int,
        rule: EvictionRule = "next_use",
    ) -> None:
        self._inbox = inbox
        self._outbox = outbox
        self._events = events
        self._clock = clock
        self.budget_bytes = budget_bytes
        self._rule = rule
        self._ledger: dict[str, LedgerEntry] = {}
        # request_id -> (model, the victims' and cancelled loads' statuses before the grant)
        self._grants: dict[str, tuple[str, dict[str, Status]]] = {}
        self._waiting: deque[Reserve] = deque()
        self._schedule: list[str] = []
        self._peak = 0
        self._granted = self._denied = self._victims = 0

    def statistics(self) -> EvictorStatistics:
        return EvictorStatistics(
            budget_bytes=self.budget_bytes,
            used_bytes=used_bytes(list(self._ledger.values())),
            peak_used_bytes=self._peak,
            waiting_urgent=len(self._waiting),
            granted=self._granted,
            denied=self._denied,
            victims=self._victims,
        )

    async def run(
        self, *, task_status: anyio.abc.TaskStatus[None] = anyio.TASK_STATUS_IGNORED
    ) -> None:
        """Serve the inbox until it closes. Cancellation stops it at once (no cleanup)."""
        async with serving(self._inbox, self._outbox):
            task_status.started()
            async for msg in self._inbox:
                await self._handle(msg)

    async def _handle(self, msg: EvictorInbox) -> None:
        match msg:
            case Reserve():
                await self._reserve(msg)
            case ReturnReservation(request_id=rid):
                self._return(rid)
                await self._retry_waiting()
            case ModelResident(model=model, nbytes=nbytes):
                self._forget_grants(model)
                entry = self._ledger.get(model)
                if entry is not None:
                    self._ledger[model] = msgspec.structs.replace(
                        entry, nbytes=nbytes, status="resident", speculative=False
                    )
                    self._note_peak()
                await self._retry_waiting()
            case ModelFreed(model=model):
                self._forget_grants(model)
                self._ledger.pop(model, None)
                self._forget_waiting(model)
                await self._retry_waiting()
            case LeaseCountChanged(model=model, leases=leases):
                entry = self._ledger.get(model)
                if entry is not None:
                    self._ledger[model] = msgspec.structs.replace(
                        entry, leases=leases, last_used=self._clock.now()
                    )
                await self._retry_waiting()
            case LoadUpgraded(model=model):
                entry = self._ledger.get(model)
                if entry is not None:
                    self._ledger[model] = msgspec.structs.replace(entry, speculative=False)
            case ScheduleUpdated(uses=uses):
                self._schedule = [u.model for u in sorted(uses, key=lambda u: u.order)]
            case _:
                assert_never(msg)

    async def _reserve(self, req: Reserve) -> None:
        if req.nbytes > self.budget_bytes:
            await self._deny(
                req,
                f"model {req.model!r} needs ~{req.nbytes / 2**20:.0f} MiB but the whole budget "
                f"is {self.budget_bytes / 2**20:.0f} MiB: raise `budget` in the profile or use "
                "a smaller model/quantization",
            )
            return
        if not req.urgent and self._waiting:
            await self._deny(req, "urgent loads are waiting for room")
            return
        if not await self._try_grant(req):
            if req.urgent:
                self._waiting.append(req)
                log.debug("reservation.waiting", model=req.model, nbytes=req.nbytes)
            else:
                await self._deny(req, "no room without evicting a model needed sooner")

    async def _try_grant(self, req: Reserve) -> bool:
        others = [e for m, e in self._ledger.items() if m != req.model]
        plan = plan_room(
            others,
            model=req.model,
            nbytes=req.nbytes,
            budget=self.budget_bytes,
            urgent=req.urgent,
            schedule=self._schedule,
            rule=self._rule,
        )
        if plan is None:
            return False
        before = {m: self._ledger[m].status for m in plan.victims + plan.cancel}
        for victim in plan.victims:
            self._ledger[victim] = msgspec.structs.replace(self._ledger[victim], status="evicting")
        for cancelled in plan.cancel:
            self._ledger[cancelled] = msgspec.structs.replace(
                self._ledger[cancelled], status="evicting"
            )
        self._ledger[req.model] = LedgerEntry(
            model=req.model,
            nbytes=req.nbytes,
            status="reserved",
            speculative=not req.urgent,
            last_used=self._clock.now(),
        )
        self._grants[req.request_id] = (req.model, before)
        self._granted += 1
        self._victims += len(plan.victims)
        self._note_peak()
        await self._events.emit(
            ReservationMade(
                t=self._events.t(),
                model=req.model,
                request_id=req.request_id,
                nbytes=req.nbytes,
                urgent=req.urgent,
                victims=plan.victims,
                cancel=plan.cancel,
                used_bytes=used_bytes(list(self._ledger.values())),
                budget_bytes=self.budget_bytes,
            )
        )
        await self._outbox.send(
            "loader",
            ReservationGranted(
                request_id=req.request_id,
                model=req.model,
                victims=plan.victims,
                cancel=plan.cancel,
            ),
        )
        return True

    def _return(self, request_id: str) -> None:
        grant = self._grants.pop(request_id, None)
        if grant is None:
            return
        model, before = grant
        entry = self._ledger.get(model)
        if entry is not None and entry.status == "reserved":
            del self._ledger[model]
        for victim, status in before.items():  # a cancelled load goes back to "reserved"
            v = self._ledger.get(victim)
            if v is not None and v.status == "evicting":
                self._ledger[victim] = msgspec.structs.replace(v, status=status)

    def _forget_grants(self, model: str) -> None:
        self._grants = {rid: g for rid, g in self._grants.items() if g[0] != model}

    def _forget_waiting(self, model: str) -> None:
        self._waiting = deque(r for r in self._waiting if r.model != model)

    async def _retry_waiting(self) -> None:
        while self._waiting:
            if not await self._try_grant(self._waiting[0]):
                return
            self._waiting.popleft()

    async def _deny(self, req: Reserve, reason: str) -> None:
        self._denied += 1
        await self._events.emit(
            ReservationRefused(
                t=self._events.t(),
                model=req.model,
                request_id=req.request_id,
                urgent=req.urgent,
                reason=reason,
            )
        )
        await self._outbox.send(
            "loader", ReservationDenied(request_id=req.request_id, model=req.model, reason=reason)
        )

    def _note_peak(self) -> None:
        counted = sum(e.nbytes for e in self._ledger.values() if e.status != "evicting")
        self._peak = max(self._peak, counted)

"""Admission of a load: room asked of the Evictor, urgent and speculative loads arbitrated.

Before a load runs, the Evictor is asked which models must go (:class:`PlanRoom`, carrying
the ledger's claims); the plan is checked against the ledger as it is on arrival
(:meth:`~swapos.policies.ledger.Ledger.admits`) and asked again when a lease granted
meanwhile made it stale. An urgent load that cannot fit now waits until room may have
changed (:meth:`Admission.room_changed`: a lease released, memory freed); a speculative one
(a prefetch) is refused instead, and is refused at once while urgent loads wait. A load
bigger than a whole budget is refused (an urgent one fails).
"""

from __future__ import annotations

import anyio
import msgspec

from swapos.actors.accounting import MemoryAccount
from swapos.actors.base import Events, Outbox, Pending
from swapos.data.residency import RoomPlan
from swapos.messages.base import new_id
from swapos.messages.commands import PlanRoom, RoomPlanned
from swapos.messages.events import ReservationMade, ReservationRefused


class Admitted(msgspec.Struct, frozen=True, kw_only=True):
    """A plan that fits the ledger now: claim it before the next ``await``."""

    plan: RoomPlan
    request_id: str
    urgent: bool


class Refused(msgspec.Struct, frozen=True, kw_only=True):
    """No room for the load: an ``urgent`` one fails, a prefetch is denied."""

    reason: str
    urgent: bool


class Admission:
    """Admits loads one plan at a time; counts what it granted and refused."""

    def __init__(
        self, *, memory: MemoryAccount, outbox: Outbox, pending: Pending, events: Events
    ) -> None:
        self._memory = memory
        self._outbox = outbox
        self._pending = pending
        self._events = events
        self._changed = anyio.Event()
        self.urgent_waiting = 0
        self.granted = self.denied = self.victims = 0

    def room_changed(self) -> None:
        """Room may have changed (a lease released, memory freed): wake the urgent loads
        waiting for it; they ask the Evictor again."""
        self._changed.set()
        self._changed = anyio.Event()

    async def admit(self, name: str, nbytes: int, device_nbytes: int) -> Admitted | Refused:
        """Ask the Evictor until its plan for ``nbytes`` host and ``device_nbytes`` device
        bytes of ``name`` fits the ledger, or refuse (a :class:`ReservationRefused` logged)."""
        ledger = self._memory.ledger
        too_big = self._memory.too_big(name, nbytes, device_nbytes)
        if too_big:
            return await self._refuse(name, too_big)
        while True:
            urgent = not self._speculative(name)  # a waiting prefetch may be upgraded
            if not urgent and self.urgent_waiting:
                return await self._refuse(name, "urgent loads are waiting for room")
            changed = self._changed  # taken before asking: no change is missed
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
                    claims=ledger.claims(excluding=name),
                    budget_bytes=ledger.budget("host"),
                    device_nbytes=device_nbytes,
                    device_budget_bytes=ledger.device_budget_bytes,
                ),
            )
            assert isinstance(reply, RoomPlanned)
            plan = reply.plan
            if plan is not None and ledger.admits(name, nbytes, plan, device_nbytes):
                return Admitted(plan=plan, request_id=rid, urgent=urgent)
            if plan is None and not urgent:
                if not self._speculative(name):  # an urgent request joined while it asked:
                    continue  # ask again as urgent (it then waits for room, never fails)
                return await self._refuse(name, "no room without evicting a model needed sooner")
            if plan is None:  # wait for a lease to end or memory to be freed
                self.urgent_waiting += 1
                try:
                    await changed.wait()
                finally:
                    self.urgent_waiting -= 1
            # else the plan went stale while it travelled (a victim was leased): ask again

    async def claimed(self, name: str, admitted: Admitted, claim: tuple[int, int]) -> None:
        """Log the ``(host, device)`` bytes ``admitted``'s plan claimed for ``name``."""
        nbytes, device_nbytes = claim
        plan = admitted.plan
        self.granted += 1
        self.victims += len(plan.victims)
        ledger = self._memory.ledger
        await self._events.emit(
            ReservationMade(
                t=self._events.t(),
                model=name,
                request_id=admitted.request_id,
                nbytes=nbytes,
                urgent=admitted.urgent,
                victims=plan.victims,
                cancel=plan.cancel,
                used_bytes=ledger.used_bytes(),
                budget_bytes=ledger.budget_bytes,
                device_nbytes=device_nbytes,
                device_used_bytes=ledger.used_bytes("device"),
                device_budget_bytes=ledger.device_budget_bytes,
            )
        )

    async def _refuse(self, name: str, reason: str) -> Refused:
        urgent = not self._speculative(name)
        self.denied += 1
        await self._events.emit(
            ReservationRefused(
                t=self._events.t(),
                model=name,
                request_id=new_id("room"),
                urgent=urgent,
                reason=reason,
            )
        )
        return Refused(reason=reason, urgent=urgent)

    def _speculative(self, name: str) -> bool:
        entry = self._memory.ledger.entry(name)
        return entry is not None and entry.speculative

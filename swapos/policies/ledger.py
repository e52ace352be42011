"""The memory ledger: every model's claim on the byte budget, in one place.

The Loader owns the one :class:`Ledger` of a system and updates it synchronously as models
are wanted, reserved, loaded, leased, released and freed; nothing else holds a copy. The
Evictor decides victims from a snapshot of it (:meth:`Ledger.claims`) that travels in the
request, and the Loader checks that decision against the ledger (:meth:`Ledger.admits`)
before it acts, so a plan made stale by a lease granted meanwhile is never carried out.

Pure: no clock, no I/O; times are passed in.
"""

from __future__ import annotations

from collections.abc import Sequence

import msgspec

from swapos.data.residency import LedgerEntry, RoomPlan, Status


def used_bytes(entries: Sequence[LedgerEntry]) -> int:
    """Bytes counted against the budget (victims being evicted still count; a load still
    waiting for room holds none)."""
    return sum(e.nbytes for e in entries if e.status != "waiting")


def free_bytes(entries: Sequence[LedgerEntry], budget: int) -> int:
    """Room left for a new claim: bytes of models already being evicted are as good as free
    (the claim that chose them as victims is counted instead)."""
    pending_free = sum(e.nbytes for e in entries if e.status == "evicting")
    return budget - used_bytes(entries) + pending_free


class Ledger:
    """Residency of every model of one system, under one byte budget."""

    def __init__(self, budget_bytes: int) -> None:
        self.budget_bytes = budget_bytes
        self._entries: dict[str, LedgerEntry] = {}
        self._peak = 0

    # --- reading ------------------------------------------------------------------------

    def status(self, model: str) -> Status | None:
        """``model``'s status, or None when it holds nothing and no load wants it."""
        entry = self._entries.get(model)
        return None if entry is None else entry.status

    def entry(self, model: str) -> LedgerEntry | None:
        return self._entries.get(model)

    def leases(self, model: str) -> int:
        entry = self._entries.get(model)
        return 0 if entry is None else entry.leases

    def claims(self, *, excluding: str) -> list[LedgerEntry]:
        """The entries that hold budget, ``excluding`` one model: what the Evictor plans over."""
        return [e for m, e in self._entries.items() if m != excluding and e.status != "waiting"]

    def used_bytes(self) -> int:
        return used_bytes(list(self._entries.values()))

    @property
    def peak_used_bytes(self) -> int:
        """The most bytes ever claimed by reserved and resident models at once."""
        return self._peak

    def admits(self, model: str, nbytes: int, plan: RoomPlan) -> bool:
        """Whether carrying out ``plan`` now makes room for ``nbytes`` of ``model``: every
        victim is still resident and idle, every load to cancel still speculative, and the
        claim fits the budget once they are gone."""
        for victim in plan.victims:
            e = self._entries.get(victim)
            if e is None or e.status != "resident" or e.leases:
                return False
        for other in plan.cancel:
            e = self._entries.get(other)
            if e is None or e.status != "reserved" or not e.speculative:
                return False
        going = set(plan.victims) | set(plan.cancel)
        claims = self.claims(excluding=model)
        freed = sum(e.nbytes for e in claims if e.model in going)
        return nbytes <= free_bytes(claims, self.budget_bytes) + freed

    # --- writing (the Loader) -----------------------------------------------------------

    def want(self, model: str, *, speculative: bool, now: float) -> None:
        """A load of ``model`` starts; it holds no room until :meth:`reserve`."""
        self._entries[model] = LedgerEntry(
            model=model, nbytes=0, status="waiting", speculative=speculative, last_used=now
        )

    def upgrade(self, model: str) -> None:
        """An urgent request joined ``model``'s speculative load: never cancel it."""
        self._replace(model, speculative=False)

    def reserve(self, model: str, plan: RoomPlan, nbytes: int) -> None:
        """Claim ``nbytes`` for ``model`` (its estimate) by ``plan``: its victims and
        cancelled loads become ``evicting``."""
        for other in plan.victims + plan.cancel:
            self._replace(other, status="evicting")
        self._replace(model, status="reserved", nbytes=nbytes)
        self._note_peak()

    def loaded(self, model: str, nbytes: int) -> None:
        """``model`` is resident; ``nbytes`` is its measured footprint."""
        self._replace(model, status="resident", nbytes=nbytes, speculative=False)
        self._note_peak()

    def lease(self, model: str, *, now: float) -> int:
        """One more lease on ``model``; returns the count."""
        entry = self._entries[model]
        self._entries[model] = msgspec.structs.replace(
            entry, leases=entry.leases + 1, last_used=now
        )
        return entry.leases + 1

    def release(self, model: str) -> int:
        """One lease fewer on ``model``; returns the count."""
        entry = self._entries[model]
        self._entries[model] = msgspec.structs.replace(entry, leases=entry.leases - 1)
        return entry.leases - 1

    def evicting(self, model: str) -> None:
        """``model`` is being closed (a victim already is)."""
        self._replace(model, status="evicting")

    def forget(self, model: str) -> None:
        """``model`` holds no memory any more (evicted, failed, cancelled or denied)."""
        self._entries.pop(model, None)

    def _replace(self, model: str, **changes: object) -> None:
        self._entries[model] = msgspec.structs.replace(self._entries[model], **changes)

    def _note_peak(self) -> None:
        counted = sum(
            e.nbytes for e in self._entries.values() if e.status in ("reserved", "resident")
        )
        self._peak = max(self._peak, counted)

"""The memory ledger: every model's claim on the byte budgets, in one place.

Two budgets, one ledger: a claim has host bytes (``nbytes``, under ``budget``) and device
bytes (``device_bytes``, GPU memory under ``device_budget``); a partly offloaded model
holds both. Every rule below holds for each kind of memory on its own, and a claim is
admitted only when it fits both.

The host budget is the process's (issue 29): a measured fixed overhead (the process before
any model: interpreter, libraries) comes off it first, the models' claims share the rest,
and the KV cache's RAM tier gets what they leave (:func:`kv_room`): it yields to models.

The Loader owns the one :class:`Ledger` of a system and updates it synchronously as models
are wanted, reserved, loaded, leased, released and freed; nothing else holds a copy. The
Evictor decides victims from a snapshot of it (:meth:`Ledger.claims`) that travels in the
request, and the Loader checks that decision against the ledger (:meth:`Ledger.admits`)
before it acts, so a plan made stale by a lease granted meanwhile is never carried out.

Pure: no clock, no I/O; times are passed in.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import msgspec

from swapos.data.lifecycle import Lifecycle, check_transition
from swapos.data.residency import LedgerEntry, MemoryKind, RoomPlan

KINDS: tuple[MemoryKind, ...] = ("host", "device")


def used_bytes(entries: Sequence[LedgerEntry], kind: MemoryKind = "host") -> int:
    """Bytes of ``kind`` counted against its budget (victims being evicted still count; a
    load still waiting for room holds none)."""
    return sum(e.size(kind) for e in entries if e.status.holds_room)


def free_bytes(entries: Sequence[LedgerEntry], budget: int, kind: MemoryKind = "host") -> int:
    """Room of ``kind`` left for a new claim: bytes of models already being evicted are as
    good as free (the claim that chose them as victims is counted instead)."""
    pending_free = sum(e.size(kind) for e in entries if e.status is Lifecycle.EVICTING)
    return budget - used_bytes(entries, kind) + pending_free


def pinned_bytes(entries: Sequence[LedgerEntry], kind: MemoryKind = "host") -> int:
    """Bytes of ``kind`` held by pinned models: room no eviction can free."""
    return sum(e.size(kind) for e in entries if e.pinned and e.status.holds_room)


def kv_room(budget: int, *, overhead: int, models: int, cap: int) -> int:
    """The KV RAM tier's share of a process ``budget``: what the fixed ``overhead`` and the
    ``models``' claims leave, at most ``cap`` (its own configured size), never below 0. So
    ``overhead + models + kv_room(...) <= budget`` whenever the models fit their share."""
    return max(0, min(cap, budget - overhead - models))


class Ledger:
    """Residency of every model of one system, under a host and a device byte budget
    (``device_budget_bytes`` 0: no GPU memory; only claims of 0 device bytes fit).

    ``overhead_bytes`` of the host budget are the process's own (measured when the system
    opens): models share ``budget_bytes - overhead_bytes`` (:meth:`budget`). The entries of
    ``pinned`` models say so (:attr:`~swapos.data.residency.LedgerEntry.pinned`): the
    eviction policy never takes them as victims.
    """

    def __init__(
        self,
        budget_bytes: int,
        device_budget_bytes: int = 0,
        *,
        overhead_bytes: int = 0,
        pinned: frozenset[str] = frozenset(),
    ) -> None:
        self.pinned = pinned
        self.budget_bytes = budget_bytes
        self.device_budget_bytes = device_budget_bytes
        self.overhead_bytes = overhead_bytes
        self._entries: dict[str, LedgerEntry] = {}
        self._peak = 0
        self._peak_device = 0

    def budget(self, kind: MemoryKind) -> int:
        """The models' budget of ``kind`` (host: the process budget less its overhead)."""
        if kind == "host":
            return max(0, self.budget_bytes - self.overhead_bytes)
        return self.device_budget_bytes

    # --- reading ------------------------------------------------------------------------

    def status(self, model: str) -> Lifecycle:
        """Where ``model`` is in its lifecycle (``ABSENT``: it has no entry)."""
        entry = self._entries.get(model)
        return Lifecycle.ABSENT if entry is None else entry.status

    def entry(self, model: str) -> LedgerEntry | None:
        return self._entries.get(model)

    def leases(self, model: str) -> int:
        entry = self._entries.get(model)
        return 0 if entry is None else entry.leases

    def claims(self, *, excluding: str) -> list[LedgerEntry]:
        """The entries that hold budget, ``excluding`` one model: what the Evictor plans over."""
        return [e for m, e in self._entries.items() if m != excluding and e.status.holds_room]

    def used_bytes(self, kind: MemoryKind = "host") -> int:
        return used_bytes(list(self._entries.values()), kind)

    @property
    def peak_used_bytes(self) -> int:
        """The most host bytes ever claimed by loading and ready models at once."""
        return self._peak

    @property
    def peak_device_bytes(self) -> int:
        """The most device bytes ever claimed by loading and ready models at once."""
        return self._peak_device

    def admits(self, model: str, nbytes: int, plan: RoomPlan, device_bytes: int = 0) -> bool:
        """Whether carrying out ``plan`` now makes room for ``nbytes`` host and
        ``device_bytes`` device bytes of ``model``: every victim is still ready and idle,
        every load to cancel still speculative, and the claim fits both budgets once they
        are gone."""
        for victim in plan.victims:
            e = self._entries.get(victim)
            if e is None or e.status is not Lifecycle.READY or e.leases:
                return False
        for other in plan.cancel:
            e = self._entries.get(other)
            if e is None or e.status is not Lifecycle.LOADING or not e.speculative:
                return False
        going = set(plan.victims) | set(plan.cancel)
        claims = self.claims(excluding=model)
        want = {"host": nbytes, "device": device_bytes}
        for kind in KINDS:
            freed = sum(e.size(kind) for e in claims if e.model in going)
            if want[kind] > free_bytes(claims, self.budget(kind), kind) + freed:
                return False
        return True

    # --- writing (the Loader) -----------------------------------------------------------
    #
    # Every change of a model's state goes through :meth:`_move`, which checks it against
    # the declared transitions (swapos/data/lifecycle.py); the methods below name the moves.

    def want(self, model: str, *, speculative: bool, now: float) -> None:
        """A load of ``model`` starts (absent -> waiting); it holds no room until
        :meth:`reserve`."""
        self._move(
            model,
            Lifecycle.WAITING,
            nbytes=0,
            speculative=speculative,
            last_used=now,
            pinned=model in self.pinned,
        )

    def upgrade(self, model: str) -> None:
        """An urgent request joined ``model``'s speculative load: never cancel it."""
        self._replace(model, speculative=False)

    def reserve(self, model: str, plan: RoomPlan, nbytes: int, device_bytes: int = 0) -> None:
        """Claim ``nbytes`` host and ``device_bytes`` device bytes for ``model`` (its
        estimates) by ``plan`` (waiting -> loading): its victims (ready) and cancelled loads
        (loading) become ``EVICTING``."""
        for other in plan.victims + plan.cancel:
            self._move(other, Lifecycle.EVICTING)
        self._move(model, Lifecycle.LOADING, nbytes=nbytes, device_bytes=device_bytes)
        self._note_peak()

    def loaded(self, model: str, nbytes: int, device_bytes: int = 0) -> None:
        """``model`` is ready (loading -> ready); ``nbytes`` and ``device_bytes`` are its
        measured footprints (each replaces its estimate)."""
        self._move(
            model, Lifecycle.READY, nbytes=nbytes, device_bytes=device_bytes, speculative=False
        )
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
        """``model`` is being closed (ready -> evicting; a victim already is)."""
        self._move(model, Lifecycle.EVICTING)

    def forget(self, model: str) -> None:
        """``model`` holds no memory any more (-> absent: evicted, failed, cancelled or
        refused)."""
        self._move(model, Lifecycle.ABSENT)

    def _move(self, model: str, new: Lifecycle, **changes: Any) -> None:
        """The one place a model's state changes: checked, then recorded with ``changes``.

        Raises:
            LifecycleError: ``model``'s state may not move to ``new`` (a bug).
        """
        old = self.status(model)
        check_transition(model, old, new)
        if new is Lifecycle.ABSENT:
            del self._entries[model]
        elif old is Lifecycle.ABSENT:
            self._entries[model] = LedgerEntry(model=model, status=new, **changes)
        else:
            self._replace(model, status=new, **changes)

    def _replace(self, model: str, **changes: Any) -> None:
        self._entries[model] = msgspec.structs.replace(self._entries[model], **changes)

    def _note_peak(self) -> None:
        counted = (Lifecycle.LOADING, Lifecycle.READY)
        held = [e for e in self._entries.values() if e.status in counted]
        self._peak = max(self._peak, sum(e.nbytes for e in held))
        self._peak_device = max(self._peak_device, sum(e.device_bytes for e in held))

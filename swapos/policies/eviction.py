"""Which models to evict to make room: pure decisions over a snapshot of the ledger.

The rule (docs/architecture.md): evict idle models, the one needed *farthest in the future* first
(Belady on the published schedule), least recently used breaking ties; never a leased
model, never a pinned one (a profile's ``pin = true``: :func:`evictable`); never exceed
either budget (host memory, and GPU memory for offloaded layers: one ledger, two budgets; a
victim is taken only if it frees a kind still lacking). A
*speculative* request (a prefetch) may only evict models needed later than itself and never
cancels anything; an *urgent* request may also cancel speculative loads in flight.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from typing import Literal

import msgspec

from swapos.data.lifecycle import Lifecycle
from swapos.data.residency import LedgerEntry, MemoryKind, RoomPlan
from swapos.policies.ledger import KINDS, free_bytes

EvictionRule = Literal["next_use", "lru", "all_idle"]
"""``next_use``: Belady on the schedule (SwapOS). ``lru``: least recently used, only when
room is needed (Ollama, the llama.cpp router; :func:`lru_victims`). ``all_idle``: evict
every idle model on each load (llama-swap without groups)."""


def next_use_distance(model: str, schedule: Sequence[str]) -> float:
    """Position of the first upcoming use of ``model`` in ``schedule``; ``inf`` if none."""
    try:
        return float(schedule.index(model))
    except ValueError:
        return math.inf


def evictable(entry: LedgerEntry) -> bool:
    """Whether ``entry`` may be a victim: ready, idle (no lease) and not pinned."""
    return entry.status is Lifecycle.READY and entry.leases == 0 and not entry.pinned


class _Room:
    """Free room of both kinds while a plan is built: what is lacking, what a model frees."""

    def __init__(
        self,
        entries: Sequence[LedgerEntry],
        want: dict[MemoryKind, int],
        budgets: dict[MemoryKind, int],
    ) -> None:
        self.want = want
        self.free = {k: free_bytes(entries, budgets[k], k) for k in KINDS}

    def lacking(self) -> list[MemoryKind]:
        return [k for k in KINDS if self.free[k] < self.want[k]]

    def fits(self) -> bool:
        return not self.lacking()

    def helps(self, entry: LedgerEntry) -> bool:
        """Whether removing ``entry`` frees memory of a kind still lacking."""
        return any(entry.size(k) > 0 for k in self.lacking())

    def take(self, entry: LedgerEntry) -> None:
        for k in KINDS:
            self.free[k] += entry.size(k)


def plan_room(
    entries: Sequence[LedgerEntry],
    *,
    model: str,
    nbytes: int,
    budget: int,
    urgent: bool,
    schedule: Sequence[str],
    rule: EvictionRule = "next_use",
    device_nbytes: int = 0,
    device_budget: int = 0,
) -> RoomPlan | None:
    """Decide how ``nbytes`` host and ``device_nbytes`` device bytes for ``model`` fit
    under ``budget`` and ``device_budget``.

    The two budgets are one ledger: a claim fits when it fits both. Victims are taken in the
    rule's order, skipping those that free nothing of a kind still lacking (a load that fits
    the device but not the host evicts only for host memory, and the other way round).

    Args:
        entries: the ledger, excluding ``model`` itself.
        model: the model that wants room.
        nbytes: its host footprint.
        budget: the host byte budget.
        urgent: a phase is waiting for it (else it is a prefetch).
        schedule: upcoming model uses, soonest first.
        rule: the eviction rule.
        device_nbytes: its device (GPU) footprint; 0 for a model that offloads nothing.
        device_budget: the device byte budget.

    Returns:
        The plan (possibly empty) or ``None`` when it cannot fit *now*: an urgent request
        then waits for leases to be released; a speculative one is refused.
    """
    if nbytes > budget or device_nbytes > device_budget:
        return None
    want: dict[MemoryKind, int] = {"host": nbytes, "device": device_nbytes}
    budgets: dict[MemoryKind, int] = {"host": budget, "device": device_budget}
    if rule == "lru" and urgent:
        lru = _lru(entries, want, budgets)
        return None if lru is None else RoomPlan(victims=lru, cancel=[])
    room = _Room(entries, want, budgets)
    idle = [e for e in entries if evictable(e)]
    if rule == "all_idle" and urgent:
        for entry in idle:
            room.take(entry)
        return RoomPlan(victims=[e.model for e in idle], cancel=[]) if room.fits() else None
    if room.fits():
        return RoomPlan(victims=[], cancel=[])
    mine = next_use_distance(model, schedule)
    order = _victim_order(idle, schedule, rule)
    if not urgent:
        order = [e for e in order if next_use_distance(e.model, schedule) > mine]
    victims: list[str] = []
    for entry in order:
        if room.fits():
            break
        if room.helps(entry):
            victims.append(entry.model)
            room.take(entry)
    cancel: list[str] = []
    if urgent and not room.fits():
        loading = [e for e in entries if e.status is Lifecycle.LOADING and e.speculative]
        for entry in sorted(loading, key=lambda e: -next_use_distance(e.model, schedule)):
            if room.fits():
                break
            if room.helps(entry):
                cancel.append(entry.model)
                room.take(entry)
    if not room.fits():
        return None
    return RoomPlan(victims=victims, cancel=cancel)


def lru_victims(
    entries: Sequence[LedgerEntry],
    *,
    nbytes: int,
    budget: int,
    device_nbytes: int = 0,
    device_budget: int = 0,
) -> list[str] | None:
    """Ollama-style LRU: the idle models to evict for ``nbytes`` (and ``device_nbytes``)
    to fit under ``budget`` (and ``device_budget``).

    Nothing is evicted while the request fits; otherwise idle resident models go least
    recently used first (``last_used``; ledger order breaks ties), only as many as needed
    and only those that free a kind of memory still lacking. The schedule is not consulted,
    and nothing in flight is cancelled (``lru`` mode has no speculative loads).

    Args:
        entries: the ledger, excluding the requesting model itself.
        nbytes: the requester's host footprint.
        budget: the host byte budget.
        device_nbytes: the requester's device footprint.
        device_budget: the device byte budget.

    Returns:
        The victims, in eviction order (possibly none), or ``None`` when the request cannot
        fit even after evicting every idle model (it then waits for a lease to end).
    """
    if nbytes > budget or device_nbytes > device_budget:
        return None
    return _lru(
        entries,
        {"host": nbytes, "device": device_nbytes},
        {"host": budget, "device": device_budget},
    )


def _lru(
    entries: Sequence[LedgerEntry], want: dict[MemoryKind, int], budgets: dict[MemoryKind, int]
) -> list[str] | None:
    room = _Room(entries, want, budgets)
    idle = [e for e in entries if evictable(e)]
    victims: list[str] = []
    for entry in sorted(idle, key=lambda e: e.last_used):
        if room.fits():
            break
        if room.helps(entry):
            victims.append(entry.model)
            room.take(entry)
    return victims if room.fits() else None


def _victim_order(
    idle: Sequence[LedgerEntry], schedule: Sequence[str], rule: EvictionRule
) -> list[LedgerEntry]:
    """Idle models, best victim first."""
    if rule == "lru":
        return sorted(idle, key=lambda e: e.last_used)
    # Farthest next use first, then least recently used.
    return sorted(
        idle,
        key=lambda e: (-next_use_distance(e.model, schedule), e.last_used),
    )


def count_loads(
    uses: Sequence[str],
    sizes: Mapping[str, int],
    budget: int,
    rule: EvictionRule,
    *,
    device_sizes: Mapping[str, int] | None = None,
    device_budget: int = 0,
) -> int:
    """Replay a sequence of uses under ``rule`` and count the loads it causes.

    Each use is known in advance (the schedule is the rest of ``uses``), which is what
    lets ``next_use`` be Belady-optimal. Used by tests and the policy benchmark.
    ``device_sizes`` (default: none) are the models' claims on ``device_budget``.
    """
    device = device_sizes or {}
    resident: dict[str, LedgerEntry] = {}
    loads = 0
    for i, model in enumerate(uses):
        if model in resident:
            resident[model] = msgspec.structs.replace(resident[model], last_used=float(i))
            continue
        plan = plan_room(
            list(resident.values()),
            model=model,
            nbytes=sizes[model],
            budget=budget,
            urgent=True,
            schedule=list(uses[i + 1 :]),
            rule=rule,
            device_nbytes=device.get(model, 0),
            device_budget=device_budget,
        )
        if plan is None:
            raise ValueError(f"{model} cannot fit in {budget} bytes")
        for victim in plan.victims:
            del resident[victim]
        resident[model] = LedgerEntry(
            model=model,
            nbytes=sizes[model],
            device_bytes=device.get(model, 0),
            status=Lifecycle.READY,
            last_used=float(i),
        )
        loads += 1
    return loads

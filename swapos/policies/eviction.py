"""Which models to evict to make room: pure decisions over a snapshot of the ledger.

The rule (DESIGN §3): evict idle models, the one needed *farthest in the future* first
(Belady on the published schedule), least recently used breaking ties; never a leased
model; never exceed the budget. A *speculative* request (a prefetch) may only evict models
needed later than itself and never cancels anything; an *urgent* request may also cancel
speculative loads in flight.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from typing import Literal

import msgspec

from swapos.data.residency import LedgerEntry, RoomPlan
from swapos.policies.ledger import free_bytes

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


def plan_room(
    entries: Sequence[LedgerEntry],
    *,
    model: str,
    nbytes: int,
    budget: int,
    urgent: bool,
    schedule: Sequence[str],
    rule: EvictionRule = "next_use",
) -> RoomPlan | None:
    """Decide how ``nbytes`` for ``model`` fits under ``budget``.

    Args:
        entries: the ledger, excluding ``model`` itself.
        model: the model that wants room.
        nbytes: its footprint.
        budget: the byte budget.
        urgent: a phase is waiting for it (else it is a prefetch).
        schedule: upcoming model uses, soonest first.
        rule: the eviction rule.

    Returns:
        The plan (possibly empty) or ``None`` when it cannot fit *now*: an urgent request
        then waits for leases to be released; a speculative one is refused.
    """
    if nbytes > budget:
        return None
    if rule == "lru" and urgent:
        lru = lru_victims(entries, nbytes=nbytes, budget=budget)
        return None if lru is None else RoomPlan(victims=lru, cancel=[])
    free = free_bytes(entries, budget)
    idle = [e for e in entries if e.status == "resident" and e.leases == 0]
    if rule == "all_idle" and urgent:
        free += sum(e.nbytes for e in idle)
        return RoomPlan(victims=[e.model for e in idle], cancel=[]) if free >= nbytes else None
    if free >= nbytes:
        return RoomPlan(victims=[], cancel=[])
    mine = next_use_distance(model, schedule)
    order = _victim_order(idle, schedule, rule)
    if not urgent:
        order = [e for e in order if next_use_distance(e.model, schedule) > mine]
    victims: list[str] = []
    for entry in order:
        if free >= nbytes:
            break
        victims.append(entry.model)
        free += entry.nbytes
    cancel: list[str] = []
    if urgent and free < nbytes:
        loading = [e for e in entries if e.status == "reserved" and e.speculative]
        for entry in sorted(loading, key=lambda e: -next_use_distance(e.model, schedule)):
            if free >= nbytes:
                break
            cancel.append(entry.model)
            free += entry.nbytes
    if free < nbytes:
        return None
    return RoomPlan(victims=victims, cancel=cancel)


def lru_victims(entries: Sequence[LedgerEntry], *, nbytes: int, budget: int) -> list[str] | None:
    """Ollama-style LRU: the idle models to evict for ``nbytes`` to fit under ``budget``.

    Nothing is evicted while the request fits; otherwise idle resident models go least
    recently used first (``last_used``; ledger order breaks ties), only as many as needed.
    The schedule is not consulted, and nothing in flight is cancelled (``lru`` mode has no
    speculative loads).

    Args:
        entries: the ledger, excluding the requesting model itself.
        nbytes: the requester's footprint.
        budget: the byte budget.

    Returns:
        The victims, in eviction order (possibly none), or ``None`` when the request cannot
        fit even after evicting every idle model (it then waits for a lease to end).
    """
    if nbytes > budget:
        return None
    free = free_bytes(entries, budget)
    idle = [e for e in entries if e.status == "resident" and e.leases == 0]
    victims: list[str] = []
    for entry in sorted(idle, key=lambda e: e.last_used):
        if free >= nbytes:
            break
        victims.append(entry.model)
        free += entry.nbytes
    return victims if free >= nbytes else None


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
) -> int:
    """Replay a sequence of uses under ``rule`` and count the loads it causes.

    Each use is known in advance (the schedule is the rest of ``uses``), which is what
    lets ``next_use`` be Belady-optimal. Used by tests and the policy benchmark.
    """
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
        )
        if plan is None:
            raise ValueError(f"{model} cannot fit in {budget} bytes")
        for victim in plan.victims:
            del resident[victim]
        resident[model] = LedgerEntry(
            model=model, nbytes=sizes[model], status="resident", last_used=float(i)
        )
        loads += 1
    return loads

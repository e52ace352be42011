"""Residency as data: a model's claim on the byte budget, and a plan to make room.

Shared by the ledger (swapos/policies/ledger.py), the Evictor's decisions and the messages
that carry a snapshot of the ledger to it.
"""

from __future__ import annotations

from typing import Literal

import msgspec

Status = Literal["waiting", "reserved", "resident", "evicting"]
"""``waiting``: a load wants room and holds none yet. ``reserved``: room granted, loading.
``resident``: loaded. ``evicting``: chosen as a victim (or closing); its bytes count until it
is :meth:`Ledger.forget`-ten."""


class LedgerEntry(msgspec.Struct, frozen=True, kw_only=True):
    """One model's claim on the budget.

    Attributes:
        model: its name.
        nbytes: estimated (until loaded) or measured (once resident) footprint.
        status: see :data:`Status`.
        leases: leases held on it; a leased model is never a victim.
        speculative: wanted by a prefetch only (its load may be cancelled for urgent work).
        last_used: clock time of its last lease (LRU order and tie-break).
    """

    model: str
    nbytes: int
    status: Status
    leases: int = 0
    speculative: bool = False
    last_used: float = 0.0


class RoomPlan(msgspec.Struct, frozen=True, kw_only=True):
    """What must go for a request to fit: models to evict, speculative loads to cancel."""

    victims: list[str]
    cancel: list[str]

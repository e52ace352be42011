"""Residency as data: a model's claim on the byte budgets, a plan to make room, and the
model table as its readers see it.

Shared by the ledger (swapos/policies/ledger.py), the Evictor's decisions, the messages
that carry a snapshot of the ledger to it, and the residency snapshot ``swapos serve``
reads (:class:`ResidencySnapshot`).
"""

from __future__ import annotations

from typing import Literal

import msgspec

from swapos.data.lifecycle import Lifecycle, ServedState

MemoryKind = Literal["host", "device"]
"""The two budgets a claim draws on: host RAM (``budget``) and GPU memory (``device_budget``)."""


class LedgerEntry(msgspec.Struct, frozen=True, kw_only=True):
    """One model's claim on the budgets.

    Attributes:
        model: its name.
        nbytes: estimated (until loaded) or measured (once resident) host footprint.
        device_bytes: the same for GPU memory (offloaded layers and their KV cache; 0 for
            a model that offloads nothing).
        status: where it is in its lifecycle (never ``ABSENT``: an absent model has no
            entry).
        leases: leases held on it; a leased model is never a victim.
        speculative: wanted by a prefetch only (its load may be cancelled for urgent work).
        last_used: clock time of its last lease (LRU order and tie-break).
        pinned: never a victim (a profile's ``pin = true``): it stays until it is unloaded.
    """

    model: str
    nbytes: int
    status: Lifecycle
    leases: int = 0
    speculative: bool = False
    last_used: float = 0.0
    device_bytes: int = 0
    pinned: bool = False

    def size(self, kind: MemoryKind) -> int:
        """Its claim on the ``kind`` budget."""
        return self.nbytes if kind == "host" else self.device_bytes


class RoomPlan(msgspec.Struct, frozen=True, kw_only=True):
    """What must go for a request to fit: models to evict, speculative loads to cancel."""

    victims: list[str]
    cancel: list[str]


class Offload(msgspec.Struct, frozen=True, kw_only=True):
    """Where a loaded model's offloaded layers went, as its backend measured them.

    Attributes:
        device: the device's name (llama.cpp's: ``CUDA0``, ``Metal``).
        layers: layers on it, as llama.cpp reports them once loaded (it counts the output
            layer as one more: ``"all"`` on a 28-layer model reports 29).
        device_bytes: the device memory the load took (its weights, KV cache, buffers).
        upload_s: the share of the load spent copying weights to the device; the rest of
            the load is the file read and host setup.
    """

    device: str
    layers: int
    device_bytes: int
    upload_s: float


class ModelState(msgspec.Struct, frozen=True, kw_only=True):
    """One row of the Loader's model table, as data (``state``: the lifecycle state as it is
    served, :attr:`~swapos.data.lifecycle.Lifecycle.served`; ``load_progress``: how far its
    load has gone, 0 to 1, as the backend reports it; None unless it is loading, also while
    a load waits for room; ``n_ctx``: the context it is loaded with, or loading with; 0
    while it is absent)."""

    model: str
    state: ServedState
    leases: int
    footprint_bytes: int  # measured once loaded, 0 otherwise
    device_footprint_bytes: int = 0  # GPU memory, measured once loaded
    load_progress: float | None = None
    n_ctx: int = 0


class ResidencySnapshot(msgspec.Struct, frozen=True, kw_only=True):
    """Every model's row of the Loader's table at one moment: read-only data, so a reader
    (``swapos serve``) never holds the Loader's live state."""

    models: tuple[ModelState, ...]

    def get(self, model: str) -> ModelState | None:
        """``model``'s row (None for a model the table does not know)."""
        return next((m for m in self.models if m.model == model), None)

    def state(self, model: str) -> ServedState:
        """``model``'s state (``absent`` for a model the table does not know)."""
        row = self.get(model)
        return row.state if row is not None else "absent"

    def ready(self) -> frozenset[str]:
        """The models that are loaded and may be leased now."""
        return frozenset(m.model for m in self.models if m.state == "ready")

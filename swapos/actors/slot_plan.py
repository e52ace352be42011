"""Slot counts, resolved once when the system opens.

A spec with ``slots = 0`` ("from the cost curve") gets the count
:func:`~swapos.policies.slots.plan_slots` chooses on its model's measured curve, at most
what the models' budget holds (:func:`~swapos.policies.slots.budget_caps`, rule 6 there):
so a machine that has measured its costs never loads a model too big for the budget that
held it before. A remote model has one slot; a pinned count stays as the user set it.
"""

from __future__ import annotations

from collections.abc import Mapping

import msgspec
import structlog

from swapos.backends.base import ModelBackend
from swapos.errors import SwapOSError
from swapos.models.spec import ModelSpec
from swapos.policies.slots import MAX_SLOTS, budget_caps, plan_slots

log = structlog.get_logger(__name__)


def slots_resolved(
    specs: Mapping[str, ModelSpec], backend: ModelBackend, room: int | None
) -> dict[str, ModelSpec]:
    """``specs`` with each ``slots = 0`` resolved on its curve under ``room``, the models'
    budget in bytes (None: no budget, the curve alone decides). Reads the curves and the
    models' headers: call it in a worker thread."""
    out = dict(specs)
    planned = [name for name, spec in specs.items() if spec.slots <= 0 and not spec.remote]
    for name, spec in specs.items():
        if spec.slots <= 0 and spec.remote:
            out[name] = msgspec.structs.replace(spec, slots=1)
    if not planned:
        return out
    caps = dict.fromkeys(planned, MAX_SLOTS)
    if room is not None:
        fixed = sum(_bytes(backend, s) for n, s in specs.items() if n not in planned)
        sizes = {name: _sizes(backend, specs[name]) for name in planned}
        caps = budget_caps(sizes, room, fixed=fixed)
    for name in planned:
        plan = plan_slots(backend.draw_curve(specs[name]), cap=caps[name])
        log.info(
            "slots.planned", model=name, slots=plan.slots, reason=plan.reason,
            budget_cap=caps[name],
        )  # fmt: skip
        out[name] = msgspec.structs.replace(specs[name], slots=plan.slots)
    return out


def _sizes(backend: ModelBackend, spec: ModelSpec) -> list[int]:
    """``spec``'s footprint with 1 to :data:`MAX_SLOTS` slots ([] when its file cannot be
    read: it keeps one slot, and its load fails with its own error)."""
    try:
        return [
            backend.estimate_footprint(msgspec.structs.replace(spec, slots=k))
            for k in range(1, MAX_SLOTS + 1)
        ]
    except SwapOSError:
        return []


def _bytes(backend: ModelBackend, spec: ModelSpec) -> int:
    """``spec``'s footprint as it is (0 when its file cannot be read)."""
    try:
        return backend.estimate_footprint(spec)
    except SwapOSError:
        return 0

"""How many requests of one model to decode side by side (its slots), from the cost curve.

A model with ``k`` slots decodes the next token of up to ``k`` requests in one batch (one
sequence each in one llama.cpp context: ``backends/llama/slots.py``). The cost curve is
what ``bench decode`` measures per model and machine, the wall of a batch of ``k`` tokens
against one (``curve[k]``, as :mod:`swapos.policies.draws` reads it): with ``k`` requests
decoding, each gets a token per step of ``curve[k]``, so together they make
``k / curve[k]`` tokens in the time one request alone makes one (:func:`throughput`).

The rules (:func:`plan_slots`), written once here:

1. Nothing measured: 1 slot (requests of a model run one at a time).
2. ``k`` slots are worth ``throughput(k) = k / cost(k)``, the cost linearly interpolated
   between measured sizes (:func:`~swapos.policies.draws.batch_cost`); a size past the
   largest measured one is never chosen (its cost is unknown).
3. The count is where throughput stops improving: scanning ``k = 2, 3, ...`` up to the
   cap, ``k`` replaces the best so far only when its throughput beats the best's by
   ``margin`` (a share of it), so a flat or noisy top of the curve stays on the smaller
   count (fewer contexts' worth of KV cells).
4. The cap, :data:`MAX_SLOTS`: each slot holds a whole context's KV cells
   (``n_ctx`` of them: for Qwen2.5-Coder 1.5B at ``n_ctx`` 4096 and f16, 112 MiB), counted
   in the model's footprint; a pin (``swapos serve --slots N``) may go past it, up to
   :data:`MAX_PINNED`.
5. Each step decodes side by side only as many of the ``n`` requests decoding as pay
   (:func:`step_width`: rule 3 with the cap ``n``), the ones admitted first; the others
   wait for a later step. A steep start of the curve (a batch of 2 costing more than 2
   tokens, as on small CPUs) so never runs slower than one at a time; nothing measured
   (slots pinned): all ``n``.
6. The budget caps the count (:func:`budget_caps`): slots never make a model that fits
   its budget stop fitting, nor split models that fit together. Where every model fits
   the models' budget at one slot (a pinned one at its pin), the room they leave is
   shared out equally, and a model may take as many slots as its share pays for; where
   they do not fit together (they swap anyway), each may grow until it alone fills the
   budget. A model too big for it at one slot keeps one (its load fails, saying why).
   A pin is the user's and is not capped.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

import msgspec

from swapos.policies.draws import batch_cost

MAX_SLOTS = 4
"""The most slots the cost curve may choose (rule 4)."""

MAX_PINNED = 64
"""The most slots a pin may ask for."""

MARGIN = 0.05
"""The share of the best throughput so far a larger count must add (rule 3)."""


class SlotPlan(msgspec.Struct, frozen=True, kw_only=True):
    """What :func:`plan_slots` chose and why.

    Attributes:
        slots: requests decoded side by side.
        throughput: tokens per one-request step at that count (1.0 for one slot).
        reason: one line for the logs.
    """

    slots: int
    throughput: float
    reason: str


def throughput(curve: Mapping[int, float], k: int) -> float | None:
    """Rule 2: the tokens ``k`` requests decoding side by side make in the time one makes
    one (None past the measured curve)."""
    cost = batch_cost(curve, k)
    return None if cost is None or cost <= 0 else k / cost


def plan_slots(
    curve: Mapping[int, float], *, cap: int = MAX_SLOTS, margin: float = MARGIN
) -> SlotPlan:
    """The slot count for a model with this measured cost curve (the module's rules)."""
    if not curve:
        return SlotPlan(slots=1, throughput=1.0, reason="1 slot: no cost curve measured")
    best, best_t = 1, 1.0
    for k in range(2, max(cap, 1) + 1):
        t = throughput(curve, k)
        if t is None:
            break
        if t >= best_t * (1.0 + margin):
            best, best_t = k, t
    if best == 1:
        return SlotPlan(slots=1, throughput=1.0, reason="1 slot: side by side does not pay")
    return SlotPlan(
        slots=best, throughput=best_t,
        reason=f"{best} slots: x{best_t:.2f} the tokens of one at a time",
    )  # fmt: skip


def budget_caps(
    footprints: Mapping[str, Sequence[int]], room: int, *, fixed: int = 0
) -> dict[str, int]:
    """Rule 6: the most slots each model may have under the models' budget ``room``.

    Args:
        footprints: per model to plan, its bytes with ``k`` slots at index ``k - 1``
            (``k`` = 1 up to the largest count considered).
        room: the models' budget (bytes).
        fixed: the bytes of the models not planned (pinned ones at their pin).
    """
    together = fixed + sum(sizes[0] for sizes in footprints.values() if sizes)
    share = (room - together) // max(len(footprints), 1) if together <= room else None
    caps: dict[str, int] = {}
    for name, sizes in footprints.items():
        base = sizes[0] if sizes else 0
        fits = [
            k for k, size in enumerate(sizes, start=1)
            if (size - base <= share if share is not None else size <= room)
        ]  # fmt: skip
        caps[name] = max(fits, default=1)
    return caps


def step_width(curve: Mapping[int, float], n: int, *, margin: float = MARGIN) -> int:
    """Rule 5: how many of ``n`` requests decoding to put in one step."""
    if not curve:
        return max(n, 1)
    if n <= 1:
        return 1
    return plan_slots(curve, cap=n, margin=margin).slots


def resolve_slots(pinned: int, curve: Mapping[int, float]) -> int:
    """A spec's ``slots``: ``pinned`` when set (> 0, at most :data:`MAX_PINNED`), else
    :func:`plan_slots`'s count."""
    if pinned > 0:
        return min(pinned, MAX_PINNED)
    return plan_slots(curve).slots


def predicted_speedup(curve: Mapping[int, float], clients: int, slots: int) -> float | None:
    """Requests per minute of ``clients`` concurrent clients on a model with ``slots``
    slots, as a multiple of one at a time: each step decodes :func:`step_width` of the
    ``min(clients, slots)`` requests side by side (None when nothing is measured). Prefill
    and answers of unequal length are left out."""
    if not curve:
        return None
    return throughput(curve, step_width(curve, max(min(clients, slots), 1)))

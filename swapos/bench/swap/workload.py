"""What ``python -m swapos.bench swap`` runs: the probe prompt and the phase schedules.

The same fixed code prompt feeds the TTFT probe of a swap and every phase of a pipeline run;
a schedule names the model of each phase (:data:`SCHEDULES`), and :func:`round_order` rotates
the modes from one round to the next.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import TypeVar

from swapos.data.sampling import SamplingParams
from swapos.messages.commands import PhaseSpec

T = TypeVar("T")

TTFT_PROMPT_TOKENS = 200
PROMPT = '''\
"""Inventory service: stock levels, reservations and restocking for a small warehouse."""

from __future__ import annotations

import dataclasses
from collections import defaultdict


@dataclasses.dataclass
class Item:
    sku: str
    name: str
    quantity: int = 0
    reserved: int = 0
    reorder_level: int = 5

    def available(self) -> int:
        """Units that can still be reserved."""
        return self.quantity - self.reserved


class Inventory:
    """Keeps items by SKU and the reservations made against them."""

    def __init__(self) -> None:
        self.items: dict[str, Item] = {}
        self.reservations: dict[str, list[tuple[str, int]]] = defaultdict(list)

    def add(self, item: Item) -> None:
        if item.sku in self.items:
            raise ValueError(f"duplicate sku {item.sku}")
        self.items[item.sku] = item

    def reserve(self, order_id: str, sku: str, count: int) -> bool:
'''
"""A fixed code prompt (~250 Gemma tokens): the TTFT probe uses its first 200 tokens, each
pipeline phase all of it."""


SCHEDULES = ("alternating", "rotation")
"""``alternating``: ``A B C B C …``. ``rotation``: a task loop with one retry per task, by the
profile's roles: reason, code, critic, fix, critic, then the next task's reason, …"""


def alternating(models: list[str], n: int) -> list[str]:
    """``A, B, C, B, C, ...`` (``n`` long) from the first three of ``models``."""
    if n <= 0:
        return []
    first, b, c = models[0], models[1 % len(models)], models[2 % len(models)]
    return [first] + [(b, c)[i % 2] for i in range(n - 1)]


def rotation(roles: Mapping[str, str], models: list[str], n: int) -> list[str]:
    """``n`` uses of the task loop reason, code, critic, fix, critic (one retry per task), each
    role on the model ``roles`` gives it. A role the profile leaves out falls to the first,
    second and third model for reason, code and critic, and to the coder for fix: planner,
    coder, critic, coder, critic, planner, … on three models."""
    k = len(models)
    code = roles.get("code", models[1 % k])
    loop = [roles.get("reason", models[0]), code, roles.get("critic", models[2 % k])]
    loop += [roles.get("fix", code), loop[2]]
    return [loop[i % len(loop)] for i in range(max(n, 0))]


def schedule_models(
    schedule: str, models: list[str], roles: Mapping[str, str], n: int
) -> list[str]:
    """The model of each of ``n`` phases under ``schedule`` (one of :data:`SCHEDULES`)."""
    if schedule == "rotation":
        return rotation(roles, models, n)
    if schedule == "alternating":
        return alternating(models, n)
    raise ValueError(f"unknown schedule {schedule!r} (choose from {', '.join(SCHEDULES)})")


def pipeline_phases(models: Sequence[str], tokens: int, *, prompt: str = PROMPT) -> list[PhaseSpec]:
    """One greedy phase of ``tokens`` tokens per entry of ``models``, all from ``prompt``."""
    params = SamplingParams(max_tokens=tokens, temperature=0.0)
    return [
        PhaseSpec(phase=f"p{i}", model=m, prompt=prompt, params=params)
        for i, m in enumerate(models)
    ]


def round_order(items: Sequence[T], round_: int) -> list[T]:
    """``items`` rotated left by ``round_``: each round starts with the next one, so no
    mode always runs first (on a cold page cache, or right after the system starts)."""
    k = round_ % len(items)
    return [*items[k:], *items[:k]]

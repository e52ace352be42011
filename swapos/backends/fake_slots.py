"""Slots of a fake model on the clock: generations side by side in shared decode steps.

A fake model with ``spec.slots > 1`` (``backends/fake.py``) runs up to that many
generations at once, as the llama backend's slot engine does (``backends/llama/slots.py``):
a generation past them waits for a free slot (first come, first served), and the tokens of
those decoding are made in shared steps. A step of ``k`` generations costs the script's
``token_s`` times its cost curve at ``k`` (``draw_step_cost``, as draws side by side
cost), and takes as many of the generations waiting for a step as the curve pays for
(``policies/slots.step_width``), the ones admitted first; the others wait for the next.

Membership is decided on the clock, so tests are deterministic: a step gathers the
generations that ask for it up to :data:`GATHER_S` after the previous step ends (or after
the first asks, when none runs), then runs; prefill takes its scripted time beside the steps
(the llama engine interleaves it, a chunk per step).
"""

from __future__ import annotations

import dataclasses
import itertools
import math
from collections.abc import AsyncIterator, Callable
from contextlib import asynccontextmanager

import anyio

from swapos.clock import Clock

GATHER_S = 1e-9
"""How long a step waits for the generations that ask for it at the same instant."""


@dataclasses.dataclass(eq=False)
class _Step:
    gather_at: float
    members: list[int] = dataclasses.field(default_factory=list)
    chosen: frozenset[int] | None = None
    end: float = 0.0


class Lockstep:
    """The slots and decode steps of one fake model.

    Args:
        clock: the injected clock.
        slots: generations at once.
        step_s: the wall of a step of ``k`` generations.
        width: how many of ``n`` generations asking for a step it takes.
    """

    def __init__(
        self,
        clock: Clock,
        slots: int,
        *,
        step_s: Callable[[int], float],
        width: Callable[[int], int],
    ) -> None:
        self._clock = clock
        self._seats = anyio.Semaphore(slots)
        self._order = itertools.count()
        self._step_s = step_s
        self._width = width
        self._open: _Step | None = None
        self._busy_until = -math.inf
        self.widths: list[int] = []
        """How many generations each step decoded, in order."""

    @asynccontextmanager
    async def seat(self) -> AsyncIterator[int]:
        """Hold a slot for the block (waiting for one, first come first served); yields
        the generation's admission order."""
        async with self._seats:
            yield next(self._order)

    async def step(self, order: int) -> None:
        """Wait until a step has made the next token of generation ``order``."""
        while True:
            step = self._open
            if step is None:
                start = max(self._clock.now(), self._busy_until)
                step = self._open = _Step(gather_at=start + GATHER_S)
            step.members.append(order)
            try:
                await self._clock.sleep(step.gather_at - self._clock.now())
            except BaseException:
                if step.chosen is None:
                    step.members.remove(order)
                    if not step.members and self._open is step:
                        self._open = None
                raise
            if step.chosen is None:
                self._close(step)
            assert step.chosen is not None
            if order in step.chosen:
                await self._clock.sleep(step.end - self._clock.now())
                return

    def _close(self, step: _Step) -> None:
        members = sorted(step.members)
        step.chosen = frozenset(members[: self._width(len(members))])
        step.end = step.gather_at + self._step_s(len(step.chosen))
        self._busy_until = step.end
        if self._open is step:
            self._open = None
        self.widths.append(len(step.chosen))

"""What every run of one Router shares (:class:`RunContext`), and how a run's phase ends.

Its own module so that both the phase primitives (:mod:`~swapos.actors.task_run`) and a
task's draws side by side (:mod:`~swapos.actors.task_draws`) use it without importing each
other.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import anyio

from swapos.actors.base import Events, Outbox, Pending
from swapos.actors.schedules import Schedules
from swapos.actors.texts import ModelTexts
from swapos.messages.events import PhaseFinished
from swapos.models.profile import Profile
from swapos.policies.outcomes import PassRate
from swapos.sysinfo import peak_rss_bytes

CANCELLED = "cancelled"
"""The ``error`` of a run, and the ``outcome``/``error`` of a phase, that a cancellation
ended (a ``CancelTask``, the caller hanging up, or the system shutting down)."""


@dataclass
class RunContext:
    """What every run of one Router shares. Owned by the Router: its runs are its tasks.

    ``pass_rate`` counts graded candidates, ``draw_pass_rate`` the draws whose check
    passed (the draws policy reads it)."""

    outbox: Outbox
    events: Events
    pending: Pending
    schedules: Schedules
    texts: ModelTexts
    profile: Profile
    grade_limiter: anyio.CapacityLimiter
    pass_rate: PassRate = field(default_factory=PassRate)
    draw_pass_rate: PassRate = field(default_factory=PassRate)
    phases_done: int = 0


async def end_phase(
    ctx: RunContext,
    ids: dict[str, str],
    *,
    outcome: str,
    error: str | None = None,
    rss: bool = True,
) -> None:
    """Record a phase's end (``rss``: with the process's peak RSS during it)."""
    ctx.phases_done += 1
    await ctx.events.emit(
        PhaseFinished(
            t=ctx.events.t(),
            outcome=outcome,
            error=error,
            peak_rss_bytes=peak_rss_bytes() if rss else 0,
            **ids,
        )
    )

"""What every run of one Router shares (:class:`RunContext`), and how a run's phase ends.

Its own module so that both the phase primitives (:mod:`~swapos.actors.task_run`) and a
task's draws side by side (:mod:`~swapos.actors.task_draws`) use it without importing each
other.
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from dataclasses import dataclass, field

import anyio

from swapos.actors.base import Events, Outbox, Pending
from swapos.actors.schedules import Schedules
from swapos.actors.texts import ModelTexts
from swapos.messages.base import new_id
from swapos.messages.commands import (
    AcquireFailed,
    AcquireModel,
    CancelGeneration,
    ModelLeased,
    ReleaseLease,
)
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


async def lease_model(
    ctx: RunContext, *, model: str, task_id: str | None, phase_id: str | None, n_ctx: int = 0
) -> ModelLeased | AcquireFailed:
    """Ask the Loader for ``model`` (the phase ``phase_id`` of ``task_id`` will use it),
    loaded with a context of at least ``n_ctx`` tokens (0: any)."""
    acquire = AcquireModel(
        request_id=new_id("acq"), reply_to="router", model=model, task_id=task_id,
        phase_id=phase_id, n_ctx=n_ctx,
    )  # fmt: skip
    reply = await ctx.pending.ask(ctx.outbox, "loader", acquire)
    assert isinstance(reply, ModelLeased | AcquireFailed)
    return reply


@asynccontextmanager
async def holding(ctx: RunContext, lease: ModelLeased) -> AsyncIterator[None]:
    """Hold ``lease`` for the block; release it however the block ends (shielded)."""
    try:
        yield
    finally:
        with anyio.CancelScope(shield=True):
            await ctx.outbox.send_if_open("loader", ReleaseLease(lease_id=lease.grant.lease_id))


@asynccontextmanager
async def generating(ctx: RunContext, request_id: str) -> AsyncIterator[None]:
    """A block that asks the Generator for ``request_id``: cancelled, it tells the Generator
    to stop that request within one step (shielded), then re-raises."""
    try:
        yield
    except anyio.get_cancelled_exc_class():
        with anyio.CancelScope(shield=True):
            await ctx.outbox.send_if_open("generator", CancelGeneration(request_id=request_id))
        raise


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

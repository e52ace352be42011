"""A task's draws side by side: one ``GenerateDraws``, one phase per draw, taken as they end.

The retry policy asks for a task's sampled draws one by one (the *Draws* rule of
:mod:`swapos.policies.retry`) and checks each before the next. When the draws policy
(:mod:`swapos.policies.draws`) says side by side pays, the conductor opens a
:class:`DrawsBatch` at the first draw: every draw of the prompt decodes at once, and each
step of the policy takes the first of those left to finish, while the others go on.
"""

from __future__ import annotations

from collections.abc import Sequence

import anyio
import msgspec

from swapos.actors.run_context import (
    CANCELLED,
    RunContext,
    end_phase,
    generating,
    holding,
    lease_model,
)
from swapos.data.sampling import SamplingParams
from swapos.messages.base import new_id
from swapos.messages.commands import (
    AcquireFailed,
    DrawFinished,
    DrawsDone,
    DrawSpec,
    GenerateDraws,
    GenerateFailed,
    ModelUse,
    StopDraws,
)
from swapos.messages.events import PhaseStarted
from swapos.pipeline.phase_runner import PhaseOutput
from swapos.sysinfo import reset_peak_rss

STOPPED = "stopped"
"""The outcome (and a taken output's error) of a draw dropped before its end: one before it
passed its check, or the task moved on."""


class DrawsSpec(msgspec.Struct, frozen=True, kw_only=True):
    """What a :class:`DrawsBatch` decodes: ``params`` one item per draw (its own seed)."""

    task_id: str
    model: str
    prompt: str
    params: tuple[SamplingParams, ...]
    attempt: int
    upcoming: tuple[str, ...]
    special: bool
    side_by_side: int


class DrawsBatch:
    """The draws of one prompt decoded side by side for one run, each recorded as a phase.

    :meth:`run` (started in the conductor's task group) records every draw's
    ``PhaseStarted`` at once, leases the model once, sends one ``GenerateDraws`` and ends
    each draw's phase (outcome ``ok``) as its ``DrawFinished`` comes. :meth:`take_first`
    waits for the first of some draws to end. :meth:`close` drops the draws still running
    (``StopDraws``; each one's phase ends ``stopped``), waits for the Generator's
    ``DrawsDone`` and the lease's release. A failure (no lease, ``GenerateFailed``) ends every
    unfinished draw's phase ``error``, and :meth:`take_first` returns it as the output's
    ``error``. Cancelled from outside, it cancels the request, ends the unfinished phases
    ``cancelled``, releases the lease (shielded) and re-raises.
    """

    def __init__(self, ctx: RunContext, run_id: str, spec: DrawsSpec) -> None:
        self._ctx, self._run_id, self.spec = ctx, run_id, spec
        n = len(spec.params)
        self._ids = [
            {"task_id": spec.task_id, "phase_id": new_id("ph"), "model": spec.model}
            for _ in range(n)
        ]
        self._outputs: list[PhaseOutput | None] = [None] * n
        self._ended_order: list[int] = []  # the draws that ended, in the order they did
        self._one_ended = anyio.Event()  # set (and replaced) each time a draw ends
        self._request_id = new_id("draws")
        self._scope = anyio.CancelScope()
        self._sent = False
        self._closing = False
        self._ended = anyio.Event()

    async def run(
        self, *, task_status: anyio.abc.TaskStatus[None] = anyio.TASK_STATUS_IGNORED
    ) -> None:
        """Decode every draw; started with ``TaskGroup.start`` (returns once every draw's
        phase is recorded as started)."""
        events, spec = self._ctx.events, self.spec
        reset_peak_rss()
        try:
            for ids in self._ids:
                await events.emit(
                    PhaseStarted(
                        t=events.t(), run_id=self._run_id, phase="code", attempt=spec.attempt,
                        **ids,
                    )
                )  # fmt: skip
            task_status.started()
            with self._scope:
                await self._serve()
            if self._scope.cancelled_caught:  # closed before the request went out
                with anyio.CancelScope(shield=True):
                    await self._end_rest(STOPPED, None)
        except anyio.get_cancelled_exc_class():
            with anyio.CancelScope(shield=True):
                await self._end_rest(CANCELLED, CANCELLED)
            raise
        finally:
            self._ended.set()
            for i, out in enumerate(self._outputs):
                if out is None:
                    self._settle(i, PhaseOutput(error=STOPPED))

    async def take_first(self, indices: Sequence[int]) -> tuple[int, PhaseOutput]:
        """The first of draws ``indices`` to finish, and its output (an ``error`` if none
        ever will: then the lowest of them, as the rest end at once)."""
        wanted = set(indices)
        while True:
            for i in self._ended_order:
                if i in wanted:
                    out = self._outputs[i]
                    assert out is not None
                    return i, out
            await self._one_ended.wait()

    async def close(self) -> None:
        """Drop the draws still running and wait until the batch has ended (every phase
        recorded, the lease released)."""
        if self._ended.is_set():
            return
        self._closing = True
        if self._sent:
            await self._ctx.outbox.send_if_open("generator", StopDraws(request_id=self._request_id))
        else:
            self._scope.cancel()
        await self._ended.wait()

    async def _serve(self) -> None:
        ctx, spec = self._ctx, self.spec
        schedule = [ModelUse(model=spec.model, order=0, task_id=spec.task_id, phase="code")] + [
            ModelUse(model=m, order=i + 1, task_id=spec.task_id)
            for i, m in enumerate(spec.upcoming)
        ]
        await ctx.schedules.publish(self._run_id, schedule)
        lease = await lease_model(
            ctx, model=spec.model, task_id=spec.task_id, phase_id=self._ids[0]["phase_id"]
        )
        if isinstance(lease, AcquireFailed):
            await self._end_rest("error", f"load failed: {lease.reason}")
            return
        request = GenerateDraws(
            request_id=self._request_id, reply_to="router", lease_id=lease.grant.lease_id,
            model=spec.model, prompt=spec.prompt, task_id=spec.task_id, special=spec.special,
            draws=[
                DrawSpec(params=p, phase_id=ids["phase_id"])
                for p, ids in zip(spec.params, self._ids, strict=True)
            ],
            side_by_side=spec.side_by_side,
        )  # fmt: skip
        async with holding(ctx, lease):
            await ctx.schedules.ready(self._run_id, schedule)
            async with (
                ctx.pending.stream(self._request_id, len(spec.params) + 2) as replies,
                generating(ctx, self._request_id),
            ):
                self._sent = True  # from here a close stops the draws, a cancel cancels them
                await ctx.outbox.send("generator", request)
                if self._closing:  # closed while the model was being leased
                    await ctx.outbox.send("generator", StopDraws(request_id=self._request_id))
                async for reply in replies:
                    if await self._handle(reply):
                        break

    async def _handle(self, reply: object) -> bool:
        """One reply of the Generator; True once it is the last."""
        match reply:
            case DrawFinished(index=i, text=text, stats=stats):
                await end_phase(self._ctx, self._ids[i], outcome="ok")
                out = PhaseOutput(
                    text=text, tokens=stats.tokens, prefilled=stats.prefill_tokens,
                    hit_cap=stats.hit_cap,
                )  # fmt: skip
                self._settle(i, out)
                return False
            case DrawsDone():
                await self._end_rest(STOPPED, None)
                return True
            case GenerateFailed(reason=reason):
                await self._end_rest("error", reason)
                return True
        return False

    async def _end_rest(self, outcome: str, error: str | None) -> None:
        """End the phase of every draw not finished, with ``outcome``."""
        for i, ids in enumerate(self._ids):
            if self._outputs[i] is None:
                await end_phase(self._ctx, ids, outcome=outcome, error=error)
                self._settle(i, PhaseOutput(error=error or outcome))

    def _settle(self, i: int, out: PhaseOutput) -> None:
        """Draw ``i`` ended with ``out``: a :meth:`take_first` waiting for it may go on."""
        self._outputs[i] = out
        self._ended_order.append(i)
        one_ended, self._one_ended = self._one_ended, anyio.Event()
        one_ended.set()

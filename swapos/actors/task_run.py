"""The phase primitives of one run: :class:`TaskRun`, a
:class:`~swapos.pipeline.phase_runner.PhaseRunner` bound to its ``run_id``.

The Router makes one per ``RunTask`` (the conductor drives it) and one per ``RunPhases``
(the Router drives its generate phases itself). Every run of one Router shares a
:class:`RunContext`: its outbox, its pending replies, the schedules, the grading limiter
and its counters. Nothing here imports the Router: the Router imports this.
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Sequence

import anyio
import msgspec
from anyio.abc import TaskGroup

from swapos.actors.run_context import (
    CANCELLED,
    RunContext,
    end_phase,
    generating,
    holding,
    lease_model,
)
from swapos.actors.task_draws import DrawsBatch, DrawsSpec
from swapos.backends.threads import run_in_worker
from swapos.data.sampling import SamplingParams
from swapos.data.task import Task
from swapos.grader import GradeResult
from swapos.messages.base import new_id
from swapos.messages.commands import (
    AcquireFailed,
    Generate,
    Generated,
    GenerateFailed,
    ModelLeased,
    ModelUse,
    PhaseObserved,
)
from swapos.messages.events import (
    GradeFinished,
    GradeStarted,
    PhaseStarted,
    RouterDecided,
    TaskFinished,
    TaskStarted,
)
from swapos.models.model_config import start_ctx
from swapos.models.templates import ChatFormat
from swapos.pipeline.phase_runner import PhaseOutput
from swapos.policies.draws import DrawPlan, context_room, plan_draws
from swapos.policies.spending import ModelCost
from swapos.sysinfo import reset_peak_rss

GradeWork = Callable[[threading.Event], GradeResult]
"""The blocking grading call a conductor hands to :meth:`TaskRun.grade_phase`; it stops soon
after the event is set (the phase was cancelled)."""


class TaskRun:
    """The phase primitives of the run ``run_id``: everything it records carries the run's
    id (the conductor names the task, the run id tells runs of one task apart).

    Cancellation is handled alike for every phase: a cancelled generate or grade phase
    stops its work (the generation within one token, the sandbox within ~0.1 s), releases
    what it holds, records the phase as finished with outcome ``cancelled`` (shielded) and
    re-raises. The run's own end (``TaskFinished``) is recorded by :meth:`finish`, which the
    Router calls once the run is over, so a run that a cancellation cut short says
    ``error="cancelled"`` whatever its conductor reported.
    """

    def __init__(self, ctx: RunContext, run_id: str) -> None:
        self._ctx = ctx
        self.run_id = run_id
        self.profile = ctx.profile
        self._started = False
        self._started_t = 0.0
        self._reported: TaskFinished | None = None

    # --- the run's start and end ----------------------------------------------------------

    async def started(self, task_id: str, category: str) -> None:
        """Record that this run started (once: later calls do nothing)."""
        if self._started:
            return
        self._started = True  # before the send: a cancel may land on it once the event is out
        events = self._ctx.events
        self._started_t = events.t()
        await events.emit(
            TaskStarted(t=self._started_t, task_id=task_id, run_id=self.run_id, category=category)
        )

    async def task_started(self, task: Task) -> None:
        """Record that this run of ``task`` started (the Router already has, before the
        run's scope: a run cancelled before it starts is recorded too)."""
        await self.started(task.task_id, task.category)

    def report(
        self,
        task_id: str,
        *,
        passed: bool,
        pass_at_1: bool,
        iterations: int,
        tests_passed: int = 0,
        tests_total: int = 0,
        error: str | None,
        passed_attempt: int = 0,
        grades: int = 0,
    ) -> None:
        """Note how the run ended, as the one who drove it saw it; :meth:`finish` records it."""
        self._reported = TaskFinished(
            t=0.0,
            task_id=task_id,
            run_id=self.run_id,
            passed=passed,
            pass_at_1=pass_at_1,
            iterations=iterations,
            tests_passed=tests_passed,
            tests_total=tests_total,
            error=error,
            passed_attempt=passed_attempt,
            grades=grades,
        )

    async def task_finished(
        self,
        task: Task,
        *,
        passed: bool,
        pass_at_1: bool,
        iterations: int,
        tests_passed: int,
        tests_total: int,
        error: str | None,
        passed_attempt: int = 0,
        grades: int = 0,
    ) -> None:
        """Note how the conductor says ``task`` ended; :meth:`finish` records it."""
        self.report(
            task.task_id,
            passed=passed,
            pass_at_1=pass_at_1,
            iterations=iterations,
            tests_passed=tests_passed,
            tests_total=tests_total,
            error=error,
            passed_attempt=passed_attempt,
            grades=grades,
        )

    async def finish(self, task_id: str, *, cancelled: bool) -> None:
        """Record the run's end (``TaskFinished``), if it started: as its conductor reported
        it, except that a run ``cancelled`` failed with ``error="cancelled"``. Call it
        shielded."""
        if not self._started:
            return
        ended = self._reported or TaskFinished(
            t=0.0, task_id=task_id, run_id=self.run_id, passed=False, pass_at_1=False
        )
        if cancelled:
            ended = msgspec.structs.replace(
                ended, passed=False, pass_at_1=False, passed_attempt=0, error=CANCELLED
            )
        await self._ctx.events.emit(msgspec.structs.replace(ended, t=self._ctx.events.t()))

    # --- what the conductor asks ----------------------------------------------------------

    def expects_pass(self) -> bool:
        return self._ctx.pass_rate.expects_pass()

    def task_wall(self) -> float:
        """Seconds since this run started, on the clock its events are stamped with (the
        wall its ``TaskFinished`` will record; 0 before it started)."""
        return self._ctx.events.t() - self._started_t if self._started else 0.0

    async def decide(self, task_id: str, decision: str, text: str) -> None:
        """Record a routing decision (which plan, which model, and why)."""
        events = self._ctx.events
        await events.emit(
            RouterDecided(t=events.t(), task_id=task_id, decision=decision, text=text)
        )

    async def token_counter(self, model: str) -> Callable[[str], int]:
        return await self._ctx.texts.token_counter(model)

    async def chat_format(self, model: str) -> ChatFormat | None:
        return await self._ctx.texts.chat_format(model)

    async def model_cost(self, model: str) -> ModelCost | None:
        return await self._ctx.texts.model_cost(model)

    # --- phases ---------------------------------------------------------------------------

    async def generate_phase(
        self,
        *,
        task_id: str,
        phase: str,
        model: str,
        prompt: str,
        stable_prefix: str,
        params: SamplingParams,
        attempt: int,
        upcoming: Sequence[str],
        special: bool = False,
        n_ctx: int = 0,
    ) -> PhaseOutput:
        """Run one generate phase end to end; failures come back in ``error``.

        ``special``: the prompt is a rendered chat (its special-token text is tokens).
        ``n_ctx``: the context the phase needs (0: whatever the model is loaded with).
        Cancelled, it stops its generation within one token, releases its lease, records
        the phase as finished with outcome ``cancelled`` and re-raises."""
        events = self._ctx.events
        ids = {"task_id": task_id, "phase_id": new_id("ph"), "model": model}
        reset_peak_rss()
        schedule = [ModelUse(model=model, order=0, task_id=task_id, phase=phase)] + [
            ModelUse(model=m, order=i + 1, task_id=task_id) for i, m in enumerate(upcoming)
        ]
        request = Generate(
            request_id=new_id("gen"),
            reply_to="router",
            lease_id="",  # set once the lease is granted
            model=model,
            prompt=prompt,
            stable_prefix=stable_prefix,
            params=params,
            task_id=task_id,
            phase_id=ids["phase_id"],
            special=special,
        )
        try:  # (a cancel may land on PhaseStarted's send, once the event is out)
            await events.emit(
                PhaseStarted(t=events.t(), run_id=self.run_id, phase=phase, attempt=attempt, **ids)
            )
            out = await self._generate(request, schedule, n_ctx=n_ctx)
        except anyio.get_cancelled_exc_class():
            with anyio.CancelScope(shield=True):
                await self._end_phase(ids, outcome=CANCELLED, error=CANCELLED)
            raise
        await self._end_phase(ids, outcome="error" if out.error else "ok", error=out.error)
        return out

    async def _generate(
        self, request: Generate, schedule: list[ModelUse], *, n_ctx: int = 0
    ) -> PhaseOutput:
        """Lease the model with a context of at least ``n_ctx`` (publishing the schedule
        before and after), generate, release."""
        ctx = self._ctx
        await ctx.schedules.publish(self.run_id, schedule)
        lease = await lease_model(
            ctx, model=request.model, task_id=request.task_id, phase_id=request.phase_id,
            n_ctx=n_ctx,
        )  # fmt: skip
        if isinstance(lease, AcquireFailed):
            return PhaseOutput(error=f"load failed: {lease.reason}")
        async with holding(ctx, lease), generating(ctx, request.request_id):
            at_first_token = await ctx.schedules.ready(self.run_id, schedule)
            gen_started = ctx.events.t()
            request = msgspec.structs.replace(
                request, lease_id=lease.grant.lease_id, at_first_token=at_first_token
            )
            reply = await ctx.pending.ask(ctx.outbox, "generator", request)
        if isinstance(reply, GenerateFailed):
            return PhaseOutput(error=reply.reason)
        assert isinstance(reply, Generated)
        await self._observed(request.model, lease, reply, started_t=gen_started)
        stats = reply.stats
        return PhaseOutput(
            text=reply.text, tokens=stats.tokens, prefilled=stats.prefill_tokens,
            hit_cap=stats.hit_cap,
        )  # fmt: skip

    async def _observed(
        self, model: str, lease: ModelLeased, reply: Generated, *, started_t: float
    ) -> None:
        """Tell the Prefetcher how long the phase generated (its cost model learns from it)."""
        await self._ctx.outbox.send(
            "prefetcher",
            PhaseObserved(
                model=model,
                tokens=reply.stats.tokens,
                gen_s=reply.stats.gen_s,
                started_t=started_t,
                ended_t=self._ctx.events.t(),
                load_s=lease.grant.load_s,
                load_hidden_s=lease.grant.load_hidden_s,
            ),
        )

    async def draw_plan(
        self, model: str, draws: int, *, prompt_tokens: int, max_tokens: int
    ) -> DrawPlan:
        """How many of ``draws`` to decode side by side: the draws policy on ``model``'s
        measured cost curve, the run's draw pass rate, and the room of its context."""
        curve = await self._ctx.texts.draw_curve(model)
        room = context_room(prompt_tokens, max_tokens, start_ctx(self.profile.models[model]))
        rate = self._ctx.draw_pass_rate.estimate
        return plan_draws(draws, curve, pass_rate=rate, room=room)

    def draw_checked(self, passed: bool) -> None:
        self._ctx.draw_pass_rate.observe(passed)

    async def open_draws(
        self,
        tg: TaskGroup,
        *,
        task_id: str,
        model: str,
        prompt: str,
        params: Sequence[SamplingParams],
        attempt: int,
        upcoming: Sequence[str],
        special: bool,
        side_by_side: int,
    ) -> DrawsBatch:
        """Start one :class:`~swapos.actors.task_draws.DrawsBatch` in ``tg``; returns once
        every draw's phase is recorded as started."""
        spec = DrawsSpec(
            task_id=task_id, model=model, prompt=prompt, params=tuple(params), attempt=attempt,
            upcoming=tuple(upcoming), special=special, side_by_side=side_by_side,
        )  # fmt: skip
        batch = DrawsBatch(self._ctx, self.run_id, spec)
        await tg.start(batch.run)
        return batch

    async def grade_phase(
        self, *, task_id: str, attempt: int, work: GradeWork, phase: str = "grade"
    ) -> GradeResult:
        """Run ``work`` (the sandboxed grader) in a worker thread as a ``phase`` phase
        (``grade``: the task's tests; ``selfcheck``: its docstring's examples).

        Cancelled, it kills the sandbox (``work`` sees its event set and returns within
        ~0.1 s), records ``GradeFinished`` and ``PhaseFinished`` with outcome ``cancelled``
        (shielded) and re-raises."""
        ctx, events = self._ctx, self._ctx.events
        t0 = events.t()
        ids = {"task_id": task_id, "phase_id": new_id("ph")}
        grade_started = False
        try:  # (a cancel may land on an event's send, once the event is out)
            await events.emit(
                PhaseStarted(t=t0, run_id=self.run_id, phase=phase, attempt=attempt, **ids)
            )
            grade_started = True
            await events.emit(GradeStarted(t=t0, attempt=attempt, **ids))
            await ctx.schedules.publish_rest(self.run_id)
            result = await run_in_worker(work, limiter=ctx.grade_limiter)
        except anyio.get_cancelled_exc_class():
            with anyio.CancelScope(shield=True):
                if grade_started:
                    await self._graded(ids, t0, outcome=CANCELLED, reason="grading was cancelled")
                await self._end_phase(ids, outcome=CANCELLED, error=CANCELLED, rss=False)
            raise
        await self._graded(ids, t0, outcome=result.outcome, reason=result.reason, result=result)
        await self._end_phase(ids, outcome=result.outcome, rss=False)
        if phase == "grade":
            ctx.pass_rate.observe(result.passed)
        return result

    async def _graded(
        self,
        ids: dict[str, str],
        t0: float,
        *,
        outcome: str,
        reason: str,
        result: GradeResult | None = None,
    ) -> None:
        events = self._ctx.events
        await events.emit(
            GradeFinished(
                t=events.t(),
                outcome=outcome,
                passed=result.passed if result else False,
                tests_passed=result.tests_passed if result else 0,
                tests_total=result.tests_total if result else 0,
                duration_s=events.t() - t0,
                reason=reason,
                **ids,
            )
        )

    async def _end_phase(
        self, ids: dict[str, str], *, outcome: str, error: str | None = None, rss: bool = True
    ) -> None:
        await end_phase(self._ctx, ids, outcome=outcome, error=error, rss=rss)

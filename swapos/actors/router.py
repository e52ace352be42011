"""The Router: conducts each task through its phases and publishes the schedule."""

from __future__ import annotations

import threading
from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING, assert_never

import anyio
import anyio.to_thread
import msgspec
import structlog
from anyio.abc import TaskGroup
from anyio.streams.memory import MemoryObjectReceiveStream

from swapos.actors.base import Events, Outbox, Pending, serving
from swapos.actors.schedules import Schedules
from swapos.actors.task_run import TaskRun
from swapos.backends.base import ModelBackend
from swapos.backends.threads import run_in_worker
from swapos.data.sampling import SamplingParams
from swapos.data.task import Task
from swapos.errors import SwapOSError
from swapos.messages.base import new_id
from swapos.messages.commands import (
    AcquireFailed,
    AcquireModel,
    CancelGeneration,
    CancelTask,
    Generate,
    Generated,
    GenerateFailed,
    ModelLeased,
    ModelUse,
    PhaseObserved,
    PhasesDone,
    Preload,
    Preloaded,
    ReleaseLease,
    RunPhases,
    RunTask,
    TaskDone,
)
from swapos.messages.events import (
    GradeFinished,
    GradeStarted,
    PhaseFinished,
    PhaseStarted,
    RouterDecided,
    TaskFinished,
    TaskStarted,
)
from swapos.messages.inboxes import RouterInbox
from swapos.models.profile import Profile
from swapos.models.spec import ModelSpec
from swapos.models.templates import CHATML, ChatFormat
from swapos.pipeline.conductor import conduct
from swapos.pipeline.phase_runner import PhaseOutput
from swapos.pipeline.routing import first_use
from swapos.policies.outcomes import PassRate
from swapos.sysinfo import peak_rss_bytes, reset_peak_rss

if TYPE_CHECKING:
    from swapos.pipeline.grader import GradeResult

log = structlog.get_logger(__name__)

GradeWork = Callable[[threading.Event], "GradeResult"]
"""The blocking grading call a conductor hands to :meth:`Router.grade_phase`; it stops soon
after the event is set (the phase was cancelled)."""


class RouterStatistics(msgspec.Struct, frozen=True, kw_only=True):
    tasks_running: int
    tasks_done: int
    phases_done: int


class Router:
    """Runs every task as a state machine in its own task of the Router's task group.

    A generate phase is: publish the schedule (so the Evictor knows what comes next),
    lease the model from the Loader, publish again (now the Prefetcher may bring in the
    next model while this one generates), generate, release the lease. Grading runs in a
    worker thread. Failures of a phase end it with a reason; they do not crash the system.
    """

    def __init__(
        self,
        *,
        inbox: MemoryObjectReceiveStream[RouterInbox],
        outbox: Outbox,
        events: Events,
        profile: Profile,
        backend: ModelBackend,
        specs: dict[str, ModelSpec],
        grade_limiter: anyio.CapacityLimiter | None = None,
    ) -> None:
        self._backend = backend
        self._specs = specs
        self._counters: dict[str, Callable[[str], int]] = {}
        self._chat: dict[str, ChatFormat | None] = {}
        self._tasks: dict[str, anyio.CancelScope] = {}  # RunTask request_id -> its scope
        self._inbox = inbox
        self._outbox = outbox
        self.events = events
        self.profile = profile
        self._pending = Pending()
        self.schedules = Schedules(outbox, events)
        self._tg: TaskGroup | None = None
        self._grade_limiter = grade_limiter or anyio.CapacityLimiter(1)
        self._running = self._done = self._phases = 0
        self.pass_rate = PassRate()

    def statistics(self) -> RouterStatistics:
        return RouterStatistics(
            tasks_running=self._running, tasks_done=self._done, phases_done=self._phases
        )

    async def run(
        self, *, task_status: anyio.abc.TaskStatus[None] = anyio.TASK_STATUS_IGNORED
    ) -> None:
        """Serve requests; when the inbox closes, in-flight tasks are cancelled."""
        async with serving(self._inbox, self._outbox) as self._tg:
            # Tokenizers are read at startup, not on the first task's critical path.
            for model in self._specs:
                try:
                    await self.token_counter(model)
                    await self.chat_format(model)
                except SwapOSError as exc:  # a bad model file fails its phases, not startup
                    log.warning("token_counter.unavailable", model=model, reason=str(exc))
            task_status.started()
            async for msg in self._inbox:
                await self._handle(msg)

    async def _handle(self, msg: RouterInbox) -> None:
        assert self._tg is not None
        match msg:
            case RunPhases():
                phases_scope = self._tasks[msg.request_id] = anyio.CancelScope()
                self._tg.start_soon(self._run_phases, msg, phases_scope)  # (a CancelTask may
                # come before the task starts: the scope is registered already)
            case RunTask():
                self._tg.start_soon(self._run_task, msg)
            case CancelTask(request_id=rid):
                scope = self._tasks.get(rid)
                if scope is not None:
                    scope.cancel()
            case Preload():
                self._tg.start_soon(self._preload, msg)
            case ModelLeased():
                if not self._pending.resolve(msg):  # its phase was cancelled meanwhile
                    await self._outbox.send("loader", ReleaseLease(lease_id=msg.grant.lease_id))
            case AcquireFailed() | Generated() | GenerateFailed():
                self._pending.resolve(msg)
            case _:
                assert_never(msg)

    # --- requests -------------------------------------------------------------------------

    async def _run_phases(self, req: RunPhases, scope: anyio.CancelScope) -> None:
        tid, rid = req.task_id, req.run_id
        self._running += 1
        outputs: list[str] = []
        error: str | None = "cancelled"  # unless the phases end (CancelTask, shutdown)
        try:
            await self.events.emit(
                TaskStarted(t=self.events.t(), task_id=tid, run_id=rid, category="phases")
            )
            with scope:
                error = None
                for i, spec in enumerate(req.phases):
                    upcoming = [p.model for p in req.phases[i + 1 :]] + req.then
                    out = await self.generate_phase(
                        task_id=tid,
                        run_id=rid,
                        phase=spec.phase,
                        model=spec.model,
                        prompt=spec.prompt,
                        stable_prefix=spec.stable_prefix,
                        params=spec.params,
                        attempt=0,
                        upcoming=upcoming,
                        special=spec.special,
                    )
                    if out.error is not None:
                        error = out.error
                        break
                    outputs.append(out.text)
            if scope.cancelled_caught:
                error = "cancelled"
        finally:
            self._tasks.pop(req.request_id, None)
            with anyio.CancelScope(shield=True):
                await self.schedules.forget(rid)
                await self.events.emit(
                    TaskFinished(
                        t=self.events.t(),
                        task_id=tid,
                        run_id=rid,
                        passed=error is None,
                        pass_at_1=error is None,
                        iterations=len(outputs),
                        error=error,
                    )
                )
                self._running -= 1
                self._done += 1
        if not scope.cancelled_caught:  # cancelled by CancelTask: its sender is not waiting
            await self._outbox.send(
                req.reply_to,
                PhasesDone(request_id=req.request_id, task_id=tid, outputs=outputs, error=error),
            )

    async def _run_task(self, req: RunTask) -> None:
        self._running += 1
        done: TaskDone | None = None
        if req.next_task is not None:
            phase, model = first_use(req.next_task, self.profile)
            self.schedules.announce(
                req.run_id,
                ModelUse(model=model, order=0, task_id=req.next_task.task_id, phase=phase),
            )
        try:
            with anyio.CancelScope() as scope:
                self._tasks[req.request_id] = scope
                run = TaskRun(self, req.run_id)
                ended = await conduct(req.task, run, max_attempts=req.max_attempts)
                done = TaskDone(
                    request_id=req.request_id,
                    task_id=req.task.task_id,
                    passed=ended.passed,
                    error=ended.error,
                    capsule_json=ended.capsule_json,
                )
        finally:
            self._tasks.pop(req.request_id, None)
            with anyio.CancelScope(shield=True):
                await self.schedules.forget(req.run_id)
            self._running -= 1
            self._done += 1
        if done is not None:  # None: cancelled by CancelTask, whose sender is not waiting
            await self._outbox.send(req.reply_to, done)

    async def _preload(self, req: Preload) -> None:
        failed: dict[str, str] = {}
        for model in req.models:
            reply = await self._pending.ask(
                self._outbox,
                "loader",
                AcquireModel(request_id=new_id("acq"), reply_to="router", model=model),
            )
            if isinstance(reply, AcquireFailed):
                failed[model] = reply.reason
            elif isinstance(reply, ModelLeased):
                await self._outbox.send("loader", ReleaseLease(lease_id=reply.grant.lease_id))
        await self._outbox.send(req.reply_to, Preloaded(request_id=req.request_id, failed=failed))

    # --- the phase primitives conductors use ----------------------------------------------

    async def task_started(self, task: Task, *, run_id: str) -> None:
        """Record that the run ``run_id`` of ``task`` started."""
        await self.events.emit(
            TaskStarted(
                t=self.events.t(), task_id=task.task_id, run_id=run_id, category=task.category
            )
        )

    async def task_finished(
        self,
        task: Task,
        *,
        run_id: str,
        passed: bool,
        pass_at_1: bool,
        iterations: int,
        tests_passed: int,
        tests_total: int,
        error: str | None,
        passed_attempt: int = 0,
        grades: int = 0,
    ) -> None:
        """Record how ``task`` ended."""
        await self.events.emit(
            TaskFinished(
                t=self.events.t(),
                task_id=task.task_id,
                run_id=run_id,
                passed=passed,
                pass_at_1=pass_at_1,
                iterations=iterations,
                tests_passed=tests_passed,
                tests_total=tests_total,
                error=error,
                passed_attempt=passed_attempt,
                grades=grades,
            )
        )

    async def token_counter(self, model: str) -> Callable[[str], int]:
        """The tokenizer of ``model`` as a counting function (built once, off the loop)."""
        if model not in self._counters:
            spec = self._specs[model]
            counter = await anyio.to_thread.run_sync(self._backend.token_counter, spec)
            self._counters.setdefault(model, counter)
        return self._counters[model]

    async def chat_format(self, model: str) -> ChatFormat | None:
        """How to render ``model``'s chat prompts, or None to prompt it as a base model:
        the profile's ``prompt`` setting, else its GGUF's chat template (read once, off the
        loop)."""
        if model not in self._chat:
            style = self.profile.models[model].prompt
            fmt: ChatFormat | None = None
            if style != "completion":
                fmt = await anyio.to_thread.run_sync(self._backend.chat_format, self._specs[model])
            if style == "chat" and fmt is None:
                fmt = ChatFormat(template=CHATML)
            self._chat.setdefault(model, fmt)
        return self._chat[model]

    async def decide(self, task_id: str, decision: str, text: str) -> None:
        """Record a routing decision (which plan, which model, and why)."""
        await self.events.emit(
            RouterDecided(t=self.events.t(), task_id=task_id, decision=decision, text=text)
        )

    async def generate_phase(
        self,
        *,
        task_id: str,
        run_id: str,
        phase: str,
        model: str,
        prompt: str,
        stable_prefix: str,
        params: SamplingParams,
        attempt: int,
        upcoming: Sequence[str],
        special: bool = False,
    ) -> PhaseOutput:
        """Run one generate phase of the run ``run_id`` end to end; failures come back in
        ``error``.

        ``special``: the prompt is a rendered chat (its special-token text is tokens).
        Cancelled, it stops its generation within one token, releases its lease, records
        the phase as finished with outcome ``cancelled`` and re-raises."""
        pid = new_id("ph")
        ids = {"task_id": task_id, "phase_id": pid, "model": model}
        reset_peak_rss()
        await self.events.emit(
            PhaseStarted(t=self.events.t(), run_id=run_id, phase=phase, attempt=attempt, **ids)
        )
        try:
            return await self._generate(
                ids,
                run_id=run_id,
                phase=phase,
                prompt=prompt,
                stable_prefix=stable_prefix,
                params=params,
                upcoming=upcoming,
                special=special,
            )
        except anyio.get_cancelled_exc_class():
            with anyio.CancelScope(shield=True):
                self._phases += 1
                await self.events.emit(
                    PhaseFinished(
                        t=self.events.t(),
                        outcome="cancelled",
                        error="cancelled",
                        peak_rss_bytes=peak_rss_bytes(),
                        **ids,
                    )
                )
            raise

    async def _generate(
        self,
        ids: dict[str, str],
        *,
        run_id: str,
        phase: str,
        prompt: str,
        stable_prefix: str,
        params: SamplingParams,
        upcoming: Sequence[str],
        special: bool,
    ) -> PhaseOutput:
        task_id, pid, model = ids["task_id"], ids["phase_id"], ids["model"]
        schedule = [ModelUse(model=model, order=0, task_id=task_id, phase=phase)] + [
            ModelUse(model=m, order=i + 1, task_id=task_id) for i, m in enumerate(upcoming)
        ]
        await self.schedules.publish(run_id, schedule)
        lease = await self._pending.ask(
            self._outbox,
            "loader",
            AcquireModel(
                request_id=new_id("acq"),
                reply_to="router",
                model=model,
                task_id=task_id,
                phase_id=pid,
            ),
        )
        if isinstance(lease, AcquireFailed):
            return await self._end_phase(ids, PhaseOutput(error=f"load failed: {lease.reason}"))
        assert isinstance(lease, ModelLeased)
        gen_id = new_id("gen")
        try:
            at_first_token = await self.schedules.ready(run_id, schedule)
            gen_started = self.events.t()
            reply = await self._pending.ask(
                self._outbox,
                "generator",
                Generate(
                    request_id=gen_id,
                    reply_to="router",
                    lease_id=lease.grant.lease_id,
                    model=model,
                    prompt=prompt,
                    stable_prefix=stable_prefix,
                    params=params,
                    task_id=task_id,
                    phase_id=pid,
                    special=special,
                    at_first_token=at_first_token,
                ),
            )
        except anyio.get_cancelled_exc_class():
            with anyio.CancelScope(shield=True):  # stop the generation within one token
                await self._outbox.send_if_open("generator", CancelGeneration(request_id=gen_id))
            raise
        finally:
            with anyio.CancelScope(shield=True):
                await self._outbox.send_if_open(
                    "loader", ReleaseLease(lease_id=lease.grant.lease_id)
                )
        if isinstance(reply, GenerateFailed):
            return await self._end_phase(ids, PhaseOutput(error=reply.reason))
        assert isinstance(reply, Generated)
        await self._outbox.send(
            "prefetcher",
            PhaseObserved(
                model=model,
                tokens=reply.stats.tokens,
                gen_s=reply.stats.gen_s,
                started_t=gen_started,
                ended_t=self.events.t(),
                load_s=lease.grant.load_s,
                load_hidden_s=lease.grant.load_hidden_s,
            ),
        )
        out = PhaseOutput(text=reply.text, tokens=reply.stats.tokens, hit_cap=reply.stats.hit_cap)
        return await self._end_phase(ids, out)

    async def grade_phase(
        self,
        *,
        task_id: str,
        run_id: str,
        attempt: int,
        work: GradeWork,
        phase: str = "grade",
    ) -> GradeResult:
        """Run ``work`` (the sandboxed grader) in a worker thread as a ``phase`` phase of the
        run ``run_id`` (``grade``: the task's tests; ``selfcheck``: its docstring's examples)."""
        pid = new_id("ph")
        t0 = self.events.t()
        ids = {"task_id": task_id, "phase_id": pid}
        await self.events.emit(
            PhaseStarted(t=t0, run_id=run_id, phase=phase, attempt=attempt, **ids)
        )
        await self.events.emit(GradeStarted(t=t0, task_id=task_id, phase_id=pid, attempt=attempt))
        await self.schedules.publish_rest(run_id)
        outcome = await run_in_worker(work, limiter=self._grade_limiter)
        await self.events.emit(
            GradeFinished(
                t=self.events.t(),
                task_id=task_id,
                phase_id=pid,
                outcome=outcome.outcome,
                passed=outcome.passed,
                tests_passed=outcome.tests_passed,
                tests_total=outcome.tests_total,
                duration_s=self.events.t() - t0,
                reason=outcome.reason,
            )
        )
        await self.events.emit(
            PhaseFinished(t=self.events.t(), task_id=task_id, phase_id=pid, outcome=outcome.outcome)
        )
        self._phases += 1
        if phase == "grade":
            self.pass_rate.observe(outcome.passed)
        return outcome

    async def _end_phase(self, ids: dict[str, str], out: PhaseOutput) -> PhaseOutput:
        self._phases += 1
        await self.events.emit(
            PhaseFinished(
                t=self.events.t(),
                outcome="error" if out.error else "ok",
                error=out.error,
                peak_rss_bytes=peak_rss_bytes(),
                **ids,
            )
        )
        return out

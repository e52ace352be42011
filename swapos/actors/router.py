"""The Router: conducts each task through its phases and publishes the schedule."""

from __future__ import annotations

from typing import assert_never

import anyio
import msgspec
from anyio.abc import TaskGroup
from anyio.streams.memory import MemoryObjectReceiveStream

from swapos.actors.base import Events, Outbox, Pending, serving
from swapos.actors.run_context import RunContext
from swapos.actors.schedules import Schedules
from swapos.actors.task_run import TaskRun
from swapos.actors.texts import ModelTexts
from swapos.messages.base import new_id
from swapos.messages.commands import (
    AcquireFailed,
    AcquireModel,
    CancelTask,
    DrawFinished,
    DrawsDone,
    Generated,
    GenerateFailed,
    ModelLeased,
    ModelUse,
    PhasesDone,
    Preload,
    Preloaded,
    ReleaseLease,
    RunPhases,
    RunTask,
    TaskDone,
)
from swapos.messages.inboxes import RouterInbox
from swapos.models.profile import Profile
from swapos.passes import passes_named
from swapos.pipeline.conductor import conduct
from swapos.pipeline.routing import first_use


class RouterStatistics(msgspec.Struct, frozen=True, kw_only=True):
    tasks_running: int
    tasks_done: int
    phases_done: int


class Router:
    """Runs every run (a ``RunTask``'s conducted task, a ``RunPhases``' scripted phases) in
    its own task of the Router's task group, through a
    :class:`~swapos.actors.task_run.TaskRun` bound to the run's id.

    A generate phase is: publish the schedule (so the Evictor knows what comes next),
    lease the model from the Loader, publish again (now the Prefetcher may bring in the
    next model while this one generates), generate, release the lease. Grading runs in a
    worker thread. Failures of a phase end it with a reason; they do not crash the system.

    Each run's cancel scope is registered when its request is handled, before its task
    starts, so a ``CancelTask`` right behind it finds it. A run that a cancellation ends (a
    ``CancelTask``, or the system shutting down) is recorded with ``error="cancelled"``.
    """

    def __init__(
        self,
        *,
        inbox: MemoryObjectReceiveStream[RouterInbox],
        outbox: Outbox,
        events: Events,
        profile: Profile,
        texts: ModelTexts,
        grade_limiter: anyio.CapacityLimiter | None = None,
    ) -> None:
        self._tasks: dict[str, anyio.CancelScope] = {}  # a run's request_id -> its scope
        self._inbox = inbox
        self._outbox = outbox
        self.profile = profile
        self._passes = passes_named(profile.pipeline.passes)
        self._texts = texts
        self._pending = Pending()
        self._ctx = RunContext(
            outbox=outbox,
            events=events,
            pending=self._pending,
            schedules=Schedules(outbox, events),
            texts=texts,
            profile=profile,
            grade_limiter=grade_limiter or anyio.CapacityLimiter(1),
        )
        self._tg: TaskGroup | None = None
        self._running = self._done = 0

    def statistics(self) -> RouterStatistics:
        return RouterStatistics(
            tasks_running=self._running, tasks_done=self._done, phases_done=self._ctx.phases_done
        )

    async def run(
        self, *, task_status: anyio.abc.TaskStatus[None] = anyio.TASK_STATUS_IGNORED
    ) -> None:
        """Serve requests; when the inbox closes, in-flight runs are cancelled."""
        async with serving(self._inbox, self._outbox) as self._tg:
            await self._texts.read_all()  # not on the first task's critical path
            task_status.started()
            async for msg in self._inbox:
                await self._handle(msg)

    async def _handle(self, msg: RouterInbox) -> None:
        assert self._tg is not None
        match msg:
            case RunPhases() | RunTask():
                # Registered before the run's task starts: a CancelTask may come first.
                scope = self._tasks[msg.request_id] = anyio.CancelScope()
                if isinstance(msg, RunPhases):
                    self._tg.start_soon(self._run_phases, msg, scope)
                else:
                    self._tg.start_soon(self._run_task, msg, scope)
            case CancelTask(request_id=rid):
                if rid in self._tasks:
                    self._tasks[rid].cancel()
            case Preload():
                self._tg.start_soon(self._preload, msg)
            case ModelLeased():
                if not self._pending.resolve(msg):  # its phase was cancelled meanwhile
                    await self._outbox.send("loader", ReleaseLease(lease_id=msg.grant.lease_id))
            case AcquireFailed() | Generated() | GenerateFailed() | DrawFinished() | DrawsDone():
                self._pending.resolve(msg)
            case _:
                assert_never(msg)

    # --- requests -------------------------------------------------------------------------

    async def _run_phases(self, req: RunPhases, scope: anyio.CancelScope) -> None:
        run = TaskRun(self._ctx, req.run_id)
        self._running += 1
        outputs: list[str] = []
        error: str | None = None
        cancelled = False  # by a CancelTask (the scope) or from outside (shutdown)
        try:
            await run.started(req.task_id, "phases")
            with scope:
                error = await self._generate_all(run, req, outputs)
                ok = error is None
                run.report(
                    req.task_id, passed=ok, pass_at_1=ok, iterations=len(outputs), error=error
                )
            cancelled = scope.cancelled_caught
        except anyio.get_cancelled_exc_class():
            cancelled = True
            raise
        finally:
            self._tasks.pop(req.request_id, None)
            with anyio.CancelScope(shield=True):
                await self._ctx.schedules.forget(req.run_id)
                await run.finish(req.task_id, cancelled=cancelled)
                self._running -= 1
                self._done += 1
        if cancelled:  # by CancelTask: its sender is not waiting
            return
        await self._outbox.send(
            req.reply_to,
            PhasesDone(
                request_id=req.request_id, task_id=req.task_id, outputs=outputs, error=error
            ),
        )

    @staticmethod
    async def _generate_all(run: TaskRun, req: RunPhases, outputs: list[str]) -> str | None:
        """Run ``req``'s phases in turn, appending each output; the first error, or None."""
        for i, spec in enumerate(req.phases):
            upcoming = [p.model for p in req.phases[i + 1 :]] + req.then
            out = await run.generate_phase(
                task_id=req.task_id,
                phase=spec.phase,
                model=spec.model,
                prompt=spec.prompt,
                stable_prefix=spec.stable_prefix,
                params=spec.params,
                attempt=0,
                upcoming=upcoming,
                special=spec.special,
                n_ctx=spec.n_ctx,
            )
            if out.error is not None:
                return out.error
            outputs.append(out.text)
        return None

    async def _run_task(self, req: RunTask, scope: anyio.CancelScope) -> None:
        run = TaskRun(self._ctx, req.run_id)
        self._running += 1
        done: TaskDone | None = None
        cancelled = False  # by a CancelTask (the scope) or from outside (shutdown)
        if req.next_task is not None:
            phase, model = first_use(req.next_task, self.profile, self._passes)
            self._ctx.schedules.announce(
                req.run_id,
                ModelUse(model=model, order=0, task_id=req.next_task.task_id, phase=phase),
            )
        try:
            # Recorded before the scope: a run cancelled before it starts is still recorded.
            await run.task_started(req.task)
            with scope:
                ended = await conduct(
                    req.task, run, passes=self._passes, max_attempts=req.max_attempts
                )
                done = TaskDone(
                    request_id=req.request_id,
                    task_id=req.task.task_id,
                    passed=ended.passed,
                    error=ended.error,
                    capsule_json=ended.capsule_json,
                )
            cancelled = scope.cancelled_caught
        except anyio.get_cancelled_exc_class():
            cancelled = True
            raise
        finally:
            self._tasks.pop(req.request_id, None)
            with anyio.CancelScope(shield=True):
                await run.finish(req.task.task_id, cancelled=cancelled)
                await self._ctx.schedules.forget(req.run_id)
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

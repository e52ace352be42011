"""The :class:`System` handle :func:`~swapos.actors.system.open_system` yields: what a caller
(the CLI, a benchmark, the server, an embedding app) asks of the running actors."""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any, TypedDict

import anyio
import anyio.to_thread
import msgspec
from anyio.streams.memory import MemoryObjectReceiveStream

from swapos.actors.base import CLEANUP_TIMEOUT_S, Outbox, Pending
from swapos.actors.evictor import Evictor, EvictorStatistics
from swapos.actors.generator import Generator, GeneratorStatistics
from swapos.actors.kvcache import KVCache, KVCacheStatistics
from swapos.actors.loader import Loader, LoaderStatistics
from swapos.actors.prefetcher import Prefetcher, PrefetcherStatistics
from swapos.actors.recorder import Recorder, RecorderStatistics
from swapos.actors.router import Router, RouterStatistics
from swapos.actors.taps import Tap, TokenTaps
from swapos.actors.texts import ModelTexts
from swapos.clock import Clock
from swapos.data.residency import ModelState, ResidencySnapshot
from swapos.data.task import Task
from swapos.errors import SystemClosedError
from swapos.messages.base import Address, new_id
from swapos.messages.commands import (
    CancelTask,
    DescribeModels,
    ModelsDescribed,
    ModelsUnloaded,
    PhasesDone,
    PhaseSpec,
    Preload,
    Preloaded,
    RunPhases,
    RunTask,
    TaskDone,
    UnloadModels,
)
from swapos.messages.events import AnyEvent
from swapos.messages.inboxes import ClientInbox
from swapos.models.profile import Profile
from swapos.models.spec import ModelSpec
from swapos.models.templates import ChatFormat, FimTokens
from swapos.records.schema import PhaseRecord, RunSummary, TaskResult


class TaskOutcome(msgspec.Struct, frozen=True, kw_only=True):
    """What :meth:`System.run_task` returns: the recorded result and the final capsule."""

    result: TaskResult
    capsule_json: bytes


class PhasesOutcome(msgspec.Struct, frozen=True, kw_only=True):
    records: list[PhaseRecord]
    outputs: list[str]
    error: str | None


@dataclass(frozen=True)
class Actors:
    """The seven actors of one system (``open_system`` starts them in this order, the
    Recorder first)."""

    recorder: Recorder
    evictor: Evictor
    kvcache: KVCache
    loader: Loader
    generator: Generator
    prefetcher: Prefetcher
    router: Router


class SystemStatistics(TypedDict):
    """What :meth:`System.statistics` returns: each actor's frozen snapshot, by actor."""

    evictor: EvictorStatistics
    kvcache: KVCacheStatistics
    loader: LoaderStatistics
    generator: GeneratorStatistics
    prefetcher: PrefetcherStatistics
    router: RouterStatistics
    recorder: RecorderStatistics


class System:
    """The handle :func:`open_system` yields. Safe to use from many tasks at once.

    It asks the actors by messages (through its own outbox) and reads them only through
    their frozen ``statistics()`` snapshots and the Recorder's finished records; it writes
    no actor's state.
    """

    def __init__(
        self,
        *,
        router: Outbox,
        actors: Actors,
        mode: str,
        budget_bytes: int,
        specs: dict[str, ModelSpec],
        outboxes: dict[Address, Outbox],
        clock: Clock,
        taps: TokenTaps,
        texts: ModelTexts,
        profile: Profile,
        t0: float = 0.0,
    ) -> None:
        self.clock = clock
        self._t0 = t0
        self.profile = profile
        self._taps = taps
        self._texts = texts
        self._out = router
        self._pending = Pending()
        self._recorder = actors.recorder
        self._actors = actors
        self.mode = mode
        self.budget_bytes = budget_bytes
        self.specs = specs
        self._outboxes = outboxes
        self._closed = False

    async def _ask(self, request: Any) -> Any:
        if self._closed:
            raise SystemClosedError("the system has shut down; open a new one")
        return await self._pending.ask(self._out, "router", request)

    async def run_phases(self, task_id: str, phases: Sequence[PhaseSpec]) -> PhasesOutcome:
        """Run a scripted sequence of generate phases as one task.

        Cancellation stops waiting; the phases themselves end when the system closes.
        """
        request = RunPhases(
            request_id=new_id("req"), reply_to="client", task_id=task_id, phases=list(phases)
        )
        done = await self._ask(request)
        assert isinstance(done, PhasesDone)
        result = await self._recorder.task_result(request.run_id)
        return PhasesOutcome(records=list(result.phases), outputs=done.outputs, error=done.error)

    async def generate(
        self,
        task_id: str,
        phase: PhaseSpec,
        *,
        then: Sequence[str] = (),
        on_token: Tap | None = None,
    ) -> PhasesOutcome:
        """Run one generate phase as task ``task_id`` (unique per call): a request of
        ``swapos serve``.

        Args:
            task_id: the task (and event-log) id of this request.
            phase: the model, prompt and sampling parameters.
            then: models expected after this phase, soonest first: they follow it in the
                published schedule, so the Evictor keeps them and the Prefetcher may bring
                the first one in while this phase generates (the cost model decides).
            on_token: called on the event loop with each decoded text piece.

        Cancelling the caller stops the phase within one token and releases its lease at
        once; it is recorded as cancelled, and once that is logged (bounded by
        ``CLEANUP_TIMEOUT_S``) the cancellation propagates.
        """
        request = RunPhases(
            request_id=new_id("req"),
            reply_to="client",
            task_id=task_id,
            phases=[phase],
            then=list(then),
        )
        if on_token is not None:
            self._taps.add(task_id, on_token)
        try:
            done = await self._ask(request)
        except anyio.get_cancelled_exc_class():
            with anyio.CancelScope(shield=True):
                await self._out.send_if_open("router", CancelTask(request_id=request.request_id))
                # Its end is logged after its lease release was sent to the Loader, so a
                # request the caller sends the Loader next (an unload) comes after it.
                with anyio.move_on_after(CLEANUP_TIMEOUT_S):
                    await self._recorder.task_result(request.run_id)
            raise
        finally:
            self._taps.remove(task_id)
        assert isinstance(done, PhasesDone)
        result = await self._recorder.task_result(request.run_id)
        return PhasesOutcome(records=list(result.phases), outputs=done.outputs, error=done.error)

    async def chat_format(self, model: str) -> ChatFormat | None:
        """``model``'s chat template, or None when the profile prompts it as a base model."""
        return await self._texts.chat_format(model)

    async def token_counter(self, model: str) -> Callable[[str], int]:
        """A function counting tokens of text as ``model``'s tokenizer does (blocking for
        real models: call it in a worker thread for long texts)."""
        return await self._texts.token_counter(model)

    async def fim_tokens(self, model: str) -> FimTokens | None:
        """``model``'s fill-in-the-middle tokens, None when its vocabulary has none."""
        return await self._texts.fim_tokens(model)

    async def models(self) -> list[ModelState]:
        """Every model's state, leases and measured footprint, as the Loader has them."""
        done = await self._ask_loader(DescribeModels(request_id=new_id("req"), reply_to="client"))
        assert isinstance(done, ModelsDescribed)
        return done.models

    async def unload(self, models: Sequence[str] | None = None) -> ModelsUnloaded:
        """Evict ``models`` (all when None) that are loaded and not leased; the others are
        named in ``skipped`` with their state. It does not wait for leases: callers that
        hold them (the server's requests) drain them first."""
        names = list(models) if models is not None else None
        done = await self._ask_loader(
            UnloadModels(request_id=new_id("req"), reply_to="client", models=names)
        )
        assert isinstance(done, ModelsUnloaded)
        return done

    async def _ask_loader(self, request: DescribeModels | UnloadModels) -> Any:
        if self._closed:
            raise SystemClosedError("the system has shut down; open a new one")
        return await self._pending.ask(self._out, "loader", request)

    async def run_task(
        self, task: Task, *, max_attempts: int | None = None, next_task: Task | None = None
    ) -> TaskOutcome:
        """Conduct ``task`` through the pipeline; its result as the Recorder recorded it.

        Args:
            task: the task.
            max_attempts: code attempts (default: the profile's).
            next_task: the task the caller will run next on this system, when it knows. Its
                first model (``reason``'s when its plan has one, else ``code``'s) is then the
                last use of this task's schedule: in ``overlap`` mode the Prefetcher brings it
                in while this task's last generation and its grades run, so the next task's
                first phase is a swap like any other. Only a hint: other modes ignore it
                (they never prefetch), and nothing breaks if another task follows.

        Cancelling the caller stops the task: its phase aborts within one token, its lease
        is released, a grading sandbox is killed, and it is recorded as finished (failed);
        then the cancellation propagates.
        """
        request = RunTask(
            request_id=new_id("req"),
            reply_to="client",
            task=task,
            max_attempts=max_attempts,
            next_task=next_task,
        )
        try:
            done = await self._ask(request)
        except anyio.get_cancelled_exc_class():
            with anyio.CancelScope(shield=True):
                await self._out.send_if_open("router", CancelTask(request_id=request.request_id))
            raise
        assert isinstance(done, TaskDone)
        result = await self._recorder.task_result(request.run_id)
        return TaskOutcome(result=result, capsule_json=done.capsule_json)

    async def preload(self, models: Sequence[str] | None = None) -> dict[str, str]:
        """Load ``models`` (all by default); returns failures by model."""
        names = list(models) if models is not None else list(self.specs)
        done = await self._ask(Preload(request_id=new_id("req"), reply_to="client", models=names))
        assert isinstance(done, Preloaded)
        return done.failed

    def summary(self) -> RunSummary:
        return self._recorder.summary()

    def message_counts(self) -> dict[str, int]:
        """Messages the actors and the client sent so far (events excluded), by type."""
        total: Counter[str] = Counter()
        for box in self._outboxes.values():
            total.update(box.sent)
        return dict(total)

    def run_time(self) -> float:
        """Seconds since the run started, on the clock the events' ``t`` is measured on."""
        return self.clock.now() - self._t0

    def watch(self, watcher: Callable[[AnyEvent], None]) -> Callable[[], None]:
        """Call ``watcher`` on the event loop with every event the Recorder writes from now
        on (it must be quick and must not raise); returns the function that stops it. The
        live page of ``swapos serve`` (``/ui``) reads the events this way."""
        return self._recorder.watch(watcher)

    def residency(self) -> ResidencySnapshot:
        """Every model's state, leases and measured footprint now, as frozen data (read
        without a message: the Loader's snapshot, never its live table)."""
        return self._actors.loader.residency()

    def statistics(self) -> SystemStatistics:
        """Frozen snapshots of every actor's counters, by actor (``["loader"]``: the model
        states, leases and bytes in use; ``["router"]``: the runs; ...)."""
        a = self._actors
        return SystemStatistics(
            evictor=a.evictor.statistics(),
            kvcache=a.kvcache.statistics(),
            loader=a.loader.statistics(),
            generator=a.generator.statistics(),
            prefetcher=a.prefetcher.statistics(),
            router=a.router.statistics(),
            recorder=a.recorder.statistics(),
        )

    async def _dispatch(self, inbox: MemoryObjectReceiveStream[ClientInbox]) -> None:
        async with inbox:
            async for msg in inbox:
                self._pending.resolve(msg)

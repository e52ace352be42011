"""``open_system``: wire the seven actors, start them, serve many tasks, shut down cleanly."""

from __future__ import annotations

import datetime as dt
from collections import Counter
from collections.abc import AsyncIterator, Callable, Sequence
from contextlib import asynccontextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import anyio
import anyio.to_thread
import msgspec
from anyio.streams.memory import MemoryObjectReceiveStream, MemoryObjectSendStream

from swapos.actors.base import CLEANUP_TIMEOUT_S, Events, Outbox, Pending
from swapos.actors.evictor import Evictor
from swapos.actors.generator import Generator
from swapos.actors.kvcache import DEFAULT_KV_DISK_BYTES, KVCache
from swapos.actors.loader import Loader
from swapos.actors.prefetcher import Prefetcher, PrefetchPolicy
from swapos.actors.recorder import Recorder
from swapos.actors.residency import Residency
from swapos.actors.router import Router
from swapos.actors.taps import Tap, TokenTaps
from swapos.backends.base import ModelBackend
from swapos.clock import Clock, MonotonicClock
from swapos.data.task import Task
from swapos.errors import SwapOSError, SystemClosedError
from swapos.messages.base import Address, new_id
from swapos.messages.commands import (
    CancelTask,
    DescribeModels,
    ModelsDescribed,
    ModelState,
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
from swapos.messages.events import AnyEvent, RunFinished, RunStarted
from swapos.messages.inboxes import ClientInbox
from swapos.models.profile import Mode, Profile, parse_size
from swapos.models.resolve import model_specs
from swapos.models.spec import ModelSpec
from swapos.models.templates import ChatFormat
from swapos.policies.eviction import EvictionRule
from swapos.records.schema import PhaseRecord, RunSummary, TaskResult
from swapos.sysinfo import host_info
from swapos.version import __version__

INBOX_SIZES: dict[Address, int] = {
    "client": 64,
    "router": 64,
    "loader": 64,
    "evictor": 64,
    "prefetcher": 16,
    "generator": 32,
    "kvcache": 32,
    "recorder": 4096,
}
"""Every stream's bound, in one table (STYLE: backpressure)."""

UNLIMITED_BUDGET = 2**62
DEFAULT_KV_CACHE_BYTES = 512 * 2**20

# Who sends to whom: the wiring of the system (requests and their replies, notifications).
WIRING: dict[Address, tuple[Address, ...]] = {
    "client": ("router", "loader", "recorder"),
    "router": ("client", "loader", "generator", "evictor", "prefetcher", "recorder"),
    "loader": ("client", "router", "prefetcher", "evictor", "recorder"),
    "evictor": ("loader",),
    "prefetcher": ("loader", "recorder"),
    "generator": ("router", "kvcache", "recorder"),
    "kvcache": ("generator", "recorder"),
}


class ModeSettings(msgspec.Struct, frozen=True, kw_only=True):
    """What a swap mode means for the actors."""

    rule: EvictionRule
    prefetch: PrefetchPolicy
    preload: bool
    unlimited_budget: bool


MODE_SETTINGS: dict[Mode, ModeSettings] = {
    "overlap": ModeSettings(
        rule="next_use", prefetch="auto", preload=False, unlimited_budget=False
    ),
    "lru": ModeSettings(rule="lru", prefetch="off", preload=False, unlimited_budget=False),
    "sequential": ModeSettings(
        rule="all_idle", prefetch="off", preload=False, unlimited_budget=False
    ),
    "resident": ModeSettings(rule="next_use", prefetch="off", preload=True, unlimited_budget=True),
}
"""What each of :data:`~swapos.models.profile.MODES` means for the actors."""


class TaskOutcome(msgspec.Struct, frozen=True, kw_only=True):
    """What :meth:`System.run_task` returns: the recorded result and the final capsule."""

    result: TaskResult
    capsule_json: bytes


class PhasesOutcome(msgspec.Struct, frozen=True, kw_only=True):
    records: list[PhaseRecord]
    outputs: list[str]
    error: str | None


class System:
    """The handle :func:`open_system` yields. Safe to use from many tasks at once."""

    def __init__(
        self,
        *,
        router: Outbox,
        recorder: Recorder,
        actors: dict[str, Any],
        mode: str,
        budget_bytes: int,
        specs: dict[str, ModelSpec],
        outboxes: dict[Address, Outbox],
        clock: Clock,
        taps: TokenTaps,
        profile: Profile,
    ) -> None:
        self.clock = clock
        self.profile = profile
        self._taps = taps
        self._out = router
        self._pending = Pending()
        self.recorder = recorder
        self.actors = actors
        self.mode = mode
        self.budget_bytes = budget_bytes
        self.specs = specs
        self.outboxes = outboxes
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
        result = await self.recorder.task_result(request.run_id)
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
                    await self.recorder.task_result(request.run_id)
            raise
        finally:
            self._taps.remove(task_id)
        assert isinstance(done, PhasesDone)
        result = await self.recorder.task_result(request.run_id)
        return PhasesOutcome(records=list(result.phases), outputs=done.outputs, error=done.error)

    async def chat_format(self, model: str) -> ChatFormat | None:
        """``model``'s chat template, or None when the profile prompts it as a base model."""
        router: Router = self.actors["router"]
        return await router.chat_format(model)

    async def token_counter(self, model: str) -> Callable[[str], int]:
        """A function counting tokens of text as ``model``'s tokenizer does (blocking for
        real models: call it in a worker thread for long texts)."""
        router: Router = self.actors["router"]
        return await router.token_counter(model)

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
        result = await self.recorder.task_result(request.run_id)
        return TaskOutcome(result=result, capsule_json=done.capsule_json)

    async def preload(self, models: Sequence[str] | None = None) -> dict[str, str]:
        """Load ``models`` (all by default); returns failures by model."""
        names = list(models) if models is not None else list(self.specs)
        done = await self._ask(Preload(request_id=new_id("req"), reply_to="client", models=names))
        assert isinstance(done, Preloaded)
        return done.failed

    def summary(self) -> RunSummary:
        return self.recorder.summary()

    def message_counts(self) -> dict[str, int]:
        """Messages the actors and the client sent so far (events excluded), by type."""
        total: Counter[str] = Counter()
        for box in self.outboxes.values():
            total.update(box.sent)
        return dict(total)

    def statistics(self) -> dict[str, Any]:
        """Frozen snapshots of every actor's counters."""
        return {name: actor.statistics() for name, actor in self.actors.items()}

    async def _dispatch(self, inbox: MemoryObjectReceiveStream[ClientInbox]) -> None:
        async with inbox:
            async for msg in inbox:
                self._pending.resolve(msg)


@asynccontextmanager
async def open_system(
    profile: Profile,
    *,
    backend: ModelBackend | None = None,
    specs: dict[str, ModelSpec] | None = None,
    mode: Mode | None = None,
    budget_bytes: int | None = None,
    clock: Clock | None = None,
    event_log: str | Path | None = None,
    on_event: Callable[[AnyEvent], None] | None = None,
    kv_cache: bool = True,
    kv_cache_bytes: int = DEFAULT_KV_CACHE_BYTES,
    kv_disk_dir: Path | None = None,
    kv_disk_bytes: int = DEFAULT_KV_DISK_BYTES,
    prefetch: PrefetchPolicy | None = None,
    load_threads: int = 1,
    cold: bool = False,
) -> AsyncIterator[System]:
    """Start the actor system for ``profile`` and yield its :class:`System` handle.

    Args:
        profile: models, roles, budget and phase settings.
        backend: the model backend (default: llama-cpp-python for model files, the API
            backend for remote models: a ``RoutingBackend``).
        specs: resolved models (default: resolved from the profile, assembling bundled ones).
        mode: one of :data:`~swapos.models.profile.MODES` (default: the profile's).
        budget_bytes: overrides the profile's budget.
        clock: time source (default: monotonic; tests pass a ``FakeClock``).
        event_log: JSONL path the Recorder appends to (None: keep records in memory only).
        on_event: called on the event loop with every event, after it is written.
        kv_cache: reuse KV prefix states.
        kv_cache_bytes: RAM budget of the KV cache.
        kv_disk_dir: directory of the KV cache's disk tier, which outlives the process
            (None: RAM only; ``swapos.kvstore.default_kv_dir()`` is the user's cache).
        kv_disk_bytes: size bound of the disk tier.
        prefetch: overrides the mode's prefetch policy.
        load_threads: model loads that may run at once.
        cold: drop an evicted model's file from the page cache (benchmarks of machines whose
            RAM cannot hold every model).

    Startup errors surface here. On exit, in-flight work is cancelled, every model is
    closed (shielded, bounded), and the log is flushed and closed. An unexpected exception
    in an actor cancels the system and propagates.
    """
    mode = mode or profile.mode
    settings = MODE_SETTINGS[mode]
    clock = clock or MonotonicClock()
    if specs is None:  # may assemble or quantize model files: never on the event loop
        specs = await anyio.to_thread.run_sync(model_specs, profile)
    if backend is None:
        from swapos.backends.llama import LlamaBackend
        from swapos.backends.routing import RoutingBackend

        local = LlamaBackend(load_limiter=anyio.CapacityLimiter(load_threads))
        backend = RoutingBackend(local)  # remote specs (api_base) go to the API backend
    budget = budget_bytes if budget_bytes is not None else parse_size(profile.budget)
    if settings.unlimited_budget:
        budget = UNLIMITED_BUDGET
    assembly = _assemble(
        profile,
        backend=backend,
        specs=specs,
        mode=mode,
        settings=settings,
        clock=clock,
        budget=budget,
        event_log=event_log,
        on_event=on_event,
        kv_cache=kv_cache,
        kv_cache_bytes=kv_cache_bytes,
        kv_disk_dir=kv_disk_dir,
        kv_disk_bytes=kv_disk_bytes,
        prefetch=prefetch,
        cold=cold,
    )
    async with _lifecycle(assembly, profile, preload=settings.preload) as system:
        yield system


@dataclass
class _Assembly:
    """The wired, not yet started actors of one system."""

    system: System
    recorder: Recorder
    actors: dict[str, Any]
    client: Outbox
    client_inbox: MemoryObjectReceiveStream[ClientInbox]
    client_events: Events


def _assemble(
    profile: Profile,
    *,
    backend: ModelBackend,
    specs: dict[str, ModelSpec],
    mode: Mode,
    settings: ModeSettings,
    clock: Clock,
    budget: int,
    event_log: str | Path | None,
    on_event: Callable[[AnyEvent], None] | None,
    kv_cache: bool,
    kv_cache_bytes: int,
    kv_disk_dir: Path | None,
    kv_disk_bytes: int,
    prefetch: PrefetchPolicy | None,
    cold: bool,
) -> _Assembly:
    """Create the streams by :data:`WIRING` and the seven actors on them (nothing runs yet)."""
    t0 = clock.now()

    streams = {a: anyio.create_memory_object_stream[Any](INBOX_SIZES[a]) for a in INBOX_SIZES}
    sends: dict[Address, MemoryObjectSendStream[Any]] = {a: s for a, (s, _) in streams.items()}
    recvs = {a: r for a, (_, r) in streams.items()}

    def outbox(actor: Address) -> Outbox:
        return Outbox({to: sends[to].clone() for to in WIRING[actor]})

    def events(box: Outbox) -> Events:
        return Events(box, clock, t0)

    residency = Residency()
    taps = TokenTaps()
    boxes = {a: outbox(a) for a in WIRING}
    recorder = Recorder(
        inbox=recvs["recorder"], path=Path(event_log) if event_log else None, on_event=on_event
    )
    actors: dict[str, Any] = {
        "evictor": Evictor(
            inbox=recvs["evictor"],
            outbox=boxes["evictor"],
            rule=settings.rule,
        ),
        "kvcache": KVCache(
            inbox=recvs["kvcache"],
            outbox=boxes["kvcache"],
            events=events(boxes["kvcache"]),
            budget_bytes=kv_cache_bytes,
            disk_dir=kv_disk_dir if kv_cache else None,
            disk_budget_bytes=kv_disk_bytes,
        ),
        "loader": Loader(
            inbox=recvs["loader"],
            outbox=boxes["loader"],
            events=events(boxes["loader"]),
            backend=backend,
            specs=specs,
            residency=residency,
            budget_bytes=budget,
            cold=cold,
        ),
        "generator": Generator(
            inbox=recvs["generator"],
            outbox=boxes["generator"],
            events=events(boxes["generator"]),
            residency=residency,
            use_kv_cache=kv_cache,
            taps=taps,
        ),
        "prefetcher": Prefetcher(
            inbox=recvs["prefetcher"],
            outbox=boxes["prefetcher"],
            events=events(boxes["prefetcher"]),
            backend=backend,
            specs=specs,
            policy=prefetch or settings.prefetch,
        ),
        "router": Router(
            inbox=recvs["router"],
            outbox=boxes["router"],
            events=events(boxes["router"]),
            profile=profile,
            backend=backend,
            specs=specs,
        ),
    }
    system = System(
        router=boxes["client"],
        recorder=recorder,
        actors={**actors, "recorder": recorder},
        mode=mode,
        budget_bytes=budget,
        specs=specs,
        outboxes=boxes,
        clock=clock,
        taps=taps,
        profile=profile,
    )
    client_events = events(boxes["client"])
    for stream in sends.values():  # only the clones in the outboxes stay open
        stream.close()
    return _Assembly(
        system=system,
        recorder=recorder,
        actors=actors,
        client=boxes["client"],
        client_inbox=recvs["client"],
        client_events=client_events,
    )


@asynccontextmanager
async def _lifecycle(asm: _Assembly, profile: Profile, *, preload: bool) -> AsyncIterator[System]:
    """Start the Recorder, log the run's header, start the other actors (and preload in
    resident mode), yield; on exit cancel them, log ``RunFinished`` and close the client."""
    system, recorder, actors = asm.system, asm.recorder, asm.actors
    client_events = asm.client_events

    async with anyio.create_task_group() as outer:
        await outer.start(recorder.run)
        try:
            await client_events.emit(
                RunStarted(
                    t=client_events.t(),
                    swapos_version=__version__,
                    run_at=dt.datetime.now(dt.UTC).isoformat(timespec="seconds"),
                    host=host_info(),
                    profile=profile.name,
                    mode=system.mode,
                    budget_bytes=system.budget_bytes,
                    models=sorted(system.specs),
                )
            )
            async with anyio.create_task_group() as tg:
                for name in ("evictor", "kvcache", "loader", "generator", "prefetcher", "router"):
                    await tg.start(actors[name].run)
                tg.start_soon(system._dispatch, asm.client_inbox)
                try:
                    if preload:
                        failed = await system.preload()
                        if failed:
                            raise SwapOSError(
                                "resident mode could not preload: "
                                + "; ".join(f"{m}: {r}" for m, r in failed.items())
                            )
                    yield system
                finally:
                    system._closed = True
                    tg.cancel_scope.cancel()
        finally:
            with anyio.move_on_after(CLEANUP_TIMEOUT_S, shield=True):
                await client_events.emit(RunFinished(t=client_events.t()))
                await asm.client.aclose()


__all__ = ["MODE_SETTINGS", "System", "TaskOutcome", "open_system"]

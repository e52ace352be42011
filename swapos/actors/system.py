"""``open_system``: wire the seven actors, start them, serve many tasks, shut down cleanly."""

from __future__ import annotations

import datetime as dt
from collections.abc import AsyncIterator, Callable
from contextlib import asynccontextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import anyio
import anyio.to_thread
import msgspec
from anyio.streams.memory import MemoryObjectReceiveStream, MemoryObjectSendStream

from swapos.actors.base import CLEANUP_TIMEOUT_S, Events, Outbox
from swapos.actors.evictor import Evictor
from swapos.actors.generator import Generator
from swapos.actors.handle import Actors, PhasesOutcome, System, SystemStatistics, TaskOutcome
from swapos.actors.kvcache import DEFAULT_KV_DISK_BYTES, KVCache
from swapos.actors.loader import Loader
from swapos.actors.prefetcher import Prefetcher, PrefetchPolicy
from swapos.actors.recorder import Recorder
from swapos.actors.residency import Residency
from swapos.actors.router import Router
from swapos.actors.taps import TokenTaps
from swapos.actors.texts import ModelTexts
from swapos.backends.base import ModelBackend
from swapos.clock import Clock, MonotonicClock
from swapos.errors import SwapOSError
from swapos.messages.base import Address
from swapos.messages.events import AnyEvent, RunFinished, RunStarted
from swapos.messages.inboxes import ClientInbox
from swapos.models.profile import Mode, Profile, parse_size
from swapos.models.resolve import model_specs
from swapos.models.spec import ModelSpec
from swapos.policies.eviction import EvictionRule
from swapos.sysinfo import host_info
from swapos.version import __version__

__all__ = [
    "DEFAULT_KV_CACHE_BYTES",
    "INBOX_SIZES",
    "MODE_SETTINGS",
    "UNLIMITED_BUDGET",
    "WIRING",
    "ModeSettings",
    "PhasesOutcome",
    "System",
    "SystemStatistics",
    "TaskOutcome",
    "open_system",
]

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
    "generator": ("router", "kvcache", "prefetcher", "recorder"),
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
        kv_cache, kv_cache_bytes: reuse KV prefix states; the RAM budget of that cache.
        kv_disk_dir, kv_disk_bytes: directory and size bound of the KV cache's disk tier,
            which outlives the process (None: RAM only; ``swapos.kvstore.default_kv_dir()``
            is the user's cache).
        prefetch: overrides the mode's prefetch policy.
        load_threads: model loads that may run at once.
        cold: drop an evicted model's file from the page cache (benchmarks of machines whose
            RAM cannot hold every model).

    Startup errors surface here. On exit, in-flight work is cancelled, every model is
    closed (shielded, bounded), and the log is flushed and closed. An unexpected exception
    in an actor cancels the system and propagates.
    """
    if specs is None:  # may assemble or quantize model files: never on the event loop
        specs = await anyio.to_thread.run_sync(model_specs, profile)
    mode = mode or profile.mode
    options = _Options(
        kv_cache=kv_cache,
        kv_cache_bytes=kv_cache_bytes,
        kv_disk_dir=kv_disk_dir,
        kv_disk_bytes=kv_disk_bytes,
        prefetch=prefetch or MODE_SETTINGS[mode].prefetch,
        cold=cold,
        event_log=Path(event_log) if event_log else None,
        on_event=on_event,
    )
    backend = backend or _default_backend(load_threads)
    budget = _budget(profile, mode, budget_bytes)
    asm = _assemble(profile, backend, specs, mode, clock or MonotonicClock(), budget, options)
    async with _lifecycle(asm, profile, preload=MODE_SETTINGS[mode].preload) as system:
        yield system


def _default_backend(load_threads: int) -> ModelBackend:
    """llama-cpp-python for model files; remote specs (``api_base``) go to the API backend."""
    from swapos.backends.llama import LlamaBackend
    from swapos.backends.routing import RoutingBackend

    return RoutingBackend(LlamaBackend(load_limiter=anyio.CapacityLimiter(load_threads)))


def _budget(profile: Profile, mode: Mode, budget_bytes: int | None) -> int:
    """The memory budget: unlimited in ``resident`` mode, else the override or the profile's."""
    if MODE_SETTINGS[mode].unlimited_budget:
        return UNLIMITED_BUDGET
    return budget_bytes if budget_bytes is not None else parse_size(profile.budget)


@dataclass(frozen=True)
class _Options:
    """The settings of :func:`open_system` that only the actors' construction reads."""

    kv_cache: bool
    kv_cache_bytes: int
    kv_disk_dir: Path | None
    kv_disk_bytes: int
    prefetch: PrefetchPolicy
    cold: bool
    event_log: Path | None
    on_event: Callable[[AnyEvent], None] | None


@dataclass
class _Assembly:
    """The wired, not yet started actors of one system."""

    system: System
    actors: Actors
    client: Outbox
    client_inbox: MemoryObjectReceiveStream[ClientInbox]
    client_events: Events


class _Wires:
    """The streams of one system, by :data:`WIRING`: each actor's inbox and outbox."""

    def __init__(self, clock: Clock) -> None:
        self.clock, self.t0 = clock, clock.now()
        streams = {a: anyio.create_memory_object_stream[Any](INBOX_SIZES[a]) for a in INBOX_SIZES}
        self._sends: dict[Address, MemoryObjectSendStream[Any]] = {
            a: s for a, (s, _) in streams.items()
        }
        self.inbox = {a: r for a, (_, r) in streams.items()}
        self.outbox = {
            actor: Outbox({to: self._sends[to].clone() for to in WIRING[actor]}) for actor in WIRING
        }

    def events(self, actor: Address) -> Events:
        return Events(self.outbox[actor], self.clock, self.t0)

    def close_originals(self) -> None:
        """Close the streams' original send ends: only the clones in the outboxes stay open."""
        for stream in self._sends.values():
            stream.close()


def _assemble(  # noqa: PLR0917
    profile: Profile,
    backend: ModelBackend,
    specs: dict[str, ModelSpec],
    mode: Mode,
    clock: Clock,
    budget: int,
    opts: _Options,
) -> _Assembly:
    """Create the streams by :data:`WIRING` and the seven actors on them (nothing runs yet)."""
    w = _Wires(clock)
    residency, taps = Residency(), TokenTaps()
    texts = ModelTexts(backend=backend, specs=specs, profile=profile)
    box, inbox = w.outbox, w.inbox
    actors = Actors(
        recorder=Recorder(inbox=inbox["recorder"], path=opts.event_log, on_event=opts.on_event),
        evictor=Evictor(
            inbox=inbox["evictor"], outbox=box["evictor"], rule=MODE_SETTINGS[mode].rule
        ),
        kvcache=KVCache(
            inbox=inbox["kvcache"],
            outbox=box["kvcache"],
            events=w.events("kvcache"),
            budget_bytes=opts.kv_cache_bytes,
            disk_dir=opts.kv_disk_dir if opts.kv_cache else None,
            disk_budget_bytes=opts.kv_disk_bytes,
        ),
        loader=Loader(
            inbox=inbox["loader"],
            outbox=box["loader"],
            events=w.events("loader"),
            backend=backend,
            specs=specs,
            residency=residency,
            budget_bytes=budget,
            cold=opts.cold,
        ),
        generator=Generator(
            inbox=inbox["generator"],
            outbox=box["generator"],
            events=w.events("generator"),
            residency=residency,
            use_kv_cache=opts.kv_cache,
            taps=taps,
        ),
        prefetcher=Prefetcher(
            inbox=inbox["prefetcher"],
            outbox=box["prefetcher"],
            events=w.events("prefetcher"),
            backend=backend,
            specs=specs,
            policy=opts.prefetch,
        ),
        router=Router(
            inbox=inbox["router"],
            outbox=box["router"],
            events=w.events("router"),
            profile=profile,
            texts=texts,
        ),
    )
    system = System(
        router=box["client"],
        actors=actors,
        mode=mode,
        budget_bytes=budget,
        specs=specs,
        outboxes=box,
        clock=clock,
        taps=taps,
        texts=texts,
        profile=profile,
    )
    client_events = w.events("client")
    w.close_originals()
    return _Assembly(
        system=system,
        actors=actors,
        client=box["client"],
        client_inbox=inbox["client"],
        client_events=client_events,
    )


@asynccontextmanager
async def _lifecycle(asm: _Assembly, profile: Profile, *, preload: bool) -> AsyncIterator[System]:
    """Start the Recorder, log the run's header, start the other actors (and preload in
    resident mode), yield; on exit cancel them, log ``RunFinished`` and close the client."""
    system, actors, client_events = asm.system, asm.actors, asm.client_events
    async with anyio.create_task_group() as outer:
        await outer.start(actors.recorder.run)
        try:
            await client_events.emit(_header(system, profile, client_events.t()))
            async with anyio.create_task_group() as tg:
                for actor in (
                    actors.evictor,
                    actors.kvcache,
                    actors.loader,
                    actors.generator,
                    actors.prefetcher,
                    actors.router,
                ):  # consumers first
                    await tg.start(actor.run)
                tg.start_soon(system._dispatch, asm.client_inbox)
                try:
                    if preload:
                        await _preload_all(system)
                    yield system
                finally:
                    system._closed = True
                    tg.cancel_scope.cancel()
        finally:
            with anyio.move_on_after(CLEANUP_TIMEOUT_S, shield=True):
                await client_events.emit(RunFinished(t=client_events.t()))
                await asm.client.aclose()


def _header(system: System, profile: Profile, t: float) -> RunStarted:
    """The event log's first line."""
    return RunStarted(
        t=t,
        swapos_version=__version__,
        run_at=dt.datetime.now(dt.UTC).isoformat(timespec="seconds"),
        host=host_info(),
        profile=profile.name,
        mode=system.mode,
        budget_bytes=system.budget_bytes,
        models=sorted(system.specs),
    )


async def _preload_all(system: System) -> None:
    """Resident mode: every model loaded before the first task, or a :class:`SwapOSError`."""
    failed = await system.preload()
    if failed:
        raise SwapOSError(
            "resident mode could not preload: " + "; ".join(f"{m}: {r}" for m, r in failed.items())
        )

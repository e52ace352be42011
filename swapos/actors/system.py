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
import structlog
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
from swapos.actors.slot_plan import slots_resolved
from swapos.actors.taps import TokenTaps
from swapos.actors.texts import ModelTexts
from swapos.backends.base import ModelBackend
from swapos.clock import Clock, MonotonicClock
from swapos.errors import SwapOSError
from swapos.messages.base import Address
from swapos.messages.events import AnyEvent, RunFinished, RunStarted
from swapos.messages.inboxes import ClientInbox
from swapos.models.profile import Mode, Profile, device_budget_bytes, parse_size
from swapos.models.resolve import model_specs
from swapos.models.spec import ModelSpec
from swapos.policies.eviction import EvictionRule
from swapos.sysinfo import host_info, process_baseline_bytes
from swapos.version import __version__

log = structlog.get_logger(__name__)

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
    "loader": ("client", "router", "prefetcher", "evictor", "kvcache", "recorder"),
    "evictor": ("loader",),
    "prefetcher": ("loader", "recorder"),
    "generator": ("router", "kvcache", "prefetcher", "recorder"),
    "kvcache": ("generator", "loader", "recorder"),
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
    process_budget: bool = False,
    overhead_bytes: int | None = None,
    calibrate: bool = False,
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
        kv_disk_dir, kv_disk_bytes: the KV cache's disk tier (it outlives the process) and
            its bound (None: RAM only; ``swapos.kvstore.default_kv_dir()``: the user's cache).
        prefetch: overrides the mode's prefetch policy.
        load_threads: model loads that may run at once.
        cold: drop an evicted model's file from the page cache (to bench small-RAM machines).
        process_budget, overhead_bytes: the budget is the process's: its fixed overhead
            (default: measured, :func:`~swapos.sysinfo.process_baseline_bytes`) and the KV
            RAM tier share it with the models (docs/timings.md). The command lines turn it on.
        calibrate: with the default backend, a model loaded with no measured decode costs
            measures them while it is idle (``backends/llama/calibration.py``; ``swapos
            serve`` turns it on).

    Startup errors surface here (GPU layers on a CPU-only build: a ``ProfileError``). On
    exit, in-flight work is cancelled, every model is closed (shielded, bounded), and the
    log is flushed and closed. An unexpected exception in an actor cancels the system.
    """
    if specs is None:  # may assemble or quantize model files: never on the event loop
        specs = await anyio.to_thread.run_sync(model_specs, profile)
    mode = mode or profile.mode
    shared = _shared(mode, process_budget, overhead_bytes, kv_cache_bytes if kv_cache else 0)
    prefetch, log = prefetch or MODE_SETTINGS[mode].prefetch, Path(event_log) if event_log else None
    kv = (kv_cache, kv_cache_bytes, kv_disk_dir, kv_disk_bytes)
    watch = shared is not None and overhead_bytes is None
    options = _Options(*kv, prefetch, cold, log, on_event, shared, watch)
    backend = backend or _default_backend(load_threads, calibrate=calibrate)
    backend.check_devices(list(specs.values()))  # GPU layers on a CPU-only build: one line
    budget, clock = _budget(profile, mode, budget_bytes), clock or MonotonicClock()
    room = None if budget >= UNLIMITED_BUDGET else budget - (shared[0] if shared else 0)
    specs = await anyio.to_thread.run_sync(slots_resolved, specs, backend, room)  # curves
    asm = _assemble(_Builder(profile, backend, specs, mode, clock, budget, options))
    async with _lifecycle(asm, profile, preload=MODE_SETTINGS[mode].preload) as system:
        yield system


def _default_backend(load_threads: int, *, calibrate: bool) -> ModelBackend:
    """llama-cpp-python for model files; remote specs (``api_base``) go to the API backend."""
    from swapos.backends.llama import LlamaBackend
    from swapos.backends.routing import RoutingBackend

    limiter = anyio.CapacityLimiter(load_threads)
    return RoutingBackend(LlamaBackend(load_limiter=limiter, calibrate=calibrate))


def _budget(profile: Profile, mode: Mode, budget_bytes: int | None) -> int:
    """The memory budget: unlimited in ``resident`` mode, else the override or the profile's."""
    if MODE_SETTINGS[mode].unlimited_budget:
        return UNLIMITED_BUDGET
    return budget_bytes if budget_bytes is not None else parse_size(profile.budget)


def _shared(
    mode: Mode, process_budget: bool, overhead_bytes: int | None, kv_ram_bytes: int
) -> tuple[int, int] | None:
    """(fixed overhead, KV RAM tier size) when the budget is the process's, else None."""
    if not process_budget or MODE_SETTINGS[mode].unlimited_budget:
        return None
    overhead = process_baseline_bytes() if overhead_bytes is None else overhead_bytes
    return (overhead, kv_ram_bytes)


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
    shared: tuple[int, int] | None
    """(fixed overhead, KV RAM tier size) when the budget is the process's."""
    watch_rss: bool = False
    """The overhead was measured (the process is SwapOS's own): RSS above the budget at a
    lease's release is taken off the KV tier's share (the Loader's ``watch_rss``)."""


@dataclass
class _Assembly:
    """The wired, not yet started actors of one system."""

    system: System
    actors: Actors
    client: Outbox
    client_inbox: MemoryObjectReceiveStream[ClientInbox]
    client_events: Events


class _Builder:
    """The streams of one system, by :data:`WIRING` (each actor's inbox and outbox), and
    the seven actors on them, made one by one (nothing runs yet)."""

    def __init__(  # noqa: PLR0917
        self,
        profile: Profile,
        backend: ModelBackend,
        specs: dict[str, ModelSpec],
        mode: Mode,
        clock: Clock,
        budget: int,
        opts: _Options,
    ) -> None:
        self.profile, self.backend, self.specs, self.mode = profile, backend, specs, mode
        self.clock, self.t0, self.budget, self.opts = clock, clock.now(), budget, opts
        streams = {a: anyio.create_memory_object_stream[Any](INBOX_SIZES[a]) for a in INBOX_SIZES}
        self._sends: dict[Address, MemoryObjectSendStream[Any]] = {
            a: s for a, (s, _) in streams.items()
        }
        self.inbox = {a: r for a, (_, r) in streams.items()}
        self.outbox = {
            actor: Outbox({to: self._sends[to].clone() for to in WIRING[actor]}) for actor in WIRING
        }
        self.residency, self.taps = Residency(), TokenTaps()
        self.texts = ModelTexts(backend=backend, specs=specs, profile=profile)

    def events(self, actor: Address) -> Events:
        return Events(self.outbox[actor], self.clock, self.t0)

    def close_originals(self) -> None:
        """Close the streams' original send ends: only the clones in the outboxes stay open."""
        for stream in self._sends.values():
            stream.close()

    def actors(self) -> Actors:
        opts = self.opts
        return Actors(
            recorder=Recorder(
                inbox=self.inbox["recorder"], path=opts.event_log, on_event=opts.on_event
            ),
            evictor=Evictor(
                inbox=self.inbox["evictor"],
                outbox=self.outbox["evictor"],
                rule=MODE_SETTINGS[self.mode].rule,
            ),
            kvcache=KVCache(
                inbox=self.inbox["kvcache"],
                outbox=self.outbox["kvcache"],
                events=self.events("kvcache"),
                budget_bytes=opts.kv_cache_bytes,
                disk_dir=opts.kv_disk_dir if opts.kv_cache else None,
                disk_budget_bytes=opts.kv_disk_bytes,
            ),
            loader=self.loader(),
            generator=Generator(
                inbox=self.inbox["generator"],
                outbox=self.outbox["generator"],
                events=self.events("generator"),
                residency=self.residency,
                use_kv_cache=opts.kv_cache,
                taps=self.taps,
            ),
            prefetcher=self.prefetcher(),
            router=Router(
                inbox=self.inbox["router"],
                outbox=self.outbox["router"],
                events=self.events("router"),
                profile=self.profile,
                texts=self.texts,
            ),
        )

    def loader(self) -> Loader:
        shared = self.opts.shared
        return Loader(
            inbox=self.inbox["loader"],
            outbox=self.outbox["loader"],
            events=self.events("loader"),
            backend=self.backend,
            specs=self.specs,
            residency=self.residency,
            budget_bytes=self.budget,
            device_budget_bytes=device_budget_bytes(
                self.profile,
                offloading=any(spec.offloaded for spec in self.specs.values()),
                unlimited=UNLIMITED_BUDGET if MODE_SETTINGS[self.mode].unlimited_budget else 0,
            ),
            overhead_bytes=shared[0] if shared else 0,
            kv_ram_bytes=shared[1] if shared else None,
            cold=self.opts.cold,
            watch_rss=self.opts.watch_rss,
            pinned=frozenset(
                n for n, cfg in self.profile.models.items() if cfg.pin and n in self.specs
            ),
        )

    def prefetcher(self) -> Prefetcher:
        return Prefetcher(
            inbox=self.inbox["prefetcher"],
            outbox=self.outbox["prefetcher"],
            events=self.events("prefetcher"),
            backend=self.backend,
            specs=self.specs,
            policy=self.opts.prefetch,
        )


def _assemble(build: _Builder) -> _Assembly:
    """Create the streams by :data:`WIRING`, the seven actors on them and the handle."""
    actors = build.actors()
    system = System(
        router=build.outbox["client"],
        actors=actors,
        mode=build.mode,
        budget_bytes=build.budget,
        specs=build.specs,
        outboxes=build.outbox,
        clock=build.clock,
        taps=build.taps,
        texts=build.texts,
        profile=build.profile,
        t0=build.t0,
    )
    client_events = build.events("client")
    build.close_originals()
    return _Assembly(
        system=system,
        actors=actors,
        client=build.outbox["client"],
        client_inbox=build.inbox["client"],
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
        overhead_bytes=system.statistics()["loader"].overhead_bytes,
    )


async def _preload_all(system: System) -> None:
    """Resident mode: every model loaded before the first task, or a :class:`SwapOSError`."""
    failed = await system.preload()
    if failed:
        raise SwapOSError(
            "resident mode could not preload: " + "; ".join(f"{m}: {r}" for m, r in failed.items())
        )

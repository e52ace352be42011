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
from swapos.actors.handle import PhasesOutcome, System, TaskOutcome
from swapos.actors.kvcache import DEFAULT_KV_DISK_BYTES, KVCache
from swapos.actors.loader import Loader
from swapos.actors.prefetcher import Prefetcher, PrefetchPolicy
from swapos.actors.recorder import Recorder
from swapos.actors.residency import Residency
from swapos.actors.router import Router
from swapos.actors.taps import TokenTaps
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

__all__ = [
    "DEFAULT_KV_CACHE_BYTES",
    "INBOX_SIZES",
    "MODE_SETTINGS",
    "UNLIMITED_BUDGET",
    "WIRING",
    "ModeSettings",
    "PhasesOutcome",
    "System",
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
        process_budget: the budget is the process's: its measured fixed overhead
            (:func:`~swapos.sysinfo.process_baseline_bytes`) and the KV cache's RAM tier
            share it with the models (the tier yields to them). The command lines (run,
            serve, bench run) turn it on; off, the budget is the models' (a library caller
            or test whose process holds more than SwapOS's own).
        overhead_bytes: the fixed overhead a process budget counts (default: measured).

    Startup errors surface here (a model asking for GPU layers the backend cannot give
    raises :class:`~swapos.errors.ProfileError` before anything starts). On exit, in-flight
    work is cancelled, every model is
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
    backend.check_devices(list(specs.values()))  # GPU layers on a CPU-only build: one line
    budget = budget_bytes if budget_bytes is not None else parse_size(profile.budget)
    if settings.unlimited_budget:
        budget = UNLIMITED_BUDGET
    shared = None  # (overhead, KV RAM tier size) when the budget is the process's
    if process_budget and not settings.unlimited_budget:
        overhead = process_baseline_bytes() if overhead_bytes is None else overhead_bytes
        shared = (overhead, kv_cache_bytes if kv_cache else 0)
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
        shared=shared,
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
    shared: tuple[int, int] | None = None,
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
            device_budget_bytes=device_budget_bytes(
                profile,
                offloading=any(spec.offloaded for spec in specs.values()),
                unlimited=UNLIMITED_BUDGET if settings.unlimited_budget else 0,
            ),
            overhead_bytes=shared[0] if shared else 0,
            kv_ram_bytes=shared[1] if shared else None,
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

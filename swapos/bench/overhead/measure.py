"""Measurements behind ``python -m swapos.bench overhead``: message hop, Recorder throughput,
per-phase orchestration overhead, each timed on the event loop it runs on.

- **hop**: the round trip of one request through an actor, on the project's own plumbing
  (:class:`~swapos.actors.base.Outbox`, :class:`~swapos.actors.base.Pending`, bounded anyio
  memory streams sized as in :data:`~swapos.actors.system.INBOX_SIZES`), halved. Two actors:
  a bare echo, and the real KVCache answering a miss (which also emits a ``KVMiss``).
- **recorder**: sustained events/s of the real Recorder writing JSONL to disk, fed by one
  producer through its inbox, timed from the first send until the file is closed.
- **orchestration**: wall time per phase of a full system on the fake backend with zero
  load and token time and the real clock: the cost of the actors themselves.
"""

from __future__ import annotations

import statistics
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any, Literal

import anyio
import msgspec
import sniffio
from anyio.streams.memory import MemoryObjectReceiveStream

from swapos.actors.base import Events, Outbox, Pending
from swapos.actors.kvcache import KVCache
from swapos.actors.recorder import Recorder
from swapos.actors.system import INBOX_SIZES, open_system
from swapos.backends.fake import FakeBackend
from swapos.backends.fake_script import FakeModelScript
from swapos.bench.overhead.events import phase_events
from swapos.clock import MonotonicClock
from swapos.data.sampling import SamplingParams
from swapos.messages.base import Reply, new_id
from swapos.messages.commands import LookupPrefix, PhaseSpec, PrefixMissing
from swapos.messages.events import AnyEvent
from swapos.models.profile import ModelConfig, Profile
from swapos.models.spec import ModelSpec
from swapos.records.aggregate import Aggregator

HopActor = Literal["echo", "kvcache"]
PHASES_PER_TASK = 10
"""Phases per task of the orchestration run."""


class HopLatency(msgspec.Struct, frozen=True, kw_only=True):
    """One request/reply through an actor; a hop is half a round trip."""

    backend: str
    actor: str
    iterations: int
    round_trip_median_us: float
    round_trip_p90_us: float
    hop_median_us: float
    hop_p90_us: float
    hop_cpu_us: float
    """Process CPU time per hop (half a round trip): robust to other load on the machine."""


class RecorderThroughput(msgspec.Struct, frozen=True, kw_only=True):
    """The Recorder writing ``events`` events to ``bytes`` of JSONL, and its parts alone."""

    backend: str
    events: int
    seconds: float
    events_per_s: float
    bytes: int
    flushes: int
    events_per_cpu_s: float
    encode_only_events_per_s: float
    aggregate_only_events_per_s: float


class PhaseOverhead(msgspec.Struct, frozen=True, kw_only=True):
    """Wall time per one-token phase of a fake-backend system (zero model time)."""

    backend: str
    phases: int
    seconds: float
    per_phase_us: float
    cpu_per_phase_us: float
    phases_per_s: float


# --- hop ----------------------------------------------------------------------------------


class EchoActor:
    """The smallest actor: answers every ``LookupPrefix`` with ``PrefixMissing``."""

    def __init__(self, *, inbox: MemoryObjectReceiveStream[LookupPrefix], outbox: Outbox) -> None:
        self._inbox = inbox
        self._outbox = outbox

    async def run(
        self, *, task_status: anyio.abc.TaskStatus[None] = anyio.TASK_STATUS_IGNORED
    ) -> None:
        """Echo until the inbox closes; the outbox is closed on exit."""
        try:
            async with self._inbox:
                task_status.started()
                async for msg in self._inbox:
                    await self._outbox.send(msg.reply_to, PrefixMissing(request_id=msg.request_id))
        finally:
            with anyio.CancelScope(shield=True):
                await self._outbox.aclose()


async def _dispatch(inbox: MemoryObjectReceiveStream[Reply], pending: Pending) -> None:
    async with inbox:
        async for msg in inbox:
            pending.resolve(msg)


def percentile(samples: Sequence[float], q: float) -> float:
    """The sample at quantile ``q`` (0..1) of ``samples``, nearest rank from below."""
    ordered = sorted(samples)
    return float(ordered[min(len(ordered) - 1, int(q * len(ordered)))])


async def measure_hop(
    iterations: int, *, actor: HopActor = "echo", warmup: int = 500
) -> HopLatency:
    """Time ``iterations`` asks of ``actor`` (a generator asking the KVCache, in the system).

    The asker sends through an :class:`Outbox` and waits in :class:`Pending`; a dispatcher
    resolves the reply, as every asking actor does. Request construction is not timed.
    """
    to_actor, actor_inbox = anyio.create_memory_object_stream[Any](INBOX_SIZES["kvcache"])
    to_asker, asker_inbox = anyio.create_memory_object_stream[Any](INBOX_SIZES["generator"])
    to_recorder, recorder_inbox = anyio.create_memory_object_stream[Any](INBOX_SIZES["recorder"])
    asker = Outbox({"kvcache": to_actor})
    actor_out = Outbox({"generator": to_asker, "recorder": to_recorder})
    pending = Pending()
    runner: EchoActor | KVCache
    if actor == "echo":
        to_recorder.close()
        recorder_inbox.close()
        runner = EchoActor(inbox=actor_inbox, outbox=actor_out)
    else:
        events = Events(actor_out, MonotonicClock(), time.perf_counter())
        runner = KVCache(inbox=actor_inbox, outbox=actor_out, events=events, budget_bytes=2**20)
    async with anyio.create_task_group() as tg:
        if actor == "kvcache":
            await tg.start(Recorder(inbox=recorder_inbox, path=None).run)
        await tg.start(runner.run)
        tg.start_soon(_dispatch, asker_inbox, pending)
        samples, cpu = await _time_asks(asker, pending, iterations=iterations, warmup=warmup)
        await asker.aclose()
    return hop_latency(samples, cpu, actor=actor, backend=current_backend())


async def _time_asks(
    asker: Outbox, pending: Pending, *, iterations: int, warmup: int
) -> tuple[list[int], float]:
    """Ask the KVCache address ``warmup + iterations`` times; the last ``iterations`` round
    trips in nanoseconds, and the process CPU seconds they took."""
    tokens = list(range(64))
    samples: list[int] = []
    perf = time.perf_counter_ns
    cpu0 = 0.0
    for i in range(warmup + iterations):
        req = LookupPrefix(
            request_id=new_id("kv"), reply_to="generator", identity="bench", tokens=tokens
        )
        if i == warmup:
            cpu0 = time.process_time()
        t0 = perf()
        await pending.ask(asker, "kvcache", req)
        if i >= warmup:
            samples.append(perf() - t0)
    return samples, time.process_time() - cpu0


def hop_latency(samples_ns: Sequence[int], cpu_s: float, *, actor: str, backend: str) -> HopLatency:
    """The figures of the round trips ``samples_ns`` (nanoseconds) that took ``cpu_s`` of
    process CPU on ``backend``, in microseconds: a hop is half a round trip."""
    median = statistics.median(samples_ns) / 1000
    p90 = percentile(samples_ns, 0.9) / 1000
    return HopLatency(
        backend=backend,
        actor=actor,
        iterations=len(samples_ns),
        round_trip_median_us=median,
        round_trip_p90_us=p90,
        hop_median_us=median / 2,
        hop_p90_us=p90 / 2,
        hop_cpu_us=cpu_s / len(samples_ns) / 2 * 1e6,
    )


# --- recorder -----------------------------------------------------------------------------


async def measure_recorder(n_events: int, path: Path) -> RecorderThroughput:
    """Emit ``n_events`` realistic events from one task to a Recorder writing ``path``
    (replaced), as actors do (:meth:`Events.emit`). Event construction is not timed."""
    events = phase_events(n_events)
    await anyio.Path(path).unlink(missing_ok=True)
    send, inbox = anyio.create_memory_object_stream[AnyEvent](INBOX_SIZES["recorder"])
    outbox = Outbox({"recorder": send})
    producer = Events(outbox, MonotonicClock(), 0.0)  # how every actor emits
    recorder = Recorder(inbox=inbox, path=path)
    async with anyio.create_task_group() as tg:
        await tg.start(recorder.run)
        t0, cpu0 = time.perf_counter(), time.process_time()
        for ev in events:
            await producer.emit(ev)
        await outbox.aclose()
    seconds = time.perf_counter() - t0  # the Recorder has returned: its file is closed
    cpu = time.process_time() - cpu0
    stats = recorder.statistics()
    return RecorderThroughput(
        backend=current_backend(),
        events=n_events,
        seconds=seconds,
        events_per_s=n_events / seconds,
        events_per_cpu_s=n_events / cpu,
        bytes=stats.bytes_written,
        flushes=stats.flushes,
        encode_only_events_per_s=_encode_rate(events),
        aggregate_only_events_per_s=_aggregate_rate(events),
    )


def _encode_rate(events: Sequence[AnyEvent]) -> float:
    encoder, buf = msgspec.json.Encoder(), bytearray()
    t0 = time.perf_counter()
    for ev in events:
        encoder.encode_into(ev, buf, len(buf))
        buf.extend(b"\n")
    return len(events) / (time.perf_counter() - t0)


def _aggregate_rate(events: Sequence[AnyEvent]) -> float:
    agg = Aggregator()
    t0 = time.perf_counter()
    for ev in events:
        agg.feed(ev)
    return len(events) / (time.perf_counter() - t0)


# --- orchestration ------------------------------------------------------------------------


async def measure_orchestration(n_phases: int, *, event_log: Path | None) -> PhaseOverhead:
    """Run ``n_phases`` one-token phases, alternating two resident models, in tasks of 10."""
    clock = MonotonicClock()
    names = ("a", "b")
    script = FakeModelScript(load_s=0.0, token_s=0.0, reply="x", footprint_bytes=100)
    backend = FakeBackend(clock, dict.fromkeys(names, script))
    specs = {n: ModelSpec(name=n, path=f"/fake/{n}.gguf") for n in names}
    profile = Profile(
        name="overhead", budget=1000, models={n: ModelConfig(path=f"/fake/{n}.gguf") for n in names}
    )
    params = SamplingParams(max_tokens=1)
    phases = [
        PhaseSpec(phase="gen", model=names[i % 2], prompt="p", params=params)
        for i in range(PHASES_PER_TASK)
    ]
    tasks = max(1, n_phases // PHASES_PER_TASK)
    async with open_system(
        profile, backend=backend, specs=specs, clock=clock, budget_bytes=1000, event_log=event_log
    ) as system:
        await system.run_phases("warmup", phases[:2])  # both models resident from here on
        t0, cpu0 = time.perf_counter(), time.process_time()
        for k in range(tasks):
            await system.run_phases(f"task-{k}", phases)
        seconds = time.perf_counter() - t0
        cpu = time.process_time() - cpu0
    done = tasks * PHASES_PER_TASK
    return PhaseOverhead(
        backend=current_backend(),
        phases=done,
        seconds=seconds,
        per_phase_us=seconds / done * 1e6,
        cpu_per_phase_us=cpu / done * 1e6,
        phases_per_s=done / seconds,
    )


def current_backend() -> str:
    """The name of the running event loop: ``asyncio`` or ``trio``."""
    return sniffio.current_async_library()

"""The overhead microbench (DESIGN §8): message hop, Recorder throughput, phase overhead.

``python -m swapos.bench overhead [--out FILE.json]`` measures, on asyncio and trio:

- **hop**: the round trip of one request through an actor, on the project's own plumbing
  (:class:`~swapos.actors.base.Outbox`, :class:`~swapos.actors.base.Pending`, bounded anyio
  memory streams sized as in :data:`~swapos.actors.system.INBOX_SIZES`), halved. Two actors:
  a bare echo, and the real KVCache answering a miss (which also emits a ``KVMiss``).
- **recorder**: sustained events/s of the real Recorder writing JSONL to disk, fed by one
  producer through its inbox, timed from the first send until the file is closed.
- **orchestration**: wall time per phase of a full system on the fake backend with zero
  load and token time and the real clock: the cost of the actors themselves.

Targets (from the issue) are checked here, never by tests.
"""

from __future__ import annotations

import argparse
import os
import statistics
import tempfile
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any, Literal

import anyio
import msgspec
from anyio.streams.memory import MemoryObjectReceiveStream
from rich.console import Console
from rich.table import Table

from swapos.actors.base import Events, Outbox, Pending
from swapos.actors.kvcache import KVCache
from swapos.actors.recorder import Recorder
from swapos.actors.system import INBOX_SIZES, open_system
from swapos.backends.base import SamplingParams
from swapos.backends.fake import FakeBackend, FakeModelScript
from swapos.clock import MonotonicClock
from swapos.messages.base import Reply, new_id
from swapos.messages.commands import LookupPrefix, PhaseSpec, PrefixMissing
from swapos.messages.events import (
    AnyEvent,
    FirstToken,
    GenerationFinished,
    GenerationProgress,
    GenerationStarted,
    KVMiss,
    KVSaved,
    LeaseGranted,
    LeaseReleased,
    ModelLoaded,
    ModelLoadStarted,
    PhaseFinished,
    PhaseStarted,
    ReservationMade,
    SchedulePublished,
    TaskFinished,
    TaskStarted,
)
from swapos.messages.generation import GenerationStats
from swapos.models.profile import ModelConfig, Profile
from swapos.models.spec import ModelSpec
from swapos.records.aggregate import Aggregator
from swapos.sysinfo import host_info

HOP_TARGET_US = 20.0
RECORDER_TARGET_EVENTS_S = 100_000.0
HopActor = Literal["echo", "kvcache"]


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


class TargetCheck(msgspec.Struct, frozen=True, kw_only=True):
    metric: str
    backend: str
    value: float
    target: str
    met: bool


class OverheadReport(msgspec.Struct, frozen=True, kw_only=True):
    host: dict[str, str]
    load_avg_1m: tuple[float, float]
    """The machine's 1-minute load average before and after: wall figures mean little when
    it exceeds the CPU count (the CPU figures still do)."""
    command: str
    hops: list[HopLatency]
    recorder: list[RecorderThroughput]
    orchestration: list[PhaseOverhead]
    targets: list[TargetCheck]


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


def _percentile(samples: Sequence[int], q: float) -> float:
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
    tokens = list(range(64))
    samples: list[int] = []
    perf = time.perf_counter_ns
    cpu0 = 0.0
    async with anyio.create_task_group() as tg:
        if actor == "kvcache":
            await tg.start(Recorder(inbox=recorder_inbox, path=None).run)
        await tg.start(runner.run)
        tg.start_soon(_dispatch, asker_inbox, pending)
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
        cpu = time.process_time() - cpu0
        await asker.aclose()
    median = statistics.median(samples) / 1000
    p90 = _percentile(samples, 0.9) / 1000
    return HopLatency(
        backend=_backend(),
        actor=actor,
        iterations=iterations,
        round_trip_median_us=median,
        round_trip_p90_us=p90,
        hop_median_us=median / 2,
        hop_p90_us=p90 / 2,
        hop_cpu_us=cpu / iterations / 2 * 1e6,
    )


# --- recorder -----------------------------------------------------------------------------

PROGRESS_PER_PHASE = 32
"""A 256-token generation, reported every 8 tokens."""


def phase_events(n_events: int) -> list[AnyEvent]:
    """``n_events`` events as a run emits them: tasks of 4 phases, each a load, a lease and
    a generation with its progress events (45 events a phase)."""
    out: list[AnyEvent] = []
    t, k = 0.0, 0
    while len(out) < n_events:
        tid = f"task-{k // 4}"
        if k % 4 == 0:
            out.append(TaskStarted(t=t, task_id=tid, category="bugfix"))
        out += _one_phase(t, tid, f"ph-{k}", ("reasoner", "coder")[k % 2])
        t += 1.0
        k += 1
        if k % 4 == 0:
            out.append(TaskFinished(t=t, task_id=tid, passed=True, iterations=1))
    return out[:n_events]


def _one_phase(t: float, tid: str, pid: str, model: str) -> list[AnyEvent]:
    ids: dict[str, Any] = {"task_id": tid, "phase_id": pid, "model": model}
    rid = f"gen-{pid}"
    gen = {**ids, "request_id": rid}
    return [
        PhaseStarted(t=t, phase="code", **ids),
        SchedulePublished(t=t + 0.001, task_id=tid, models=[model, "coder"]),
        ReservationMade(
            t=t + 0.002,
            model=model,
            request_id=f"rsv-{pid}",
            nbytes=300_000_000,
            urgent=True,
            victims=[],
            cancel=[],
            used_bytes=300_000_000,
            budget_bytes=1_000_000_000,
        ),
        ModelLoadStarted(t=t + 0.002, model=model, speculative=False, estimate_bytes=300_000_000),
        ModelLoaded(
            t=t + 0.2,
            model=model,
            load_s=0.198,
            speculative=False,
            estimate_bytes=300_000_000,
            measured_bytes=287_654_321,
        ),
        LeaseGranted(
            t=t + 0.2,
            lease_id=f"lease-{pid}",
            load_s=0.198,
            evict_s=0.0,
            load_hidden_s=0.0,
            joined=False,
            **ids,
        ),
        GenerationStarted(t=t + 0.201, prompt_chars=1834, **gen),
        KVMiss(t=t + 0.202, request_id=f"kv-{pid}", prompt_tokens=412, reason="no saved prefix"),
        FirstToken(t=t + 0.25, ttft_s=0.049, **gen),
        *(
            GenerationProgress(t=t + 0.25 + i * 0.02, tokens=8 * i, text_tail="    return x", **gen)
            for i in range(1, PROGRESS_PER_PHASE + 1)
        ),
        GenerationFinished(
            t=t + 0.9,
            stats=GenerationStats(
                prompt_tokens=412,
                prefill_tokens=412,
                kv_restored_tokens=0,
                prefill_s=0.045,
                ttft_s=0.049,
                tokens=256,
                gen_s=0.65,
                stop_reason="length",
            ),
            **gen,
        ),
        KVSaved(t=t + 0.91, model=model, tokens=300, nbytes=4_000_000),
        LeaseReleased(t=t + 0.92, model=model, lease_id=f"lease-{pid}"),
        PhaseFinished(t=t + 0.92, peak_rss_bytes=812_345_678, **ids),
    ]


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
        backend=_backend(),
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

PHASES_PER_TASK = 10


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
        backend=_backend(),
        phases=done,
        seconds=seconds,
        per_phase_us=seconds / done * 1e6,
        cpu_per_phase_us=cpu / done * 1e6,
        phases_per_s=done / seconds,
    )


# --- the command --------------------------------------------------------------------------


def _backend() -> str:
    import sniffio

    return sniffio.current_async_library()


def backends() -> list[str]:
    """asyncio, and trio when it is installed."""
    try:
        import trio  # noqa: F401
    except ImportError:
        return ["asyncio"]
    return ["asyncio", "trio"]


def targets(
    hops: Sequence[HopLatency], recorder: Sequence[RecorderThroughput]
) -> list[TargetCheck]:
    """The issue's targets: hop <= 20 us median, Recorder >= 100k events/s.

    The hop target is checked on the bare echo actor (the transport); the KVCache row adds
    the actor's own work and an event, and is reported for reference.
    """
    checks = [
        TargetCheck(
            metric=f"hop median ({h.actor})",
            backend=h.backend,
            value=h.hop_median_us,
            target=f"<= {HOP_TARGET_US:g} us",
            met=h.hop_median_us <= HOP_TARGET_US,
        )
        for h in hops
        if h.actor == "echo"
    ]
    checks += [
        TargetCheck(
            metric="recorder events/s",
            backend=r.backend,
            value=r.events_per_s,
            target=f">= {RECORDER_TARGET_EVENTS_S:,.0f}",
            met=r.events_per_s >= RECORDER_TARGET_EVENTS_S,
        )
        for r in recorder
    ]
    return checks


async def _measure_all(
    args: argparse.Namespace, workdir: Path
) -> tuple[list[HopLatency], RecorderThroughput, PhaseOverhead]:
    hops = [await measure_hop(args.hops, actor=a) for a in ("echo", "kvcache")]
    rec = await measure_recorder(args.events, workdir / "recorder.jsonl")
    orch = await measure_orchestration(args.phases, event_log=workdir / "orchestration.jsonl")
    return hops, rec, orch


def report(args: argparse.Namespace, command: str) -> OverheadReport:
    """Run every measurement on every backend."""
    hops: list[HopLatency] = []
    recs: list[RecorderThroughput] = []
    orchs: list[PhaseOverhead] = []
    load0 = os.getloadavg()[0]
    with tempfile.TemporaryDirectory(prefix="swapos-overhead-", dir=args.dir) as tmp:
        for backend in args.backend or backends():
            h, r, o = anyio.run(_measure_all, args, Path(tmp), backend=backend)
            hops += h
            recs.append(r)
            orchs.append(o)
    return OverheadReport(
        host=host_info(),
        load_avg_1m=(load0, os.getloadavg()[0]),
        command=command,
        hops=hops,
        recorder=recs,
        orchestration=orchs,
        targets=targets(hops, recs),
    )


def render(rep: OverheadReport) -> Table:
    """The figures, with the issue's targets met or missed."""
    before, after = rep.load_avg_1m
    table = Table(
        title="SwapOS overhead",
        caption=f"load average {before:.1f} -> {after:.1f} on {rep.host.get('cpus', '?')} CPUs",
    )
    for col in ("metric", "backend", "value", "target", ""):
        table.add_column(col, justify="right" if col == "value" else "left")
    checks = {(c.metric, c.backend): c for c in rep.targets}

    def row(metric: str, backend: str, value: str) -> None:
        c = checks.get((metric, backend))
        verdict = "" if c is None else ("[green]met[/green]" if c.met else "[red]missed[/red]")
        table.add_row(metric, backend, value, c.target if c else "", verdict)

    for h in rep.hops:
        row(f"hop median ({h.actor})", h.backend, f"{h.hop_median_us:.2f} us")
        row(f"hop p90 ({h.actor})", h.backend, f"{h.hop_p90_us:.2f} us")
        row(f"hop cpu ({h.actor})", h.backend, f"{h.hop_cpu_us:.2f} us")
    for r in rep.recorder:
        row("recorder events/s", r.backend, f"{r.events_per_s:,.0f}")
        row("  per cpu-second", r.backend, f"{r.events_per_cpu_s:,.0f}")
        row("  encode only", r.backend, f"{r.encode_only_events_per_s:,.0f}")
        row("  aggregate only", r.backend, f"{r.aggregate_only_events_per_s:,.0f}")
    for o in rep.orchestration:
        row("orchestration per phase", o.backend, f"{o.per_phase_us:,.0f} us")
        row("  cpu per phase", o.backend, f"{o.cpu_per_phase_us:,.0f} us")
    return table


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--out", type=Path, help="write the figures as JSON here")
    parser.add_argument("--hops", type=int, default=20_000, help="timed round trips per actor")
    parser.add_argument("--events", type=int, default=200_000, help="events fed to the Recorder")
    parser.add_argument("--phases", type=int, default=2_000, help="one-token phases to run")
    parser.add_argument(
        "--backend",
        action="append",
        choices=["asyncio", "trio"],
        help="event loop to measure (repeatable; default: both)",
    )
    parser.add_argument(
        "--dir",
        type=Path,
        default=None,
        help="directory for the event logs written (default: system temp)",
    )


def main(args: argparse.Namespace) -> int:
    """Measure message hop latency, Recorder events/s and per-phase orchestration overhead."""
    import sys

    console = Console()
    rep = report(args, " ".join(["python -m swapos.bench", *sys.argv[1:]]))
    console.print(render(rep))
    if args.out is not None:
        args.out.write_bytes(msgspec.json.format(msgspec.json.encode(rep)))
        console.print(f"written to {args.out}")
    return 0

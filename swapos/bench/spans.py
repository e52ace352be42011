"""Spans from an event log: start and end events paired into intervals on lanes.

:func:`spans` pairs every event type's start and end into intervals on *lanes*: one lane per
actor (``router``, ``grader``, ``generator``, ``kvcache``, ``prefetcher``, ``evictor``) and one
per model (``model a``: its loads, leases and evictions), so a prefetch load visibly overlaps
the generation before it; decisions are instants. :func:`swaps` lists every load and eviction
for the replay report. The Chrome trace writer (:mod:`swapos.bench.trace`) and the timeline
plot (:mod:`swapos.bench.plot`) draw these spans (docs/reports.md).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import msgspec

from swapos.messages.events import (
    AnyEvent,
    FirstToken,
    GenerationFailed,
    GenerationFinished,
    GenerationStarted,
    GradeFinished,
    GradeStarted,
    KVDropped,
    KVHit,
    KVMiss,
    KVRestoreFailed,
    KVSaved,
    LeaseGranted,
    LeaseReleased,
    ModelEvicted,
    ModelEvictStarted,
    ModelLoadCancelled,
    ModelLoaded,
    ModelLoadFailed,
    ModelLoadStarted,
    PhaseFinished,
    PhaseStarted,
    PrefetchFinished,
    PrefetchStarted,
    ReservationMade,
    ReservationRefused,
    RouterDecided,
    SchedulePublished,
)

ACTOR_LANES = ("router", "grader", "generator", "kvcache", "prefetcher", "evictor")
"""Actor lanes, in display order; model lanes (``model <name>``) follow."""


class Span(msgspec.Struct, frozen=True, kw_only=True):
    """An interval on a lane. ``end`` is None for an instant (a decision)."""

    lane: str
    name: str
    start: float
    end: float | None
    kind: str
    args: dict[str, Any] = msgspec.field(default_factory=dict)


class Swap(msgspec.Struct, frozen=True, kw_only=True):
    """One model load (ModelLoadStarted to its end) or eviction (ModelEvictStarted to
    ModelEvicted). ``outcome`` is ``unfinished`` when the log ends first."""

    kind: str
    model: str
    start: float
    end: float
    outcome: str
    speculative: bool
    reason: str = ""

    @property
    def duration_s(self) -> float:
        return self.end - self.start


def swaps(events: Sequence[AnyEvent]) -> list[Swap]:
    """Every load and eviction in ``events``, in order of start."""
    last_t = max((ev.t for ev in events), default=0.0)
    loads: dict[str, ModelLoadStarted] = {}
    evicts: dict[str, ModelEvictStarted] = {}
    out: list[Swap] = []
    for ev in events:
        match ev:
            case ModelLoadStarted(model=str(m)):
                loads[m] = ev
            case (
                ModelLoaded(model=str(m))
                | ModelLoadCancelled(model=str(m))
                | ModelLoadFailed(model=str(m))
            ) if m in loads:
                start = loads.pop(m)
                outcome, reason = _load_outcome(ev)
                out.append(_swap("load", start, ev.t, outcome, reason))
            case ModelEvictStarted(model=str(m)):
                evicts[m] = ev
            case ModelEvicted(model=str(m)) if m in evicts:
                out.append(_swap("evict", evicts.pop(m), ev.t, "evicted", ev.reason))
            case _:
                pass
    out += [_swap("load", s, last_t, "unfinished", "") for s in loads.values()]
    out += [_swap("evict", s, last_t, "unfinished", s.reason) for s in evicts.values()]
    return sorted(out, key=lambda s: s.start)


def _load_outcome(ev: ModelLoaded | ModelLoadCancelled | ModelLoadFailed) -> tuple[str, str]:
    if isinstance(ev, ModelLoaded):
        return "loaded", ""
    return ("cancelled" if isinstance(ev, ModelLoadCancelled) else "failed"), ev.reason


def _swap(
    kind: str, start: ModelLoadStarted | ModelEvictStarted, end: float, outcome: str, reason: str
) -> Swap:
    spec = isinstance(start, ModelLoadStarted) and start.speculative
    return Swap(
        kind=kind,
        model=start.model or "",
        start=start.t,
        end=end,
        outcome=outcome,
        speculative=spec,
        reason=reason,
    )


def spans(events: Sequence[AnyEvent]) -> list[Span]:
    """Intervals and instants on their lanes, from a log's events."""
    builder = _SpanBuilder()
    for ev in events:
        builder.feed(ev)
    out = builder.out + builder.close(max((ev.t for ev in events), default=0.0))
    for sw in swaps(events):
        label = f"{sw.kind} {sw.model}" + (" (prefetch)" if sw.speculative else "")
        args = {"outcome": sw.outcome, "speculative": sw.speculative, "reason": sw.reason}
        out.append(
            Span(
                lane=f"model {sw.model}",
                name=label,
                start=sw.start,
                end=sw.end,
                kind=sw.kind,
                args=args,
            )
        )
        if sw.kind == "evict":
            out.append(
                Span(
                    lane="evictor", name=label, start=sw.start, end=sw.end, kind="evict", args=args
                )
            )
    return sorted(out, key=lambda s: (s.start, s.lane))


class _SpanBuilder:
    """Pairs start/end events by their ids."""

    def __init__(self) -> None:
        self.out: list[Span] = []
        self._open: dict[tuple[str, str], tuple[str, str, float, str, dict[str, Any]]] = {}

    def _start(
        self, key: tuple[str, str], lane: str, name: str, t: float, kind: str, **args: Any
    ) -> None:
        self._open[key] = (lane, name, t, kind, args)

    def _end(self, key: tuple[str, str], t: float, **args: Any) -> None:
        opened = self._open.pop(key, None)
        if opened is not None:
            lane, name, start, kind, first = opened
            self.out.append(
                Span(lane=lane, name=name, start=start, end=t, kind=kind, args={**first, **args})
            )

    def _instant(self, lane: str, name: str, t: float, **args: Any) -> None:
        self.out.append(Span(lane=lane, name=name, start=t, end=None, kind="decision", args=args))

    def feed(self, ev: AnyEvent) -> None:
        match ev:
            case PhaseStarted(phase_id=str(pid)):
                name = ev.phase + (f" ({ev.model})" if ev.model else "")
                self._start(
                    ("phase", pid),
                    "router",
                    name,
                    ev.t,
                    "phase",
                    task_id=ev.task_id,
                    model=ev.model,
                )
            case PhaseFinished(phase_id=str(pid)):
                self._end(("phase", pid), ev.t, outcome=ev.outcome)
            case GradeStarted(phase_id=str(pid)):
                self._start(("grade", pid), "grader", "grade", ev.t, "grade", task_id=ev.task_id)
            case GradeFinished(phase_id=str(pid)):
                self._end(("grade", pid), ev.t, outcome=ev.outcome, passed=ev.passed)
            case GenerationStarted(request_id=str(rid)):
                self._start(
                    ("gen", rid),
                    "generator",
                    f"prefill {ev.model}",
                    ev.t,
                    "prefill",
                    model=ev.model,
                    phase_id=ev.phase_id,
                )
            case FirstToken(request_id=str(rid)):
                self._end(("gen", rid), ev.t)
                self._start(
                    ("gen", rid),
                    "generator",
                    f"decode {ev.model}",
                    ev.t,
                    "decode",
                    model=ev.model,
                    phase_id=ev.phase_id,
                )
            case GenerationFinished(request_id=str(rid)) | GenerationFailed(request_id=str(rid)):
                self._end(("gen", rid), ev.t)
            case LeaseGranted():
                self._start(
                    ("lease", ev.lease_id),
                    f"model {ev.model}",
                    "leased",
                    ev.t,
                    "lease",
                    phase_id=ev.phase_id,
                    load_s=ev.load_s,
                )
            case LeaseReleased():
                self._end(("lease", ev.lease_id), ev.t)
            case PrefetchStarted(model=str(m)):
                self._start(
                    ("prefetch", f"{m}/{ev.kind}"),
                    "prefetcher",
                    f"prefetch {ev.kind} {m}",
                    ev.t,
                    "prefetch",
                )
            case PrefetchFinished(model=str(m)):
                self._end(("prefetch", f"{m}/{ev.kind}"), ev.t, outcome=ev.outcome)
            case _:
                self._decision(ev)

    def _decision(self, ev: AnyEvent) -> None:
        match ev:
            case RouterDecided():
                self._instant("router", ev.decision, ev.t, text=ev.text)
            case SchedulePublished():
                self._instant("router", "schedule", ev.t, models=list(ev.models))
            case ReservationMade():
                self._instant(
                    "evictor",
                    f"reserve {ev.model}",
                    ev.t,
                    urgent=ev.urgent,
                    victims=list(ev.victims),
                    cancel=list(ev.cancel),
                )
            case ReservationRefused():
                self._instant("evictor", f"refuse {ev.model}", ev.t, reason=ev.reason)
            case KVHit() | KVMiss() | KVRestoreFailed() | KVSaved() | KVDropped():
                self._instant("kvcache", type(ev).__name__, ev.t)
            case _:
                pass

    def close(self, last_t: float) -> list[Span]:
        """Spans still open when the log ended, cut at ``last_t`` and marked unfinished."""
        out = [
            Span(
                lane=lane,
                name=name,
                start=t,
                end=max(t, last_t),
                kind=kind,
                args={**args, "unfinished": True},
            )
            for lane, name, t, kind, args in self._open.values()
        ]
        self._open.clear()
        return out


def lane_order(all_spans: Sequence[Span]) -> list[str]:
    """Actor lanes first (those in use), then model lanes by name."""
    used = {s.lane for s in all_spans}
    models = sorted(lane for lane in used if lane not in ACTOR_LANES)
    return [lane for lane in ACTOR_LANES if lane in used] + models

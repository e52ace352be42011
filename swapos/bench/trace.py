"""A Chrome trace from an event log (docs/reports.md).

:func:`chrome_trace` writes the spans of one log (:func:`swapos.bench.spans.spans`) as Trace
Event JSON for Perfetto or ``chrome://tracing``: one process for the actor lanes, one for the
model lanes. :func:`cluster_trace` puts the logs of several nodes on one time axis, each node a
process of its own.
"""

from __future__ import annotations

import datetime as dt
from collections.abc import Callable, Iterable, Sequence
from typing import Any

import msgspec

from swapos.bench.spans import Span, lane_order, spans
from swapos.messages.events import AnyEvent, RunStarted

_ACTORS_PID, _MODELS_PID = 1, 2


def _rows(items: Iterable[Span]) -> list[tuple[Span, int]]:
    """Pack a lane's spans into rows where none overlap (trace viewers need nesting).

    Instants need no room: they go on the first row.
    """
    ends: list[float] = []
    out = []
    for span in sorted(items, key=lambda s: s.start):
        if span.end is None:
            out.append((span, 0))
            continue
        row = next((i for i, e in enumerate(ends) if e <= span.start), len(ends))
        if row == len(ends):
            ends.append(span.end)
        else:
            ends[row] = span.end
        out.append((span, row))
    return out


def _us(t: float) -> float:
    return round(t * 1e6, 3)


def chrome_trace(events: Sequence[AnyEvent]) -> dict[str, Any]:
    """Trace Event JSON (``{"traceEvents": [...]}``) for ``events``; times in microseconds.

    Spans are complete events (``ph: "X"``), decisions instant events (``ph: "i"``), and
    metadata events (``ph: "M"``) name the two processes (actors, models) and every lane.
    A lane whose spans overlap (two tasks at once) is split into rows ``lane``, ``lane #2``.
    """
    all_spans = spans(events)
    trace: list[dict[str, Any]] = [
        _meta(_ACTORS_PID, 0, "process_name", "actors"),
        _meta(_MODELS_PID, 0, "process_name", "models"),
    ]
    trace += _lanes(all_spans, lambda lane: _MODELS_PID if lane.startswith("model ") else 1)
    return {"traceEvents": trace, "displayTimeUnit": "ms"}


def node_of(events: Sequence[AnyEvent], default: str) -> str:
    """The ``node`` a log's header names (a cluster worker's log), else ``default``."""
    header = events[0] if events else None
    if isinstance(header, RunStarted):
        return header.host.get("node", default)
    return default


def start_offsets(logs: Sequence[Sequence[AnyEvent]]) -> list[float]:
    """Seconds from the earliest log's start to each log's, from the headers' ``run_at``
    (whole seconds: the logs of different machines share no finer clock)."""
    starts = []
    for events in logs:
        header = events[0] if events else None
        at = header.run_at if isinstance(header, RunStarted) else ""
        try:
            starts.append(dt.datetime.fromisoformat(at).timestamp())
        except ValueError:
            starts.append(0.0)
    first = min(starts, default=0.0)
    return [s - first for s in starts]


def cluster_trace(logs: Sequence[tuple[str, Sequence[AnyEvent]]]) -> dict[str, Any]:
    """One trace for a set of event logs (``(node, events)``), each node its own process
    (its actor lanes, then its model lanes), placed on a common time axis by
    :func:`start_offsets`."""
    trace: list[dict[str, Any]] = []
    offsets = start_offsets([events for _, events in logs])
    for pid, ((node, events), offset) in enumerate(zip(logs, offsets, strict=True), start=1):
        shifted = [msgspec.structs.replace(s, start=s.start + offset,
                                           end=None if s.end is None else s.end + offset)
                   for s in spans(events)]  # fmt: skip
        trace.append(_meta(pid, 0, "process_name", node))
        trace.append(_meta(pid, 0, "process_sort_index", pid))
        trace += _lanes(shifted, _always(pid))
    return {"traceEvents": trace, "displayTimeUnit": "ms"}


def _always(pid: int) -> Callable[[str], int]:
    return lambda _lane: pid


def _lanes(all_spans: Sequence[Span], pid_of: Callable[[str], int]) -> list[dict[str, Any]]:
    """Thread metadata and events of every lane, rows split where spans overlap."""
    trace: list[dict[str, Any]] = []
    tid = 0
    for lane in lane_order(all_spans):
        pid = pid_of(lane)
        placed = _rows(s for s in all_spans if s.lane == lane)
        nrows = max((row for _, row in placed), default=0) + 1
        for row in range(nrows):
            label = lane if row == 0 else f"{lane} #{row + 1}"
            trace.append(_meta(pid, tid + 1 + row, "thread_name", label))
            trace.append(_meta(pid, tid + 1 + row, "thread_sort_index", tid + row))
        for span, row in placed:
            trace.append(_event(span, pid, tid + 1 + row))
        tid += nrows
    return trace


def _meta(pid: int, tid: int, name: str, value: str | int) -> dict[str, Any]:
    key = "sort_index" if name.endswith("sort_index") else "name"
    return {"ph": "M", "name": name, "ts": 0, "pid": pid, "tid": tid, "args": {key: value}}


def _event(span: Span, pid: int, tid: int) -> dict[str, Any]:
    base: dict[str, Any] = {
        "name": span.name,
        "cat": span.kind,
        "ts": _us(span.start),
        "pid": pid,
        "tid": tid,
        "args": span.args,
    }
    if span.end is None:
        return {**base, "ph": "i", "s": "t"}
    return {**base, "ph": "X", "dur": max(0.0, _us(span.end) - _us(span.start))}

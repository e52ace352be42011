"""Replay an event log: rebuild every record, print the phases and swaps, export a trace.

``python -m swapos.bench replay EVENTS.jsonl... [--trace T.json] [--plot T.png] [--json S.json]``

Several logs (a cluster run's workers, ``<mode>-<arm>/events-*.jsonl``) replay as one run:
their tasks together, counters added up; the trace shows each node as its own process.

Records are rebuilt by the same :class:`~swapos.records.aggregate.Aggregator` the Recorder
runs live, so a replayed summary equals the live one exactly (docs/events.md).
"""

from __future__ import annotations

import argparse
import json
from collections.abc import Callable, Sequence
from pathlib import Path

import msgspec
import structlog
from rich.console import Console
from rich.markup import escape
from rich.table import Table

from swapos.bench.results import RunInfo, add_counters, info_of
from swapos.bench.results import summarize as summarize_results
from swapos.bench.spans import Swap, swaps
from swapos.bench.trace import chrome_trace, cluster_trace, node_of
from swapos.errors import EventLogError
from swapos.messages.events import (
    EVENT_DECODER,
    SCHEMA_VERSION,
    AnyEvent,
    RunFinished,
    RunStarted,
    TaskFinished,
    TaskStarted,
    event_decoder,
)
from swapos.records.aggregate import Aggregator, run_key
from swapos.records.schema import RunSummary

log = structlog.get_logger(__name__)

_HEADER = msgspec.json.Decoder(dict[str, object])


def load_events(path: str | Path) -> tuple[list[AnyEvent], list[str]]:
    """Decode every line of the log at ``path`` with the typed event decoder.

    Returns:
        The events in log order, and warnings (a truncated last line, as left by a crash
        mid-write, is dropped and reported here).

    Raises:
        EventLogError: the file cannot be read, is empty, does not start with a
            ``RunStarted`` header, was written by a newer schema (older ones are upgraded
            line by line: :func:`~swapos.messages.events.event_decoder`), holds a corrupt line
            before its last, or holds more than one run.
    """
    path = Path(path)
    try:
        data = path.read_bytes()
    except OSError as exc:
        raise EventLogError(f"cannot read event log {path}: {exc}") from exc
    lines = data.split(b"\n")
    if lines and not lines[-1]:
        lines.pop()  # the newline after the last complete line
    events: list[AnyEvent] = []
    warnings: list[str] = []
    decode: Callable[[bytes], AnyEvent] = EVENT_DECODER.decode  # until the header's version
    for i, line in enumerate(lines, start=1):
        if not line.strip():
            continue
        try:
            ev = decode(line)
        except msgspec.DecodeError as exc:
            if i == 1:
                _check_newer(path, line)
            if i == len(lines):
                warnings.append(
                    f"line {i} of {path} is truncated or corrupt and was ignored ({exc}); "
                    "the run probably stopped mid-write"
                )
                log.warning("replay.truncated_last_line", path=str(path), line=i)
                break
            raise EventLogError(
                f"line {i} of {path} is not a valid event ({exc}); the log is corrupt before "
                "its end: restore it from a copy, or cut it at this line to replay what precedes"
            ) from exc
        _check_order(path, i, ev, events)
        if isinstance(ev, RunStarted):
            decode = event_decoder(ev.schema_version)
        events.append(ev)
    if not events:
        raise EventLogError(f"event log {path} holds no events; was the run started?")
    if not isinstance(events[-1], RunFinished):
        warnings.append(unfinished(path, events))
    return events, warnings


def unfinished(path: Path, events: list[AnyEvent]) -> str:
    """What an event log without ``RunFinished`` holds: the run was killed or is running."""
    started = {run_key(e): e.task_id for e in events if isinstance(e, TaskStarted)}
    finished = {run_key(e) for e in events if isinstance(e, TaskFinished)}
    open_ = sorted(t for r, t in started.items() if r not in finished and t)
    return (
        f"{path} has no RunFinished event: the run was killed (or is still running) "
        f"{events[-1].t:.1f}s after it started; it holds {len(finished)} finished task(s)"
        + (f" and {len(open_)} unfinished ({', '.join(open_)}), left out" if open_ else "")
    )


def _check_order(path: Path, line: int, ev: AnyEvent, before: list[AnyEvent]) -> None:
    if not before:
        if not isinstance(ev, RunStarted):
            raise EventLogError(
                f"{path} does not start with a RunStarted header (line 1 is {type(ev).__name__}); "
                "is it a SwapOS event log?"
            )
        _check_version(path, ev.schema_version)
    elif isinstance(ev, RunStarted):
        raise EventLogError(
            f"line {line} of {path} starts a second run (a log holds one run; SwapOS keeps an "
            "earlier run's log under another name, older versions appended to it): split this "
            "file at that line and replay each part"
        )


def _check_newer(path: Path, line: bytes) -> None:
    """A header the current decoder rejects may be from a newer schema: say so if it is."""
    try:
        version = _HEADER.decode(line).get("schema_version")
    except msgspec.DecodeError:
        return
    if isinstance(version, int):
        _check_version(path, version)


def _check_version(path: Path, version: int) -> None:
    if version > SCHEMA_VERSION:
        raise EventLogError(
            f"{path} was written with event schema {version}, newer than this SwapOS "
            f"understands ({SCHEMA_VERSION}): upgrade swapos to replay it"
        )


def summarize(events: Sequence[AnyEvent]) -> RunSummary:
    """Fold ``events`` through the Aggregator, exactly as the Recorder does live."""
    agg = Aggregator()
    for ev in events:
        agg.feed(ev)
    return agg.summary()


def replay(path: str | Path) -> RunSummary:
    """The run summary rebuilt from the event log at ``path`` (see :func:`load_events`)."""
    events, _ = load_events(path)
    return summarize(events)


def merge(summaries: Sequence[RunSummary]) -> RunSummary:
    """One summary of several runs (the logs of a cluster run's workers, or of resumed
    sessions): their finished tasks together, counters added up, ``run_at`` the first's.
    Every aggregate is recomputed by the same ``summarize`` as a live run's."""
    if len(summaries) == 1:
        return summaries[0]
    info = RunInfo()
    for s in summaries:
        info = add_counters(info, info_of(s)) if info.run_at else info_of(s)
    return summarize_results([r for s in summaries for r in s.results], info)


def load_set(paths: Sequence[Path]) -> list[tuple[str, list[AnyEvent], list[str]]]:
    """Each log of ``paths`` as ``(node, events, warnings)``; ``node`` from its header
    (a cluster worker's), else the file name."""
    out = []
    for path in paths:
        events, warnings = load_events(path)
        out.append((node_of(events, Path(path).stem), events, warnings))
    return out


# --- report -------------------------------------------------------------------------------


def _s(x: float) -> str:
    return f"{x:.3f}"


def phase_table(summary: RunSummary) -> Table:
    """One row per phase of every finished task."""
    table = Table(title="Phases (seconds)")
    for col in (
        "task",
        "phase",
        "model",
        "load",
        "hidden",
        "evict",
        "ttft",
        "prefill",
        "prefill_s",
        "kv_restored",
        "tokens",
        "tok/s",
        "total",
        "outcome",
    ):
        table.add_column(col, justify="left" if col in ("task", "phase", "model") else "right")
    for result in summary.results:
        for p in result.phases:
            table.add_row(
                p.task_id,
                p.phase,
                p.model or "-",
                _s(p.load_s),
                _s(p.load_hidden_s),
                _s(p.evict_s),
                _s(p.ttft_s),
                str(p.prefill_tokens),
                _s(p.prefill_s),
                str(p.kv_restored_tokens),
                str(p.tokens),
                f"{p.tok_s:.1f}",
                _s(p.total_s),
                p.outcome,
            )
    return table


def swap_table(items: Sequence[Swap]) -> Table:
    """One row per load and eviction."""
    table = Table(title="Swaps (seconds since run start)")
    for col in ("kind", "model", "start", "end", "duration", "speculative", "outcome", "reason"):
        table.add_column(col, justify="right" if col in ("start", "end", "duration") else "left")
    for sw in items:
        table.add_row(
            sw.kind,
            sw.model,
            _s(sw.start),
            _s(sw.end),
            _s(sw.duration_s),
            "yes" if sw.speculative else "no",
            sw.outcome,
            sw.reason,
        )
    return table


def summary_table(summary: RunSummary) -> Table:
    """The run's aggregates (everything but the per-task results)."""
    table = Table(title=f"Run {summary.run_at} ({summary.mode}, profile {summary.profile})")
    table.add_column("metric")
    table.add_column("value", justify="right")
    for key, value in msgspec.to_builtins(summary).items():
        if key in ("results", "host", "per_category"):
            continue
        table.add_row(key, f"{value:.4f}" if isinstance(value, float) else str(value))
    return table


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "events", type=Path, nargs="+", help="the run's events.jsonl (or a cluster run's set)"
    )
    parser.add_argument("--trace", type=Path, help="write a Chrome trace (Perfetto) here")
    parser.add_argument("--plot", type=Path, help="write a timeline picture here (needs [plot])")
    parser.add_argument("--json", type=Path, help="write the rebuilt run summary here")
    parser.add_argument("--html", type=Path, help="write a self-contained HTML page here")


def main(args: argparse.Namespace) -> int:
    """Rebuild a run from its event log; print phases, swaps and summary; export a trace."""
    console = Console()
    if not console.is_terminal:  # piped: do not squeeze the tables into 80 columns
        console.width = max(console.width, 160)
    logs = load_set(args.events)
    for _, _, warnings in logs:
        for warning in warnings:
            console.print(f"[yellow]warning:[/yellow] {escape(warning)}")
    summary = merge([summarize(events) for _, events, _ in logs])
    console.print(phase_table(summary))
    for node, events, _ in logs:
        table = swap_table(swaps(events))
        if len(logs) > 1:
            table.title = f"{table.title} on {node}"
        console.print(table)
    console.print(summary_table(summary))
    if args.json is not None:
        args.json.write_bytes(msgspec.json.format(msgspec.json.encode(summary)))
        console.print(f"summary written to {args.json}")
    if args.trace is not None:
        if len(logs) == 1:
            trace = chrome_trace(logs[0][1])
        else:
            trace = cluster_trace([(node, events) for node, events, _ in logs])
        args.trace.write_text(json.dumps(trace))
        console.print(f"trace written to {args.trace} (open it in https://ui.perfetto.dev)")
    if args.html is not None:
        from swapos.bench.html import replay_page

        page = replay_page(summary, [(node, events) for node, events, _ in logs])
        args.html.write_text(page, encoding="utf-8")
        console.print(f"page written to {args.html}")
    if args.plot is not None and len(logs) > 1:
        console.print("no timeline picture for a set of logs: open the trace instead")
        return 0
    if args.plot is not None:
        from swapos.bench.plot import plot_timeline

        plot_timeline(logs[0][1], args.plot)
        console.print(f"timeline written to {args.plot}")
    return 0

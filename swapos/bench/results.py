"""Benchmark results files: a :class:`RunSummary` per mode/arm, rebuilt from its tasks.

A benchmark may be interrupted and resumed, so its summary cannot come from one live
Recorder: :func:`summarize` recomputes every aggregate from the :class:`TaskResult` list
(old results plus new ones), exactly as :meth:`Aggregator.summary` does from events. The
few figures that are not per task (the header, the run's wall time, load/eviction/KV
counters) travel in a :class:`RunInfo`.
"""

from __future__ import annotations

import os
import statistics
from collections.abc import Sequence
from pathlib import Path

import msgspec

from swapos.errors import EventLogError
from swapos.records.schema import CategoryStats, RunSummary, TaskResult


class RunInfo(msgspec.Struct, kw_only=True):
    """What a run summary holds beyond its tasks: header facts and run-wide counters."""

    run_at: str = ""
    mode: str = ""
    profile: str = ""
    models: list[str] = msgspec.field(default_factory=list)
    budget_bytes: int = 0
    host: dict[str, str] = msgspec.field(default_factory=dict)
    wall_clock_s: float = 0.0
    loads: int = 0
    evictions: int = 0
    kv_hits: int = 0
    kv_misses: int = 0
    kv_saves: int = 0


COUNTERS = ("wall_clock_s", "loads", "evictions", "kv_hits", "kv_misses", "kv_saves")
"""The :class:`RunInfo` fields that add up across resumed sessions."""


def info_of(summary: RunSummary) -> RunInfo:
    """The :class:`RunInfo` part of ``summary``."""
    return RunInfo(
        run_at=summary.run_at,
        mode=summary.mode,
        profile=summary.profile,
        models=list(summary.models),
        budget_bytes=summary.budget_bytes,
        host=dict(summary.host),
        **{name: getattr(summary, name) for name in COUNTERS},
    )


def add_counters(base: RunInfo, extra: RunInfo) -> RunInfo:
    """``extra`` with every counter of :data:`COUNTERS` increased by ``base``'s; the header
    facts (``run_at`` first of all) are ``base``'s when it has them."""
    merged = msgspec.structs.replace(
        extra, **{name: getattr(base, name) + getattr(extra, name) for name in COUNTERS}
    )
    if base.run_at:
        merged.run_at = base.run_at
    return merged


def summarize(results: Sequence[TaskResult], info: RunInfo) -> RunSummary:
    """The run summary of ``results`` (in order), every aggregate computed from them.

    Agrees with :meth:`swapos.records.aggregate.Aggregator.summary` for the same finished
    tasks and the same ``info`` (a test checks it).
    """
    results = list(results)
    phases = [p for r in results for p in r.phases]
    generated = [p for p in phases if p.model is not None]
    paid = sum(p.load_s for p in generated)
    hidden = sum(p.load_hidden_s for p in generated)
    passed = sum(r.passed for r in results)
    per_cat: dict[str, CategoryStats] = {}
    for r in results:
        c = per_cat.setdefault(r.category or "none", CategoryStats())
        c.tasks += 1
        c.passed += r.passed
    for c in per_cat.values():
        c.pass_rate = c.passed / c.tasks
    n = len(results)
    return RunSummary(
        run_at=info.run_at,
        mode=info.mode,
        profile=info.profile,
        models=list(info.models),
        budget_bytes=info.budget_bytes,
        host=dict(info.host),
        tasks_total=n,
        tasks_passed=passed,
        pass_rate=passed / n if n else 0.0,
        pass_at_1=sum(r.pass_at_1 for r in results) / n if n else 0.0,
        per_category=per_cat,
        wall_clock_s=info.wall_clock_s,
        mean_wall_clock_s=_mean([r.wall_clock_s for r in results]),
        phases_total=len(phases),
        mean_load_s=_mean([p.load_s for p in generated]),
        mean_evict_s=_mean([p.evict_s for p in generated]),
        mean_ttft_s=_mean([p.ttft_s for p in generated]),
        total_load_s=paid,
        total_load_hidden_s=hidden,
        total_evict_s=sum(p.evict_s for p in generated),
        load_hidden_fraction=hidden / (hidden + paid) if hidden + paid > 0 else 0.0,
        loads=info.loads,
        evictions=info.evictions,
        prefill_tokens=sum(p.prefill_tokens for p in generated),
        prefill_s=sum(p.prefill_s for p in generated),
        kv_restored_tokens=sum(p.kv_restored_tokens for p in generated),
        kv_hits=info.kv_hits,
        kv_misses=info.kv_misses,
        kv_saves=info.kv_saves,
        peak_rss_bytes=max((p.peak_rss_bytes for p in phases), default=0),
        results=results,
    )


def _mean(values: list[float]) -> float:
    return statistics.fmean(values) if values else 0.0


def read_summary(path: Path) -> RunSummary | None:
    """The summary stored at ``path``, or None if there is none.

    Raises:
        EventLogError: the file exists but is not a valid results file (the message says
            what to do).
    """
    try:
        data = path.read_bytes()
    except FileNotFoundError:
        return None
    except OSError as exc:
        raise EventLogError(f"cannot read results file {path}: {exc}") from exc
    try:
        return msgspec.json.decode(data, type=RunSummary)
    except (msgspec.DecodeError, msgspec.ValidationError) as exc:
        raise EventLogError(
            f"results file {path} is corrupt ({exc}): delete it to rerun that mode/arm from "
            "scratch, or choose another --out"
        ) from exc


def write_atomic(path: Path, data: bytes) -> None:
    """Write ``data`` to ``path`` via a temporary file and a rename, so a reader (or a
    crash) never sees half a file."""
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(f".{path.name}.tmp")
    with tmp.open("wb") as f:
        f.write(data)
        f.flush()
        os.fsync(f.fileno())
    tmp.replace(path)


def write_summary(path: Path, summary: RunSummary) -> None:
    """Store ``summary`` at ``path`` as indented JSON, atomically."""
    write_atomic(path, msgspec.json.format(msgspec.json.encode(summary), indent=2) + b"\n")

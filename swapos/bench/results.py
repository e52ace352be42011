"""Benchmark results files: a :class:`RunSummary` per mode/arm, rebuilt from its tasks.

A benchmark may be interrupted and resumed, so its summary cannot come from one live
Recorder: :func:`~swapos.records.summary.summarize` (the same function the Recorder's
aggregator uses) recomputes every aggregate from the :class:`TaskResult` list (old results
plus new ones). The few figures that are not per task travel in a :class:`RunInfo`.
"""

from __future__ import annotations

import os
from pathlib import Path

import msgspec

from swapos.errors import EventLogError
from swapos.records.schema import RunInfo, RunSummary
from swapos.records.summary import info_of, summarize

__all__ = [
    "RunInfo",
    "add_counters",
    "info_of",
    "read_summary",
    "summarize",
    "write_atomic",
    "write_summary",
]

COUNTERS = ("wall_clock_s", "loads", "evictions", "kv_hits", "kv_misses", "kv_saves")
"""The :class:`RunInfo` fields that add up across resumed sessions."""


def add_counters(base: RunInfo, extra: RunInfo) -> RunInfo:
    """``extra`` with every counter of :data:`COUNTERS` increased by ``base``'s; the header
    facts (``run_at`` first of all) are ``base``'s when it has them."""
    merged = msgspec.structs.replace(
        extra, **{name: getattr(base, name) + getattr(extra, name) for name in COUNTERS}
    )
    if base.run_at:
        merged.run_at = base.run_at
    return merged


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

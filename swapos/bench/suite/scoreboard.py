"""What a suite benchmark has finished, per (mode, arm), and the results files that record it.

A suite run is a set of *triples* (task, mode, arm). The :class:`Scoreboard` knows which are
finished (read back from ``<out>/<mode>-<arm>/results.json`` on ``--resume``), commits each new
one by rewriting that file atomically (so a crash or a kill loses at most the triples in
flight) after writing the task's final capsule to ``capsules/<task_id>.json`` beside it (the
code of every candidate, its feedback and every decision: what the event log does not hold),
and rebuilds every summary with the same :func:`~swapos.bench.results.summarize`.
The local runner (:mod:`swapos.bench.suite.session`) and the Ray driver
(:mod:`swapos.cluster.driver`) share it, so their results files are built the same way.

A mode/arm may be served by several systems at once (one per Ray worker) and over several
sessions (resumes): each *source* (a system) reports its own run-wide counters
(:class:`~swapos.records.summary.RunInfo`: loads, evictions, KV counts, time spent in the
system), and the scoreboard adds them up with those of the sessions before.
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

from swapos.bench.compare import Key, label
from swapos.bench.results import (
    RunInfo,
    add_counters,
    info_of,
    read_summary,
    summarize,
    write_atomic,
    write_summary,
)
from swapos.data.task import Task
from swapos.errors import SwapOSError
from swapos.records.schema import RunSummary, TaskResult


def rotated(keys: Sequence[Key], index: int) -> list[Key]:
    """``keys`` rotated by ``index`` (the order a task's mode/arms run in, so that machine
    drift spreads over all of them)."""
    rot = index % len(keys) if keys else 0
    return [*keys[rot:], *keys[:rot]]


def previous_runs(out: Path, keys: Sequence[Key], resume: bool) -> dict[Key, RunSummary]:
    """The results already in ``out`` for ``keys``.

    Raises:
        SwapOSError: ``out`` holds a run and ``resume`` is False; a results file is from
            another mode. :class:`~swapos.errors.EventLogError`: a results file is corrupt.
    """
    found: dict[Key, RunSummary] = {}
    for key in keys:
        folder = out / label(key)
        if not resume:
            if (folder / "results.json").exists() or any(folder.glob("events*.jsonl")):
                raise SwapOSError(
                    f"{folder} holds a previous run: pass --resume to continue it, or choose "
                    "another --out"
                )
            continue
        summary = read_summary(folder / "results.json")
        if summary is not None:
            if summary.mode and summary.mode != key[0]:
                raise SwapOSError(
                    f"{folder / 'results.json'} is a {summary.mode!r} run, not {key[0]!r}: "
                    "delete it or choose another --out"
                )
            found[key] = summary
    return found


class Scoreboard:
    """The finished triples of a suite run and their results files.

    Not thread-safe: one event loop commits.
    """

    def __init__(
        self, out: Path, keys: Sequence[Key], tasks: Sequence[Task], previous: dict[Key, RunSummary]
    ) -> None:
        self.out = out
        self.keys = list(keys)
        self._order = {t.task_id: i for i, t in enumerate(tasks)}
        self._base = {k: info_of(previous[k]) if k in previous else RunInfo() for k in keys}
        self._results = {k: list(previous[k].results) if k in previous else [] for k in keys}
        self._done = {k: {r.task_id for r in self._results[k]} for k in keys}
        self._sources: dict[Key, dict[str, RunInfo]] = {k: {} for k in keys}
        self.summaries: dict[Key, RunSummary] = dict(previous)
        self.committed = 0
        """Triples committed by this session (not counting those read back)."""

    @classmethod
    def open(
        cls, out: Path, keys: Sequence[Key], tasks: Sequence[Task], resume: bool
    ) -> Scoreboard:
        """The scoreboard of ``out`` (see :func:`previous_runs` for what it raises)."""
        return cls(out, keys, tasks, previous_runs(out, keys, resume))

    def is_done(self, task_id: str, key: Key) -> bool:
        return task_id in self._done[key]

    def pending(self, task: Task, order: Sequence[Key] | None = None) -> list[Key]:
        """The mode/arms (in ``order``, default :attr:`keys`) that have not finished ``task``."""
        keys = order if order is not None else self.keys
        return [k for k in keys if not self.is_done(task.task_id, k)]

    def todo(self, tasks: Sequence[Task]) -> dict[Key, list[Task]]:
        """Per mode/arm, the tasks of ``tasks`` it has not finished, in order."""
        return {k: [t for t in tasks if not self.is_done(t.task_id, k)] for k in self.keys}

    def remaining(self, tasks: Sequence[Task]) -> int:
        """Triples of ``tasks`` not finished yet."""
        return sum(len(v) for v in self.todo(tasks).values())

    def commit(
        self, key: Key, result: TaskResult, live: RunInfo, source: str = "", capsule: bytes = b""
    ) -> RunSummary:
        """Record ``result`` of ``key`` and rewrite its ``results.json``; its ``capsule`` (the
        task's final capsule JSON: every candidate's code, feedback and decision) goes to
        ``capsules/<task_id>.json`` beside it, first.

        Args:
            key: the mode/arm.
            result: the finished task.
            live: the run-wide counters of the system that ran it (cumulative for that
                system: each call replaces the previous report of ``source``).
            source: which system (one per Ray worker; "" for a local run).
            capsule: the task's final capsule (none written when empty).

        Raises:
            SwapOSError: ``result``'s task was already committed for ``key`` (a bug of the
                caller: a triple is never counted twice).
        """
        if self.is_done(result.task_id, key):
            raise SwapOSError(
                f"{result.task_id} in {label(key)} was already recorded: a triple is never "
                "counted twice (this is a bug in the runner)"
            )
        if capsule:
            write_atomic(self.out / label(key) / "capsules" / f"{result.task_id}.json", capsule)
        results = self._results[key]
        results.append(result)
        results.sort(key=lambda r: self._order.get(r.task_id, -1))
        self._done[key].add(result.task_id)
        self._sources[key][source] = live
        summary = summarize(results, self.info(key))
        self.summaries[key] = summary
        write_summary(self.out / label(key) / "results.json", summary)
        self.committed += 1
        return summary

    def info(self, key: Key) -> RunInfo:
        """The run-wide facts of ``key``: the previous sessions' counters plus every source's
        of this one; ``run_at`` is the first session's, the other header facts (host,
        models, budget) those of the last source (in the order they first reported)."""
        merged = self._base[key]
        for live in self._sources[key].values():
            merged = add_counters(merged, live)
        return merged

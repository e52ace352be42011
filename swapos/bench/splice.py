"""``python -m swapos.bench splice FULL_RUN RERUN [RERUN ...]``: reruns of some tasks laid
over a full suite run, newest last, and the figures before and after each.

A rerun is the ``--out`` folder of a ``bench run`` of chosen tasks (``--tasks``), pipeline
arm; its results replace the earlier ones for the same task ids, and the single arm is the
full run's (or ``--single DIR``'s: a rerun of the single arm on every task). For each rerun
task it prints how it ended before and now and the first phase (attempt, name, model,
prompt and generated tokens, outcome) that differs from the run it replaces; then the
spliced figures: passes, pass@1, passes by a draw, retry rescues, mean wall, McNemar
against the single arm and the first graded candidate against it.

A splice is diagnosis, not a result (docs/benchmarks.md): the runs started with other KV
caches and shared the machine with other work, so a near-tie may decode otherwise. Only
per-task figures are spliced; run-wide counters (loads, hidden fraction) belong to one
system's session.
"""

from __future__ import annotations

import argparse
from collections.abc import Sequence
from pathlib import Path

from swapos.bench.results import read_summary
from swapos.bench.stats import mcnemar, mcnemar_exact
from swapos.errors import SwapOSError
from swapos.records.schema import RunInfo, RunSummary, TaskResult
from swapos.records.summary import summarize


def arm_results(folder: Path, mode: str, arm: str) -> RunSummary:
    """The ``results.json`` of ``mode``-``arm`` in a ``bench run`` output ``folder``.

    Raises:
        SwapOSError: there is none. :class:`~swapos.errors.EventLogError`: it is corrupt.
    """
    path = folder / f"{mode}-{arm}" / "results.json"
    summary = read_summary(path)
    if summary is None:
        raise SwapOSError(f"no {path}: pass the --out folder of a bench run with that mode/arm")
    return summary


def first_difference(before: TaskResult, now: TaskResult) -> str:
    """The first phase (``attempt N name``) of ``now`` that differs from ``before``'s:
    ``none`` when every phase is the same, ``the end`` when one run only has more phases."""

    def key(r: TaskResult) -> list[tuple[object, ...]]:
        return [
            (p.attempt, p.phase, p.model, p.prompt_tokens, p.tokens, p.outcome) for p in r.phases
        ]

    for x, y in zip(key(before), key(now), strict=False):
        if x != y:
            return f"attempt {y[0]} {y[1]}"
    return "none" if len(before.phases) == len(now.phases) else "the end"


def splice(base: Sequence[TaskResult], rerun: Sequence[TaskResult]) -> list[TaskResult]:
    """``base`` with each task of ``rerun`` replaced by the rerun's result, in ``base``'s order.

    Raises:
        SwapOSError: a rerun task is not in ``base`` (a rerun of another suite).
    """
    known = {r.task_id for r in base}
    stray = [r.task_id for r in rerun if r.task_id not in known]
    if stray:
        raise SwapOSError(f"rerun tasks not in the full run: {', '.join(stray)}")
    redone = {r.task_id: r for r in rerun}
    return [redone.get(r.task_id, r) for r in base]


def figures(name: str, results: Sequence[TaskResult], single: dict[str, bool]) -> list[str]:
    """Two lines: the pass figures of ``results``, and the paired tests against ``single``
    (task id -> passed) on the tasks both have; one line when ``single`` is empty."""
    s = summarize(results, RunInfo())
    n, p1 = s.tasks_total, round(s.pass_at_1 * s.tasks_total)
    head = (
        f"{name}: passed {s.tasks_passed}/{n} ({s.pass_rate:.1%}), pass@1 {p1}, "
        f"draw {s.draw_rescued}, retry rescue {s.retry_rescued}/{n - p1} "
        f"({s.retry_rescue_rate:.1%}), mean wall {s.mean_wall_clock_s:.1f} s"
    )
    if not single:  # no single arm to pair with
        return [head]
    shared = [r for r in results if r.task_id in single]
    m = mcnemar("pipeline", {r.task_id: r.passed for r in shared}, "single", single)
    better = sum(r.pass_at_1 and not single[r.task_id] for r in shared)
    worse = sum(single[r.task_id] and not r.pass_at_1 for r in shared)
    return [
        head,
        f"  McNemar vs single: {m.only_a}-{m.only_b}, p = {m.p_value:.2g}; first graded "
        f"candidate vs single: {better} better, {worse} worse "
        f"(p = {mcnemar_exact(better, worse):.2g})",
    ]


def rerun_lines(
    name: str, current: dict[str, TaskResult], redone: Sequence[TaskResult]
) -> list[str]:
    """What one rerun changed, task by task, against the results it replaces."""

    def ending(r: TaskResult) -> str:
        return f"{'pass' if r.passed else 'fail'} (attempt {r.passed_attempt})"

    lines = [f"{name}: {len(redone)} tasks rerun"]
    for r in redone:
        before = current[r.task_id]
        lines.append(
            f"  {r.task_id}: before {ending(before)}, now {ending(r)}; "
            f"first differing phase: {first_difference(before, r)}"
        )
    gained = [r.task_id for r in redone if r.passed and not current[r.task_id].passed]
    lost = [r.task_id for r in redone if current[r.task_id].passed and not r.passed]
    lines.append(
        f"  newly passed: {', '.join(gained) or '-'} | newly failed: {', '.join(lost) or '-'}"
    )
    return lines


def splice_report(
    full_name: str,
    full: RunSummary,
    single: RunSummary | None,
    reruns: Sequence[tuple[str, RunSummary]],
) -> list[str]:
    """The whole report: the full run's figures, then each rerun's changes and the figures
    spliced so far (reruns in the order given, newest last).

    Raises:
        SwapOSError: a rerun holds a task the full run does not.
    """
    passed = {r.task_id: r.passed for r in single.results} if single is not None else {}
    results = list(full.results)
    lines = figures(full_name, results, passed)
    for name, rerun in reruns:
        current = {r.task_id: r for r in results}
        results = splice(results, rerun.results)
        lines += ["", *rerun_lines(name, current, rerun.results)]
        lines += figures(f"  spliced with {name}", results, passed)
    return lines


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("full", type=Path, metavar="FULL_RUN", help="--out of the full run")
    parser.add_argument(
        "reruns", type=Path, nargs="+", metavar="RERUN", help="--out of each rerun, newest last"
    )
    parser.add_argument("--mode", default="overlap", help="the mode of every run (default overlap)")
    parser.add_argument(
        "--single",
        type=Path,
        metavar="DIR",
        help="take the single arm from DIR, not FULL_RUN (without one: no paired test)",
    )


def _optional_single(folder: Path, mode: str) -> RunSummary | None:
    """The full run's single arm, or None when it ran none (then no paired test is printed:
    e.g. two runs of one arm compared task by task)."""
    if not (folder / f"{mode}-single" / "results.json").is_file():
        return None
    return arm_results(folder, mode, "single")


def main(args: argparse.Namespace) -> int:
    """Lay reruns of some tasks over a full suite run; print the figures after each."""
    full = arm_results(args.full, args.mode, "pipeline")
    single = (
        arm_results(args.single, args.mode, "single")
        if args.single is not None
        else _optional_single(args.full, args.mode)
    )
    reruns = [(p.name, arm_results(p, args.mode, "pipeline")) for p in args.reruns]
    print("\n".join(splice_report(args.full.name, full, single, reruns)))
    return 0

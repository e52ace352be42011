"""HTML reports: one self-contained page (no script, nothing fetched) per suite run
(``bench report DIR --html``), per task (``run --html``) and per event log
(``bench replay LOG --html``). ``docs/reports.md`` says how to read them.

The numbers are the markdown report's, from the same table functions
(:mod:`swapos.bench.report_tables`); the timeline is the live page's fold
(:mod:`swapos.records.timeline`) drawn as SVG; each task shows its phases and its capsule.
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

from swapos.bench import report_tables as tables
from swapos.bench.compare import Comparison, Key, label
from swapos.bench.html_page import details, esc, facts, note, page, section, table
from swapos.bench.html_task import read_capsule, task_block
from swapos.bench.html_timeline import timeline_svg
from swapos.capsule.schema import Capsule
from swapos.messages.events import AnyEvent
from swapos.records.schema import RunSummary, TaskResult

TRACE_NOTE = (
    "The Chrome trace beside this page (trace-<mode>-<arm>.json) opens in Perfetto or "
    "chrome://tracing with every actor's lane as well."
)


def suite_page(
    folder: Path,
    summaries: dict[Key, RunSummary],
    comparison: Comparison,
    manifest: dict[str, object],
    timelines: Sequence[tuple[str, Sequence[AnyEvent]]],
) -> str:
    """The HTML report of the suite benchmark in ``folder``.

    Args:
        folder: the ``--out`` folder (each task's capsule is read from it).
        summaries, comparison, manifest: what the markdown report is made of.
        timelines: ``(mode-arm, events)`` of the event logs to draw.
    """
    body = [
        "<h1>SwapOS suite benchmark</h1>",
        facts(tables.header_facts(summaries, manifest)),
        section("Pass rates", table(tables.arms_table(summaries))),
        section("Pass rate per category", table(tables.categories_table(summaries))),
        section(
            "Paired pass/fail tests (exact McNemar, two-sided)",
            table(tables.mcnemar_table(comparison)),
        ),
        section(
            "Wall-time ratios (per task, paired)",
            table(tables.ratios_table(comparison)),
            note(tables.bootstrap_note(comparison)),
        ),
        section("Hidden-load fraction per mode", table(tables.hidden_table(comparison))),
        section(
            "Where a task's time goes (mean per task)", table(tables.breakdown_table(comparison))
        ),
        section("Per phase (means)", table(tables.phases_table(summaries))),
    ]
    for name, events in timelines:
        body.append(section(f"Timeline ({name})", timeline_svg(events), note(TRACE_NOTE)))
    body.append(section("Tasks", *(_arm_tasks(folder, k, s) for k, s in summaries.items())))
    return page("SwapOS suite benchmark", body)


def _arm_tasks(folder: Path, key: Key, summary: RunSummary) -> str:
    capsules = folder / label(key) / "capsules"
    blocks = [task_block(r, read_capsule(capsules / f"{r.task_id}.json")) for r in summary.results]
    passed = sum(r.passed for r in summary.results)
    return details(f"{label(key)}: {passed}/{len(summary.results)} passed", *blocks)


def task_page(result: TaskResult, capsule: Capsule | str | None, events: Sequence[AnyEvent]) -> str:
    """The HTML page of one task run (``swapos run --html``)."""
    body = [
        f"<h1>SwapOS task {esc(result.task_id)}</h1>",
        facts(_task_facts(result)),
        section("Timeline", timeline_svg(events)),
        section("Phases and capsule", task_block(result, capsule, open_=True)),
    ]
    return page(f"SwapOS task {result.task_id}", body)


def replay_page(summary: RunSummary, logs: Sequence[tuple[str, Sequence[AnyEvent]]]) -> str:
    """The HTML page of a replayed event log (or a cluster run's set of logs)."""
    metrics = [
        [key, f"{value:.4f}" if isinstance(value, float) else str(value)]
        for key, value in _scalars(summary)
    ]
    body = [
        f"<h1>SwapOS run {esc(summary.run_at)}</h1>",
        facts([f"mode: {summary.mode}", f"profile: {summary.profile}"]),
        section("Run", table((["metric", "value"], metrics))),
    ]
    for node, events in logs:
        title = "Timeline" if len(logs) == 1 else f"Timeline of {node}"
        body.append(section(title, timeline_svg(events)))
    body.append(section("Tasks", *(task_block(r, None) for r in summary.results)))
    return page(f"SwapOS run {summary.run_at}", body)


def _task_facts(result: TaskResult) -> list[str]:
    lines = [
        f"category: {result.category or '-'}",
        f"verdict: {'passed' if result.passed else 'failed'}"
        + (" on the first attempt" if result.pass_at_1 else ""),
        f"attempts: {result.iterations}; grades: {result.grades}",
        f"tests: {result.tests_passed}/{result.tests_total}",
        f"wall: {result.wall_clock_s:.2f} s",
    ]
    return [*lines, f"error: {result.error}"] if result.error else lines


def _scalars(summary: RunSummary) -> list[tuple[str, object]]:
    skip = {"results", "host", "per_category", "models"}
    return [
        (name, getattr(summary, name)) for name in summary.__struct_fields__ if name not in skip
    ]

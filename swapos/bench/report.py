"""``python -m swapos.bench report DIR``: a markdown report of a suite benchmark.

Reads every ``DIR/<mode>-<arm>/results.json``, rebuilds the comparison (the same pure
:func:`~swapos.bench.compare.compare` that wrote ``comparison.json``), and writes
``DIR/report.md`` with a Chrome trace and a timeline picture of the overlap mode.
``docs/reports.md`` explains how to read it.
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path

import msgspec

from swapos.bench import report_tables as tables
from swapos.bench.compare import Comparison, Key, compare, label, ordered
from swapos.bench.results import read_summary, write_atomic
from swapos.errors import SwapOSError
from swapos.records.schema import RunSummary
from swapos.records.summary import summarize


def load_results(folder: Path) -> dict[Key, RunSummary]:
    """Every ``<mode>-<arm>/results.json`` under ``folder``, its aggregates recomputed from
    its tasks (so a file written by an older version reads with today's figures).

    Raises:
        SwapOSError: none found, or one is corrupt.
    """
    found: dict[Key, RunSummary] = {}
    for path in sorted(folder.glob("*-*/results.json")):
        mode, _, arm = path.parent.name.partition("-")
        summary = read_summary(path)
        if summary is not None:
            found[(mode, arm)] = summarize(summary.results, summary)
    if not found:
        raise SwapOSError(
            f"{folder} holds no <mode>-<arm>/results.json; run `python -m swapos.bench run "
            f"--out {folder}` first"
        )
    return found


def header_section(summaries: dict[Key, RunSummary], manifest: dict[str, object]) -> list[str]:
    facts = [f"- {line}" for line in tables.header_facts(summaries, manifest)]
    return ["# SwapOS suite benchmark", "", *facts, ""]


def arms_section(summaries: dict[Key, RunSummary]) -> list[str]:
    return ["## Modes and arms", "", *tables.markdown(tables.arms_table(summaries)), ""]


def categories_section(summaries: dict[Key, RunSummary]) -> list[str]:
    table = tables.markdown(tables.categories_table(summaries))
    return ["## Pass rate per category", "", *table, ""]


def ratios_section(comparison: Comparison) -> list[str]:
    return [
        "## Wall-time ratios (per task, paired)",
        "",
        *tables.markdown(tables.ratios_table(comparison)),
        "",
        tables.bootstrap_note(comparison),
        "",
        "## Hidden-load fraction per mode",
        "",
        *tables.markdown(tables.hidden_table(comparison)),
        "",
    ]


def mcnemar_section(comparison: Comparison) -> list[str]:
    table = tables.markdown(tables.mcnemar_table(comparison))
    return ["## Paired pass/fail tests (exact McNemar, two-sided)", "", *table, ""]


def breakdown_section(comparison: Comparison) -> list[str]:
    table = tables.markdown(tables.breakdown_table(comparison))
    return ["## Where a task's time goes (mean per task)", "", *table, ""]


def phases_section(summaries: dict[Key, RunSummary]) -> list[str]:
    return ["## Per phase (means)", "", *tables.markdown(tables.phases_table(summaries)), ""]


def timeline_section(folder: Path, summaries: dict[Key, RunSummary], report: Path) -> list[str]:
    """Write the trace and picture of the overlap mode (else the first mode/arm).

    A mode/arm with several event logs (a cluster run's workers, or resumed sessions) gets
    one trace of them all, each log (node) its own process; the picture shows the first.
    """
    from swapos.bench.replay import load_set
    from swapos.bench.trace import chrome_trace, cluster_trace

    keys = [k for k in summaries if k[0] == "overlap"] or list(summaries)
    paths = event_logs(folder / label(keys[0]))
    lines = [f"## Timeline ({label(keys[0])})", ""]
    if not paths:
        return [*lines, f"No event log in {folder / label(keys[0])}.", ""]
    logs = load_set(paths)
    lines += [f"- warning: {w}" for _, _, warnings in logs for w in warnings]
    trace = folder / f"trace-{label(keys[0])}.json"
    if len(logs) == 1:
        trace.write_text(json.dumps(chrome_trace(logs[0][1])))
    else:
        trace.write_text(json.dumps(cluster_trace([(node, ev) for node, ev, _ in logs])))
        lines.append(f"{len(logs)} event logs: {', '.join(node for node, _, _ in logs)}.")
    lines.append(
        f"Chrome trace: [{trace.name}]({_rel(trace, report)}) (open in "
        "https://ui.perfetto.dev or chrome://tracing)."
    )
    picture = folder / f"timeline-{label(keys[0])}.png"
    try:
        from swapos.bench.plot import plot_timeline

        plot_timeline(logs[0][1], picture)
        lines += ["", f"![timeline]({_rel(picture, report)})"]
    except SwapOSError as exc:
        lines += ["", f"No picture: {exc}"]
    return [*lines, ""]


def event_logs(folder: Path) -> list[Path]:
    """The event logs of one mode/arm folder: ``events.jsonl`` first (a local run's), then
    the others (``events-<n>.jsonl`` of resumed sessions, ``events-<worker>.jsonl`` of a
    cluster run's workers) by name."""
    paths = sorted(folder.glob("events*.jsonl"))
    return sorted(paths, key=lambda p: (p.name != "events.jsonl", p.name))


def _rel(path: Path, report: Path) -> str:
    try:
        return str(path.resolve().relative_to(report.resolve().parent))
    except ValueError:
        return str(path.resolve())


def _inputs(folder: Path) -> tuple[dict[Key, RunSummary], dict[str, object], Comparison]:
    """What both reports are made of: the summaries in report order, the manifest, the
    comparison."""
    found = load_results(folder)
    summaries = {k: found[k] for k in ordered(list(found))}
    manifest: dict[str, object] = {}
    if (folder / "bench.json").exists():
        try:
            manifest = json.loads((folder / "bench.json").read_text())
        except json.JSONDecodeError:
            manifest = {}
    return summaries, manifest, compare(summaries)


def render(folder: Path, report: Path) -> str:
    """The markdown report of the benchmark in ``folder`` (writes trace and picture)."""
    summaries, manifest, comparison = _inputs(folder)
    sections = [
        header_section(summaries, manifest),
        arms_section(summaries),
        categories_section(summaries),
        ratios_section(comparison),
        mcnemar_section(comparison),
        breakdown_section(comparison),
        phases_section(summaries),
        timeline_section(folder, summaries, report),
    ]
    return "\n".join(line for section in sections for line in section)


def render_html(folder: Path) -> str:
    """The HTML report of the benchmark in ``folder``: the markdown report's tables, the
    timeline of the overlap mode (else the first mode/arm) as SVG, every task's phases and
    capsule (:mod:`swapos.bench.html`)."""
    from swapos.bench.html import suite_page
    from swapos.bench.replay import load_set

    summaries, manifest, comparison = _inputs(folder)
    key = next((k for k in summaries if k[0] == "overlap"), next(iter(summaries)))
    logs = load_set(event_logs(folder / label(key)))
    named = [(f"{label(key)}, {node}" if len(logs) > 1 else label(key), ev) for node, ev, _ in logs]
    return suite_page(folder, summaries, comparison, manifest, named)


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("folder", type=Path, help="the --out folder of `bench run`")
    parser.add_argument("--out", type=Path, help="report path (default: FOLDER/report.md)")
    parser.add_argument(
        "--html",
        action="store_true",
        help="also write a self-contained HTML report beside it (report.html)",
    )


def main(args: argparse.Namespace) -> int:
    """Write a markdown report (tables, ratios, paired tests, timeline) of a bench run;
    with --html, an HTML page of it too (tasks and their capsules included)."""
    report: Path = args.out or args.folder / "report.md"
    text = render(args.folder, report)
    report.parent.mkdir(parents=True, exist_ok=True)
    report.write_text(text)
    if args.html:
        page = report.with_suffix(".html")
        page.write_text(render_html(args.folder), encoding="utf-8")
        print(f"wrote {page}")
    comparison = msgspec.json.encode(compare(load_results(args.folder)))
    write_atomic(args.folder / "comparison.json", msgspec.json.format(comparison, indent=2) + b"\n")
    print(f"wrote {report} and {args.folder / 'comparison.json'}")
    return 0

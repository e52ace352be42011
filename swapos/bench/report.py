"""``python -m swapos.bench report DIR``: a markdown report of a suite benchmark.

Reads every ``DIR/<mode>-<arm>/results.json``, rebuilds the comparison (the same pure
:func:`~swapos.bench.compare.compare` that wrote ``comparison.json``), and writes
``DIR/report.md`` with a Chrome trace and a timeline picture of the overlap mode.
``docs/reports.md`` explains how to read it.
"""

from __future__ import annotations

import argparse
import json
import statistics
from collections.abc import Sequence
from pathlib import Path

import msgspec

from swapos.bench.compare import BREAKDOWN, Comparison, Key, compare, label, ordered
from swapos.bench.results import read_summary, write_atomic
from swapos.bench.stats import RatioStats
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


def _f(x: float | None, digits: int = 2) -> str:
    return "-" if x is None else f"{x:.{digits}f}"


def _pct(x: float) -> str:
    return f"{x:.0%}"


def _table(header: Sequence[str], rows: Sequence[Sequence[str]]) -> list[str]:
    lines = ["| " + " | ".join(header) + " |", "|" + "---|" * len(header)]
    return lines + ["| " + " | ".join(row) + " |" for row in rows]


def header_section(summaries: dict[Key, RunSummary], manifest: dict[str, object]) -> list[str]:
    first = next(iter(summaries.values()))
    host = ", ".join(f"{k} {v}" for k, v in first.host.items())
    budgets = ", ".join(
        f"{label(k)} {s.budget_bytes / 2**20:.0f} MiB"
        if s.budget_bytes < 2**60
        else f"{label(k)} unlimited"
        for k, s in summaries.items()
    )
    lines = [
        "# SwapOS suite benchmark",
        "",
        f"- started: {first.run_at}",
        f"- host: {host}",
        f"- profile: {first.profile}; models: {', '.join(first.models)}",
        f"- budget: {budgets}",
    ]
    sessions = manifest.get("sessions")
    if isinstance(sessions, list) and sessions and isinstance(sessions[-1], dict):
        last = sessions[-1]
        argv = last.get("argv")
        argv = argv if isinstance(argv, dict) else {}
        lines.append(f"- suite: {argv.get('suite')}; sessions: {len(sessions)}")
        lines.append(f"- cold page cache: {last.get('cold')}")
    return [*lines, ""]


def arms_section(summaries: dict[Key, RunSummary]) -> list[str]:
    rows = [
        [
            label(k),
            str(s.tasks_total),
            _pct(s.pass_rate),
            _pct(s.pass_at_1),
            f"{s.retry_rescued} ({_pct(s.retry_rescue_rate)})",
            str(s.draw_rescued),
            _f(s.mean_wall_clock_s),
            f"{_f(s.mean_wall_passed_s)} / {_f(s.mean_wall_failed_s)}",
            _pct(s.failed_wall_share),
            _f(s.mean_load_s),
            _f(s.mean_evict_s),
            _f(s.mean_ttft_s),
            _pct(s.load_hidden_fraction),
            str(s.loads),
            str(s.evictions),
            _f(s.wall_clock_s, 1),
        ]
        for k, s in summaries.items()
    ]
    head = [
        "mode-arm",
        "tasks",
        "pass",
        "pass@1",
        "rescued by retry",
        "passed by a draw",
        "mean wall s",
        "passed / failed s",
        "wall on failed",
        "mean load s",
        "mean evict s",
        "mean ttft s",
        "hidden load",
        "loads",
        "evictions",
        "system s",
    ]
    return ["## Modes and arms", "", *_table(head, rows), ""]


def ratios_section(comparison: Comparison) -> list[str]:
    def row(arm: str, name: str, r: RatioStats) -> list[str]:
        return [
            arm,
            name,
            str(r.n),
            _f(r.median, 3),
            f"[{_f(r.ci_low, 3)}, {_f(r.ci_high, 3)}]",
            _f(r.ratio_of_totals, 3),
        ]

    rows = [row(a, n, r) for a, ratios in comparison.wall_ratios.items() for n, r in ratios.items()]
    hidden = [[m, _pct(v)] for m, v in comparison.hidden_load_fraction.items()]
    b = comparison.bootstrap
    return [
        "## Wall-time ratios (per task, paired)",
        "",
        *_table(["arm", "ratio", "tasks", "median", "95% CI", "ratio of totals"], rows),
        "",
        f"Bootstrap: {b['resamples']:.0f} resamples of the median, seed {b['seed']:.0f}.",
        "",
        "## Hidden-load fraction per mode",
        "",
        *_table(["mode", "hidden / (hidden + paid)"], hidden),
        "",
    ]


def mcnemar_section(comparison: Comparison) -> list[str]:
    rows = [
        [
            m.a,
            m.b,
            str(m.n),
            str(m.both_pass),
            str(m.only_a),
            str(m.only_b),
            str(m.both_fail),
            f"{m.p_value:.4g}",
        ]
        for m in [*comparison.mcnemar_arms, *comparison.first_attempt, *comparison.mcnemar_modes]
    ]
    head = ["a", "b", "tasks", "both pass", "only a", "only b", "both fail", "p (exact)"]
    return ["## Paired pass/fail tests (exact McNemar, two-sided)", "", *_table(head, rows), ""]


def breakdown_section(comparison: Comparison) -> list[str]:
    rows = [
        [name, _f(a.mean_wall_clock_s), *(_f(a.breakdown.get(part, 0.0)) for part in BREAKDOWN)]
        for name, a in comparison.arms.items()
    ]
    head = ["mode-arm", "mean wall s", *(f"{part} s" for part in BREAKDOWN)]
    return ["## Where a task's time goes (mean per task)", "", *_table(head, rows), ""]


def phases_section(summaries: dict[Key, RunSummary]) -> list[str]:
    rows = []
    for key, s in summaries.items():
        by_phase: dict[str, list[tuple[float, float, float, float, float]]] = {}
        for p in (p for r in s.results for p in r.phases):
            by_phase.setdefault(p.phase, []).append(
                (p.load_s, p.load_hidden_s, p.ttft_s, float(p.tokens), p.total_s)
            )
        for phase, values in by_phase.items():
            means = [statistics.fmean(col) for col in zip(*values, strict=True)]
            rows.append(
                [
                    label(key),
                    phase,
                    str(len(values)),
                    _f(means[0]),
                    _f(means[1]),
                    _f(means[2]),
                    _f(means[3], 1),
                    _f(means[4]),
                ]
            )
    head = ["mode-arm", "phase", "n", "load s", "hidden s", "ttft s", "tokens", "total s"]
    return ["## Per phase (means)", "", *_table(head, rows), ""]


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


def render(folder: Path, report: Path) -> str:
    """The markdown report of the benchmark in ``folder`` (writes trace and picture)."""
    found = load_results(folder)
    summaries = {k: found[k] for k in ordered(list(found))}
    manifest: dict[str, object] = {}
    if (folder / "bench.json").exists():
        try:
            manifest = json.loads((folder / "bench.json").read_text())
        except json.JSONDecodeError:
            manifest = {}
    comparison = compare(summaries)
    sections = [
        header_section(summaries, manifest),
        arms_section(summaries),
        ratios_section(comparison),
        mcnemar_section(comparison),
        breakdown_section(comparison),
        phases_section(summaries),
        timeline_section(folder, summaries, report),
    ]
    return "\n".join(line for section in sections for line in section)


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("folder", type=Path, help="the --out folder of `bench run`")
    parser.add_argument("--out", type=Path, help="report path (default: FOLDER/report.md)")


def main(args: argparse.Namespace) -> int:
    """Write a markdown report (tables, ratios, paired tests, timeline) of a bench run."""
    report: Path = args.out or args.folder / "report.md"
    text = render(args.folder, report)
    report.parent.mkdir(parents=True, exist_ok=True)
    report.write_text(text)
    comparison = msgspec.json.encode(compare(load_results(args.folder)))
    write_atomic(args.folder / "comparison.json", msgspec.json.format(comparison, indent=2) + b"\n")
    print(f"wrote {report} and {args.folder / 'comparison.json'}")
    return 0

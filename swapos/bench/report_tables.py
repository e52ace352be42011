"""The tables of a suite benchmark's report, as text cells: one function per table.

``bench report`` renders them as markdown (``report.md``), ``bench report --html`` as HTML
(``report.html``): the same cells from the same functions, so the two show the same
numbers, digit for digit. ``docs/reports.md`` explains every column.
"""

from __future__ import annotations

import statistics
from collections.abc import Sequence

from swapos.bench.compare import BREAKDOWN, Comparison, Key, label
from swapos.bench.stats import RatioStats
from swapos.records.schema import RunSummary

Table = tuple[list[str], list[list[str]]]
"""A table: its header, then its rows, every cell already formatted."""


def num(x: float | None, digits: int = 2) -> str:
    return "-" if x is None else f"{x:.{digits}f}"


def pct(x: float) -> str:
    return f"{x:.0%}"


def header_facts(summaries: dict[Key, RunSummary], manifest: dict[str, object]) -> list[str]:
    """The run's facts, one line each (``started: ...``)."""
    first = next(iter(summaries.values()))
    host = ", ".join(f"{k} {v}" for k, v in first.host.items())
    budgets = ", ".join(
        f"{label(k)} {s.budget_bytes / 2**20:.0f} MiB"
        if s.budget_bytes < 2**60
        else f"{label(k)} unlimited"
        for k, s in summaries.items()
    )
    lines = [
        f"started: {first.run_at}",
        f"host: {host}",
        f"profile: {first.profile}; models: {', '.join(first.models)}",
        f"budget: {budgets}",
    ]
    sessions = manifest.get("sessions")
    if isinstance(sessions, list) and sessions and isinstance(sessions[-1], dict):
        last = sessions[-1]
        argv = last.get("argv")
        argv = argv if isinstance(argv, dict) else {}
        lines.append(f"suite: {argv.get('suite')}; sessions: {len(sessions)}")
        lines.append(f"cold page cache: {last.get('cold')}")
    return lines


def arms_table(summaries: dict[Key, RunSummary]) -> Table:
    rows = [
        [
            label(k),
            str(s.tasks_total),
            pct(s.pass_rate),
            pct(s.pass_at_1),
            f"{s.retry_rescued} ({pct(s.retry_rescue_rate)})",
            str(s.draw_rescued),
            num(s.mean_wall_clock_s),
            f"{num(s.mean_wall_passed_s)} / {num(s.mean_wall_failed_s)}",
            pct(s.failed_wall_share),
            num(s.mean_load_s),
            num(s.mean_evict_s),
            num(s.mean_ttft_s),
            pct(s.load_hidden_fraction),
            str(s.loads),
            str(s.evictions),
            num(s.wall_clock_s, 1),
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
    return head, rows


def categories_table(summaries: dict[Key, RunSummary]) -> Table:
    """Pass rate per mode-arm and task category (``RunSummary.per_category``)."""
    rows = [
        [label(k), category, str(c.tasks), str(c.passed), pct(c.pass_rate)]
        for k, s in summaries.items()
        for category, c in sorted(s.per_category.items())
    ]
    return ["mode-arm", "category", "tasks", "passed", "pass"], rows


def ratios_table(comparison: Comparison) -> Table:
    def row(arm: str, name: str, r: RatioStats) -> list[str]:
        return [
            arm,
            name,
            str(r.n),
            num(r.median, 3),
            f"[{num(r.ci_low, 3)}, {num(r.ci_high, 3)}]",
            num(r.ratio_of_totals, 3),
        ]

    rows = [row(a, n, r) for a, ratios in comparison.wall_ratios.items() for n, r in ratios.items()]
    return ["arm", "ratio", "tasks", "median", "95% CI", "ratio of totals"], rows


def bootstrap_note(comparison: Comparison) -> str:
    b = comparison.bootstrap
    return f"Bootstrap: {b['resamples']:.0f} resamples of the median, seed {b['seed']:.0f}."


def hidden_table(comparison: Comparison) -> Table:
    rows = [[m, pct(v)] for m, v in comparison.hidden_load_fraction.items()]
    return ["mode", "hidden / (hidden + paid)"], rows


def mcnemar_table(comparison: Comparison) -> Table:
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
    return head, rows


def breakdown_table(comparison: Comparison) -> Table:
    rows = [
        [name, num(a.mean_wall_clock_s), *(num(a.breakdown.get(part, 0.0)) for part in BREAKDOWN)]
        for name, a in comparison.arms.items()
    ]
    return ["mode-arm", "mean wall s", *(f"{part} s" for part in BREAKDOWN)], rows


def phases_table(summaries: dict[Key, RunSummary]) -> Table:
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
                    num(means[0]),
                    num(means[1]),
                    num(means[2]),
                    num(means[3], 1),
                    num(means[4]),
                ]
            )
    head = ["mode-arm", "phase", "n", "load s", "hidden s", "ttft s", "tokens", "total s"]
    return head, rows


def markdown(table: Table) -> list[str]:
    """``table`` as markdown lines."""
    header, rows = table
    return [_md_row(header), "|" + "---|" * len(header), *(_md_row(row) for row in rows)]


def _md_row(cells: Sequence[str]) -> str:
    return "| " + " | ".join(cells) + " |"

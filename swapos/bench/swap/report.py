"""The swap bench's report: what ``swap-bench.json`` holds and how it prints (rich tables).

See ``docs/benchmarks.md`` for how to read it.
"""

from __future__ import annotations

import sys

import msgspec
from rich.console import Console
from rich.table import Table

from swapos.bench.swap.results import ModeRun
from swapos.bench.swap.stats import MiB, ModelStats, ModeStats, Ratio, TargetCheck


class SwapReport(msgspec.Struct, frozen=True, kw_only=True):
    host: dict[str, str]
    command: str
    profile: str
    budget_bytes: int
    budget_holds_two: bool
    estimates_bytes: dict[str, int]
    repeats: int
    rounds: int
    schedule: str
    phases: list[str]
    tokens: int
    prefetch: str
    cold_method: str | None
    cold_skipped: str | None
    load_avg_start: list[float]
    load_avg_end: list[float]
    models: list[ModelStats]
    runs: list[ModeRun]
    modes: list[ModeStats]
    ratios: list[Ratio]
    targets: list[TargetCheck]


def print_report(report: SwapReport, console: Console | None = None) -> None:
    """Rich tables: per-model swaps, pipeline by mode, ratios, targets."""
    console = console or Console(file=sys.stdout)
    console.print(_models_table(report))
    console.print(_modes_table(report))
    console.print(_ratios_table(report.ratios))
    console.print(_targets_table(report.targets))
    la = report.load_avg_start + report.load_avg_end
    console.print(f"load average start {la[0]:.2f} {la[1]:.2f} {la[2]:.2f}, "
                  f"end {la[3]:.2f} {la[4]:.2f} {la[5]:.2f}; {report.command}")  # fmt: skip
    if report.cold_skipped:
        console.print(f"cold skipped: {report.cold_skipped}")


def _models_table(report: SwapReport) -> Table:
    cold = report.cold_method or "warm only"
    t = Table(title=f"Per-model swap, median of {report.repeats} (cold: {cold})")
    for col in ("model", "cond", "load s", "ttft s", "load->1st tok s", "close s",
                "peak RSS Δ MiB", "RSS Δ MiB", "after close Δ MiB"):  # fmt: skip
        t.add_column(col, justify="left" if col in ("model", "cond") else "right")
    for s in report.models:
        t.add_row(s.model, s.condition, f"{s.load_s:.3f}", f"{s.ttft_s:.3f}", f"{s.swap_s:.3f}",
                  f"{s.evict_s:.3f}", _mib(s.peak_rss_delta_bytes), _mib(s.rss_delta_bytes),
                  _mib(s.rss_after_close_delta_bytes))  # fmt: skip
    return t


def _modes_table(report: SwapReport) -> Table:
    budget = _mib(report.budget_bytes)
    t = Table(
        title=f"Pipeline {' '.join(report.phases)} x {report.tokens} tokens, "
        f"median of {report.rounds} rounds (budget {budget} MiB)"
    )
    cols = ("cond", "mode", "wall s", "open s", "load s", "hidden s", "evict s", "hidden frac",
            "swap hidden frac", "loads", "evictions", "peak RSS Δ MiB")  # fmt: skip
    for col in cols:
        t.add_column(col, justify="left" if col in ("cond", "mode") else "right")
    for m in report.modes:
        t.add_row(m.condition, m.mode, f"{m.wall_s:.2f}", f"{m.open_s:.2f}", f"{m.load_s:.2f}",
                  f"{m.load_hidden_s:.2f}", f"{m.evict_s:.2f}", f"{m.load_hidden_fraction:.3f}",
                  f"{m.swap_hidden_fraction:.3f}", f"{m.loads:g}", f"{m.evictions:g}",
                  _mib(m.peak_rss_delta_max_bytes))  # fmt: skip
    return t


def _ratios_table(ratios: list[Ratio]) -> Table:
    t = Table(title="Wall-time ratios")
    for col in ("cond", "ratio", "per round", "median"):
        t.add_column(col, justify="right" if col == "median" else "left")
    for r in ratios:
        t.add_row(r.condition, r.name, " ".join(f"{v:.3f}" for v in r.per_round),
                  f"{r.median:.3f}")  # fmt: skip
    return t


def _targets_table(targets: list[TargetCheck]) -> Table:
    t = Table(title="Targets")
    for col in ("verdict", "cond", "target", "value", "limit", "detail"):
        t.add_column(col)
    for c in targets:
        verdict = "[green]MET[/green]" if c.met else "[red]MISSED[/red]"
        t.add_row(verdict, c.condition, c.name, f"{c.value:.3f}", f"{c.limit:.3f}", c.detail)
    return t


def _mib(n: int) -> str:
    return f"{n / MiB:.0f}"

"""The size bench's report: what its JSON holds, its tables, and its plot (``plot`` extra).

See docs/benchmarks.md, "Size scaling", for how to read it.
"""

from __future__ import annotations

import sys
from pathlib import Path

import msgspec
from rich.console import Console
from rich.table import Table

from swapos.bench.swap.sizes_stats import (
    Fit,
    GiB,
    SizeModeStats,
    SizeRatio,
    SizeRun,
    SizeSample,
    SizeStats,
    size_label,
)
from swapos.errors import SwapOSError

MiB = 2**20


class SizesReport(msgspec.Struct, frozen=True, kw_only=True):
    host: dict[str, str]
    command: str
    sizes_bytes: list[int]
    models: dict[str, str]
    repeats: int
    rounds: int
    tokens: int
    probe_tokens: int
    cold_method: str | None
    cold_skipped: str | None
    load_avg_start: list[float]
    load_avg_end: list[float]
    sizes: list[SizeStats]
    fits: list[Fit]
    modes: list[SizeModeStats]
    ratios: list[SizeRatio]
    samples: list[SizeSample]
    runs: list[SizeRun]


def print_sizes(report: SizesReport, console: Console | None = None) -> None:
    """Rich tables: per size, the fits, the pipeline by size and mode."""
    console = console or Console(file=sys.stdout)
    console.print(sizes_table(report))
    console.print(fits_table(report.fits))
    console.print(pipeline_table(report))
    la = report.load_avg_start + report.load_avg_end
    console.print(f"load average start {la[0]:.2f} {la[1]:.2f} {la[2]:.2f}, "
                  f"end {la[3]:.2f} {la[4]:.2f} {la[5]:.2f}; {report.command}")  # fmt: skip
    if report.cold_skipped:
        console.print(f"cold skipped: {report.cold_skipped}")


def sizes_table(report: SizesReport) -> Table:
    cold = report.cold_method or "warm only"
    t = Table(
        title=f"Per size, median of {report.repeats} (cold: {cold}; probe "
        f"{report.probe_tokens} tokens; touch = what ran between the load and the probe)"
    )
    for col in ("size", "file MiB", "cond", "touch", "load s", "touch s", "ttft s",
                "steady ttft s", "ttft - steady s", "close s", "RSS after load Δ MiB",
                "peak RSS Δ MiB"):  # fmt: skip
        t.add_column(col, justify="left" if col in ("size", "cond", "touch") else "right")
    for s in report.sizes:
        t.add_row(size_label(s.size_bytes), _mib(s.file_bytes), s.condition, s.touch,
                  f"{s.load_s:.3f}", f"{s.touch_s:.3f}", f"{s.ttft_s:.3f}",
                  f"{s.steady_ttft_s:.3f}", f"{s.ttft_s - s.steady_ttft_s:+.3f}",
                  f"{s.close_s:.3f}", _mib(s.load_rss_delta_bytes),
                  _mib(s.peak_rss_delta_bytes))  # fmt: skip
    return t


def fits_table(fits: list[Fit]) -> Table:
    t = Table(title="Least-squares fits against file size (touch = none samples)")
    for col in ("quantity", "cond", "samples", "intercept s", "s per GiB", "MB/s", "R²"):
        t.add_column(col, justify="left" if col in ("quantity", "cond") else "right")
    for f in fits:
        rate = f"{f.bytes_per_s / 1e6:.0f}" if f.bytes_per_s else "—"
        r2 = f"{f.r2:.3f}" if f.r2 is not None else "—"
        t.add_row(f.quantity, f.condition, str(f.samples), f"{f.intercept_s:.3f}",
                  f"{f.seconds_per_gib:.3f}", rate, r2)  # fmt: skip
    return t


def pipeline_table(report: SizesReport) -> Table:
    t = Table(
        title=f"Two-model pipeline A then B x {report.tokens} tokens, budget for both, "
        f"median of {report.rounds} rounds"
    )
    for col in ("size", "cond", "mode", "wall s", "load s", "hidden s", "swap hidden frac",
                "loads", "overlap/lru", "peak RSS Δ MiB"):  # fmt: skip
        t.add_column(col, justify="left" if col in ("size", "cond", "mode") else "right")
    ratio = {(r.size_bytes, r.condition): r.median for r in report.ratios}
    for m in report.modes:
        r = ratio.get((m.size_bytes, m.condition)) if m.mode == "overlap" else None
        errors = " ERRORS" if m.errors else ""
        t.add_row(size_label(m.size_bytes), m.condition, m.mode + errors, f"{m.wall_s:.2f}",
                  f"{m.load_s:.2f}", f"{m.load_hidden_s:.2f}", f"{m.swap_hidden_fraction:.3f}",
                  f"{m.loads:g}", f"{r:.3f}" if r is not None else "",
                  _mib(m.peak_rss_delta_bytes))  # fmt: skip
    return t


def plot_sizes(report: SizesReport, path: str | Path) -> None:
    """Three panels against file size: load and time to first token (points and the load
    fit), the first token's extra over the steady one by touch, and overlap's swap hidden
    fraction with overlap/lru.

    Raises:
        SwapOSError: matplotlib is not installed.
    """
    try:
        from matplotlib.figure import Figure
    except ImportError as exc:
        raise SwapOSError("plotting needs matplotlib: pip install 'swapos[plot]'") from exc
    fig = Figure(figsize=(15, 4.5), layout="constrained")
    load_ax, ready_ax, hide_ax = fig.subplots(1, 3)
    conditions = list(dict.fromkeys(s.condition for s in report.sizes))
    for cond, color in zip(conditions, ("#4c72b0", "#c44e52"), strict=False):
        none = [s for s in report.sizes if s.condition == cond and s.touch == "none"]
        xs = [s.file_bytes / GiB for s in none]
        load_ax.plot(xs, [s.load_s for s in none], "o", color=color, label=f"load, {cond}")
        load_ax.plot(xs, [s.ttft_s for s in none], "^", color=color, mfc="none",
                     label=f"first token after load, {cond}")  # fmt: skip
        fit = next((f for f in report.fits if (f.quantity, f.condition) == ("load_s", cond)), None)
        if fit is not None and xs:
            ends = [0.0, max(xs)]
            rate = f"{fit.bytes_per_s / 1e6:.0f} MB/s" if fit.bytes_per_s else "no slope"
            load_ax.plot(ends, [fit.intercept_s + fit.seconds_per_gib * x for x in ends], "-",
                         color=color, alpha=0.6, label=f"load fit, {cond}: {rate}")  # fmt: skip
        for touch, marker in (("none", "o"), ("decode", "s"), ("warm", "D")):
            group = [s for s in report.sizes if s.condition == cond and s.touch == touch]
            ready_ax.plot([s.file_bytes / GiB for s in group],
                          [s.ttft_s - s.steady_ttft_s for s in group], marker + "-",
                          color=color, alpha=0.8, label=f"{touch}, {cond}")  # fmt: skip
        over = [m for m in report.modes if m.condition == cond and m.mode == "overlap"]
        hide_ax.plot([m.size_bytes / GiB for m in over],
                     [m.swap_hidden_fraction for m in over], "o-", color=color,
                     label=f"swap hidden fraction, {cond}")  # fmt: skip
        ratios = [r for r in report.ratios if r.condition == cond]
        hide_ax.plot([r.size_bytes / GiB for r in ratios], [r.median for r in ratios], "s--",
                     color=color, label=f"overlap/lru wall, {cond}")  # fmt: skip
    load_ax.set(title="Load and first token vs size", xlabel="file GiB", ylabel="seconds")
    ready_ax.set(title="First token minus steady first token, by touch after the load",
                 xlabel="file GiB", ylabel="seconds")  # fmt: skip
    ready_ax.axhline(0, color="black", lw=0.5)
    top = max([1.0, *(r.median for r in report.ratios)])
    hide_ax.set(title="Two-model pipeline (budget for both)", xlabel="size GiB",
                ylim=(0, 1.1 * top))  # fmt: skip
    for ax in (load_ax, ready_ax, hide_ax):
        ax.grid(alpha=0.3)
        ax.legend(fontsize=7)
    fig.savefig(Path(path), dpi=110)


def _mib(n: int) -> str:
    return f"{n / MiB:.0f}"

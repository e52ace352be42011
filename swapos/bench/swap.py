"""The swap microbenchmark: what one model swap costs, and what SwapOS saves on a pipeline.

``python -m swapos.bench swap [--repeats 3] [--rounds 3] [--phases 9] [--tokens 48]
[--conditions warm,cold] [--modes overlap,lru,sequential,resident] [--prefetch POLICY]
[--out swap-bench.json]``

1. **Per model**, cold (page cache dropped) and warm: load, time to first token right
   after the load (a 200-token prompt), close, peak RSS and RSS delta; ``--repeats`` times,
   medians reported.
2. **The alternating pipeline** ``A, B, C, B, C, ...`` (``--phases`` greedy phases of
   ``--tokens`` tokens) in every mode, interleaved: each round runs each mode once per
   condition, the order rotating between rounds; a fresh system per run, and only
   ``run_phases`` timed (resident's preload is reported apart).
3. **Targets** (issue 4), each reported met or missed with its numbers.

See ``docs/benchmarks.md`` for how to read the output.
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import get_args

import anyio
import msgspec
from rich.console import Console
from rich.table import Table

from swapos.actors.prefetcher import PrefetchPolicy
from swapos.bench.swap_measure import (
    CacheDropper,
    ModeRun,
    Rig,
    SwapSample,
    measure_swap,
    pipeline_phases,
    run_mode,
)
from swapos.models.profile import MODES, Mode, model_specs, parse_size
from swapos.sysinfo import host_info

CONDITIONS = ("warm", "cold")
COLD_SPEEDUP = 0.85
"""Cold page cache: overlap wall <= 0.85 x sequential wall."""
WARM_NOISE = 1.02
"""Warm page cache: overlap wall <= 1.02 x sequential wall (never worse than noise)."""
HIDDEN_FRACTION = 0.9
"""Cold page cache, budget holding two models: hidden-load fraction >= 0.9."""
RSS_SLACK = 0.05
"""Peak RSS above the pre-load baseline <= budget + 5%."""
BUSY_LOAD = 3.0
"""A 1-minute load average above this on a small machine distorts timings: we say so."""
MiB = 2**20


class ModelStats(msgspec.Struct, frozen=True, kw_only=True):
    """Medians over the repeats of one model in one condition (fields as in SwapSample)."""

    model: str
    condition: str
    repeats: int
    load_s: float
    ttft_s: float
    swap_s: float
    evict_s: float
    peak_rss_delta_bytes: int
    rss_delta_bytes: int
    rss_after_close_delta_bytes: int
    samples: list[SwapSample]


class ModeStats(msgspec.Struct, frozen=True, kw_only=True):
    """Medians over the rounds of one mode in one condition (fields as in ModeRun);
    ``peak_rss_delta_max_bytes`` is the worst round."""

    condition: str
    mode: str
    runs: int
    wall_s: float
    open_s: float
    load_s: float
    load_hidden_s: float
    evict_s: float
    load_hidden_fraction: float
    swap_hidden_fraction: float
    loads: float
    evictions: float
    tokens: float
    peak_rss_delta_bytes: int
    peak_rss_delta_max_bytes: int
    errors: list[str]


class Ratio(msgspec.Struct, frozen=True, kw_only=True):
    """``numerator`` wall / ``denominator`` wall, per round and their median."""

    condition: str
    name: str
    per_round: list[float]
    median: float


class TargetCheck(msgspec.Struct, frozen=True, kw_only=True):
    name: str
    condition: str
    value: float
    limit: float
    met: bool
    detail: str


class SwapReport(msgspec.Struct, frozen=True, kw_only=True):
    host: dict[str, str]
    command: str
    profile: str
    budget_bytes: int
    budget_holds_two: bool
    estimates_bytes: dict[str, int]
    repeats: int
    rounds: int
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


# --- the command ----------------------------------------------------------------------------


def _csv(choices: Sequence[str]) -> Callable[[str], list[str]]:
    def parse(text: str) -> list[str]:
        items = [t.strip() for t in text.split(",") if t.strip()]
        bad = [t for t in items if t not in choices]
        if bad or not items:
            raise argparse.ArgumentTypeError(f"choose from {', '.join(choices)} (got {text!r})")
        return items

    return parse


def add_arguments(parser: argparse.ArgumentParser) -> None:
    add = parser.add_argument
    add("--repeats", type=int, default=3, help="per-model swaps per condition (default: 3)")
    add("--rounds", type=int, default=3, help="pipeline rounds (default: 3)")
    add("--phases", type=int, default=9, help="pipeline phases, A B C B C ... (default: 9)")
    add("--tokens", type=int, default=48, help="tokens generated per phase (default: 48)")
    add("--conditions", type=_csv(CONDITIONS), default=list(CONDITIONS),
        help="page-cache conditions (default: warm,cold)")  # fmt: skip
    add("--modes", type=_csv(MODES), default=list(MODES),
        help=f"pipeline modes (default: {','.join(MODES)})")  # fmt: skip
    add("--profile", default="tiny", help="profile TOML or builtin name (default: tiny)")
    add("--prefetch", choices=get_args(PrefetchPolicy), default=None,
        help="overlap mode's prefetch policy (default: the mode's)")  # fmt: skip
    add("--out", type=Path, default=Path("swap-bench.json"), help="JSON report")


def build_args(argv: Sequence[str]) -> argparse.Namespace:
    """This subcommand's arguments parsed from ``argv`` (for library callers and tests)."""
    parser = argparse.ArgumentParser(prog="python -m swapos.bench swap")
    add_arguments(parser)
    return parser.parse_args(argv)


def main(args: argparse.Namespace) -> int:
    """Swap microbench: per-model cold/warm load, TTFT, close, RSS; pipeline by mode."""
    rig = real_rig(args.profile)
    console = Console(width=None if sys.stdout.isatty() else 150)  # logs keep whole tables
    report = anyio.run(lambda: run_bench(rig, args, say=console.print))
    print_report(report, console)
    args.out.write_bytes(msgspec.json.format(msgspec.json.encode(report)))
    console.print(f"wrote {args.out}")
    return 0


def real_rig(profile_name: str | Path | None) -> Rig:
    """The llama backend on a profile: a TOML path or builtin name (default: ``tiny``, three
    Gemma files for the three-model schedule)."""
    from swapos.backends.llama import LlamaBackend
    from swapos.models.bundled import resolve_profile

    profile = resolve_profile(str(profile_name) if profile_name else "tiny")
    return Rig(
        profile=profile,
        specs=model_specs(profile),
        new_backend=lambda: LlamaBackend(load_limiter=anyio.CapacityLimiter(1)),
    )


async def run_bench(
    rig: Rig, args: argparse.Namespace, *, say: Callable[[str], None] = print
) -> SwapReport:
    """Both parts of the benchmark on ``rig``; progress lines go to ``say``.

    Raises:
        SwapOSError: a model failed to load (the message names it).
    """
    load_start = list(os.getloadavg())
    if load_start[0] > BUSY_LOAD:
        say(f"warning: load average {load_start[0]:.2f} > {BUSY_LOAD}: timings will be noisy")
    backend = rig.new_backend()
    dropper = CacheDropper(backend, rig.specs, rig.drop_caches)
    conditions = list(args.conditions)
    if "cold" in conditions and not await dropper.drop():
        say(f"cold skipped: {dropper.unavailable}")
        conditions.remove("cold")
    samples: list[SwapSample] = []
    for rep in range(args.repeats):
        for cond in conditions:
            for spec in rig.specs.values():
                sample = await measure_swap(backend, spec, condition=cond, dropper=dropper)
                if sample is not None:
                    samples.append(sample)
                    say(f"swap {rep + 1}/{args.repeats} {cond:4} {spec.name:8} "
                        f"load {sample.load_s:.3f}s ttft {sample.ttft_s:.3f}s "
                        f"close {sample.evict_s:.3f}s")  # fmt: skip
    phases = pipeline_phases(list(rig.specs), args.phases, args.tokens)
    runs: list[ModeRun] = []
    modes: list[Mode] = list(args.modes)
    for rnd in range(args.rounds):
        order = modes[rnd % len(modes) :] + modes[: rnd % len(modes)]
        for cond in conditions:
            for pos, mode in enumerate(order):
                run = await run_mode(
                    rig, mode, phases, condition=cond, round_=rnd, position=pos,
                    dropper=dropper, prefetch=args.prefetch,
                )  # fmt: skip
                runs.append(run)
                error = f" ERROR {run.error}" if run.error else ""
                say(f"round {rnd + 1}/{args.rounds} {cond:4} {mode:10} wall {run.wall_s:.2f}s "
                    f"load {run.load_s:.2f}s hidden {run.load_hidden_s:.2f}s "
                    f"evict {run.evict_s:.2f}s{error}")  # fmt: skip
    budget = parse_size(rig.profile.budget)
    estimates = {n: backend.estimate_footprint(s) for n, s in rig.specs.items()}
    two = sum(sorted(estimates.values())[-2:])
    mode_stats = [
        stats for c in conditions for m in modes if (stats := _mode_stats(runs, c, m)) is not None
    ]
    ratios = _ratios(runs, conditions)
    return SwapReport(
        host=host_info(),
        command=_command(args),
        profile=rig.profile.name,
        budget_bytes=budget,
        budget_holds_two=len(estimates) >= 2 and two <= budget,
        estimates_bytes=estimates,
        repeats=args.repeats,
        rounds=args.rounds,
        phases=[p.model for p in phases],
        tokens=args.tokens,
        prefetch=args.prefetch or "(mode default)",
        cold_method=dropper.method,
        cold_skipped=dropper.unavailable if "cold" in args.conditions else None,
        load_avg_start=load_start,
        load_avg_end=list(os.getloadavg()),
        models=_model_stats(samples),
        runs=runs,
        modes=mode_stats,
        ratios=ratios,
        targets=targets(mode_stats, ratios, budget=budget, holds_two=two <= budget),
    )


def _command(args: argparse.Namespace) -> str:
    parts = [
        "python -m swapos.bench swap",
        f"--repeats {args.repeats} --rounds {args.rounds} --phases {args.phases}",
        f"--tokens {args.tokens} --conditions {','.join(args.conditions)}",
        f"--modes {','.join(args.modes)}",
    ]
    if args.profile:
        parts.append(f"--profile {args.profile}")
    if args.prefetch:
        parts.append(f"--prefetch {args.prefetch}")
    return " ".join([*parts, f"--out {args.out}"])


# --- statistics -----------------------------------------------------------------------------


def _med(values: Sequence[float]) -> float:
    return float(statistics.median(values)) if values else 0.0


def _model_stats(samples: list[SwapSample]) -> list[ModelStats]:
    keys = list(dict.fromkeys((s.model, s.condition) for s in samples))
    out = []
    for model, cond in sorted(keys, key=lambda k: (k[1] != "cold", keys.index(k))):
        group = [s for s in samples if (s.model, s.condition) == (model, cond)]

        def med(field: str, group: list[SwapSample] = group) -> float:
            return _med([float(getattr(s, field)) for s in group])

        out.append(
            ModelStats(
                model=model, condition=cond, repeats=len(group), load_s=med("load_s"),
                ttft_s=med("ttft_s"), swap_s=med("swap_s"), evict_s=med("evict_s"),
                peak_rss_delta_bytes=int(med("peak_rss_delta_bytes")),
                rss_delta_bytes=int(med("rss_delta_bytes")),
                rss_after_close_delta_bytes=int(med("rss_after_close_delta_bytes")),
                samples=group,
            )
        )  # fmt: skip
    return out


def _mode_stats(runs: list[ModeRun], condition: str, mode: str) -> ModeStats | None:
    group = [r for r in runs if (r.condition, r.mode) == (condition, mode)]
    if not group:
        return None

    def med(field: str) -> float:
        return _med([float(getattr(r, field)) for r in group])

    return ModeStats(
        condition=condition, mode=mode, runs=len(group), wall_s=med("wall_s"),
        open_s=med("open_s"), load_s=med("load_s"), load_hidden_s=med("load_hidden_s"),
        evict_s=med("evict_s"), load_hidden_fraction=med("load_hidden_fraction"),
        swap_hidden_fraction=med("swap_hidden_fraction"), loads=med("loads"),
        evictions=med("evictions"), tokens=med("tokens"),
        peak_rss_delta_bytes=int(med("peak_rss_delta_bytes")),
        peak_rss_delta_max_bytes=max(r.peak_rss_delta_bytes for r in group),
        errors=[f"round {r.round}: {r.error}" for r in group if r.error],
    )  # fmt: skip


RATIOS = (
    ("overlap/lru", "overlap", "lru"),
    ("overlap/sequential", "overlap", "sequential"),
    ("overlap/resident", "overlap", "resident"),
    ("lru/resident", "lru", "resident"),
    ("sequential/resident", "sequential", "resident"),
)


def _ratios(runs: list[ModeRun], conditions: list[str]) -> list[Ratio]:
    walls = {(r.round, r.condition, r.mode): r.wall_s for r in runs if r.error is None}
    rounds = sorted({r.round for r in runs})
    out = []
    for cond in conditions:
        for name, num, den in RATIOS:
            per_round = [
                walls[(k, cond, num)] / walls[(k, cond, den)]
                for k in rounds
                if (k, cond, num) in walls and walls.get((k, cond, den), 0.0) > 0
            ]
            if per_round:
                out.append(
                    Ratio(condition=cond, name=name, per_round=per_round, median=_med(per_round))
                )
    return out


def targets(
    modes: list[ModeStats], ratios: list[Ratio], *, budget: int, holds_two: bool
) -> list[TargetCheck]:
    """Issue 4's targets, on the medians (peak RSS: on the worst round)."""
    checks = []
    ratio = {(r.condition, r.name): r for r in ratios}
    for cond, limit in (("cold", COLD_SPEEDUP), ("warm", WARM_NOISE)):
        r = ratio.get((cond, "overlap/sequential"))
        if r is not None:
            rounds = ", ".join(f"{v:.3f}" for v in r.per_round)
            checks.append(TargetCheck(
                name="overlap wall / sequential wall <=", condition=cond, value=r.median,
                limit=limit, met=r.median <= limit, detail=f"median of rounds [{rounds}]",
            ))  # fmt: skip
    for m in modes:
        if m.mode == "overlap" and m.condition == "cold" and holds_two:
            for name, value in (
                ("hidden-load fraction >=", m.load_hidden_fraction),
                ("hidden-load fraction, swaps only (phase 2..n) >=", m.swap_hidden_fraction),
            ):
                checks.append(TargetCheck(
                    name=name, condition="cold", value=value, limit=HIDDEN_FRACTION,
                    met=value >= HIDDEN_FRACTION,
                    detail=f"hidden {m.load_hidden_s:.2f}s, paid {m.load_s:.2f}s (all phases)",
                ))  # fmt: skip
        if m.mode != "resident":
            limit = budget * (1 + RSS_SLACK)
            checks.append(TargetCheck(
                name=f"{m.mode} peak RSS - baseline (MiB) <=", condition=m.condition,
                value=m.peak_rss_delta_max_bytes / MiB, limit=limit / MiB,
                met=m.peak_rss_delta_max_bytes <= limit,
                detail=f"worst of {m.runs} rounds; median {m.peak_rss_delta_bytes / MiB:.0f} "
                f"MiB; budget {budget / MiB:.0f} MiB + 5%",
            ))  # fmt: skip
    errors = [e for m in modes for e in m.errors]
    if errors:
        checks.append(TargetCheck(
            name="pipeline runs without error", condition="all", value=len(errors), limit=0,
            met=False, detail="; ".join(errors),
        ))  # fmt: skip
    return checks


# --- output ---------------------------------------------------------------------------------


def print_report(report: SwapReport, console: Console | None = None) -> None:
    """Rich tables: per-model swaps, pipeline by mode, ratios, targets."""
    console = console or Console(file=sys.stdout)
    cold = report.cold_method or "warm only"
    t = Table(title=f"Per-model swap, median of {report.repeats} (cold: {cold})")
    for col in ("model", "cond", "load s", "ttft s", "load->1st tok s", "close s",
                "peak RSS Δ MiB", "RSS Δ MiB", "after close Δ MiB"):  # fmt: skip
        t.add_column(col, justify="left" if col in ("model", "cond") else "right")
    for s in report.models:
        t.add_row(s.model, s.condition, f"{s.load_s:.3f}", f"{s.ttft_s:.3f}", f"{s.swap_s:.3f}",
                  f"{s.evict_s:.3f}", _mib(s.peak_rss_delta_bytes), _mib(s.rss_delta_bytes),
                  _mib(s.rss_after_close_delta_bytes))  # fmt: skip
    console.print(t)
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
    console.print(t)
    t = Table(title="Wall-time ratios")
    for col in ("cond", "ratio", "per round", "median"):
        t.add_column(col, justify="right" if col == "median" else "left")
    for r in report.ratios:
        t.add_row(r.condition, r.name, " ".join(f"{v:.3f}" for v in r.per_round),
                  f"{r.median:.3f}")  # fmt: skip
    console.print(t)
    t = Table(title="Targets (issue 4)")
    for col in ("verdict", "cond", "target", "value", "limit", "detail"):
        t.add_column(col)
    for c in report.targets:
        verdict = "[green]MET[/green]" if c.met else "[red]MISSED[/red]"
        t.add_row(verdict, c.condition, c.name, f"{c.value:.3f}", f"{c.limit:.3f}", c.detail)
    console.print(t)
    la = report.load_avg_start + report.load_avg_end
    console.print(f"load average start {la[0]:.2f} {la[1]:.2f} {la[2]:.2f}, "
                  f"end {la[3]:.2f} {la[4]:.2f} {la[5]:.2f}; {report.command}")  # fmt: skip
    if report.cold_skipped:
        console.print(f"cold skipped: {report.cold_skipped}")


def _mib(n: int) -> str:
    return f"{n / MiB:.0f}"

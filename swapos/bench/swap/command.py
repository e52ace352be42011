"""The swap microbenchmark: what one model swap costs, and what SwapOS saves on a pipeline.

``python -m swapos.bench swap [--repeats 3] [--rounds 3] [--phases 9] [--tokens 48]
[--schedule alternating|rotation] [--budget SIZE] [--conditions warm,cold] [--modes MODE,...]
[--prefetch POLICY] [--out swap-bench.json]``; with ``--sizes 0.25,0.5,1,2,4``, the size
scaling bench of :mod:`~swapos.bench.swap.sizes` instead.

1. **Per model**, cold (page cache dropped) and warm: load, time to first token right
   after the load (a 200-token prompt), close, peak RSS and RSS delta; ``--repeats`` times,
   medians reported.
2. **A pipeline schedule** (``--schedule``: ``A, B, C, B, C, ...`` or the role rotation
   reason, code, critic, fix, critic, …; ``--phases`` greedy phases of ``--tokens`` tokens,
   under the profile's budget or ``--budget``) in every mode (default: all of
   :data:`~swapos.models.profile.MODES`), interleaved: each round runs each mode once per
   condition, the order rotating between rounds; a fresh system per run, and only
   ``run_phases`` timed (resident's preload is reported apart).
3. **Targets** (issue 4's against `sequential`, issue 13's against `lru`), each reported
   met or missed with its numbers.

This module is the command; the prompt and schedules are in :mod:`~swapos.bench.swap.workload`,
the measurements in :mod:`~swapos.bench.swap.measure`, their result Structs in
:mod:`~swapos.bench.swap.results`, the statistics and targets in
:mod:`~swapos.bench.swap.stats`, the report in :mod:`~swapos.bench.swap.report`. See
``docs/benchmarks.md`` for how to read the output.
"""

from __future__ import annotations

import argparse
import dataclasses
import os
import sys
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import get_args

import anyio
import msgspec
from rich.console import Console

from swapos.actors.prefetcher import PrefetchPolicy
from swapos.backends.base import ModelBackend
from swapos.bench.swap.measure import CacheDropper, Rig, measure_swap, run_mode
from swapos.bench.swap.report import SwapReport, print_report
from swapos.bench.swap.results import ModeRun, SwapSample
from swapos.bench.swap.sizes import main_sizes
from swapos.bench.swap.sizes_stats import parse_sizes
from swapos.bench.swap.stats import mode_stats, model_stats, targets, wall_ratios
from swapos.bench.swap.workload import SCHEDULES, pipeline_phases, round_order, schedule_models
from swapos.errors import ProfileError
from swapos.messages.commands import PhaseSpec
from swapos.models.profile import MODES, Mode, parse_size
from swapos.models.resolve import model_specs
from swapos.sysinfo import host_info

CONDITIONS = ("warm", "cold")
BUSY_LOAD = 3.0
"""A 1-minute load average above this on a small machine distorts timings: we say so."""

Say = Callable[[str], None]


def _csv(choices: Sequence[str]) -> Callable[[str], list[str]]:
    def parse(text: str) -> list[str]:
        items = [t.strip() for t in text.split(",") if t.strip()]
        bad = [t for t in items if t not in choices]
        if bad or not items:
            raise argparse.ArgumentTypeError(f"choose from {', '.join(choices)} (got {text!r})")
        return items

    return parse


def _size(text: str) -> str:
    try:
        parse_size(text, field="--budget")
    except ProfileError as exc:
        raise argparse.ArgumentTypeError(str(exc)) from None
    return text


def _sizes(text: str) -> list[int]:
    try:
        return parse_sizes(text)
    except ValueError as exc:
        raise argparse.ArgumentTypeError(str(exc)) from None


def add_arguments(parser: argparse.ArgumentParser) -> None:
    add = parser.add_argument
    add("--repeats", type=int, default=3, help="per-model swaps per condition (default: 3)")
    add("--rounds", type=int, default=3, help="pipeline rounds (default: 3)")
    add("--phases", type=int, default=9, help="pipeline phases (default: 9)")
    add("--schedule", choices=SCHEDULES, default="alternating",
        help="alternating: A B C B C ...; rotation: reason code critic fix critic ... by the "
        "profile's roles (default: alternating)")  # fmt: skip
    add("--budget", type=_size, default=None,
        help="byte budget, e.g. 600MiB (default: the profile's)")  # fmt: skip
    add("--tokens", type=int, default=48, help="tokens generated per phase (default: 48)")
    add("--conditions", type=_csv(CONDITIONS), default=list(CONDITIONS),
        help="page-cache conditions (default: warm,cold)")  # fmt: skip
    add("--modes", type=_csv(MODES), default=list(MODES),
        help=f"pipeline modes (default: {','.join(MODES)})")  # fmt: skip
    add("--profile", default="tiny", help="profile TOML or builtin name (default: tiny)")
    add("--prefetch", choices=get_args(PrefetchPolicy), default=None,
        help="overlap mode's prefetch policy (default: the mode's)")  # fmt: skip
    add("--out", type=Path, default=Path("swap-bench.json"), help="JSON report")
    sizes = parser.add_argument_group(
        "size scaling", "with --sizes, synthetic models of each size replace the profile's "
        "(docs/benchmarks.md, \"Size scaling\"); --repeats, --rounds, --conditions apply"
    )  # fmt: skip
    sizes.add_argument("--sizes", type=_sizes, default=None, metavar="LIST",
        help="model sizes in GiB (0.25,0.5,1,2,4) or with units (256MiB)")  # fmt: skip
    sizes.add_argument("--size-tokens", type=int, default=8,
        help="tokens per phase of the two-model pipeline (default: 8)")  # fmt: skip


def build_args(argv: Sequence[str]) -> argparse.Namespace:
    """This subcommand's arguments parsed from ``argv`` (for library callers and tests)."""
    parser = argparse.ArgumentParser(prog="python -m swapos.bench swap")
    add_arguments(parser)
    return parser.parse_args(argv)


def main(args: argparse.Namespace) -> int:
    """Swap microbench: per-model cold/warm load, TTFT, close, RSS; pipeline by mode."""
    if args.sizes:
        return main_sizes(args)
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


@dataclass(frozen=True)
class _Bench:
    """One benchmark's fixed inputs: the rig and its backend, the arguments, the page-cache
    dropper, the conditions it can run, where progress goes."""

    rig: Rig
    backend: ModelBackend
    args: argparse.Namespace
    dropper: CacheDropper
    conditions: list[str]
    say: Say


async def run_bench(rig: Rig, args: argparse.Namespace, *, say: Say = print) -> SwapReport:
    """Both parts of the benchmark on ``rig``; progress lines go to ``say``.

    Raises:
        SwapOSError: a model failed to load (the message names it).
    """
    load_start = list(os.getloadavg())
    if args.budget is not None:
        rig = dataclasses.replace(
            rig, profile=msgspec.structs.replace(rig.profile, budget=args.budget)
        )
    if load_start[0] > BUSY_LOAD:
        say(f"warning: load average {load_start[0]:.2f} > {BUSY_LOAD}: timings will be noisy")
    backend = rig.new_backend()
    dropper = CacheDropper(backend, rig.specs, rig.drop_caches)
    conditions = list(args.conditions)
    if "cold" in conditions and not await dropper.drop():
        say(f"cold skipped: {dropper.unavailable}")
        conditions.remove("cold")
    bench = _Bench(rig, backend, args, dropper, conditions, say)
    samples = await _measure_models(bench)
    order = schedule_models(args.schedule, list(rig.specs), rig.profile.roles, args.phases)
    phases = pipeline_phases(order, args.tokens)
    runs = await _run_pipelines(bench, phases)
    return _report(bench, samples, phases, runs, load_start=load_start)


async def _measure_models(bench: _Bench) -> list[SwapSample]:
    """Part 1: every model swapped ``--repeats`` times per condition."""
    args = bench.args
    samples: list[SwapSample] = []
    for rep in range(args.repeats):
        for cond in bench.conditions:
            for spec in bench.rig.specs.values():
                sample = await measure_swap(
                    bench.backend, spec, condition=cond, dropper=bench.dropper
                )
                if sample is not None:
                    samples.append(sample)
                    bench.say(
                        f"swap {rep + 1}/{args.repeats} {cond:4} {spec.name:8} "
                        f"load {sample.load_s:.3f}s ttft {sample.ttft_s:.3f}s "
                        f"close {sample.evict_s:.3f}s"
                    )
    return samples


async def _run_pipelines(bench: _Bench, phases: list[PhaseSpec]) -> list[ModeRun]:
    """Part 2: ``--rounds`` rounds, each running every mode once per condition in the order
    :func:`round_order` gives."""
    args = bench.args
    runs: list[ModeRun] = []
    modes: list[Mode] = list(args.modes)
    for rnd in range(args.rounds):
        for cond in bench.conditions:
            for pos, mode in enumerate(round_order(modes, rnd)):
                run = await run_mode(
                    bench.rig, mode, phases, condition=cond, round_=rnd, position=pos,
                    dropper=bench.dropper, prefetch=args.prefetch,
                )  # fmt: skip
                runs.append(run)
                error = f" ERROR {run.error}" if run.error else ""
                bench.say(
                    f"round {rnd + 1}/{args.rounds} {cond:4} {mode:10} wall {run.wall_s:.2f}s "
                    f"load {run.load_s:.2f}s hidden {run.load_hidden_s:.2f}s "
                    f"evict {run.evict_s:.2f}s{error}"
                )
    return runs


def _report(
    bench: _Bench,
    samples: list[SwapSample],
    phases: list[PhaseSpec],
    runs: list[ModeRun],
    *,
    load_start: list[float],
) -> SwapReport:
    """Part 3: the statistics of both parts and the targets checked on them."""
    rig, args, conditions = bench.rig, bench.args, bench.conditions
    budget = parse_size(rig.profile.budget)
    estimates = {n: bench.backend.estimate_footprint(s) for n, s in rig.specs.items()}
    two = sum(sorted(estimates.values())[-2:])
    modes = [
        stats
        for c in conditions
        for m in args.modes
        if (stats := mode_stats(runs, c, m)) is not None
    ]
    ratios = wall_ratios(runs, conditions)
    return SwapReport(
        host=host_info(),
        command=_command(args),
        profile=rig.profile.name,
        budget_bytes=budget,
        budget_holds_two=len(estimates) >= 2 and two <= budget,
        estimates_bytes=estimates,
        repeats=args.repeats,
        rounds=args.rounds,
        schedule=args.schedule,
        phases=[p.model for p in phases],
        tokens=args.tokens,
        prefetch=args.prefetch or "(mode default)",
        cold_method=bench.dropper.method,
        cold_skipped=bench.dropper.unavailable if "cold" in args.conditions else None,
        load_avg_start=load_start,
        load_avg_end=list(os.getloadavg()),
        models=model_stats(samples),
        runs=runs,
        modes=modes,
        ratios=ratios,
        targets=targets(
            modes, ratios, budget=budget, holds_two=two <= budget, schedule=args.schedule
        ),
    )


def _command(args: argparse.Namespace) -> str:
    parts = [
        "python -m swapos.bench swap",
        f"--repeats {args.repeats} --rounds {args.rounds} --phases {args.phases}",
        f"--schedule {args.schedule}" + (f" --budget {args.budget}" if args.budget else ""),
        f"--tokens {args.tokens} --conditions {','.join(args.conditions)}",
        f"--modes {','.join(args.modes)}",
    ]
    if args.profile:
        parts.append(f"--profile {args.profile}")
    if args.prefetch:
        parts.append(f"--prefetch {args.prefetch}")
    return " ".join([*parts, f"--out {args.out}"])

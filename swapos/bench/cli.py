"""``python -m swapos.bench``: one subcommand per benchmark, registered in one table."""

from __future__ import annotations

import argparse
import sys
from collections.abc import Callable, Sequence

from swapos.bench import grammar, kv, long_prompt, precheck, replay, report, splice
from swapos.bench.decode import command as decode
from swapos.bench.draws import command as draws
from swapos.bench.grade import command as grade_cost
from swapos.bench.overhead import command as overhead
from swapos.bench.serve import command as serve
from swapos.bench.slots import command as slots
from swapos.bench.soak import command as soak
from swapos.bench.soak_slots import command as soak_slots
from swapos.bench.suite import command as suite_run
from swapos.bench.swap import command as swap
from swapos.bench.swap.gpu_check import add_arguments as gpu_check_args
from swapos.bench.swap.gpu_check import main as gpu_check_main
from swapos.cluster import overhead as ray_overhead
from swapos.cluster.session import run_on_ray
from swapos.errors import SwapOSError
from swapos.logconfig import configure_logging

AddArguments = Callable[[argparse.ArgumentParser], None]
Main = Callable[[argparse.Namespace], int]


def _suite_run(args: argparse.Namespace) -> int:
    return suite_run.main(args, on_ray=run_on_ray)  # the cluster plugs in --ray here


_suite_run.__doc__ = suite_run.main.__doc__

SUBCOMMANDS: dict[str, tuple[AddArguments, Main]] = {
    "decode": (decode.add_arguments, decode.main),
    "draws": (draws.add_arguments, draws.main),
    "grade": (grade_cost.add_arguments, grade_cost.main),
    "grammar": (grammar.add_arguments, grammar.main),
    "kv": (kv.add_arguments, kv.main),
    "long-prompt": (long_prompt.add_arguments, long_prompt.main),
    "overhead": (overhead.add_arguments, overhead.main),
    "precheck": (precheck.add_arguments, precheck.main),
    "ray-overhead": (ray_overhead.add_arguments, ray_overhead.main),
    "replay": (replay.add_arguments, replay.main),
    "run": (suite_run.add_arguments, _suite_run),
    "serve": (serve.add_arguments, serve.main),
    "slots": (slots.add_arguments, slots.main),
    "soak": (soak.add_arguments, soak.main),
    "soak-slots": (soak_slots.add_arguments, soak_slots.main),
    "splice": (splice.add_arguments, splice.main),
    "swap": (swap.add_arguments, swap.main),
    "gpu-check": (gpu_check_args, gpu_check_main),
    "report": (report.add_arguments, report.main),
}
"""Every subcommand: ``name -> (add_arguments, main)``. ``main``'s docstring is its help."""


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="python -m swapos.bench", description="SwapOS benchmarks, one subcommand each."
    )
    parser.add_argument("-v", "--verbose", action="store_true", help="log at debug level")
    sub = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")
    for name, (add_arguments, run) in SUBCOMMANDS.items():
        doc = (run.__doc__ or "").strip().splitlines()
        add_arguments(sub.add_parser(name, help=doc[0] if doc else None, description=run.__doc__))
    return parser


def main(argv: Sequence[str] | None = None, *, configure_logs: bool = False) -> int:
    """Parse ``argv`` and run the subcommand; a :class:`SwapOSError` is printed, exit 2.

    ``configure_logs`` is for the process entry point only: structlog is configured once,
    globally, so library callers and tests leave it False.
    """
    args = build_parser().parse_args(argv)
    if configure_logs:
        configure_logging(2 if args.verbose else 0)  # -v: debug
    _, run = SUBCOMMANDS[args.command]
    try:
        return run(args)
    except SwapOSError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2

"""``bench run``: the suite benchmark's command line.

``python -m swapos.bench run --suite S [--modes ...] [--arms ...] [--out DIR] [--resume]``

:func:`main` reads the arguments, loads the suite and runs it, locally
(:func:`swapos.bench.suite.session.run_bench`: one system per mode/arm in this process) or on
Ray (``--ray``, plugged in by the ``bench`` command line); it then records the invocation in
``bench.json``, writes ``comparison.json`` and prints each mode/arm's figures. See
``docs/reports.md``.
"""

from __future__ import annotations

import argparse
import functools
from collections.abc import Sequence
from pathlib import Path
from typing import Protocol

import anyio
import msgspec

from swapos.bench.compare import Key, compare, label
from swapos.bench.results import write_atomic
from swapos.bench.suite.arms import ARMS, parse_arms
from swapos.bench.suite.progress import Reporter, RichReporter
from swapos.bench.suite.session import open_llama, run_bench
from swapos.bench.swap.coldcache import ColdCache
from swapos.cliargs import positive_int
from swapos.console import interrupt_on_sigterm
from swapos.data.task import Task
from swapos.errors import SwapOSError
from swapos.models.profile import MODES, Profile
from swapos.pipeline.tasks import load_suite
from swapos.records.schema import RunSummary
from swapos.records.summary import peak_rss_text
from swapos.sysinfo import process_baseline_bytes


class RunOnRay(Protocol):
    """Runs a suite on Ray (``--ray``): :func:`swapos.cluster.session.run_on_ray`, which the
    ``bench`` command line plugs into :func:`main` (this module does not import the
    cluster: the cluster imports the suite's parts)."""

    async def __call__(
        self,
        tasks: Sequence[Task],
        profile: Profile,
        *,
        address: str | None,
        workers: int | None,
        out: Path,
        modes: Sequence[str],
        arms: Sequence[str],
        max_attempts: int | None = None,
        resume: bool = False,
        shared_logs: bool = False,
        reporter: Reporter | None = None,
    ) -> tuple[dict[Key, RunSummary], object]: ...


def parse_choices(text: str, valid: Sequence[str], what: str) -> list[str]:
    """A comma-separated list of ``what`` names, each one of ``valid``, deduplicated.

    Raises:
        SwapOSError: an unknown or empty name (the message lists the valid ones).
    """
    names = list(dict.fromkeys(n.strip() for n in text.split(",")))
    unknown = [n for n in names if n not in valid]
    if unknown or not names:
        raise SwapOSError(
            f"unknown {what} {', '.join(map(repr, unknown)) or repr(text)}; "
            f"choose from {', '.join(valid)} (comma-separated)"
        )
    return names


def write_comparison(out: Path, summaries: dict[Key, RunSummary]) -> Path:
    """Write ``out/comparison.json`` from ``summaries``; returns its path."""
    path = out / "comparison.json"
    encoded = msgspec.json.encode(compare(summaries))
    write_atomic(path, msgspec.json.format(encoded, indent=2) + b"\n")
    return path


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--suite", default="builtin", help="builtin, humaneval, issues or a folder")
    parser.add_argument("--limit", type=positive_int, help="at most this many tasks (in id order)")
    parser.add_argument("--tasks", help="only these task ids (comma-separated)")
    parser.add_argument("--categories", help="only these categories (comma-separated)")
    parser.add_argument("--modes", default=",".join(MODES), help=f"of {', '.join(MODES)}")
    parser.add_argument(
        "--arms",
        default="pipeline",
        help=f"of {', '.join(ARMS)}, single:MODEL (one shot of that model of the profile), "
        "pipeline:KNOB=VALUE[+KNOB=VALUE] (the pipeline with [pipeline] knobs changed)",
    )
    parser.add_argument("--profile", help="profile TOML or builtin name (default, tiny)")
    parser.add_argument(
        "--max-attempts", type=positive_int, help="code attempts of the pipeline arm (>= 1)"
    )
    parser.add_argument("--out", type=Path, default=Path("out/bench"), help="output folder")
    parser.add_argument("--resume", action="store_true", help="continue the run in --out")
    parser.add_argument("--cold", action="store_true", help="drop the page cache before runs")
    parser.add_argument(
        "--ray",
        nargs="?",
        const="",
        metavar="ADDRESS",
        help="run on Ray (needs swapos[ray]): at ADDRESS, else RAY_ADDRESS, else a local Ray",
    )
    parser.add_argument(
        "--workers", type=positive_int, help="with --ray: this many workers (default: one per node)"
    )
    parser.add_argument(
        "--shared-out",
        action="store_true",
        help="with --ray: --out is mounted on every node; workers write their logs there",
    )


def main(args: argparse.Namespace, *, on_ray: RunOnRay | None = None) -> int:
    """Run a suite in every mode x arm, interleaved; write results and comparison.json."""
    if args.ray is None and (args.workers is not None or args.shared_out):
        raise SwapOSError("--workers and --shared-out go with --ray")
    if args.ray is not None and args.cold:
        raise SwapOSError("--cold is not supported with --ray (it drops one machine's cache)")
    if args.ray is not None and on_ray is None:
        raise SwapOSError("--ray is not available here: run it as `python -m swapos.bench run`")
    modes = parse_choices(args.modes, MODES, "mode")
    profile = _profile(args.profile)
    arms = parse_arms(args.arms, profile)
    # a local run holds one system per mode/arm in this process; on Ray each worker its own
    systems = len(modes) * len(arms) if args.ray is None else 1
    tasks = load_suite(
        args.suite,
        limit=args.limit,
        task_ids=_split(args.tasks),
        categories=_split(args.categories),
    )
    out: Path = args.out
    cold = ColdCache(print) if args.cold else None
    cluster: dict[str, object] = {}

    async def go() -> dict[Key, RunSummary]:
        with RichReporter() as reporter:
            if on_ray is not None and args.ray is not None:
                return await _go_ray(
                    on_ray,
                    args,
                    tasks=tasks,
                    profile=profile,
                    modes=modes,
                    arms=arms,
                    reporter=reporter,
                    cluster=cluster,
                )
            return await run_bench(
                tasks,
                profile,
                out=out,
                modes=modes,
                arms=arms,
                factory=functools.partial(open_llama, process_budget=systems == 1),
                max_attempts=args.max_attempts,
                resume=args.resume,
                cold=cold,
                reporter=reporter,
            )

    task_ids = [t.task_id for t in tasks]
    interrupt_on_sigterm()
    process_baseline_bytes()  # the process before any system: what no system's budget holds
    try:
        summaries = anyio.run(go)
    except KeyboardInterrupt:
        _write_manifest(out, args, task_ids, cold, cluster)
        print(f"interrupted; finished tasks are in {out}: rerun with --resume to continue")
        return 130
    _write_manifest(out, args, task_ids, cold, cluster)
    _print_cluster(cluster)
    path = write_comparison(out, summaries)
    for key, s in summaries.items():
        print(
            f"{label(key)}: {s.tasks_passed}/{s.tasks_total} passed, "
            f"mean wall {s.mean_wall_clock_s:.2f}s, hidden load {s.load_hidden_fraction:.0%}"
            + (_peak(s, systems) if s.peak_rss_of_budget else "")
        )
    print(f"wrote {path}; report: python -m swapos.bench report {out}")
    return 0


async def _go_ray(
    run_on_ray: RunOnRay,
    args: argparse.Namespace,
    *,
    tasks: Sequence[Task],
    profile: Profile,
    modes: Sequence[str],
    arms: Sequence[str],
    reporter: Reporter,
    cluster: dict[str, object],
) -> dict[Key, RunSummary]:
    """``main`` on Ray; the session's cluster report goes into ``cluster`` (for bench.json)."""
    summaries, report = await run_on_ray(
        tasks,
        profile,
        address=args.ray or None,
        workers=args.workers,
        out=args.out,
        modes=modes,
        arms=arms,
        max_attempts=args.max_attempts,
        resume=args.resume,
        shared_logs=args.shared_out,
        reporter=reporter,
    )
    cluster.update(msgspec.to_builtins(report))
    return summaries


def _print_cluster(cluster: dict[str, object]) -> None:
    workers = cluster.get("workers")
    for w in workers if isinstance(workers, list) else []:
        print(f"worker {w['name']} ({w['node']}): {w['state']}, {w['tasks']} task(s) {w['reason']}")
    if cluster:
        print(f"re-runs: {cluster.get('reruns')}; given up: {cluster.get('given_up')}")


def _split(text: str | None) -> list[str] | None:
    return [x.strip() for x in text.split(",") if x.strip()] if text else None


def _profile(name_or_path: str | None) -> Profile:
    from swapos.models.bundled import resolve_profile

    return resolve_profile(name_or_path)


def _write_manifest(
    out: Path,
    args: argparse.Namespace,
    task_ids: list[str],
    cold: ColdCache | None,
    cluster: dict[str, object] | None = None,
) -> None:
    """``bench.json``: the invocation, appended to the sessions already recorded."""
    path = out / "bench.json"
    sessions: list[object] = []
    if path.exists():
        try:
            sessions = list(msgspec.json.decode(path.read_bytes()).get("sessions", []))
        except (msgspec.DecodeError, AttributeError):
            sessions = []
    sessions.append(
        {
            "argv": {
                k: str(v) if isinstance(v, Path) else v
                for k, v in vars(args).items()
                if k != "command"
            },
            "task_ids": task_ids,
            "cold": cold.status() if cold is not None else {"requested": False},
            **({"cluster": cluster} if cluster else {}),
        }
    )
    write_atomic(path, msgspec.json.format(msgspec.json.encode({"sessions": sessions})) + b"\n")


def _peak(s: RunSummary, systems: int = 1) -> str:
    """``, peak RSS 1545 MiB of 1536 MiB budget (1.006x; fixed overhead 52 MiB)``. With
    ``systems`` > 1 (every mode/arm of a local run is a system of one process, and RSS is
    the process's) the peak is set against the sum of their budgets."""
    if systems == 1:
        note = f"; fixed overhead {s.overhead_bytes / 2**20:.0f} MiB"
    else:  # each budget holds its models and KV tier; the process's own memory none
        note = (
            f"; {systems} systems of {s.budget_bytes / 2**20:.0f} MiB in this process, whose "
            f"fixed overhead ({process_baseline_bytes() / 2**20:.0f} MiB) no budget holds"
        )
    budget = s.budget_bytes * systems
    return f", {peak_rss_text(s.peak_rss_bytes, budget, places=3, note=note)}"

"""The suite benchmark: every mode x arm on the same tasks, interleaved task by task.

``python -m swapos.bench run --suite S [--modes ...] [--arms ...] [--out DIR] [--resume]``

Each mode/arm gets one long-lived system, opened once and kept open across tasks so models
stay resident between tasks, as they would in a real deployment. All of them are open at
once: with the default profile that is up to ~9 GiB of models for four modes x two arms
(resident holds every model). For each task, every mode/arm runs it in turn, in an order
rotated by the task's index so that machine drift spreads over all of them. After every
task the mode/arm's ``results.json`` is rewritten atomically, so an interrupted run keeps
what it finished and ``--resume`` continues it without running or counting anything twice.
Each system is told which task it runs next (``run_task(..., next_task=...)``), so the
overlap mode prefetches the next task's first model while the current task finishes.
See ``docs/reports.md``.
"""

from __future__ import annotations

import argparse
import functools
from collections.abc import Sequence
from contextlib import AbstractAsyncContextManager, AsyncExitStack
from pathlib import Path
from typing import Protocol, cast

import anyio
import msgspec
import structlog

from swapos.actors.system import System, open_system
from swapos.bench.compare import Key, compare, label, ordered
from swapos.bench.results import info_of, write_atomic
from swapos.bench.suite.arms import ARMS, SystemFactory, arm_profile, parse_arms, run_triple
from swapos.bench.suite.progress import Reporter, RichReporter
from swapos.bench.suite.scoreboard import Scoreboard, rotated
from swapos.bench.swap.coldcache import ColdCache
from swapos.cliargs import positive_int
from swapos.clock import Clock, MonotonicClock
from swapos.console import interrupt_on_sigterm
from swapos.data.task import Task
from swapos.errors import SwapOSError
from swapos.models.profile import MODES, Mode, Profile
from swapos.pipeline.tasks import load_suite
from swapos.records.schema import RunSummary
from swapos.records.summary import peak_rss_text
from swapos.sysinfo import process_baseline_bytes

log = structlog.get_logger(__name__)


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


def events_path(folder: Path) -> Path:
    """``events.jsonl``, or ``events-<n>.jsonl`` for the n-th resumed session (every session
    opens a new system, and an event log holds exactly one run)."""
    path, n = folder / "events.jsonl", 1
    while path.exists():
        n += 1
        path = folder / f"events-{n}.jsonl"
    return path


def open_llama(
    profile: Profile, mode: Mode, events: Path, *, process_budget: bool = True
) -> AbstractAsyncContextManager[System]:
    """The real :data:`SystemFactory`: llama-cpp-python models, a monotonic clock; the
    budget is the process's (its RSS), as ``swapos run`` holds it. A run of several systems
    in one process passes ``process_budget=False``: each budget then holds its system's
    models and KV tier only, since the process's RSS holds every system's (each would read
    the others' models as memory of its own and shrink its KV tier for them)."""
    return open_system(profile, mode=mode, event_log=events, process_budget=process_budget)


class _Session:
    """The systems a local run keeps open, one per mode/arm, and the time spent in each."""

    def __init__(self, clock: Clock) -> None:
        self.clock = clock
        self.systems: dict[Key, System] = {}
        self.wall: dict[Key, float] = {}


async def _open_systems(
    stack: AsyncExitStack,
    session: _Session,
    *,
    keys: Sequence[Key],
    profile: Profile,
    out: Path,
    factory: SystemFactory,
) -> None:
    """Step 2: open one system per mode/arm in ``keys`` (its opening counts as its time)."""
    for key in keys:
        t0 = session.clock.now()
        folder = out / label(key)
        folder.mkdir(parents=True, exist_ok=True)
        cm = factory(arm_profile(profile, key[1]), cast(Mode, key[0]), events_path(folder))
        session.systems[key] = await stack.enter_async_context(cm)
        session.wall[key] = session.clock.now() - t0
        log.info("bench.system_opened", key=label(key), open_s=session.wall[key])


async def _run_task_everywhere(
    session: _Session,
    board: Scoreboard,
    task: Task,
    order: Sequence[Key],
    following: dict[Key, dict[str, Task | None]],
    *,
    max_attempts: int | None,
    cold: ColdCache | None,
    reporter: Reporter | None,
) -> None:
    """Step 3, for one task: run it in every mode/arm of ``order`` that has not finished it,
    committing each result as it comes."""
    for key in board.pending(task, order):
        if cold is not None:
            await cold.drop()
        t0 = session.clock.now()
        outcome = await run_triple(
            session.systems[key],
            task,
            key[1],
            max_attempts=max_attempts,
            next_task=following[key][task.task_id],
        )
        session.wall[key] += session.clock.now() - t0
        live = info_of(session.systems[key].summary())
        live.wall_clock_s = session.wall[key]
        board.commit(key, outcome.result, live, capsule=outcome.capsule_json)
        if reporter is not None:
            reporter.advance(key, outcome.result)


async def run_bench(
    tasks: Sequence[Task],
    profile: Profile,
    *,
    out: Path,
    modes: Sequence[str],
    arms: Sequence[str],
    factory: SystemFactory = open_llama,
    max_attempts: int | None = None,
    resume: bool = False,
    cold: ColdCache | None = None,
    clock: Clock | None = None,
    reporter: Reporter | None = None,
) -> dict[Key, RunSummary]:
    """Run every task in every mode x arm, interleaved; write results after every task.

    The steps: read what ``out`` already holds
    (:class:`~swapos.bench.suite.scoreboard.Scoreboard`), open one system per mode/arm with
    work left, then for each task run every mode/arm that has not finished it, in an order
    rotated by the task's index, committing each result.

    Args:
        tasks: the suite, in order (its index rotates the mode/arm order).
        profile: the profile of the ``pipeline`` arm (see :func:`arm_profile`).
        out: output folder; ``<mode>-<arm>/results.json``, ``events*.jsonl`` and
            ``capsules/<task_id>.json`` (each task's final capsule) go there.
            Each task run announces the next task that system will run.
        modes, arms: what to compare (validated by :func:`parse_choices`).
        factory: opens one mode/arm's system (tests pass fake systems).
        max_attempts: code attempts of the ``pipeline`` arm (default: the profile's).
        resume: continue the results in ``out``, skipping finished (task, mode, arm).
        cold: drops the page cache before every task run, where allowed.
        clock: measures the time spent in each system (default: monotonic).
        reporter: told the total and every finished task.

    Returns:
        The summary of every mode/arm, old and new tasks together.

    Raises:
        SwapOSError: ``out`` holds a run and ``resume`` is False; a results file is
            corrupt or from another mode; a system cannot open. Results written so far
            stay on disk. Cancellation stops after the task runs in flight; nothing
            finished is lost.
    """
    keys = ordered([(m, a) for m in modes for a in arms])
    board = Scoreboard.open(out, keys, tasks, resume)
    todo = board.todo(tasks)
    # The task each system runs after each one: announced so overlap prefetches its model.
    following = {k: _following(v) for k, v in todo.items()}
    if reporter is not None:
        reporter.start(board.remaining(tasks), keys)
    session = _Session(clock or MonotonicClock())
    async with AsyncExitStack() as stack:
        await _open_systems(
            stack,
            session,
            keys=[k for k in keys if todo[k]],
            profile=profile,
            out=out,
            factory=factory,
        )
        for i, task in enumerate(tasks):
            await _run_task_everywhere(
                session,
                board,
                task,
                rotated(keys, i),
                following,
                max_attempts=max_attempts,
                cold=cold,
                reporter=reporter,
            )
    return board.summaries


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


def _following(tasks: Sequence[Task]) -> dict[str, Task | None]:
    """Each task's id -> the task after it (None for the last)."""
    return {t.task_id: tasks[i + 1] if i + 1 < len(tasks) else None for i, t in enumerate(tasks)}


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

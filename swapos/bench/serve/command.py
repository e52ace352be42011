"""``python -m swapos.bench serve``: an Aider-style trace against ``swapos serve`` and against
``llama_cpp.server`` on the same models, on loopback, in one run (issue 11's targets).

``python -m swapos.bench serve [--profile default|tiny|PATH] [--sessions 3] [--rounds 4]
[--architect-tokens 64] [--editor-tokens 96] [--conditions one,both] [--targets swapos,peer]
[--name serve] [--results out]``

``--targets page`` is ``swapos`` with one live page open on ``/ui`` in headless Chromium
through the trace (the page's cost: its wall against ``swapos``'s; a screenshot of the page
as the trace ends goes to the results folder). Targets may repeat (``swapos,page,swapos,page``
interleaves them); the ratios are of the summed walls.

The trace (:mod:`~swapos.bench.serve.trace`): ``--sessions`` concurrent sessions, each
``--rounds`` rounds of an architect request (the profile's ``reason`` model, the large one)
then an editor request (its ``code`` model, the small one), fixed prompts whose chat history
grows every round, fixed ``max_tokens``, temperature 0, seed 0.

Conditions, each on fresh server processes, SwapOS first, then the peer:

* ``one``: a budget that holds either model but not both. SwapOS: ``--budget`` = the larger
  model's estimated footprint plus half the smaller's. Peer: one ``llama_cpp.server`` with
  both models in its config (it swaps, one model at a time).
* ``both``: a budget for both (1.25x their sum). Peer: one server per model, both preloaded.

Before the clock starts, each server answers one 1-token request per model (editor, then
architect), so files are in the page cache and the peer-with-both has both loaded; both sides
start with the architect resident. Results: ``<results>/<name>-<date>/serve-bench.json`` plus
the servers' logs and SwapOS's event logs. See ``docs/benchmarks.md``, "bench serve".
"""

from __future__ import annotations

import argparse
import datetime
import sys
from collections.abc import Callable, Sequence
from pathlib import Path

import anyio
import msgspec
from rich.console import Console
from rich.table import Table

from swapos.bench.serve import fleet, servers
from swapos.bench.serve.client import replay
from swapos.bench.serve.page import page_open
from swapos.bench.serve.stats import RunStats, TargetRun, run_stats, targets
from swapos.bench.serve.trace import TraceRequest, build_trace
from swapos.bench.swap.stats import TargetCheck
from swapos.errors import SwapOSError
from swapos.models.bundled import resolve_profile
from swapos.models.profile import Profile
from swapos.models.resolve import model_specs
from swapos.models.spec import ModelSpec
from swapos.sysinfo import host_info

CONDITIONS = ("one", "both")
TARGETS = ("swapos", "page", "peer")
Say = Callable[[str], None]


class ServeReport(msgspec.Struct, frozen=True, kw_only=True):
    host: dict[str, str]
    command: str
    run_at: str
    profile: str
    architect: str
    editor: str
    sessions: int
    rounds: int
    architect_tokens: int
    editor_tokens: int
    estimates_bytes: dict[str, int]
    budgets_bytes: dict[str, int]
    runs: list[TargetRun]
    stats: list[RunStats]
    targets: list[TargetCheck]


def _csv(choices: Sequence[str]) -> Callable[[str], list[str]]:
    def parse(text: str) -> list[str]:
        items = [t.strip() for t in text.split(",") if t.strip()]
        if not items or any(t not in choices for t in items):
            raise argparse.ArgumentTypeError(f"choose from {', '.join(choices)} (got {text!r})")
        return items

    return parse


def add_arguments(parser: argparse.ArgumentParser) -> None:
    add = parser.add_argument
    add("--profile", default="default", help="builtin profile or TOML (default: default)")
    add("--sessions", type=int, default=3, help="concurrent sessions (default: 3)")
    add("--rounds", type=int, default=4, help="architect+editor rounds per session (default: 4)")
    add("--architect-tokens", type=int, default=64, help="max_tokens of architect requests")
    add("--editor-tokens", type=int, default=96, help="max_tokens of editor requests")
    add("--conditions", type=_csv(CONDITIONS), default=list(CONDITIONS),
        help="one (budget for one model), both (budget for both); default: one,both")  # fmt: skip
    add("--targets", type=_csv(TARGETS), default=["swapos", "peer"],
        help="swapos, page (swapos with /ui open in chromium), peer (llama_cpp.server), "
        "in order, repeats allowed; default: swapos,peer")  # fmt: skip
    add("--name", default="serve", help="results folder name, before the date (default: serve)")
    add("--results", type=Path, default=Path("out"), help="where results go (default: out)")
    fleet.add_arguments(parser)


def build_args(argv: Sequence[str]) -> argparse.Namespace:
    """This subcommand's arguments parsed from ``argv`` (for library callers and tests)."""
    parser = argparse.ArgumentParser(prog="python -m swapos.bench serve")
    add_arguments(parser)
    return parser.parse_args(argv)


def main(args: argparse.Namespace) -> int:
    """Serving bench: an Aider-style trace against swapos serve and llama_cpp.server (with
    ``--ray``: a fleet against one replica and round-robin replicas)."""
    if args.sessions < 1 or args.rounds < 1:
        raise SwapOSError("--sessions and --rounds must be at least 1")
    if args.ray is not None:
        return fleet.main(args)
    console = Console(width=None if sys.stdout.isatty() else 150)
    out_dir = args.results / f"{args.name}-{datetime.date.today().isoformat()}"
    report = anyio.run(lambda: run_bench(args, out_dir, say=console.print))
    print_report(report, console)
    out_dir.mkdir(parents=True, exist_ok=True)
    path = out_dir / "serve-bench.json"
    path.write_bytes(msgspec.json.format(msgspec.json.encode(report)))
    console.print(f"wrote {path}")
    return 0


def roles_of(profile: Profile) -> tuple[str, str]:
    """(architect, editor): the profile's ``reason`` and ``code`` models.

    Raises:
        SwapOSError: they are the same model, or the profile lacks the roles.
    """
    names = list(profile.models)
    architect = profile.roles.get("reason", names[0])
    editor = profile.roles.get("code", names[-1])
    if architect == editor:
        raise SwapOSError(
            f"profile {profile.name!r}: the reason and code roles use the same model "
            f"({architect!r}); bench serve alternates two models"
        )
    return architect, editor


def budgets(estimates: dict[str, int]) -> dict[str, int]:
    """Per condition: ``one`` holds the larger model plus half the smaller (either, never
    both); ``both`` is 1.25x the two together."""
    small, large = sorted(estimates.values())
    return {"one": large + small // 2, "both": int((large + small) * 1.25)}


async def run_bench(args: argparse.Namespace, out_dir: Path, *, say: Say = print) -> ServeReport:
    """Every condition x target, in order; progress lines go to ``say``."""
    from swapos.backends.llama import LlamaBackend

    profile = resolve_profile(args.profile)
    architect, editor = roles_of(profile)
    all_specs = await anyio.to_thread.run_sync(model_specs, profile)
    specs = {name: all_specs[name] for name in (architect, editor)}
    backend = LlamaBackend()
    estimates = {n: backend.estimate_footprint(s) for n, s in specs.items()}
    limits = budgets(estimates)
    trace = build_trace(
        args.sessions, args.rounds, architect=architect, editor=editor,
        architect_tokens=args.architect_tokens, editor_tokens=args.editor_tokens,
    )  # fmt: skip
    await anyio.Path(out_dir).mkdir(parents=True, exist_ok=True)
    runs: list[TargetRun] = []
    for cond in args.conditions:
        for i, target in enumerate(args.targets):
            tag = f"{cond}-{target}" + (f"-{i}" if args.targets.count(target) > 1 else "")
            run = await _run_one(args, (cond, target, tag), specs, limits[cond], trace, out_dir)
            runs.append(run)
            st = run_stats(run)
            say(
                f"{cond:4} {target:6} wall {st.wall_s:.2f}s p50 {st.p50_s:.2f}s p95 "
                f"{st.p95_s:.2f}s errors {st.errors} (servers ready after {run.setup_s:.1f}s)"
            )
    stats = [run_stats(r) for r in runs]
    return ServeReport(
        host=host_info(),
        command=_command(args),
        run_at=datetime.datetime.now().isoformat(timespec="seconds"),
        profile=profile.name,
        architect=architect,
        editor=editor,
        sessions=args.sessions,
        rounds=args.rounds,
        architect_tokens=args.architect_tokens,
        editor_tokens=args.editor_tokens,
        estimates_bytes=estimates,
        budgets_bytes=limits,
        runs=runs,
        stats=stats,
        targets=targets(stats),
    )


async def _run_one(  # noqa: PLR0917
    args: argparse.Namespace,
    what: tuple[str, str, str],
    specs: dict[str, ModelSpec],
    budget: int,
    trace: list[list[TraceRequest]],
    out_dir: Path,
) -> TargetRun:
    """One condition on one target (``what``: condition, target, the run's file tag): start
    its servers, warm them, replay (with ``page``: a live page open on ``/ui``), stop them."""
    cond, target, tag = what
    if target in {"swapos", "page"}:
        port = servers.free_port()
        launches = [servers.swapos_launch(
            args.profile, port, mode="overlap", budget=budget,
            event_log=out_dir / f"{tag}-events.jsonl", log=out_dir / f"{tag}.log",
        )]  # fmt: skip
        urls = {name: servers.base_url(port) for name in specs}
        server = f"swapos serve --mode overlap --budget {budget}"
    elif cond == "one":
        port = servers.free_port()
        launches = [servers.peer_launch(list(specs.values()), port, workdir=out_dir,
                                        log=out_dir / f"{tag}.log")]  # fmt: skip
        urls = {name: servers.base_url(port) for name in specs}
        server = "llama_cpp.server, both models in one config (swaps)"
    else:
        ports = {name: servers.free_port() for name in specs}
        launches = [
            servers.peer_launch(
                [spec], ports[name], workdir=out_dir, log=out_dir / f"{tag}-{name}.log"
            )
            for name, spec in specs.items()
        ]
        urls = servers.model_urls(ports)
        server = "llama_cpp.server x2, one per model (both preloaded)"
    async with servers.running(launches) as setup_s:
        await _warm(urls, list(specs))
        if target == "page":
            async with page_open(urls[next(iter(specs))], out_dir / tag):
                wall, samples = await replay(trace, urls)
        else:
            wall, samples = await replay(trace, urls)
    return TargetRun(
        condition=cond, target=target, server=server, wall_s=wall, samples=samples,
        setup_s=setup_s,
    )  # fmt: skip


async def _warm(urls: dict[str, str], names: list[str]) -> None:
    """One 1-token request per model, editor first, so the architect is resident after."""
    warm = [
        [TraceRequest(session=0, round=0, role="editor", model=name, max_tokens=1,
                      messages=build_trace(1, 1, architect=name, editor=name)[0][0].messages)]
        for name in reversed(names)
    ]  # fmt: skip
    for session in warm:
        _, samples = await replay([session], urls)
        failed = [s.error for s in samples if s.error]
        if failed:
            raise servers.ServerError(f"warm-up request failed: {failed[0]}")


def print_report(report: ServeReport, console: Console | None = None) -> None:
    """The per-run table and the targets table."""
    console = console or Console(file=sys.stdout)
    t = Table(
        title=f"bench serve: {report.sessions} sessions x {report.rounds} rounds of "
        f"{report.architect} ({report.architect_tokens} tok) -> {report.editor} "
        f"({report.editor_tokens} tok), {report.profile}"
    )
    cols = ("cond", "target", "budget MiB", "wall s", "p50 s", "p95 s", "mean s",
            "requests", "errors", "gen tokens", "load s", "queue s")  # fmt: skip
    for col in cols:
        t.add_column(col, justify="left" if col in ("cond", "target") else "right")
    for s in report.stats:
        t.add_row(
            s.condition, s.target, f"{report.budgets_bytes[s.condition] / 2**20:.0f}",
            f"{s.wall_s:.2f}", f"{s.p50_s:.2f}", f"{s.p95_s:.2f}", f"{s.mean_s:.2f}",
            str(s.requests), str(s.errors), str(s.completion_tokens),
            "-" if s.load_s is None else f"{s.load_s:.2f}",
            "-" if s.queue_wait_s is None else f"{s.queue_wait_s:.2f}",
        )  # fmt: skip
    console.print(t)
    if report.targets:
        tt = Table(title="Targets (issue 11)")
        for col in ("target", "cond", "value", "limit", "met", "detail"):
            tt.add_column(col)
        for c in report.targets:
            tt.add_row(c.name, c.condition, f"{c.value:.3f}", f"{c.limit:g}",
                       "met" if c.met else "MISSED", c.detail)  # fmt: skip
        console.print(tt)
    console.print(report.command)


def _command(args: argparse.Namespace) -> str:
    return (
        f"python -m swapos.bench serve --profile {args.profile} --sessions {args.sessions} "
        f"--rounds {args.rounds} --architect-tokens {args.architect_tokens} "
        f"--editor-tokens {args.editor_tokens} --conditions {','.join(args.conditions)} "
        f"--targets {','.join(args.targets)} --name {args.name} --results {args.results}"
    )

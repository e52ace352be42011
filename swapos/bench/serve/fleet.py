"""``bench serve --ray``: a fleet against one replica and against replicas behind plain
round-robin, on the same trace, in one run.

``python -m swapos.bench serve --ray [ADDRESS] --profile tiny [--sessions 3] [--rounds 4]
[--arms fleet,one,rr] [--replicas 2] [--replica-cpus 1] [--port N]``

The trace: ``--sessions`` concurrent conversations, session ``s`` alternating between the
profile's models ``s`` and ``s + 1`` (round the list), with the prompts, token counts and
session header of ``bench serve``'s Aider-style trace. Every replica's budget holds two of
the models and never three (the two largest estimates plus half the smallest), so a replica
that gets every model swaps, and replicas that split the models between them need not.

Arms, each on freshly deployed Ray Serve applications (cold: nothing loaded):

* ``fleet``: ``--replicas`` replicas in one fleet, requests routed by residency (Ray Serve's
  model multiplexing);
* ``one``: one replica;
* ``rr``: ``--replicas`` fleets of one replica each (they share nothing), the client sending
  request ``i`` to fleet ``i mod n``: replicas behind plain round-robin.

Per arm: the wall (first request sent to last answer), the requests' latencies, and the
models loaded by its replicas (urgent and prefetched, from ``GET /fleet``) per request.
Results: ``<results>/<name>-<date>/fleet-bench.json``. See docs/cluster.md, "Fleet".
"""

from __future__ import annotations

import argparse
import datetime
import itertools
import socket
import sys
from collections.abc import Callable, Sequence
from functools import partial
from typing import Any

import anyio
import httpx
import msgspec
from rich.console import Console
from rich.table import Table

from swapos.bench.serve.client import replay
from swapos.bench.serve.stats import RequestSample, percentile
from swapos.bench.serve.trace import TraceRequest, build_trace
from swapos.cluster.fleet_protocol import SESSION_HEADER, FleetConfig
from swapos.cluster.fleet_replica import ReplicaFactory
from swapos.errors import SwapOSError
from swapos.models.bundled import resolve_profile
from swapos.models.profile import Profile
from swapos.policies.fleet import ReplicaCount
from swapos.sysinfo import host_info

ARMS = ("fleet", "one", "rr")
Say = Callable[[str], None]


class ArmRun(msgspec.Struct, frozen=True, kw_only=True):
    """One arm of the run.

    Attributes:
        arm: ``fleet``, ``one`` or ``rr``; ``setup`` says what ran.
        replicas: replicas serving it.
        wall_s: first request sent to last answer.
        requests, errors: requests sent, and those that failed.
        loads, evictions: model loads (urgent and prefetched) and evictions of its replicas.
        swaps_per_request: ``loads / requests``.
        p50_s, p95_s: latency of the successful requests.
        samples: every request as the client saw it.
    """

    arm: str
    setup: str
    replicas: int
    wall_s: float
    requests: int
    errors: int
    loads: int
    evictions: int
    swaps_per_request: float
    p50_s: float
    p95_s: float
    samples: list[RequestSample]


class FleetBenchReport(msgspec.Struct, frozen=True, kw_only=True):
    host: dict[str, str]
    command: str
    run_at: str
    profile: str
    models: list[str]
    budget_bytes: int
    sessions: int
    rounds: int
    arms: list[ArmRun]


def add_arguments(parser: argparse.ArgumentParser) -> None:
    add = parser.add_argument
    add("--ray", nargs="?", const="", default=None, metavar="ADDRESS",
        help="bench a fleet on Ray Serve (ADDRESS: a cluster; none: a local Ray)")  # fmt: skip
    add("--arms", type=_arms, default=list(ARMS),
        help="with --ray: fleet, one (replica), rr (replicas behind round-robin)")  # fmt: skip
    add("--replicas", type=int, default=2, help="with --ray: replicas of fleet and rr (default 2)")
    add("--replica-cpus", type=float, default=1.0, help="with --ray: CPUs of each replica")
    add("--port", type=int, default=0, help="with --ray: Ray Serve's proxy port (0: a free one)")


def _arms(text: str) -> list[str]:
    items = [t.strip() for t in text.split(",") if t.strip()]
    if not items or any(t not in ARMS for t in items):
        raise argparse.ArgumentTypeError(f"choose from {', '.join(ARMS)} (got {text!r})")
    return items


def fleet_trace(
    models: Sequence[str], sessions: int, rounds: int, *, tokens: tuple[int, int] = (64, 96)
) -> list[list[TraceRequest]]:
    """Session ``s`` alternates between ``models[s]`` and ``models[s + 1]`` (round the list),
    on ``bench serve``'s prompts (its architect and editor turns)."""
    n = len(models)
    trace = build_trace(sessions, rounds, architect="A", editor="E",
                        architect_tokens=tokens[0], editor_tokens=tokens[1])  # fmt: skip
    return [
        [msgspec.structs.replace(r, model=models[(s + (r.model == "E")) % n]) for r in session]
        for s, session in enumerate(trace)
    ]


def budget_for_two(estimates: dict[str, int]) -> int:
    """A budget that holds any two of the models, never three.

    Raises:
        SwapOSError: fewer than three models (every replica would hold them all).
    """
    if len(estimates) < 3:
        raise SwapOSError("bench serve --ray needs a profile of three models or more")
    sizes = sorted(estimates.values())
    return sizes[-1] + sizes[-2] + sizes[0] // 2


def arm_configs(arm: str, base: FleetConfig, replicas: int) -> list[FleetConfig]:
    """The fleets an arm deploys (each at ``/<name>``)."""
    one = ReplicaCount(low=1, high=1)
    if arm == "fleet":
        count = ReplicaCount(low=replicas, high=replicas)
        return [msgspec.structs.replace(base, name="bench-fleet", replicas=count)]
    if arm == "one":
        return [msgspec.structs.replace(base, name="bench-one", replicas=one)]
    return [
        msgspec.structs.replace(base, name=f"bench-rr{i}", replicas=one) for i in range(replicas)
    ]


SETUPS = {
    "fleet": "{n} replicas, one fleet, routed by residency",
    "one": "1 replica",
    "rr": "{n} one-replica fleets behind plain round-robin",
}


async def run_arm(  # noqa: PLR0917
    arm: str,
    configs: list[FleetConfig],
    trace: list[list[TraceRequest]],
    proxy: str,
    factory: ReplicaFactory | None = None,
    actor: dict[str, Any] | None = None,
) -> ArmRun:
    """Deploy the arm's fleets, replay the trace, read their loads, delete them."""
    from swapos.cluster.ray_fleet import deploy, undeploy

    for cfg in configs:
        await anyio.to_thread.run_sync(
            partial(deploy, cfg, route_prefix=f"/{cfg.name}", factory=factory, actor=actor)
        )
    try:
        bases = [f"{proxy}/{c.name}/v1" for c in configs]
        turn = itertools.count()
        wall, samples = await replay(
            trace, lambda _: bases[next(turn) % len(bases)], session_header=SESSION_HEADER
        )
        loads = evictions = 0
        async with httpx.AsyncClient(timeout=60) as client:
            for cfg in configs:
                view = (await client.get(f"{proxy}/{cfg.name}/fleet")).json()
                loads += sum(s["report"]["loads"] for s in view["replicas"])
                evictions += sum(s["report"]["evictions"] for s in view["replicas"])
    finally:
        for cfg in configs:
            await anyio.to_thread.run_sync(undeploy, cfg.name)
    ok = [s.latency_s for s in samples if s.error is None]
    replicas = sum(c.replicas.low for c in configs)
    return ArmRun(
        arm=arm, setup=SETUPS[arm].format(n=replicas), replicas=replicas, wall_s=wall,
        requests=len(samples), errors=len(samples) - len(ok), loads=loads, evictions=evictions,
        swaps_per_request=loads / len(samples) if samples else 0.0,
        p50_s=percentile(ok, 0.5), p95_s=percentile(ok, 0.95), samples=samples,
    )  # fmt: skip


async def run_fleet_bench(
    args: argparse.Namespace,
    *,
    proxy: str,
    profile: Profile | None = None,
    budget: int | None = None,
    factory: ReplicaFactory | None = None,
    actor: dict[str, Any] | None = None,
    say: Say = print,
) -> FleetBenchReport:
    """Every arm of ``args.arms`` in order, on Ray Serve's proxy at ``proxy`` (Ray and Serve
    started). ``profile``, ``budget``, ``factory``: tests pass fake models."""
    profile = profile or resolve_profile(args.profile)
    models = sorted(profile.models)
    if budget is None:
        budget = budget_for_two(await anyio.to_thread.run_sync(_estimates, profile))
    base = FleetConfig(profile=profile, budget_bytes=budget, replica_cpus=args.replica_cpus,
                       kv_dir=None)  # fmt: skip
    tokens = (args.architect_tokens, args.editor_tokens)
    trace = fleet_trace(models, args.sessions, args.rounds, tokens=tokens)
    runs = []
    for arm in args.arms:
        run = await run_arm(
            arm, arm_configs(arm, base, args.replicas), trace, proxy, factory, actor
        )
        say(f"{arm:5} wall {run.wall_s:.2f}s swaps/request {run.swaps_per_request:.2f} "
            f"errors {run.errors}")  # fmt: skip
        runs.append(run)
    return FleetBenchReport(
        host=host_info(), command=_command(args),
        run_at=datetime.datetime.now().isoformat(timespec="seconds"), profile=profile.name,
        models=models, budget_bytes=budget, sessions=args.sessions, rounds=args.rounds, arms=runs,
    )  # fmt: skip


def _estimates(profile: Profile) -> dict[str, int]:
    from swapos.backends.llama import LlamaBackend
    from swapos.models.resolve import model_specs

    backend = LlamaBackend()
    return {n: backend.estimate_footprint(s) for n, s in model_specs(profile).items()}


def main(args: argparse.Namespace) -> int:
    """``bench serve --ray``: connect to Ray, start Serve's proxy, run, write the report."""
    from swapos.cluster.ray_fleet import import_serve, start_proxy
    from swapos.cluster.ray_pool import connect, import_ray

    console = Console(width=None if sys.stdout.isatty() else 150)
    out_dir = args.results / f"{args.name}-{datetime.date.today().isoformat()}"
    port = args.port or _free_port()
    started = connect(args.ray or None)
    try:
        start_proxy("127.0.0.1", port)
        proxy = f"http://127.0.0.1:{port}"
        report = anyio.run(lambda: run_fleet_bench(args, proxy=proxy, say=console.print))
    finally:
        if started:
            import_serve().shutdown()
            import_ray().shutdown()
    print_report(report, console)
    out_dir.mkdir(parents=True, exist_ok=True)
    path = out_dir / "fleet-bench.json"
    path.write_bytes(msgspec.json.format(msgspec.json.encode(report)))
    console.print(f"wrote {path}")
    return 0


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def print_report(report: FleetBenchReport, console: Console | None = None) -> None:
    console = console or Console(file=sys.stdout)
    t = Table(
        title=f"bench serve --ray: {report.sessions} sessions x {report.rounds} rounds over "
        f"{len(report.models)} models ({report.profile}), budget {report.budget_bytes / 2**20:.0f}"
        " MiB a replica"
    )
    for col in ("arm", "setup", "wall s", "requests", "errors", "loads", "swaps/request",
                "p50 s", "p95 s"):  # fmt: skip
        t.add_column(col, justify="left" if col in ("arm", "setup") else "right")
    for a in report.arms:
        t.add_row(a.arm, a.setup, f"{a.wall_s:.2f}", str(a.requests), str(a.errors),
                  str(a.loads), f"{a.swaps_per_request:.2f}", f"{a.p50_s:.2f}",
                  f"{a.p95_s:.2f}")  # fmt: skip
    console.print(t)
    console.print(report.command)


def _command(args: argparse.Namespace) -> str:
    return (
        f"python -m swapos.bench serve --ray {args.ray} --profile {args.profile} "
        f"--sessions {args.sessions} --rounds {args.rounds} --architect-tokens "
        f"{args.architect_tokens} --editor-tokens {args.editor_tokens} --arms "
        f"{','.join(args.arms)} --replicas {args.replicas} --replica-cpus {args.replica_cpus} "
        f"--name {args.name} --results {args.results}"
    ).replace("--ray  ", "--ray ")

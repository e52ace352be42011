"""``python -m swapos.bench slots``: K concurrent clients on one model, requests per minute with
slots against one at a time, and what the cost curve predicts (issue 54).

``python -m swapos.bench slots [--profile default] [--models small,large] [--clients 1,2,4,8]
[--slots 8] [--requests 3] [--max-tokens 128] [--n-ctx 2048] [--rounds 1] [--peer]
[--llama-server PATH] [--name slots] [--results out]``

Per model of ``--models`` (the profile's names; by default the 0.5B and the 1.5B), in turn:
a one-model profile is written (its file, ``--n-ctx``, the profile's ``n_batch`` and
threads), and its servers start on loopback, each with the model preloaded
(``--mode resident``, ``--kv-dir none``: no KV state from an earlier run):
``swapos serve --slots 1`` (arm ``one``), ``swapos serve --slots N``
(arm ``slots``, N = ``--slots``, default the largest client count), with ``--peer``
``llama_cpp.server`` (one request at a time; the ``bench-serve`` extra installs it), and with
``--llama-server PATH`` llama.cpp's own server with N slots (``-np N``, arm ``server``;
``servers.llama_server_launch``: the same file, context per slot, batch and threads). Each
answers one 1-token request before the clock starts. Then, for each round and each client
count K, every arm runs in turn (which goes first alternates by round and K, so drift
cancels): K clients, each sending ``--requests`` chat requests one after another (greedy,
``max_tokens`` = ``--max-tokens``, a different prompt per request, written to run long).

Requests per minute are the successful requests over the wall (the rounds pooled). Each
client count compares slots with one at a time, and with the ratio the model's measured cost
curve predicts (``policies/slots.predicted_speedup``: the requests of a step side by side,
as many as pay; ``bench decode`` measures the curve; none measured, no prediction). Targets:
within 10 % of the prediction and never below one at a time. A request alone may draft (the
decode loop's policy), side by side it does not; prefill is left out of the prediction.

Results: ``<results>/<name>-<date>/slots-bench.json`` (every request), ``slots-bench.md``
(the table), the servers' logs and event logs, and the profiles written.
"""

from __future__ import annotations

import argparse
import datetime
import os
import sys
from collections.abc import Callable, Sequence
from pathlib import Path

import anyio
import msgspec
from rich.console import Console
from rich.table import Table

from swapos.bench.serve import servers
from swapos.bench.serve.client import replay
from swapos.bench.serve.trace import Message, TraceRequest
from swapos.bench.slots.stats import ArmRate, Comparison, SlotsRun, arm_rates, comparisons
from swapos.errors import SwapOSError
from swapos.models.bundled import resolve_profile
from swapos.models.resolve import model_specs
from swapos.models.spec import ModelSpec
from swapos.sysinfo import host_info

Say = Callable[[str], None]
TOPICS = (
    "an LRU cache with get, put, delete and resize", "a token-bucket rate limiter",
    "a command-line todo list stored in JSON", "an interval tree with insert and query",
    "a CSV report that groups amounts by category", "a retrying HTTP client with backoff",
    "a trie with prefix search and deletion", "a priority task scheduler with deadlines",
)  # fmt: skip


class SlotsReport(msgspec.Struct, frozen=True, kw_only=True):
    host: dict[str, str]
    command: str
    run_at: str
    profile: str
    models: dict[str, str]
    curves: dict[str, dict[int, float]]
    clients: list[int]
    slots: int
    requests: int
    max_tokens: int
    n_ctx: int
    runs: list[SlotsRun]
    rates: list[ArmRate]
    comparisons: list[Comparison]


def _ints(text: str) -> list[int]:
    try:
        items = [int(t) for t in text.split(",") if t.strip()]
    except ValueError:
        raise argparse.ArgumentTypeError(
            f"a comma-separated list of numbers (got {text!r})"
        ) from None
    if not items or min(items) < 1:
        raise argparse.ArgumentTypeError(f"numbers of at least 1 (got {text!r})")
    return items


def _executable(text: str) -> Path:
    path = Path(text).expanduser()
    if not path.is_file() or not os.access(path, os.X_OK):
        raise argparse.ArgumentTypeError(
            f"{text!r} is not an executable file: give the path of a llama-server binary "
            "(llama.cpp's build/bin/llama-server)"
        )
    return path.resolve()


def add_arguments(parser: argparse.ArgumentParser) -> None:
    add = parser.add_argument
    add("--profile", default="default", help="builtin profile or TOML (default: default)")
    add("--models", default="small,large", help="the profile's models, in turn (default: "
        "small,large: the 0.5B and the 1.5B)")  # fmt: skip
    add("--clients", type=_ints, default=[1, 2, 4, 8], help="client counts (default 1,2,4,8)")
    add("--slots", type=int, help="slots of the slots arm (default: the most clients)")
    add("--requests", type=int, default=3, help="requests per client (default 3)")
    add("--max-tokens", type=int, default=128, help="max_tokens of every request (default 128)")
    add("--n-ctx", type=int, default=2048, help="each slot's context (default 2048)")
    add("--rounds", type=int, default=1, help="rounds over the client counts (default 1)")
    add("--peer", action="store_true", help="also llama_cpp.server (one request at a time)")
    add("--llama-server", type=_executable, metavar="PATH", help="also llama.cpp's own "
        "llama-server at PATH, with --slots slots (-np)")  # fmt: skip
    add("--name", default="slots", help="results folder name, before the date (default: slots)")
    add("--results", type=Path, default=Path("out"), help="where results go (default: out)")


def build_args(argv: Sequence[str]) -> argparse.Namespace:
    """This subcommand's arguments parsed from ``argv`` (for library callers and tests)."""
    parser = argparse.ArgumentParser(prog="python -m swapos.bench slots")
    add_arguments(parser)
    return parser.parse_args(argv)


def main(args: argparse.Namespace) -> int:
    """Slots bench: K clients on one model, slots against one at a time and the cost curve."""
    if args.requests < 1 or args.rounds < 1 or args.max_tokens < 1:
        raise SwapOSError("--requests, --rounds and --max-tokens must be at least 1")
    console = Console(width=None if sys.stdout.isatty() else 150)
    out_dir = args.results / f"{args.name}-{datetime.date.today().isoformat()}"
    report = anyio.run(lambda: run_bench(args, out_dir, say=console.print))
    print_report(report, console)
    out_dir.mkdir(parents=True, exist_ok=True)
    path = out_dir / "slots-bench.json"
    path.write_bytes(msgspec.json.format(msgspec.json.encode(report)))
    (out_dir / "slots-bench.md").write_text(markdown(report))
    console.print(f"wrote {path}")
    return 0


def one_model_profile(spec: ModelSpec, n_ctx: int) -> str:
    """A profile TOML serving ``spec`` alone, preloaded, with each slot's context ``n_ctx``."""
    threads = f"threads = {spec.n_threads}\n" if spec.n_threads else ""
    return (
        f'name = "bench slots: {spec.name}"\nmode = "resident"\n\n[models.{spec.name}]\n'
        f"path = {msgspec.json.encode(spec.path).decode()}\nn_ctx = {n_ctx}\n"
        f"n_batch = {spec.n_batch}\n{threads}"
    )


def client_sessions(
    model: str, clients: int, requests: int, max_tokens: int, *, offset: int = 0
) -> list[list[TraceRequest]]:
    """``clients`` sessions of ``requests`` chat requests each, no two prompts alike."""
    sessions = []
    for c in range(clients):
        session = []
        for r in range(requests):
            n = offset + c * requests + r
            text = (
                f"Write a complete, well-commented Python module implementing "
                f"{TOPICS[n % len(TOPICS)]} (variant {n}), with a docstring for every "
                "function and a few tests at the end."
            )
            session.append(TraceRequest(
                session=c, round=r, role="editor", model=model, max_tokens=max_tokens,
                messages=[Message(role="user", content=text)],
            ))  # fmt: skip
        sessions.append(session)
    return sessions


def warm_up(model: str) -> list[list[TraceRequest]]:
    """The one 1-token request each server answers before the clock starts. Its prompt is
    none of the measured ones: a server that keeps its last prompt's KV cells
    (``llama_cpp.server``, ``llama-server``) would otherwise answer the first measured
    request from them."""
    return client_sessions(model, 1, 1, 1, offset=-1)


def arm_order(arms: Sequence[str], round_: int, k_index: int) -> list[str]:
    """The arms in the order they run at this round and client count (rotated by both)."""
    shift = (round_ + k_index) % len(arms)
    return [*arms[shift:], *arms[:shift]]


async def run_bench(args: argparse.Namespace, out_dir: Path, *, say: Say = print) -> SlotsReport:
    """Every model in turn: its servers, then rounds x client counts x arms, interleaved."""
    from swapos.backends.llama import LlamaBackend

    profile = resolve_profile(args.profile)
    names = [n.strip() for n in args.models.split(",") if n.strip()]
    all_specs = await anyio.to_thread.run_sync(model_specs, profile)
    unknown = [n for n in names if n not in all_specs]
    if unknown:
        raise SwapOSError(
            f"--models: {unknown} not in profile {profile.name!r} ({list(all_specs)})"
        )
    slots = args.slots or max(args.clients)
    backend = LlamaBackend()
    curves = {n: await anyio.to_thread.run_sync(backend.draw_curve, all_specs[n]) for n in names}
    await anyio.Path(out_dir).mkdir(parents=True, exist_ok=True)
    runs: list[SlotsRun] = []
    for name in names:
        runs += await _bench_model(args, all_specs[name], slots, out_dir, say)
    rates = arm_rates(runs)
    return SlotsReport(
        host=host_info(), command=_command(args, slots),
        run_at=datetime.datetime.now().isoformat(timespec="seconds"), profile=profile.name,
        models={n: all_specs[n].path for n in names}, curves=curves, clients=args.clients,
        slots=slots, requests=args.requests, max_tokens=args.max_tokens, n_ctx=args.n_ctx,
        runs=runs, rates=rates, comparisons=comparisons(rates, curves),
    )  # fmt: skip


async def _bench_model(
    args: argparse.Namespace, spec: ModelSpec, slots: int, out_dir: Path, say: Say
) -> list[SlotsRun]:
    """One model's servers up, every round x clients x arm, servers down."""
    profile = out_dir / f"profile-{spec.name}.toml"
    profile.write_text(one_model_profile(spec, args.n_ctx))
    ports = {arm: servers.free_port() for arm in ("one", "slots", "peer", "server")}
    arm_slots = {"one": 1, "slots": slots, "peer": 1, "server": slots}
    launches = [
        servers.swapos_launch(
            str(profile), ports[arm], mode="resident", budget=2**50,
            event_log=out_dir / f"{spec.name}-{arm}-events.jsonl",
            log=out_dir / f"{spec.name}-{arm}.log",
            extra=["--slots", str(arm_slots[arm]), "--kv-dir", "none"],
        )
        for arm in ("one", "slots")
    ]  # fmt: skip
    arms = ["one", "slots"]
    served = msgspec.structs.replace(spec, n_ctx=args.n_ctx)  # what the peers load
    if args.peer:
        launches.append(servers.peer_launch([served], ports["peer"], workdir=out_dir,
                                            log=out_dir / f"{spec.name}-peer.log"))  # fmt: skip
        arms.append("peer")
    if args.llama_server is not None:
        launches.append(servers.llama_server_launch(
            args.llama_server, served, ports["server"],
            slots=slots, log=out_dir / f"{spec.name}-server.log",
        ))  # fmt: skip
        arms.append("server")
    urls = {arm: {spec.name: servers.base_url(ports[arm])} for arm in arms}
    runs: list[SlotsRun] = []
    async with servers.running(launches) as setup_s:
        say(f"{spec.name}: servers ready after {setup_s:.1f}s")
        for arm in arms:
            _, warm = await replay(warm_up(spec.name), urls[arm])
            if warm[0].error:
                raise servers.ServerError(f"{arm} warm-up failed: {warm[0].error}")
        offset = 0
        for round_ in range(args.rounds):
            for k_index, clients in enumerate(args.clients):
                sessions = client_sessions(
                    spec.name, clients, args.requests, args.max_tokens, offset=offset
                )
                offset += clients * args.requests
                for arm in arm_order(arms, round_, k_index):
                    wall, samples = await replay(sessions, urls[arm])
                    runs.append(SlotsRun(
                        model=spec.name, arm=arm, clients=clients, slots=arm_slots[arm],
                        round=round_, wall_s=wall, samples=samples,
                    ))  # fmt: skip
                    ok = [s for s in samples if s.error is None]
                    say(f"{spec.name} K={clients} {arm:6} {60 * len(ok) / wall:7.2f} req/min "
                        f"({len(samples) - len(ok)} errors, {wall:.1f}s)")  # fmt: skip
    return runs


def print_report(report: SlotsReport, console: Console | None = None) -> None:
    """The comparison table (and the command)."""
    console = console or Console(file=sys.stdout)
    t = Table(title=f"bench slots: {report.requests} requests/client x {report.max_tokens} "
              f"tokens, slots {report.slots}, {report.profile}")  # fmt: skip
    for col in COLUMNS:
        t.add_column(col, justify="left" if col == "model" else "right")
    for row in _rows(report.comparisons):
        t.add_row(*row)
    console.print(t)
    console.print(report.command)


COLUMNS = ("model", "K", "one req/min", "slots req/min", "ratio", "predicted", "within 10%",
           ">= one", "peer req/min", "llama-server req/min")  # fmt: skip


def _rows(items: Sequence[Comparison]) -> list[tuple[str, ...]]:
    def flag(v: bool | None) -> str:
        return "-" if v is None else ("yes" if v else "NO")

    return [
        (c.model, str(c.clients), f"{c.one_requests_per_min:.2f}",
         f"{c.slots_requests_per_min:.2f}", f"x{c.ratio:.2f}",
         "-" if c.predicted is None else f"x{c.predicted:.2f}", flag(c.within),
         flag(c.not_below_one),
         "-" if c.peer_requests_per_min is None else f"{c.peer_requests_per_min:.2f}",
         "-" if c.server_requests_per_min is None else f"{c.server_requests_per_min:.2f}")
        for c in items
    ]  # fmt: skip


def markdown(report: SlotsReport) -> str:
    """The comparison table as markdown, with the command and the host."""
    lines = [f"`{report.command}` ({report.run_at}, {report.host.get('cpu', '')})", "",
             "| " + " | ".join(COLUMNS) + " |", "|" + "---|" * len(COLUMNS)]  # fmt: skip
    lines += ["| " + " | ".join(row) + " |" for row in _rows(report.comparisons)]
    return "\n".join(lines) + "\n"


def _command(args: argparse.Namespace, slots: int) -> str:
    peers = " --peer" if args.peer else ""
    if args.llama_server is not None:
        peers += f" --llama-server {args.llama_server}"
    return (
        f"python -m swapos.bench slots --profile {args.profile} --models {args.models} "
        f"--clients {','.join(map(str, args.clients))} --slots {slots} --requests "
        f"{args.requests} --max-tokens {args.max_tokens} --n-ctx {args.n_ctx} --rounds "
        f"{args.rounds}{peers} --name {args.name} --results {args.results}"
    )

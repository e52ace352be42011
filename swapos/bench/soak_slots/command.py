"""``python -m swapos.bench soak-slots``: many streamed clients on one model's slots for
minutes, with random disconnects and cancellations (issue 56).

``python -m swapos.bench soak-slots [--profile default] [--model small] [--slots 8]
[--clients 64] [--minutes 10] [--max-tokens 64] [--disconnect 0.2] [--cancel 0.05]
[--seed 0] [--warmup 60] [--sample-every 10] [--n-ctx 1024] [--fake] [--name soak-slots]
[--results out]``

``swapos serve`` starts on loopback with the model alone (a one-model profile, as ``bench
slots`` writes it; ``--mode resident``, preloaded, ``--slots``, ``--kv-dir none``,
``--event-log``); ``--fake`` serves a scripted model instead
(:mod:`swapos.bench.soak_slots.fake_serve`). After one 1-token request, ``--clients``
clients each keep one streamed, greedy chat request going (a prompt of its own naming its
id, ``max_tokens`` = ``--max-tokens``) for ``--minutes``: a seeded share ``--disconnect``
close the response after a random number of chunks, ``--cancel`` close it before reading
one (:mod:`swapos.bench.soak_slots.plan`). The server's RSS is sampled every
``--sample-every`` seconds. Once the clients stop, ``GET /running`` must show every slot
back in the pool, the server is stopped, and its event log must replay and agree with the
clients (:mod:`swapos.bench.soak_slots.checks`).

Results: ``<results>/<name>-<date>/soak-slots.json`` (the figures, the checks, every
request), ``soak-slots.md`` (the table), the server's log and event log. Exit 0 when every
check passes, 1 if one does not.
"""

from __future__ import annotations

import argparse
import datetime
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import anyio
import httpx
import msgspec
from rich.console import Console
from rich.table import Table

from swapos.bench.replay import load_events, summarize
from swapos.bench.serve import servers
from swapos.bench.slots.command import one_model_profile
from swapos.bench.soak_slots.checks import audit_log, counts, idle_problems, rss_check
from swapos.bench.soak_slots.clients import Soak
from swapos.bench.soak_slots.report import SoakSlotsReport, checks, markdown, rows
from swapos.bench.soak_slots.sampling import Sampler
from swapos.errors import SwapOSError
from swapos.messages.events import AnyEvent
from swapos.sysinfo import host_info

Say = Callable[[str], None]
SETTLE_S = 30.0
"""How long the slots may take to come back once the clients stopped."""


def add_arguments(parser: argparse.ArgumentParser) -> None:
    add = parser.add_argument
    add("--profile", default="default", help="builtin profile or TOML (default: default)")
    add("--model", default="small", help="the profile's model (default: small, the 0.5B)")
    add("--slots", type=int, default=8, help="the server's --slots (default 8)")
    add("--clients", type=int, default=64, help="concurrent streamed requests (default 64)")
    add("--minutes", type=float, default=10.0, help="how long clients send (default 10)")
    add("--max-tokens", type=int, default=64, help="max_tokens of every request (default 64)")
    add("--disconnect", type=float, default=0.2, help="share of requests closed mid-stream "
        "(default 0.2)")  # fmt: skip
    add("--cancel", type=float, default=0.05, help="share closed before a chunk (default 0.05)")
    add("--seed", type=int, default=0, help="the clients' draws (default 0)")
    add("--warmup", type=float, default=60.0, help="seconds before the RSS baseline (default "
        "60; at most half the run)")  # fmt: skip
    add("--sample-every", type=float, default=10.0, help="RSS sample period, s (default 10)")
    add("--n-ctx", type=int, default=1024, help="each slot's context (default 1024)")
    add("--fake", action="store_true", help="a scripted model on the fake backend")
    add("--name", default="soak-slots", help="results folder name, before the date")
    add("--results", type=Path, default=Path("out"), help="where results go (default: out)")


def main(args: argparse.Namespace) -> int:
    """Slot soak: many streamed clients with disconnects on one model's slots for minutes."""
    if min(args.slots, args.clients, args.max_tokens) < 1 or args.minutes <= 0:
        raise SwapOSError("--slots, --clients and --max-tokens must be at least 1, --minutes > 0")
    if min(args.disconnect, args.cancel) < 0 or args.disconnect + args.cancel > 1:
        raise SwapOSError("--disconnect and --cancel are shares: each >= 0, together <= 1")
    console = Console(width=None if sys.stdout.isatty() else 150)
    out_dir = args.results / f"{args.name}-{datetime.date.today().isoformat()}"
    report = anyio.run(lambda: run_soak(args, out_dir, say=console.print))
    table = Table(title=f"soak-slots: {report.model}, {report.slots} slots, {report.clients} "
                  f"clients, {report.seconds:g} s")  # fmt: skip
    table.add_column("figure")
    table.add_column("value", justify="right")
    for row in rows(report):
        table.add_row(*row)
    console.print(table)
    path = out_dir / "soak-slots.json"
    path.write_bytes(msgspec.json.format(msgspec.json.encode(report)))
    (out_dir / "soak-slots.md").write_text(markdown(report))
    console.print(f"wrote {path}")
    return 0 if report.ok else 1


def _launch(args: argparse.Namespace, out_dir: Path, port: int) -> tuple[servers.Launch, str, str]:
    """The server to start, the profile's name and the model's file."""
    log, events = out_dir / "server.log", out_dir / "events.jsonl"
    if args.fake:
        argv = [sys.executable, "-m", "swapos.bench.soak_slots.fake_serve", "--model",
                args.model, "--slots", str(args.slots), "--port", str(port),
                "--event-log", str(events)]  # fmt: skip
        launch = servers.Launch(argv=argv, ready_url=servers.health_url(port), log=log)
        return launch, "fake", f"/nonexistent/{args.model}.gguf"
    from swapos.models.bundled import resolve_profile
    from swapos.models.resolve import model_specs

    profile = resolve_profile(args.profile)
    specs = model_specs(profile)
    if args.model not in specs:
        raise SwapOSError(f"--model {args.model}: not in profile {profile.name!r} ({list(specs)})")
    spec = specs[args.model]
    written = out_dir / f"profile-{spec.name}.toml"
    written.write_text(one_model_profile(spec, args.n_ctx))
    launch = servers.swapos_launch(
        str(written), port, mode="resident", budget=2**50, event_log=events, log=log,
        extra=["--slots", str(args.slots), "--kv-dir", "none"],
    )  # fmt: skip
    return launch, profile.name, spec.path


async def run_soak(args: argparse.Namespace, out_dir: Path, *, say: Say = print) -> SoakSlotsReport:
    """Start the server, run the clients while sampling it, wait for its slots, stop it,
    then check its event log."""
    await anyio.Path(out_dir).mkdir(parents=True, exist_ok=True)
    port = servers.free_port()
    launch, profile, model_path = await anyio.to_thread.run_sync(_launch, args, out_dir, port)
    seconds = args.minutes * 60
    warmup = min(args.warmup, seconds / 2)
    base = f"http://127.0.0.1:{port}"
    soak = Soak(f"{base}/v1/chat/completions", args.model, max_tokens=args.max_tokens,
                disconnect=args.disconnect, cancel=args.cancel, seed=args.seed)  # fmt: skip
    async with servers.started([launch]) as (setup_s, procs):
        say(f"server ready after {setup_s:.1f}s (pid {procs[0].pid}); {args.clients} clients "
            f"for {seconds:g}s")  # fmt: skip
        await _warm_up(base, args.model)
        sampler = Sampler(procs[0].pid, out_dir / "events.jsonl")
        stop = anyio.Event()
        wall = 0.0
        async with anyio.create_task_group() as tg:
            tg.start_soon(_watch, sampler, args.sample_every, stop, tg.cancel_scope)
            wall = await soak.run(args.clients, seconds)
            stop.set()
        if not stop.is_set():
            raise servers.ServerError(f"the server exited during the soak; see {launch.log}")
        settle_s, busy, running = await _settle(base)
        sampler.sample()
        say(f"clients done after {wall:.1f}s; slots idle after {settle_s:.1f}s: {busy or 'yes'}")
    events, warnings, replay_error, replayed = _replay(out_dir / "events.jsonl")
    figures = counts(soak.outcomes, wall)
    rss = rss_check(sampler.samples, warmup)
    audit = audit_log(events, soak.outcomes, extra=1, warnings=warnings)
    verdicts = checks(figures, rss, busy, audit, replay_error)
    return SoakSlotsReport(
        host=host_info(), command=_command(args),
        run_at=datetime.datetime.now().isoformat(timespec="seconds"), fake=args.fake,
        profile=profile, model=args.model, model_path=model_path, slots=args.slots,
        clients=args.clients, seconds=seconds, max_tokens=args.max_tokens,
        disconnect=args.disconnect, cancel=args.cancel, seed=args.seed, setup_s=setup_s,
        wall_s=wall, counts=figures, rss=rss, rss_samples=sampler.samples, settle_s=settle_s,
        busy_after=busy, running_after=running, log=audit, replay_error=replay_error,
        replayed_tasks=replayed, checks=verdicts, ok=all(verdicts.values()),
        outcomes=soak.outcomes,
    )  # fmt: skip


def _replay(log: Path) -> tuple[list[AnyEvent], list[str], str | None, int]:
    """The log's events and warnings, what kept it from replaying (None: it replayed) and
    the tasks its replay rebuilt."""
    try:
        events, warnings = load_events(log)
        return events, warnings, None, len(summarize(events).results)
    except Exception as exc:  # a log that does not replay is the finding
        return [], [], f"{type(exc).__name__}: {exc}", 0


async def _watch(
    sampler: Sampler, every: float, stop: anyio.Event, clients: anyio.CancelScope
) -> None:
    """Sample the server until ``stop``; a server gone mid-soak cancels the ``clients``."""
    try:
        await sampler.every(every, stop)
    except (OSError, ValueError):  # no /proc/PID/status, or no VmRSS in it: it exited
        clients.cancel()


async def _warm_up(base: str, model: str) -> None:
    body = {"model": model, "messages": [{"role": "user", "content": "hi"}], "max_tokens": 1}
    async with httpx.AsyncClient(timeout=600.0) as http:
        r = await http.post(f"{base}/v1/chat/completions", json=body)
    if r.status_code != 200:
        raise servers.ServerError(f"the warm-up request failed: HTTP {r.status_code} {r.text}")


async def _settle(base: str) -> tuple[float, list[str], dict[str, Any]]:
    """Poll ``GET /running`` until nothing is busy or :data:`SETTLE_S` passed: the seconds
    that took, what was still busy and the last answer."""
    began = time.perf_counter()
    async with httpx.AsyncClient(timeout=30.0) as http:
        while True:
            running: dict[str, Any] = (await http.get(f"{base}/running")).json()
            busy = idle_problems(running)
            waited = time.perf_counter() - began
            if not busy or waited > SETTLE_S:
                return waited, busy, running
            await anyio.sleep(0.1)


def _command(args: argparse.Namespace) -> str:
    fake = " --fake" if args.fake else f" --profile {args.profile} --n-ctx {args.n_ctx}"
    return (
        f"python -m swapos.bench soak-slots --model {args.model} --slots {args.slots} "
        f"--clients {args.clients} --minutes {args.minutes:g} --max-tokens {args.max_tokens} "
        f"--disconnect {args.disconnect:g} --cancel {args.cancel:g} --seed {args.seed} "
        f"--warmup {args.warmup:g} --sample-every {args.sample_every:g}{fake} --name "
        f"{args.name} --results {args.results}"
    )

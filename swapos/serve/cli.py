"""``python -m swapos.serve``: open the system for a profile (or for model files) and serve
it over HTTP.

Hypercorn serves the app on the event loop the system runs on (asyncio by default, trio
with ``--async-backend trio``). ``--preload`` models are loaded before it serves, so
``/health`` answers once they are ready. Ctrl-C or SIGTERM stops accepting requests, lets
running ones finish within Hypercorn's graceful timeout, then closes the system (models
closed, event log flushed).
"""

from __future__ import annotations

import argparse
import signal
import sys
from collections.abc import Collection
from functools import partial
from pathlib import Path

import anyio
from starlette.types import ASGIApp

from swapos.actors.system import open_system
from swapos.cluster import fleet_cli
from swapos.errors import ProfileError, SwapOSError
from swapos.kvstore import default_kv_dir
from swapos.logconfig import configure_logging
from swapos.models.bundled import resolve_profile
from swapos.models.files import files_profile, models_in
from swapos.models.profile import MODES, Mode, Profile, check_profile, parse_size
from swapos.models.resolve import checked_model_specs
from swapos.models.spec import ModelSpec
from swapos.serve.app import app
from swapos.serve.hosting import listening_socket, serve_http
from swapos.serve.names import ModelNames
from swapos.serve.state import Server, ServeSettings, served_specs

EXIT_ERROR = 2


def build_parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(
        prog="python -m swapos.serve",
        description="An OpenAI- and Ollama-compatible server over SwapOS (/v1 and /api on one "
        "port): swap-aware queues, prefetch of the likely next model, KV prefix reuse, timings "
        "in every response (docs/serve.md).",
    )
    p.add_argument(
        "models",
        nargs="*",
        type=Path,
        metavar="MODEL.gguf",
        help="serve these GGUF files, each named by its file name (instead of a profile)",
    )
    p.add_argument(
        "--models-dir",
        type=Path,
        help="serve every .gguf model of this folder, each named by its file name",
    )
    p.add_argument(
        "--profile",
        help="profile TOML, or a builtin profile: default (Qwen2.5-Coder 1.5B + 0.5B), tiny",
    )
    p.add_argument("--host", default="127.0.0.1", help="address to bind (default: loopback)")
    p.add_argument("--port", type=int, default=8080, help="port (0: a free one, printed)")
    p.add_argument("--mode", choices=MODES, help="swap mode (default: the profile's)")
    p.add_argument("--budget", help='memory budget: bytes or a size such as "1.5GiB"')
    p.add_argument("--api-key", help="require 'Authorization: Bearer KEY' (not on /health)")
    p.add_argument("--event-log", type=Path, help="JSONL event log (bench replay/trace read it)")
    p.add_argument(
        "--max-wait",
        type=float,
        default=ServeSettings().max_wait,
        help="starvation bound in seconds: a queue waiting this long goes next (default 30)",
    )
    p.add_argument(
        "--parallel", type=int, default=1, help="requests of one model run at once (default 1)"
    )
    p.add_argument(
        "--slots",
        type=int,
        help="requests of one model decoded side by side (default: from each model's measured "
        "cost curve, 1 where bench decode has not measured it)",
    )
    p.add_argument(
        "--max-body", default="1MiB", help="largest request body (default 1MiB; larger: 413)"
    )
    p.add_argument(
        "--preload", nargs="+", default=[], metavar="NAME", help="load these models before serving"
    )
    p.add_argument(
        "--cors",
        nargs="+",
        default=[],
        metavar="ORIGIN",
        help="let browser pages of these origins call the server (* for any)",
    )
    p.add_argument(
        "--kv-dir",
        default=str(default_kv_dir()),
        help="the KV cache's disk tier, so chats' prefixes survive a restart "
        "(default: %(default)s; none: RAM only)",
    )
    p.add_argument(
        "--heartbeat",
        type=float,
        default=ServeSettings().heartbeat_s,
        metavar="SECONDS",
        help="a streamed response silent this long is sent its request's status "
        "(default %(default)s; 0: never)",
    )
    p.add_argument(
        "--no-calibrate",
        dest="calibrate",
        action="store_false",
        help="do not measure a model's decode costs while it is idle when none are measured "
        "(they decide drafting and slots; `swapos bench decode` measures them too)",
    )
    p.add_argument("--async-backend", choices=["asyncio", "trio"], default="asyncio")
    p.add_argument("-v", "--verbose", action="count", default=0)
    fleet_cli.add_arguments(p)
    return p


def main(argv: list[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    configure_logging(args.verbose)
    try:
        profile = _profile(args)
        budget = parse_size(args.budget, field="--budget") if args.budget else None
        max_body = parse_size(args.max_body, field="--max-body")
        kv_dir = None if args.kv_dir.strip().lower() == "none" else Path(args.kv_dir)
        settings = ServeSettings(
            max_wait=args.max_wait,
            parallel=args.parallel,
            slots=args.slots,
            api_key=args.api_key,
            max_body_bytes=max_body,
            heartbeat_s=args.heartbeat,
            cors_origins=tuple(args.cors),
        )
        if args.ray is not None:  # each replica checks the model files on its own node
            preload = _preloads(profile, list(profile.models), args.preload)
            config = fleet_cli.fleet_config(
                args, profile, settings, budget=budget, preload=preload, kv_dir=kv_dir
            )
            fleet_cli.serve_fleet(args, config)
            return 0
        specs = checked_model_specs(profile)  # a bad model file: exit 2 before serving
        serve = partial(
            _serve,
            profile,
            served_specs(specs, settings),
            settings,
            host=args.host,
            port=args.port,
            mode=args.mode,
            budget=budget,
            event_log=args.event_log,
            access_log=args.verbose > 0,
            preload=_preloads(profile, specs, args.preload),
            kv_dir=kv_dir,
            calibrate=args.calibrate,
        )
        anyio.run(serve, backend=args.async_backend)
    except (SwapOSError, OSError) as exc:
        print(f"error: {exc}", file=sys.stderr)
        return EXIT_ERROR
    except KeyboardInterrupt:
        pass
    return 0


def _profile(args: argparse.Namespace) -> Profile:
    """The profile to serve: ``--profile``'s, or one made of the model files named.

    Raises:
        ProfileError: files and a profile both given, or the files cannot be served.
    """
    files = list(args.models)
    if args.models_dir is not None:
        files += models_in(args.models_dir)
    if not files:
        return resolve_profile(args.profile)
    if args.profile is not None:
        raise ProfileError(
            "give either --profile or model files (MODEL.gguf, --models-dir), not both; "
            "aliases, ttl and pin are set in a profile"
        )
    profile = files_profile(files)
    check_profile(profile, source="the command line")
    return profile


def _preloads(profile: Profile, served: Collection[str], wanted: list[str]) -> list[str]:
    """The models ``--preload`` names (names or aliases), in order.

    Raises:
        ProfileError: a name that is none of the served models'.
    """
    names = ModelNames.of(served, {n: c.aliases for n, c in profile.models.items()})
    found = []
    for name in wanted:
        model = names.resolve(name)
        if model is None:
            raise ProfileError(f"--preload {name}: no such model (models: {names.known()})")
        found.append(model)
    return list(dict.fromkeys(found))


async def _serve(
    profile: Profile,
    specs: dict[str, ModelSpec],
    settings: ServeSettings,
    *,
    host: str,
    port: int,
    mode: Mode | None,
    budget: int | None,
    event_log: Path | None,
    access_log: bool,
    preload: list[str],
    kv_dir: Path | None,
    calibrate: bool,
) -> None:
    bind, port = listening_socket(host, port)  # bound before the banner names the port
    failed = ""
    async with open_system(
        profile,
        specs=specs,
        mode=mode,
        budget_bytes=budget,
        event_log=event_log,
        process_budget=True,
        kv_disk_dir=kv_dir,
        calibrate=calibrate,
    ) as system:
        asgi = app(system, settings)
        failed = await _preload(asgi.state.server, preload)
        if not failed:
            banner = (
                f"swapos serve: {profile.name} ({', '.join(sorted(specs))}), mode "
                f"{system.mode}, on http://{host}:{port}"
            )
            await _serve_until_stopped(asgi, bind, banner=banner, access_log=access_log)
    if failed:  # raised here, not inside the system's task groups (they would wrap it)
        raise SwapOSError(failed)


async def _serve_until_stopped(asgi: ASGIApp, bind: str, *, banner: str, access_log: bool) -> None:
    """Serve ``asgi`` on ``bind`` until Ctrl-C or SIGTERM; ``banner`` once it is about to."""
    stop = anyio.Event()
    async with anyio.create_task_group() as tg:
        tg.start_soon(_stop_on_signal, stop)
        print(banner, file=sys.stderr, flush=True)

        async def http() -> None:
            # In a child task: Hypercorn's asyncio TaskGroup cancels its parent task on
            # shutdown, which must not be the task that owns the system.
            await serve_http(asgi, bind=bind, shutdown_trigger=stop.wait, access_log=access_log)
            tg.cancel_scope.cancel()

        tg.start_soon(http)


async def _preload(server: Server, models: list[str]) -> str:
    """Load ``models`` before serving (their ttls start then); what failed, or ""."""
    if not models:
        return ""
    print(f"swapos serve: preloading {', '.join(models)}", file=sys.stderr, flush=True)
    failed = await server.system.preload(models)
    if failed:
        why = "; ".join(f"{m} could not be loaded: {reason}" for m, reason in failed.items())
        return f"--preload: {why}"
    for model in models:
        server.expiry.finished(model)
    return ""


async def _stop_on_signal(stop: anyio.Event) -> None:
    with anyio.open_signal_receiver(signal.SIGINT, signal.SIGTERM) as signals:
        async for _ in signals:
            stop.set()
            return


__all__ = ["build_parser", "main"]

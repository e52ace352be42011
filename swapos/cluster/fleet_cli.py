"""``swapos serve --ray [ADDRESS] --replicas N``: the server as a fleet on Ray Serve.

The serve command's own flags keep their meaning (``--profile``, model files, ``--budget``
for each replica, ``--api-key``, ``--kv-dir`` on each node, ...); these add where the fleet
runs and how big it is. The command connects to Ray (see
:func:`~swapos.cluster.ray_pool.connect`), starts Ray Serve's HTTP proxy on ``--host`` and
``--port``, deploys the fleet (:mod:`swapos.cluster.ray_fleet`) and serves until Ctrl-C or
SIGTERM, then deletes the application (and stops the Ray it started). See docs/cluster.md.

Ray is imported only when the fleet starts: ``swapos serve`` without ``--ray`` loads none.
"""

from __future__ import annotations

import argparse
import contextlib
import signal
import sys
from pathlib import Path

import anyio

from swapos.cluster.fleet_protocol import FleetConfig
from swapos.errors import SwapOSError
from swapos.models.profile import Profile
from swapos.policies.fleet import parse_replicas
from swapos.serve.state import ServeSettings

DEFAULT_NAME = "swapos"


def add_arguments(parser: argparse.ArgumentParser) -> None:
    """The fleet's flags, in their own group of the serve command's help."""
    group = parser.add_argument_group(
        "fleet on Ray Serve",
        "serve from several replicas, each one SwapOS system (docs/cluster.md)",
    )
    add = group.add_argument
    add("--ray", nargs="?", const="", default=None, metavar="ADDRESS",
        help="serve as a fleet on the Ray cluster at ADDRESS (auto, head:6379; none given: "
        "RAY_ADDRESS, else a new local Ray)")  # fmt: skip
    add("--replicas", default="1", metavar="N|MIN-MAX",
        help="replicas, or a range Ray Serve autoscales within from its queue metrics "
        "(default 1)")  # fmt: skip
    add("--replica-cpus", type=float, default=1.0,
        help="CPUs of each replica; its models use them as threads (default 1)")  # fmt: skip
    add("--replica-gpus", type=float, default=0.0, help="GPUs of each replica (default 0)")
    add("--replica-queue", type=int, default=32,
        help="requests one replica holds before Ray sends more elsewhere (default 32)")  # fmt: skip
    add("--target-queue", type=float, default=2.0,
        help="autoscaling: requests per replica Ray Serve aims at (default 2)")  # fmt: skip
    add("--fleet-name", default=DEFAULT_NAME, help="the Ray Serve application's name")


def fleet_config(
    args: argparse.Namespace,
    profile: Profile,
    settings: ServeSettings,
    *,
    budget: int | None,
    preload: list[str],
    kv_dir: Path | None,
) -> FleetConfig:
    """The :class:`~swapos.cluster.fleet_protocol.FleetConfig` the flags describe.

    Raises:
        SwapOSError: a bad ``--replicas``, or a flag the fleet cannot honour.
    """
    if args.async_backend == "trio":
        raise SwapOSError("--ray serves on Ray Serve's event loop (asyncio): drop --async-backend")
    if args.replica_cpus <= 0 or args.replica_queue < 1 or args.target_queue <= 0:
        raise SwapOSError("--replica-cpus, --replica-queue and --target-queue must be positive")
    try:
        replicas = parse_replicas(args.replicas)
    except ValueError as exc:
        raise SwapOSError(str(exc)) from exc
    return FleetConfig(
        name=args.fleet_name,
        profile=profile,
        mode=args.mode,
        budget_bytes=budget,
        settings=settings,
        kv_dir=str(kv_dir) if kv_dir else None,
        event_log=str(Path(args.event_log).resolve()) if args.event_log else None,
        preload=preload,
        replicas=replicas,
        replica_cpus=args.replica_cpus,
        replica_gpus=args.replica_gpus,
        replica_queue=args.replica_queue,
        target_queue=args.target_queue,
    )


def serve_fleet(args: argparse.Namespace, config: FleetConfig) -> None:
    """Deploy ``config`` on Ray at ``--ray`` and serve until a signal.

    Raises:
        SwapOSError: Ray or Ray Serve missing, the cluster unreachable, or the fleet did
            not deploy (a node lacking a model file: Ray Serve's message says which).
    """
    from swapos.cluster.ray_fleet import deploy, import_serve, start_proxy, undeploy
    from swapos.cluster.ray_pool import connect, import_ray

    started = connect(args.ray or None)
    try:
        start_proxy(args.host, args.port)
        count = config.replicas
        size = str(count.low) if count.fixed else f"{count.low}-{count.high}"
        noun = "replica" if size == "1" else "replicas"
        print(f"swapos serve --ray: deploying {config.name!r}, {size} {noun} of "
              f"{config.profile.name} ({', '.join(sorted(config.profile.models))})",
              file=sys.stderr, flush=True)  # fmt: skip
        deploy(config)
        url = f"http://{args.host}:{args.port}"
        print(f"swapos serve --ray: {config.name!r} on {url} (Ray Serve's proxy; GET /fleet "
              "shows the replicas)", file=sys.stderr, flush=True)  # fmt: skip
        with contextlib.suppress(KeyboardInterrupt):
            anyio.run(_until_signal)
    finally:
        with contextlib.suppress(Exception):
            undeploy(config.name)
        if started:
            import_serve().shutdown()
            import_ray().shutdown()


async def _until_signal() -> None:
    with anyio.open_signal_receiver(signal.SIGINT, signal.SIGTERM) as signals:
        async for _ in signals:
            return

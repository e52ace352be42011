"""The fleet on Ray Serve: the only fleet module that talks to ``ray`` (imported lazily).

Three deployments make one application (:func:`fleet_app`):

- ``SwapOSFront``: the ingress behind Ray Serve's HTTP proxy (:mod:`swapos.cluster.fleet_front`),
  one replica, no CPU;
- ``SwapOSReplica``: N replicas (or an autoscaled range), each one SwapOS system
  (:class:`ReplicaHost` around :class:`~swapos.cluster.fleet_replica.FleetReplica`). Its
  ``routed`` method is wrapped by ``@serve.multiplexed``: every request enters it with its
  multiplexed id, and the replica keeps the ids Ray Serve's multiplexing reports in step
  with its own ledger (:func:`sync_multiplexed`), so Ray's router sends each model's
  requests to the replicas that hold it;
- ``FleetState``: the shared transitions and reports (:mod:`swapos.cluster.fleet_state`),
  one replica, no CPU.

Ray Serve runs user code on asyncio, so the hosts here use asyncio where Ray needs it (a
replica's system lives in a task of Ray's event loop).
"""

from __future__ import annotations

import asyncio
import contextlib
import platform
from collections.abc import AsyncIterator
from typing import Any

import structlog

from swapos.cluster.fleet_front import FleetUnavailable, Front, ReplicaLost
from swapos.cluster.fleet_protocol import (
    CONFIG,
    PART,
    VIEW,
    FleetConfig,
    FleetView,
    ForwardedRequest,
    ResponsePart,
    encode,
)
from swapos.cluster.fleet_replica import (
    FleetReplica,
    FleetStateUnavailable,
    ReplicaFactory,
)
from swapos.cluster.fleet_state import FleetState
from swapos.cluster.ray_pool import import_ray
from swapos.errors import SwapOSError
from swapos.models.profile import parse_size
from swapos.policies.fleet import replica_budget

log = structlog.get_logger(__name__)

MULTIPLEX_ATTR = "__serve_multiplex_wrapper"
"""Where ``@serve.multiplexed`` keeps its per-replica model table (Ray Serve's internals,
checked when a replica starts)."""
STOP_TIMEOUT_S = 30.0
FORGET_TIMEOUT_S = 1.0
STATE_TIMEOUT_S = 2.0
"""A call to the shared state that takes longer fails: requests never wait on it."""


def import_serve() -> Any:
    """``ray.serve``.

    Raises:
        SwapOSError: Ray Serve is not installed (the message says how to install it).
    """
    import_ray()
    try:
        from ray import serve
    except ImportError as exc:
        raise SwapOSError(
            "--ray serving needs Ray Serve, which is not installed: pip install 'swapos[fleet]'"
        ) from exc
    return serve


def replica_options(config: FleetConfig, actor: dict[str, Any] | None = None) -> dict[str, Any]:
    """The ``SwapOSReplica`` deployment's options: its count or autoscaling range (Ray
    Serve's queue metrics, ``target_ongoing_requests``), its queue bound, its resources
    (``memory`` reserved when the budget is given, so Ray places replicas where they fit).

    Args:
        config: the fleet.
        actor: more ``ray_actor_options`` (a ``runtime_env``).
    """
    resources: dict[str, Any] = {"num_cpus": config.replica_cpus, **(actor or {})}
    if config.replica_gpus:
        resources["num_gpus"] = config.replica_gpus
    if config.budget_bytes:
        resources["memory"] = config.budget_bytes
    options: dict[str, Any] = {
        "max_ongoing_requests": config.replica_queue,
        "ray_actor_options": resources,
        "graceful_shutdown_timeout_s": STOP_TIMEOUT_S,
    }
    count = config.replicas
    if count.fixed:
        options["num_replicas"] = count.low
    else:
        options["autoscaling_config"] = {
            "min_replicas": count.low,
            "max_replicas": count.high,
            "initial_replicas": max(count.low, 1),
            "target_ongoing_requests": config.target_queue,
        }
    return options


def sync_multiplexed(wrapper: Any, routes: frozenset[str]) -> bool:
    """Make Ray Serve's multiplexed model table of a replica hold exactly ``routes`` (the
    ids its ledger says it holds) and have it pushed to the router; True if it changed."""
    models = wrapper.models
    if set(models) == routes:
        return False
    for gone in set(models) - routes:
        del models[gone]
    for new in sorted(routes - set(models)):
        models[new] = new
    wrapper._push_multiplexed_replica_info = True
    return True


def _check_wrapper(wrapper: Any) -> None:
    if not hasattr(wrapper, "models") or not hasattr(wrapper, "_push_multiplexed_replica_info"):
        raise SwapOSError(
            "this Ray Serve's model multiplexing keeps its table elsewhere than SwapOS knows "
            "(ray.serve.multiplex._ModelMultiplexWrapper): install a Ray version the fleet "
            "supports (docs/cluster.md)"
        )


class HandleState:
    """The fleet's shared state through a Ray Serve deployment handle; every call fails
    with :class:`FleetStateUnavailable` after :data:`STATE_TIMEOUT_S`."""

    def __init__(self, handle: Any) -> None:
        self._handle = handle

    async def _call(self, method: str, *args: Any) -> Any:
        try:
            return await asyncio.wait_for(
                getattr(self._handle, method).remote(*args), STATE_TIMEOUT_S
            )
        except Exception as exc:  # Ray's errors, a timeout: the state is down or restarting
            raise FleetStateUnavailable(f"{type(exc).__name__}: {exc}") from exc

    async def observe(self, batch: bytes) -> None:
        await self._call("observe", batch)

    async def transitions(self) -> bytes:
        return bytes(await self._call("transitions"))

    async def report(self, data: bytes) -> None:
        await self._call("report", data)

    async def forget(self, replica: str) -> None:
        await self._call("forget", replica)

    async def view(self) -> FleetView:
        return VIEW.decode(await self._call("view"))


class HandleForwarder:
    """Forwards requests through the ``SwapOSReplica`` deployment handle: Ray Serve's
    router picks the replica by the multiplexed id."""

    def __init__(self, handle: Any) -> None:
        self._handle = handle

    async def stream(
        self, request: ForwardedRequest, route: str | None
    ) -> AsyncIterator[ResponsePart]:
        ray = import_ray()
        from ray.serve.exceptions import RayServeException, ReplicaUnavailableError

        options: dict[str, Any] = {"stream": True}
        if route is not None:
            options["multiplexed_model_id"] = route
        stream = self._handle.options(**options).answer.remote(encode(request))
        done = False
        try:
            async for data in stream:
                yield PART.decode(data)
            done = True
        except (ray.exceptions.RayActorError, ReplicaUnavailableError) as exc:
            done = True
            raise ReplicaLost(f"{type(exc).__name__}") from exc
        except RayServeException as exc:  # back pressure, a deployment that failed
            done = True
            raise FleetUnavailable(f"{type(exc).__name__}: {exc}") from exc
        finally:
            if not done:
                stream.cancel()


class ReplicaHost:
    """A ``SwapOSReplica`` deployment replica: a :class:`FleetReplica` on Ray's event loop.

    Args:
        config: the encoded :class:`FleetConfig`.
        state: the ``FleetState`` deployment's handle.
        factory: opens the replica's system (default: real models, checked on the node).
    """

    async def __init__(  # type: ignore[misc]
        self, config: bytes, state: Any, factory: ReplicaFactory | None = None
    ) -> None:
        serve, ray = import_serve(), import_ray()
        cfg = CONFIG.decode(config)
        name = str(serve.get_replica_context().replica_id.unique_id)
        self._state = HandleState(state)
        budget = await asyncio.to_thread(_budget_here, ray, cfg)
        self._replica = FleetReplica(
            cfg, name, platform.node(), budget, self._state, self._set_routes, factory
        )
        self._task = asyncio.get_running_loop().create_task(self._replica.serve())
        ready = asyncio.ensure_future(self._replica.ready.wait())
        await asyncio.wait({ready, self._task}, return_when=asyncio.FIRST_COMPLETED)
        if not ready.done():
            ready.cancel()
            self._task.result()  # the reason it could not start
            raise SwapOSError(f"replica {name} stopped before it served")
        await self.routed(f"{name}|starting")  # makes Ray's multiplexed table for this replica
        _check_wrapper(getattr(self, MULTIPLEX_ATTR))

    async def routed(self, model_id: str) -> str:
        """Entered by every request with its multiplexed id (``@serve.multiplexed`` wraps
        it in :func:`fleet_app`): Ray Serve learns the replica now holds that id."""
        return model_id

    def _set_routes(self, routes: frozenset[str]) -> None:
        wrapper = getattr(self, MULTIPLEX_ATTR, None)
        if wrapper is not None:
            sync_multiplexed(wrapper, routes)

    async def answer(self, data: bytes) -> AsyncIterator[bytes]:
        """One forwarded request: its response's encoded parts."""
        route = import_serve().get_multiplexed_model_id()
        if route:
            await self.routed(route)
        async with contextlib.aclosing(self._replica.handle(data)) as parts:
            async for part in parts:
                yield part

    async def __del__(self) -> None:
        self._replica.stop()
        try:
            await asyncio.wait_for(self._task, STOP_TIMEOUT_S)
        except Exception:
            log.exception("fleet.replica_stop_failed", replica=self._replica.name)
        # The shared state may be going away too (the whole application is deleted).
        with contextlib.suppress(FleetStateUnavailable, TimeoutError):
            await asyncio.wait_for(self._state.forget(self._replica.name), FORGET_TIMEOUT_S)


def _budget_here(ray: Any, config: FleetConfig) -> int:
    """This replica's budget from its node's resources (:func:`replica_budget`)."""
    context = ray.get_runtime_context()
    assigned = context.get_assigned_resources()
    node_id = context.get_node_id()
    node: dict[str, Any] = next((n for n in ray.nodes() if n.get("NodeID") == node_id), {})
    resources = node.get("Resources", {})
    budget = config.profile.budget
    explicit = config.budget_bytes
    if explicit is None and budget != "auto":
        explicit = parse_size(budget)
    return replica_budget(
        explicit=explicit,
        assigned_memory=float(assigned.get("memory", 0.0)),
        node_memory=float(resources.get("memory", 0.0)),
        node_cpus=float(resources.get("CPU", 0.0)),
        replica_cpus=config.replica_cpus,
    )


class FrontHost:
    """The ``SwapOSFront`` ingress deployment: its ASGI app is :class:`Front`'s."""

    def __init__(self, config: bytes, replicas: Any, state: Any) -> None:
        self.front = Front(CONFIG.decode(config), HandleForwarder(replicas), HandleState(state))

    def __serve_build_asgi_app__(self) -> Any:
        return self.front.app()


def fleet_app(
    config: FleetConfig,
    *,
    factory: ReplicaFactory | None = None,
    actor: dict[str, Any] | None = None,
) -> Any:
    """The Ray Serve application of ``config`` (``serve.run`` it).

    Args:
        config: the fleet.
        factory: the replicas' system factory (tests: fake systems); importable on every node.
        actor: more ``ray_actor_options`` for every deployment (a ``runtime_env``).
    """
    serve = import_serve()
    blob, extra = encode(config), dict(actor or {})
    light = {"num_cpus": 0, **extra}
    state = serve.deployment(
        FleetState, name="FleetState", max_ongoing_requests=1000, ray_actor_options=light
    ).bind()
    multiplexed = serve.multiplexed(max_num_models_per_replica=-1)(ReplicaHost.routed)
    replica_class = type("SwapOSReplica", (ReplicaHost,), {"routed": multiplexed})
    replicas = serve.deployment(
        replica_class, name="SwapOSReplica", **replica_options(config, extra)
    ).bind(blob, state, factory)
    front = serve.deployment(
        serve.ingress()(FrontHost),
        name="SwapOSFront",
        max_ongoing_requests=10_000,
        ray_actor_options=light,
    )
    return front.bind(blob, replicas, state)


def start_proxy(host: str, port: int) -> None:
    """Start Ray Serve with its HTTP proxy on ``host:port`` (where Serve runs already, its
    proxy keeps the address it has)."""
    import_serve().start(http_options={"host": host, "port": port})


def deploy(
    config: FleetConfig,
    *,
    route_prefix: str = "/",
    factory: ReplicaFactory | None = None,
    actor: dict[str, Any] | None = None,
) -> None:
    """Run the fleet ``config`` as Ray Serve application ``config.name`` at ``route_prefix``;
    returns once every replica serves (blocking: call it in a worker thread).

    Raises:
        SwapOSError: the application failed to deploy (a replica could not open its
            system: Ray Serve's message says why).
    """
    serve = import_serve()
    app = fleet_app(config, factory=factory, actor=actor)
    try:
        serve.run(app, name=config.name, route_prefix=route_prefix)
    except RuntimeError as exc:
        raise SwapOSError(f"the fleet {config.name!r} did not deploy: {exc}") from exc


def undeploy(name: str) -> None:
    """Delete the application ``name`` (its replicas drain, then stop)."""
    import_serve().delete(name)

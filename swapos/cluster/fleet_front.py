"""The fleet's front: the ingress behind Ray Serve's HTTP proxy, in front of the replicas.

Ray Serve's proxy routes by a header (``serve_multiplexed_model_id``), and clients name
their model in the body. The front reads the body's ``model`` (or Ollama's ``name``), the
session header, and forwards the request to the replicas with the multiplexed id
:func:`~swapos.policies.fleet.route_for` gives: **Ray Serve's router picks the replica**
(one that reported the id), the front picks none. Requests that name no model (``GET
/v1/models``, ``/health``, ``/running``...) go to any replica and describe that one.

A replica that dies under a request (:class:`ReplicaLost`) has its request sent again, to
whichever replica Ray routes it to, as long as nothing of the response reached the client:
the front holds the response's start until its first bytes, so every request that had not
begun to answer is retried (:func:`~swapos.policies.fleet.retry_delay`). An answer cut
after its first bytes is not: its connection is dropped, so the client sees it broken.

``GET /fleet`` shows the replicas' last reports (residency, sessions, loads) and the
front's counters.
"""

from __future__ import annotations

import hmac
import time
from collections.abc import AsyncIterator, Callable
from typing import Protocol

import anyio
import msgspec
import structlog
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import Response, StreamingResponse
from starlette.routing import Route

from swapos.cluster.fleet_protocol import (
    SESSION_HEADER,
    FleetConfig,
    FleetView,
    ForwardedRequest,
    ResponseBody,
    ResponsePart,
    ResponseStart,
)
from swapos.errors import SwapOSError
from swapos.policies.fleet import retry_delay, route_for
from swapos.serve.errors import RequestError
from swapos.serve.names import ModelNames
from swapos.serve.ollama import OllamaError

log = structlog.get_logger(__name__)

METHODS = ["GET", "POST", "PUT", "DELETE", "PATCH", "HEAD", "OPTIONS"]
VIEW_MAX_AGE_S = 0.5
"""The front re-reads the fleet's view when the one it has is older than this."""


class ReplicaLost(SwapOSError):
    """The replica serving a request died (its process ended, its node went away)."""


class FleetUnavailable(SwapOSError):
    """No replica can take the request now (Ray Serve refused it: its queues are full, or
    the replicas failed to deploy)."""


class Forwarder(Protocol):
    """Sends a request to the replicas (Ray Serve's handle, :mod:`swapos.cluster.ray_fleet`)."""

    def stream(self, request: ForwardedRequest, route: str | None) -> AsyncIterator[ResponsePart]:
        """The response's parts from the replica Ray routes ``route`` to (None: any).
        Raises :class:`ReplicaLost` when that replica dies, :class:`FleetUnavailable` when
        Ray Serve refuses the request."""
        ...


class StateReader(Protocol):
    async def view(self) -> FleetView:
        """The fleet's view. Raises ``FleetStateUnavailable``."""
        ...


class FrontStats(msgspec.Struct, kw_only=True):
    """The front's counters.

    Attributes:
        requests: requests forwarded.
        retried: times a request was sent again after its replica died.
        failed: requests given up (no replica answered) or cut mid-answer.
    """

    requests: int = 0
    retried: int = 0
    failed: int = 0


class _Named(msgspec.Struct):
    model: str | None = None
    name: str | None = None


def requested_model(body: bytes, names: ModelNames) -> str | None:
    """The served model a JSON body names (``model``, or Ollama's ``name``; aliases and
    ``:latest`` resolved), or None: no JSON object, no such field, no such model."""
    try:
        named = msgspec.json.decode(body, type=_Named)
    except (msgspec.DecodeError, msgspec.ValidationError):
        return None
    given = named.model or named.name
    return names.resolve(given) if given else None


class ViewCache:
    """The fleet's view, read again once older than :data:`VIEW_MAX_AGE_S`; an empty view
    while the shared state cannot be reached (requests then go by model)."""

    def __init__(self, state: StateReader, clock: Callable[[], float] = time.monotonic) -> None:
        self._state = state
        self._clock = clock
        self._view = FleetView()
        self._at = -VIEW_MAX_AGE_S - 1.0

    async def get(self) -> FleetView:
        if self._clock() - self._at > VIEW_MAX_AGE_S:
            try:
                self._view = await self._state.view()
            except SwapOSError as exc:
                log.warning("fleet.state_unreachable", reason=str(exc))
                self._view = FleetView()
            self._at = self._clock()
        return self._view


class Front:
    """The front's logic; :meth:`app` is its ASGI app.

    Args:
        config: the fleet.
        forwarder: sends requests to the replicas.
        state: the fleet's shared state.
    """

    def __init__(self, config: FleetConfig, forwarder: Forwarder, state: StateReader) -> None:
        self.config = config
        self.stats = FrontStats()
        self._forwarder = forwarder
        self._views = ViewCache(state)
        profile = config.profile
        self._names = ModelNames.of(
            profile.models, {n: c.aliases for n, c in profile.models.items()}
        )

    def app(self) -> Starlette:
        return Starlette(
            routes=[
                Route("/fleet", self.fleet, methods=["GET"]),
                Route("/{path:path}", self.forward, methods=METHODS),
            ]
        )

    async def fleet(self, request: Request) -> Response:
        """``GET /fleet``: the replicas' reports and the front's counters."""
        key = self.config.settings.api_key
        if key is not None and not _bearer_is(request, key):
            return RequestError(
                401, "Incorrect or missing API key", code="invalid_api_key"
            ).response()
        view = await self._views.get()
        body = {"routing": self.config.routing, "front": self.stats, **msgspec.to_builtins(view)}
        return Response(msgspec.json.encode(body), media_type="application/json")

    async def forward(self, request: Request) -> Response:
        """Any other route: forwarded to a replica (see the module docstring)."""
        body = await _capped_body(request, self.config.settings.max_body_bytes + 1)
        model = requested_model(body, self._names) if body else None
        session = request.headers.get(SESSION_HEADER) or None
        route = None
        if self.config.routing == "model" and model is not None:
            held = (await self._views.get()).held_routes() if session else frozenset[str]()
            route = route_for(model, session, held)
        scope = request.scope
        path, root = str(scope["path"]), str(scope.get("root_path", ""))
        if root and path.startswith(root):
            path = path[len(root) :] or "/"
        forwarded = ForwardedRequest(
            method=request.method,
            path=path,
            query=bytes(scope.get("query_string", b"")),
            headers=[(bytes(k), bytes(v)) for k, v in scope["headers"]],
            body=body,
            client=tuple(scope["client"]) if scope.get("client") else None,
            model=model,
            session=session,
        )
        self.stats.requests += 1
        return await self._relay(forwarded, route)

    async def _relay(self, request: ForwardedRequest, route: str | None) -> Response:
        attempt = 0
        while True:
            parts = self._forwarder.stream(request, route)
            try:
                start, first = await _head(parts)
            except FleetUnavailable as exc:
                await _close(parts)
                self.stats.failed += 1
                return _unavailable(request.path, str(exc))
            except ReplicaLost as exc:
                await _close(parts)
                delay = retry_delay(attempt, sent=False)
                if delay is None:
                    self.stats.failed += 1
                    return _unavailable(request.path, f"no replica could answer: {exc}")
                log.info("fleet.retry", path=request.path, route=route, reason=str(exc))
                self.stats.retried += 1
                attempt += 1
                await anyio.sleep(delay)
                continue
            response = StreamingResponse(self._rest(first, parts), status_code=start.status)
            response.raw_headers = list(start.headers)
            return response

    async def _rest(
        self, first: ResponseBody | None, parts: AsyncIterator[ResponsePart]
    ) -> AsyncIterator[bytes]:
        try:
            if first is not None:
                yield first.body
                if not first.more:
                    return
            async for part in parts:
                if isinstance(part, ResponseBody):
                    yield part.body
                    if not part.more:
                        return
        except ReplicaLost as exc:  # bytes already reached the client: the answer is cut
            self.stats.failed += 1
            log.warning("fleet.answer_cut", reason=str(exc))
            raise  # the server drops the connection: the client sees a broken answer
        finally:
            await _close(parts)


async def _head(parts: AsyncIterator[ResponsePart]) -> tuple[ResponseStart, ResponseBody | None]:
    """The response's start and its first body part with bytes (or its last part): what
    must arrive before anything is sent to the client.

    Raises:
        ReplicaLost: the replica died first.
        SwapOSError: the replica's answer ended without a start.
    """
    start: ResponseStart | None = None
    async for part in parts:
        if isinstance(part, ResponseStart):
            start = part
        elif start is not None and (part.body or not part.more):
            return start, part
    if start is None:
        raise SwapOSError("the replica's answer had no response start")
    return start, None


async def _close(parts: AsyncIterator[ResponsePart]) -> None:
    aclose = getattr(parts, "aclose", None)
    if aclose is not None:
        with anyio.CancelScope(shield=True):
            await aclose()


async def _capped_body(request: Request, limit: int) -> bytes:
    """The body, at most ``limit`` bytes (the replica refuses one over its limit)."""
    chunks, size = [], 0
    async for chunk in request.stream():
        chunks.append(chunk)
        size += len(chunk)
        if size >= limit:
            break
    return b"".join(chunks)[:limit]


def _bearer_is(request: Request, key: str) -> bool:
    scheme, _, token = request.headers.get("authorization", "").partition(" ")
    given = token.strip().encode("utf-8", "surrogateescape")
    return scheme.lower() == "bearer" and hmac.compare_digest(given, key.encode())


def _unavailable(path: str, message: str) -> Response:
    if path.startswith("/api/"):
        return OllamaError(503, message).response()
    return RequestError(503, message).response()

"""``app(system)``: the OpenAI-compatible ASGI app over an open SwapOS system.

Starlette routes, Hypercorn (or any ASGI server) to serve them; both run on anyio, so the
app serves on asyncio and on trio. The system is opened by the caller (``python -m
swapos.serve`` does it, or another async app that mounts this one), which keeps the models
resident across requests and owns their lifetime.
"""

from __future__ import annotations

import hmac
from collections.abc import AsyncIterator, Awaitable, Callable
from contextlib import asynccontextmanager
from typing import Any

import structlog
from starlette.applications import Starlette
from starlette.exceptions import HTTPException
from starlette.middleware import Middleware
from starlette.middleware.cors import CORSMiddleware
from starlette.requests import ClientDisconnect, Request
from starlette.responses import Response
from starlette.routing import Route

from swapos.actors.system import System
from swapos.models.profile import ttl_seconds
from swapos.serve import admin
from swapos.serve.bodies import decode, read_body
from swapos.serve.completions import Prepared, prepare_chat, prepare_text
from swapos.serve.errors import RequestError
from swapos.serve.expiry import Expiry
from swapos.serve.fields import checked_fields
from swapos.serve.metrics import Metrics
from swapos.serve.names import ModelNames
from swapos.serve.ollama import Ollama, OllamaError
from swapos.serve.responses import new_response_id, streamer, whole_response
from swapos.serve.running import failure, run
from swapos.serve.scheduler import Scheduler
from swapos.serve.schemas import ChatCompletionRequest, CompletionRequest
from swapos.serve.sse import EventStream
from swapos.serve.state import Server, ServeSettings
from swapos.serve.transitions import NextModels
from swapos.serve.ui import LivePage

log = structlog.get_logger(__name__)
Handler = Callable[[Server, Request], Awaitable[Any]]
OPEN_PATHS = frozenset({"/health"})


def app(
    system: System,
    settings: ServeSettings | None = None,
    *,
    next_models: NextModels | None = None,
) -> Starlette:
    """The ASGI app serving ``system`` (which must stay open while the app serves).

    Args:
        system: an open system (:func:`~swapos.actors.system.open_system`).
        settings: queueing bound, parallelism, bearer key, body limit (defaults: see
            :class:`ServeSettings`).
        next_models: what learns which model follows which (default: this app's own; a
            fleet's replicas pass one that shares what it learns, docs/cluster.md).

    The app is also reachable as ``app.state.server`` (its scheduler, counters and
    keep-alive timers), and its Ollama routes (``/api/...``) as ``app.state.ollama``. Models'
    keep-alives and ttls run out in the app's lifespan (a server that runs the lifespan, as
    Hypercorn does; an app that mounts this one runs ``app.state.server.expiry.lifespan()``
    in its own).
    """
    settings = settings or ServeSettings()

    def resident() -> frozenset[str]:
        return system.residency().ready()

    def slots(model: str) -> int:
        spec = system.specs.get(model)
        return spec.slots if spec is not None else 1

    scheduler = Scheduler(
        system.clock,
        max_wait=settings.max_wait,
        parallel=settings.parallel,
        resident=resident,
        slots=slots,
    )
    configs = {n: c for n, c in system.profile.models.items() if n in system.specs}
    ttls = {n: s for n, c in configs.items() if (s := ttl_seconds(c)) is not None}
    server = Server(
        system=system,
        settings=settings,
        scheduler=scheduler,
        metrics=Metrics(),
        next_models=next_models or NextModels(),
        names=ModelNames.of(system.specs, {n: c.aliases for n, c in configs.items()}),
        expiry=Expiry(system, scheduler, ttls),
    )

    def route(path: str, handler: Handler, methods: list[str]) -> Route:
        async def endpoint(request: Request) -> Any:
            try:
                if path not in OPEN_PATHS:
                    _authorize(request, settings.api_key)
                return await handler(server, request)
            except RequestError as exc:
                return exc.response()
            except ClientDisconnect:  # gone while sending its body: no one reads an answer
                log.info("serve.client_gone", path=path)
                return Response(status_code=400)
            except Exception as exc:  # a bug: still an answer in the OpenAI shape, logged
                log.exception("serve.request_failed", path=path)
                return RequestError(
                    500, f"internal error ({type(exc).__name__}); see the server log"
                ).response()

        return Route(path, endpoint, methods=methods)

    async def http_error(request: Request, exc: Exception) -> Response:
        assert isinstance(exc, HTTPException)
        message = f"{request.method} {request.url.path}: {exc.detail}"
        if request.url.path.startswith("/api/"):
            return OllamaError(exc.status_code, message).response()
        return RequestError(exc.status_code, message).response()

    ollama = Ollama(server, lambda r: _authorize(r, settings.api_key), client_key)
    live = LivePage(server, lambda r: _authorize(r, settings.api_key), settings.cors_origins)

    @asynccontextmanager
    async def lifespan(_: Starlette) -> AsyncIterator[None]:
        async with server.expiry.lifespan(), live.lifespan():  # keep-alive, ttl; /ui's watch
            yield

    starlette = Starlette(
        routes=[
            route("/v1/chat/completions", chat_completions, ["POST"]),
            route("/v1/completions", completions, ["POST"]),
            route("/v1/models", admin.models, ["GET"]),
            route("/running", admin.running, ["GET"]),
            route("/unload", admin.unload, ["POST"]),
            route("/health", admin.health, ["GET"]),
            route("/metrics", admin.metrics, ["GET"]),
            *ollama.routes(),
            *live.routes(),
        ],
        exception_handlers={HTTPException: http_error},
        lifespan=lifespan,
        middleware=_cors(settings.cors_origins),
    )
    starlette.state.server = server
    starlette.state.ollama = ollama
    starlette.state.live = live
    return starlette


def _cors(origins: tuple[str, ...]) -> list[Middleware]:
    """Starlette's CORS middleware for ``origins`` (``*``: any), none without them: a
    browser page of such an origin may call every route, with any header (the bearer key
    among them); preflight requests need no key."""
    if not origins:
        return []
    return [
        Middleware(
            CORSMiddleware,
            allow_origins=list(origins),
            allow_methods=["*"],
            allow_headers=["*"],
            expose_headers=["*"],
            max_age=600,
        )
    ]


def _authorize(request: Request, api_key: str | None) -> None:
    if api_key is None:
        return
    scheme, _, token = request.headers.get("authorization", "").partition(" ")
    # Bytes, not str: compare_digest refuses non-ASCII strings, and a header may hold any.
    given = token.strip().encode("utf-8", "surrogateescape")
    if scheme.lower() != "bearer" or not hmac.compare_digest(given, api_key.encode()):
        raise RequestError(
            401,
            "Incorrect or missing API key: send the header 'Authorization: Bearer <key>'",
            code="invalid_api_key",
        )


def client_key(request: Request) -> str | None:
    """The bearer token, if any: the client whose model transitions are learned (a
    request's ``user`` field takes precedence)."""
    scheme, _, token = request.headers.get("authorization", "").partition(" ")
    return token.strip() or None if scheme.lower() == "bearer" else None


async def chat_completions(server: Server, request: Request) -> Any:
    raw = await read_body(request, server.settings.max_body_bytes)
    checked_fields("openai.chat", raw)
    body = decode(raw, ChatCompletionRequest)
    return await _complete(server, await prepare_chat(server, body, client_key(request)))


async def completions(server: Server, request: Request) -> Any:
    raw = await read_body(request, server.settings.max_body_bytes)
    checked_fields("openai.completions", raw)
    body = decode(raw, CompletionRequest)
    return await _complete(server, await prepare_text(server, body, client_key(request)))


async def _complete(server: Server, prep: Prepared) -> Any:
    response_id = new_response_id(prep.kind)
    if prep.stream:
        return EventStream(streamer(server, prep, response_id))
    ran = await run(server, prep, response_id)
    if ran.error is not None:
        raise failure(ran)
    return Response(whole_response(prep, ran, response_id), media_type="application/json")

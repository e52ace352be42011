"""``/ui``: the server's live page (docs/serve.md, "The live page").

``GET /ui`` is one self-contained HTML page (its script and style inline, nothing fetched
from elsewhere; package data, ``swapos/serve/static/ui.html``); it needs no key, since it
holds no data. Everything else needs the bearer key when the server has one, which the
page asks for and sends as ``Authorization: Bearer``:

- ``GET /ui/state``: the page's view now, bars included (:mod:`swapos.serve.ui_state`);
- ``GET /ui/events``: server-sent events: a full ``state`` first, then ``bars`` (what each
  of the Recorder's events changed on the timeline) and ``state`` (at most four a second,
  at least one a second); ``resync`` followed by a full ``state`` when the page fell behind
  its bounded buffer (:mod:`swapos.serve.ui_events`);
- ``POST /ui/load``, ``POST /ui/unload`` (``{"model": name}``): the page's buttons. Both
  refuse a request a browser sent from another site (``Sec-Fetch-Site``, else ``Origin``
  against ``Host``) and any body that is not JSON, so another page cannot press them.
"""

from __future__ import annotations

import base64
import hashlib
import re
import time
from collections.abc import AsyncIterator, Awaitable, Callable
from contextlib import asynccontextmanager
from importlib import resources
from typing import Any

import anyio
import msgspec
import structlog
from starlette.requests import Request
from starlette.responses import Response
from starlette.routing import Route

from swapos.serve.bodies import decode, read_body
from swapos.serve.completions import served_model
from swapos.serve.errors import RequestError
from swapos.serve.schemas import UnloadRequest
from swapos.serve.sse import EventStream
from swapos.serve.state import Server
from swapos.serve.ui_events import EventHub, Subscriber
from swapos.serve.ui_state import live_state

log = structlog.get_logger(__name__)

STATE_EVERY_S = 1.0
"""The longest the stream stays silent: a ``state`` message at least this often."""
STATE_MIN_S = 0.25
"""The shortest gap between two ``state`` messages."""
BATCH_S = 0.05
"""How long the stream gathers bars before it sends them (one write per batch)."""
SAME_SITE = frozenset({"same-origin", "none"})
"""``Sec-Fetch-Site`` values of a request the page itself (or a typed address) sent."""


def page_html() -> str:
    """The page, as shipped in the package."""
    return resources.files("swapos.serve").joinpath("static/ui.html").read_text("utf-8")


def _hashes(html: str, tag: str) -> str:
    """CSP source hashes of every inline ``<tag>`` block of ``html``."""
    blocks = re.findall(rf"<{tag}>(.*?)</{tag}>", html, flags=re.DOTALL)
    digests = (base64.b64encode(hashlib.sha256(b.encode()).digest()).decode() for b in blocks)
    return " ".join(f"'sha256-{d}'" for d in digests)


def content_security_policy(html: str) -> str:
    """Only the page's own inline script and style run, and it talks to this server only:
    an injected tag or handler would not run even if a name slipped through as markup."""
    return (
        f"default-src 'none'; script-src {_hashes(html, 'script')}; "
        f"style-src {_hashes(html, 'style')}; connect-src 'self'; img-src data:; "
        "base-uri 'none'; form-action 'none'; frame-ancestors 'none'"
    )


def check_same_site(request: Request, allowed_origins: tuple[str, ...] = ()) -> None:
    """Refuse (403) a request a browser sent from another site.

    A browser says where a request comes from in ``Sec-Fetch-Site``; without it (an older
    browser) ``Origin`` must name this server (its ``Host``) or an ``allowed_origins`` one.
    A request with neither header is not a browser's (curl, a script): the key guards it.
    """
    site = request.headers.get("sec-fetch-site")
    origin = request.headers.get("origin")
    if site is not None:
        if site in SAME_SITE or (origin is not None and origin in allowed_origins):
            return
        raise RequestError(
            403, f"cross-site request refused (Sec-Fetch-Site: {site})", kind="permission_error"
        )
    if origin is None:
        return
    own = f"{request.url.scheme}://{request.headers.get('host', '')}"
    if origin != own and origin not in allowed_origins:
        raise RequestError(
            403, f"cross-site request refused (Origin: {origin})", kind="permission_error"
        )


def _sse(name: str, data: bytes) -> bytes:
    return b"event: " + name.encode() + b"\ndata: " + data + b"\n\n"


class LivePage:
    """The ``/ui`` routes of one app, and the event hub that feeds them.

    Args:
        server: the app's shared state (system, scheduler, transitions).
        authorize: raises the 401 :class:`RequestError` for a request without the key.
        allowed_origins: other origins whose pages may press the buttons (CORS origins).
    """

    def __init__(
        self,
        server: Server,
        authorize: Callable[[Request], None],
        allowed_origins: tuple[str, ...] = (),
    ) -> None:
        self.server = server
        self.hub = EventHub(server.system.watch)
        self._authorize = authorize
        self._origins = allowed_origins
        self._html = page_html()
        self._csp = content_security_policy(self._html)
        self._encoder = msgspec.json.Encoder()

    def routes(self) -> list[Route]:
        return [
            self._route("/ui", self.page, "GET", key=False),
            self._route("/ui/state", self.state, "GET"),
            self._route("/ui/events", self.events, "GET"),
            self._route("/ui/load", self.load, "POST"),
            self._route("/ui/unload", self.unload, "POST"),
        ]

    @asynccontextmanager
    async def lifespan(self) -> AsyncIterator[None]:
        """Stops watching the system's events when the app's lifespan ends."""
        try:
            yield
        finally:
            self.hub.close()

    def _route(
        self,
        path: str,
        handler: Callable[[Request], Awaitable[Any]],
        method: str,
        *,
        key: bool = True,
    ) -> Route:
        async def endpoint(request: Request) -> Any:
            try:
                if key:
                    self._authorize(request)
                if method == "POST":
                    check_same_site(request, self._origins)
                return await handler(request)
            except RequestError as exc:
                return exc.response()

        return Route(path, endpoint, methods=[method])

    async def page(self, request: Request) -> Response:
        headers = {
            "content-security-policy": self._csp,
            "x-content-type-options": "nosniff",
            "referrer-policy": "no-referrer",
            "cache-control": "no-store",
        }
        return Response(self._html, media_type="text/html; charset=utf-8", headers=headers)

    async def state(self, request: Request) -> Response:
        body = self._encoder.encode(live_state(self.server, self.hub, full=True))
        return Response(body, media_type="application/json")

    async def events(self, request: Request) -> EventStream:
        return EventStream(self.stream)

    async def stream(self, emit: Callable[[bytes], Awaitable[None]]) -> None:
        """Write one page's event stream through ``emit`` until cancelled (the page closes):
        a full state, then what changes (see the module's docstring)."""
        sub = self.hub.subscribe()
        try:
            await emit(_sse("state", self._state(full=True)))
            last_state = time.monotonic()
            while True:
                await sub.wait(STATE_EVERY_S)
                await anyio.sleep(BATCH_S)  # gather what comes with it into one write
                chunk, full = self._chunk(sub)
                if full or time.monotonic() - last_state >= STATE_MIN_S:
                    chunk += _sse("state", self._state(full=full))
                    last_state = time.monotonic()
                if chunk:
                    await emit(chunk)
        finally:
            self.hub.unsubscribe(sub)

    def _chunk(self, sub: Subscriber) -> tuple[bytes, bool]:
        """The buffered bars as ``bars`` events, or a ``resync`` when the page fell behind
        (a full state follows it); and whether a full state must follow."""
        messages, overflowed = sub.take()
        if overflowed:
            log.info("ui.resync", subscribers=self.hub.subscribers)
            return _sse("resync", b"{}"), True
        return b"".join(_sse("bars", m) for m in messages), False

    def _state(self, *, full: bool) -> bytes:
        return self._encoder.encode(live_state(self.server, self.hub, full=full))

    async def load(self, request: Request) -> Response:
        """Load a model (the page's load button): it takes its turn in the queues, as
        Ollama's empty request does."""
        name = await self._model(request)
        async with self.server.scheduler.turn(name):
            failed = await self.server.system.preload([name])
        if failed:
            raise RequestError(500, f"cannot load {name!r}: {failed[name]}", code="load_failed")
        self.server.expiry.finished(name)  # its ttl, if it has one, starts now
        return Response(self._encoder.encode({"loaded": [name]}), media_type="application/json")

    async def unload(self, request: Request) -> Response:
        """Unload a model (the page's unload button), as ``POST /unload`` does."""
        name = await self._model(request)
        async with self.server.scheduler.hold([name]):
            done = await self.server.system.unload([name])
        body = {"unloaded": done.unloaded, "skipped": done.skipped}
        return Response(self._encoder.encode(body), media_type="application/json")

    async def _model(self, request: Request) -> str:
        if request.headers.get("content-type", "").split(";")[0].strip() != "application/json":
            raise RequestError(415, "send the body as JSON (Content-Type: application/json)")
        raw = await read_body(request, self.server.settings.max_body_bytes)
        body = decode(raw, UnloadRequest)
        if body.model is None:
            raise RequestError(400, 'name the model: {"model": name}', param="model")
        return served_model(self.server, body.model)

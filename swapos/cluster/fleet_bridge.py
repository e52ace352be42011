"""A forwarded request run through an ASGI app, its response as parts (the replica's side).

The front hands a replica a :class:`~swapos.cluster.fleet_protocol.ForwardedRequest`; the
replica runs it through its ``swapos.serve.app(system)`` with an ASGI scope made from it,
and each ``http.response.start`` / ``http.response.body`` message the app sends becomes a
:data:`~swapos.cluster.fleet_protocol.ResponsePart` the front streams to its client.

:class:`AsgiCall` runs the app in a task group the caller owns (a replica's long-lived one)
rather than in the async generator that streams the parts back: a generator closed from
another task must not own a cancel scope. When the parts are no longer read
(:meth:`AsgiCall.abandon`, the client went away), the app sees ``http.disconnect`` and the
call is cancelled.
"""

from __future__ import annotations

import anyio
import structlog
from anyio.streams.memory import MemoryObjectReceiveStream
from starlette.types import ASGIApp, Message, Scope

from swapos.cluster.fleet_protocol import (
    ForwardedRequest,
    ResponseBody,
    ResponsePart,
    ResponseStart,
)

log = structlog.get_logger(__name__)

PARTS_BUFFER = 16
"""Response parts a call may run ahead of its reader."""
SERVER = ("swapos-fleet", 80)


def scope_of(request: ForwardedRequest) -> Scope:
    """The ASGI HTTP scope of ``request``."""
    return {
        "type": "http",
        "asgi": {"version": "3.0", "spec_version": "2.3"},
        "http_version": "1.1",
        "method": request.method,
        "scheme": "http",
        "path": request.path,
        "raw_path": request.path.encode("utf-8", "surrogateescape"),
        "query_string": request.query,
        "root_path": "",
        "headers": [(k, v) for k, v in request.headers],
        "client": request.client,
        "server": SERVER,
        "state": {},
    }


def part_of(message: Message) -> ResponsePart | None:
    """The part an ASGI ``send`` message is (None for other messages)."""
    if message["type"] == "http.response.start":
        headers = [(bytes(k), bytes(v)) for k, v in message.get("headers", [])]
        return ResponseStart(status=int(message["status"]), headers=headers)
    if message["type"] == "http.response.body":
        return ResponseBody(
            body=bytes(message.get("body", b"")), more=bool(message.get("more_body", False))
        )
    return None


class AsgiCall:
    """One request through ``asgi``: start :meth:`run` in a task group, read :meth:`parts`.

    Args:
        asgi: the app.
        request: the forwarded request (its whole body is already here).
    """

    def __init__(self, asgi: ASGIApp, request: ForwardedRequest) -> None:
        self._asgi = asgi
        self._request = request
        self._send, self._parts = anyio.create_memory_object_stream[ResponsePart](PARTS_BUFFER)
        self._gone = anyio.Event()
        self._scope = anyio.CancelScope()
        self._body_read = False
        self._started = False

    def parts(self) -> MemoryObjectReceiveStream[ResponsePart]:
        """The response's parts, in order; the stream ends with the response."""
        return self._parts

    def abandon(self) -> None:
        """The parts are no longer read: the app sees a disconnect and the call ends."""
        self._gone.set()
        self._scope.cancel()

    async def run(self) -> None:
        """Run the app (in the caller's task group). An exception the app lets out is
        logged and answered with a 500 if no response had started; it never escapes."""
        with self._scope:
            async with self._send:
                try:
                    await self._asgi(scope_of(self._request), self._receive, self._on_send)
                except Exception:
                    log.exception("fleet.request_failed", path=self._request.path)
                    await self._fail()

    async def _fail(self) -> None:
        try:
            if not self._started:
                await self._send.send(ResponseStart(status=500, headers=_JSON))
                await self._send.send(ResponseBody(body=_INTERNAL, more=False))
            else:
                await self._send.send(ResponseBody(body=b"", more=False))
        except (anyio.BrokenResourceError, anyio.ClosedResourceError):
            pass

    async def _receive(self) -> Message:
        if not self._body_read:
            self._body_read = True
            return {"type": "http.request", "body": self._request.body, "more_body": False}
        await self._gone.wait()
        return {"type": "http.disconnect"}

    async def _on_send(self, message: Message) -> None:
        part = part_of(message)
        if part is None:
            return
        self._started = self._started or isinstance(part, ResponseStart)
        try:
            await self._send.send(part)
        except anyio.BrokenResourceError:  # the reader went away: the client is gone
            self.abandon()


_JSON: list[tuple[bytes, bytes]] = [(b"content-type", b"application/json")]
_INTERNAL = (
    b'{"error": {"message": "internal error in the replica; see its log", '
    b'"type": "server_error", "param": null, "code": null}}'
)


def header(headers: list[tuple[bytes, bytes]], name: str) -> str | None:
    """The value of header ``name`` (lower case), if any."""
    key = name.encode()
    return next((v.decode("latin-1") for k, v in headers if k.lower() == key), None)

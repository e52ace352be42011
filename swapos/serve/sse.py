"""A server-sent-events response that notices a client going away while nothing is sent.

Starlette's ``StreamingResponse`` relies on a failing ``send`` to see a disconnect under
ASGI 2.4 servers; a request still queued or prefilling sends nothing for a while, so the
generation would run on for a client that is gone. :class:`EventStream` listens for
``http.disconnect`` during the whole response and cancels the producer at once: the
generation stops within a token and its lease is released.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable

import anyio
from starlette.types import Receive, Scope, Send

Emit = Callable[[bytes], Awaitable[None]]
"""Sends one chunk of the event stream to the client."""


def sse_event(data: bytes | str) -> bytes:
    """One ``data:`` event (the payload must not contain newlines: JSON never does)."""
    body = data.encode() if isinstance(data, str) else data
    return b"data: " + body + b"\n\n"


class EventStream:
    """An ASGI response running ``produce(emit)`` while watching for a disconnect.

    Args:
        produce: writes the events through ``emit``; cancelled if the client disconnects.
        media_type: the response's content type (Ollama's routes stream NDJSON).
    """

    def __init__(
        self,
        produce: Callable[[Emit], Awaitable[None]],
        media_type: str = "text/event-stream; charset=utf-8",
    ) -> None:
        self._produce = produce
        self._media_type = media_type.encode()
        self.disconnected = False

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        await send(
            {
                "type": "http.response.start",
                "status": 200,
                "headers": [
                    (b"content-type", self._media_type),
                    (b"cache-control", b"no-cache"),
                    (b"x-accel-buffering", b"no"),
                ],
            }
        )

        async def emit(chunk: bytes) -> None:
            await send({"type": "http.response.body", "body": chunk, "more_body": True})

        async with anyio.create_task_group() as tg:

            async def watch() -> None:
                while (await receive())["type"] != "http.disconnect":
                    pass
                self.disconnected = True
                tg.cancel_scope.cancel()

            tg.start_soon(watch)
            try:
                await self._produce(emit)
            except OSError:  # the connection broke under a send
                self.disconnected = True
            tg.cancel_scope.cancel()
        if not self.disconnected:
            await send({"type": "http.response.body", "body": b"", "more_body": False})

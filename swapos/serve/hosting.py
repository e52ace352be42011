"""Serving the ASGI app with Hypercorn on the running event loop (asyncio or trio).

Hypercorn is chosen because it serves on asyncio *and* on trio (``hypercorn.asyncio`` /
``hypercorn.trio``), takes a shutdown trigger, and speaks HTTP/1.1 and HTTP/2; uvicorn runs
on asyncio only.
"""

from __future__ import annotations

import socket
from collections.abc import Awaitable, Callable
from typing import TYPE_CHECKING, cast

import sniffio
from hypercorn.config import Config
from starlette.types import ASGIApp

if TYPE_CHECKING:
    from hypercorn.typing import Framework


def listening_socket(host: str = "127.0.0.1", port: int = 0) -> tuple[str, int]:
    """A socket listening on ``host:port`` (``port`` 0: a free one), as a Hypercorn bind
    (``fd://N``; Hypercorn then owns the socket) and its port. Clients may connect as soon
    as this returns; Hypercorn accepts them once it serves.

    Raises:
        OSError: the address cannot be bound (in use, not local).
    """
    sock = socket.socket(socket.AF_INET6 if ":" in host else socket.AF_INET)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    sock.bind((host, port))
    sock.listen()  # clients may connect at once; Hypercorn accepts once it serves
    port = int(sock.getsockname()[1])
    return f"fd://{sock.detach()}", port


async def serve_http(
    asgi: ASGIApp,
    *,
    bind: str,
    shutdown_trigger: Callable[[], Awaitable[None]],
    access_log: bool = False,
) -> None:
    """Serve ``asgi`` on ``bind`` (``host:port`` or ``fd://N``) until ``shutdown_trigger``
    returns, on whichever event loop runs this (asyncio or trio). Running requests get
    Hypercorn's graceful timeout to finish; the app's own cleanup is its owner's."""
    config = Config()
    config.bind = [bind]
    config.accesslog = "-" if access_log else None
    framework = cast("Framework", asgi)
    if sniffio.current_async_library() == "trio":
        import hypercorn.trio

        await hypercorn.trio.serve(framework, config, shutdown_trigger=shutdown_trigger)
    else:
        import hypercorn.asyncio

        await hypercorn.asyncio.serve(framework, config, shutdown_trigger=shutdown_trigger)

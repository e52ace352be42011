"""A tiny OpenAI-compatible server for tests: scripted replies, served on loopback.

``stub_server(...)`` runs a Starlette app on Hypercorn (on asyncio or trio, whichever runs
the test) on a free loopback port and yields its state and base URL (``.../v1``). Replies
stream over SSE one word per chunk, as a llama.cpp server streams one token per chunk, with
``max_tokens`` (words) and ``stop`` applied server-side and the ``usage`` chunk at the end
when ``stream_options.include_usage`` asks for it; with ``stream: false`` the reply is one
JSON object with its ``usage``. Every request body is recorded.
"""

from __future__ import annotations

import json
import re
import socket
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from dataclasses import dataclass, field
from typing import Any, cast

import anyio
import sniffio
from hypercorn.config import Config
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import JSONResponse, Response, StreamingResponse
from starlette.routing import Route

_WORD = re.compile(r"\s*\S+|\s+")


@dataclass
class StubState:
    """The server's script and what it saw.

    Attributes:
        replies: model id -> successive replies (the last one repeats).
        hang: stream the first word of each reply, then wait until the client goes.
        status: answer every completion with this error status instead.
        requests: the JSON bodies of the completions received, in order.
        disconnected: set when a streaming client went away mid-reply.
    """

    replies: dict[str, list[str]]
    hang: bool = False
    status: int | None = None
    requests: list[dict[str, Any]] = field(default_factory=list)
    served: dict[str, int] = field(default_factory=dict)
    disconnected: anyio.Event = field(default_factory=anyio.Event)

    def reply_for(self, model: str) -> str:
        n = self.served.get(model, 0)
        self.served[model] = n + 1
        script = self.replies[model]
        return script[min(n, len(script) - 1)]


def _error(status: int, message: str) -> JSONResponse:
    return JSONResponse({"error": {"message": message, "type": "invalid_request_error"}}, status)


def stub_app(state: StubState) -> Starlette:
    async def models(request: Request) -> Response:
        return JSONResponse({"object": "list", "data": [{"id": m} for m in state.replies]})

    async def complete(request: Request) -> Response:
        body = await request.json()
        state.requests.append(body)
        if state.status is not None:
            return _error(state.status, "scripted failure")
        model = body.get("model")
        if model not in state.replies:
            return _error(404, f"model {model!r} not found")
        words = _WORD.findall(state.reply_for(model))
        text, finish = _cut(words, body.get("max_tokens", 16), body.get("stop") or [])
        chat = "messages" in body
        usage = {"prompt_tokens": len(json.dumps(body.get("messages", body.get("prompt")))),
                 "completion_tokens": len(_WORD.findall(text))}  # fmt: skip
        if not body.get("stream"):
            choice: dict[str, Any] = {"index": 0, "finish_reason": finish}
            if chat:
                choice["message"] = {"role": "assistant", "content": text}
            else:
                choice["text"] = text
            return JSONResponse({"choices": [choice], "usage": usage})
        return StreamingResponse(
            _stream(state, text, finish, usage if _wants_usage(body) else None, chat=chat),
            media_type="text/event-stream",
        )

    return Starlette(
        routes=[
            Route("/v1/models", models),
            Route("/v1/chat/completions", complete, methods=["POST"]),
            Route("/v1/completions", complete, methods=["POST"]),
        ]
    )


def _wants_usage(body: dict[str, Any]) -> bool:
    options = body.get("stream_options") or {}
    return bool(options.get("include_usage"))


def _cut(words: list[str], max_tokens: int, stop: list[str]) -> tuple[str, str]:
    text = "".join(words[:max_tokens])
    finish = "length" if len(words) > max_tokens else "stop"
    for s in stop:
        at = text.find(s)
        if at >= 0:
            text, finish = text[:at], "stop"
    return text, finish


async def _stream(
    state: StubState, text: str, finish: str, usage: dict[str, int] | None, *, chat: bool
) -> AsyncIterator[str]:
    def chunk(piece: str | None, reason: str | None) -> str:
        choice: dict[str, Any] = {"index": 0, "finish_reason": reason}
        if chat:
            choice["delta"] = {"content": piece} if piece is not None else {}
        else:
            choice["text"] = piece or ""
        return f"data: {json.dumps({'choices': [choice]})}\n\n"

    try:
        for i, piece in enumerate(_WORD.findall(text)):
            yield chunk(piece, None)
            if state.hang and i == 0:
                await anyio.sleep_forever()
        yield chunk(None, finish)
        if usage is not None:
            yield f"data: {json.dumps({'choices': [], 'usage': usage})}\n\n"
        yield "data: [DONE]\n\n"
    except anyio.get_cancelled_exc_class():
        state.disconnected.set()
        raise


def free_port() -> int:
    """A loopback port nobody listens on (bound, then released)."""
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


@asynccontextmanager
async def stub_server(state: StubState) -> AsyncIterator[str]:
    """Serve :func:`stub_app` on loopback; yields the base URL (``http://127.0.0.1:N/v1``)."""
    sock = socket.socket()
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    sock.bind(("127.0.0.1", 0))
    sock.listen()  # connections queue until Hypercorn accepts: no readiness poll needed
    port = int(sock.getsockname()[1])
    config = Config()
    config.bind = [f"fd://{sock.detach()}"]
    config.accesslog = None
    config.errorlog = None
    config.graceful_timeout = 1.0
    stop = anyio.Event()
    app = cast(Any, stub_app(state))
    async with anyio.create_task_group() as tg:
        if sniffio.current_async_library() == "trio":
            import hypercorn.trio

            tg.start_soon(lambda: hypercorn.trio.serve(app, config, shutdown_trigger=stop.wait))
        else:
            import hypercorn.asyncio

            tg.start_soon(lambda: hypercorn.asyncio.serve(app, config, shutdown_trigger=stop.wait))
        try:
            yield f"http://127.0.0.1:{port}/v1"
        finally:
            stop.set()

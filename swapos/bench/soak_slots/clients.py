"""The slot soak's clients: each keeps one streamed chat request going until the deadline,
reading it to the end, disconnecting mid-stream or cancelling it as its plan draws.

A request's result: ``completed`` (a well-formed stream to ``[DONE]``), ``disconnected``
(closed after its chunks; one that ended first counts as completed), ``cancelled`` (closed
before a chunk was read), ``error`` (a status other than 200, a malformed stream, a
transport error). A client starts no request after the deadline and finishes the one it
has, so every request sent ends in one of the four.
"""

from __future__ import annotations

import itertools
import time
from collections.abc import Iterator

import anyio
import httpx

from swapos.bench.soak_slots.checks import Outcome, Result
from swapos.bench.soak_slots.plan import (
    Action,
    chat_body,
    client_rng,
    draw_action,
    request_id,
)
from swapos.bench.soak_slots.stream import StreamReader

HEADER = "X-Soak-Request"
TIMEOUT = httpx.Timeout(600.0, connect=30.0)
"""A queued request hears the server's heartbeat every few seconds; 10 minutes of silence is
an error."""


class Soak:
    """The clients' shared settings and what they recorded."""

    def __init__(
        self,
        url: str,
        model: str,
        *,
        max_tokens: int,
        disconnect: float,
        cancel: float,
        seed: int,
    ) -> None:
        self.url = url
        self.model = model
        self.max_tokens = max_tokens
        self.disconnect = disconnect
        self.cancel = cancel
        self.seed = seed
        self.outcomes: list[Outcome] = []
        self._numbers: Iterator[int] = itertools.count()
        self._t0 = time.perf_counter()

    async def run(self, clients: int, seconds: float) -> float:
        """``clients`` clients until ``seconds`` from now, then until their last requests
        end; returns the wall from the start to the last end."""
        self._t0 = time.perf_counter()
        deadline = self._t0 + seconds
        limits = httpx.Limits(max_connections=2 * clients, max_keepalive_connections=clients)
        async with (
            httpx.AsyncClient(timeout=TIMEOUT, limits=limits) as http,
            anyio.create_task_group() as tg,
        ):
            for c in range(clients):
                tg.start_soon(self._client, http, c, deadline)
        return time.perf_counter() - self._t0

    async def _client(self, http: httpx.AsyncClient, client: int, deadline: float) -> None:
        rng = client_rng(self.seed, client)
        while time.perf_counter() < deadline:
            action = draw_action(
                rng, disconnect=self.disconnect, cancel=self.cancel, max_tokens=self.max_tokens
            )
            self.outcomes.append(await self._request(http, client, next(self._numbers), action))

    async def _request(
        self, http: httpx.AsyncClient, client: int, n: int, action: Action
    ) -> Outcome:
        rid = request_id(n)
        start = time.perf_counter()
        reader = StreamReader()
        result: Result = "error"
        error: str | None = None
        try:
            if action.kind == "cancel":
                error = await self._cancel(http, n, rid, action.cancel_after_s)
                result = "cancelled" if error is None else "error"
            else:
                result, error = await self._read(http, n, rid, action, reader)
        except httpx.HTTPError as exc:
            result, error = "error", f"{type(exc).__name__}: {exc}"
        return Outcome(
            request_id=rid, client=client, action=action.kind, result=result,
            start_s=start - self._t0, latency_s=time.perf_counter() - start,
            response_id=reader.response_id, chunks=reader.content_chunks,
            tokens=reader.tokens or 0, error=error,
        )  # fmt: skip

    async def _cancel(
        self, http: httpx.AsyncClient, n: int, rid: str, after_s: float
    ) -> str | None:
        """Send, then close ``after_s`` later without reading a chunk; a refusal that came
        first is an error."""
        body = chat_body(self.model, n, self.max_tokens)
        with anyio.move_on_after(after_s):
            async with http.stream("POST", self.url, json=body, headers={HEADER: rid}) as r:
                if r.status_code != 200:
                    return f"HTTP {r.status_code}"
                await anyio.sleep_forever()
        return None

    async def _read(
        self, http: httpx.AsyncClient, n: int, rid: str, action: Action, reader: StreamReader
    ) -> tuple[Result, str | None]:
        body = chat_body(self.model, n, self.max_tokens)
        async with http.stream("POST", self.url, json=body, headers={HEADER: rid}) as r:
            if r.status_code != 200:
                text = (await r.aread()).decode(errors="replace")
                return "error", f"HTTP {r.status_code}: {text[:200]}"
            async for line in r.aiter_lines():
                reader.feed(line)
                if reader.problem is not None:
                    return "error", reader.problem
                if (
                    action.kind == "disconnect"
                    and reader.content_chunks >= action.after_chunks
                    and reader.finish_reason is None
                ):
                    return "disconnected", None  # leaving the block closes the response
        if not reader.complete:
            return "error", reader.problem or "the stream ended before [DONE]"
        return "completed", None

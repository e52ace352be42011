"""``bench serve``'s client: replays the trace's sessions concurrently against OpenAI-compatible
servers and times every request."""

from __future__ import annotations

import time
from collections.abc import Callable, Mapping, Sequence
from typing import Any

import anyio
import httpx
import msgspec

from swapos.bench.serve.stats import RequestSample
from swapos.bench.serve.trace import TraceRequest

REQUEST_TIMEOUT_S = 1800.0
"""A request may wait this long (queued behind swaps on a slow machine)."""


class _Usage(msgspec.Struct, frozen=True, kw_only=True):
    prompt_tokens: int = 0
    completion_tokens: int = 0


class _Timings(msgspec.Struct, frozen=True, kw_only=True):
    load_s: float | None = None
    queue_wait_s: float | None = None


class _Reply(msgspec.Struct, frozen=True, kw_only=True):
    usage: _Usage | None = None
    swapos: _Timings | None = None


def request_body(req: TraceRequest, *, seed: int) -> dict[str, Any]:
    """The non-streamed chat completion ``req`` sends: greedy, seeded, ``max_tokens``.

    ``repeat_penalty: 1.0`` turns off llama_cpp.server's default penalty of 1.1 (a field
    SwapOS ignores: it samples without one), so both servers decode the same greedy tokens
    and generate answers of the same length."""
    return {
        "model": req.model,
        "messages": [{"role": m.role, "content": m.content} for m in req.messages],
        "max_tokens": req.max_tokens,
        "temperature": 0.0,
        "seed": seed,
        "stream": False,
        "repeat_penalty": 1.0,
    }


async def replay(
    sessions: Sequence[Sequence[TraceRequest]],
    urls: Mapping[str, str] | Callable[[TraceRequest], str],
    *,
    seed: int = 0,
    session_header: str | None = None,
) -> tuple[float, list[RequestSample]]:
    """Send every session's requests in order, all sessions at once; returns the total wall
    (first request sent to last response) and one sample per request, in completion order.

    Args:
        sessions: the trace (:func:`~swapos.bench.serve.trace.build_trace`).
        urls: model name -> base URL (``http://127.0.0.1:N/v1``) of the server serving it,
            or a function that picks the base URL of each request when it is sent.
        seed: the sampling seed of every request.
        session_header: when given, each request names its session (``s<n>``) in this
            header (a fleet keeps a conversation on one replica).

    A failed request (an error status, a broken connection) is a sample with ``error``;
    its session goes on with the next request.
    """
    samples: list[RequestSample] = []
    timeout = httpx.Timeout(REQUEST_TIMEOUT_S, connect=30.0)
    limits = httpx.Limits(max_connections=len(sessions) + 4)
    async with httpx.AsyncClient(timeout=timeout, limits=limits) as client:
        began = time.perf_counter()

        pick = urls if callable(urls) else lambda req: urls[req.model]

        async def session(requests: Sequence[TraceRequest]) -> None:
            for req in requests:
                headers = {session_header: f"s{req.session}"} if session_header else {}
                samples.append(await _send(client, pick(req), req, seed, began, headers))

        async with anyio.create_task_group() as tg:
            for requests in sessions:
                tg.start_soon(session, requests)
        wall = time.perf_counter() - began
    return wall, samples


async def _send(  # noqa: PLR0917
    client: httpx.AsyncClient,
    base: str,
    req: TraceRequest,
    seed: int,
    began: float,
    headers: Mapping[str, str],
) -> RequestSample:
    start = time.perf_counter()
    try:
        response = await client.post(
            f"{base}/chat/completions", json=request_body(req, seed=seed), headers=headers
        )
        latency = time.perf_counter() - start
        if response.status_code >= 400:
            error = f"HTTP {response.status_code}: {response.text[:200]}"
            return _sample(req, start - began, latency, error=error)
        reply = msgspec.json.decode(response.content, type=_Reply)
    except (httpx.HTTPError, msgspec.DecodeError) as exc:
        error = f"{type(exc).__name__}: {exc}"
        return _sample(req, start - began, time.perf_counter() - start, error=error)
    usage = reply.usage or _Usage()
    timings = reply.swapos or _Timings()
    return _sample(
        req, start - began, latency,
        prompt_tokens=usage.prompt_tokens, completion_tokens=usage.completion_tokens,
        load_s=timings.load_s, queue_wait_s=timings.queue_wait_s,
    )  # fmt: skip


def _sample(req: TraceRequest, start_s: float, latency_s: float, **measured: Any) -> RequestSample:
    return RequestSample(
        session=req.session, round=req.round, role=req.role, model=req.model,
        start_s=start_s, latency_s=latency_s, **measured,
    )  # fmt: skip

"""The server's own endpoints: models, running state, unload, health, metrics."""

from __future__ import annotations

import time
from typing import Any

import msgspec
from starlette.requests import Request
from starlette.responses import Response

from swapos.serve.bodies import decode, read_body
from swapos.serve.errors import RequestError
from swapos.serve.schemas import ModelCard, ModelList, UnloadRequest
from swapos.serve.state import Server

PROMETHEUS_TEXT = "text/plain; version=0.0.4; charset=utf-8"


def _json(value: Any) -> Response:
    return Response(msgspec.json.encode(value), media_type="application/json")


async def health(server: Server, request: Request) -> Response:
    """200 once the system is open (the app exists only then)."""
    return _json(
        {"status": "ok", "mode": server.system.mode, "models": sorted(server.system.specs)}
    )


async def models(server: Server, request: Request) -> Response:
    """The profile's models, each with its residency (``swapos``: state, leases, bytes)."""
    states = {s.model: s for s in await server.system.models()}
    waiting = {q.model: q.waiting for q in server.scheduler.snapshot()}
    created = int(time.time())
    cards = []
    for name, spec in sorted(server.system.specs.items()):
        st = states.get(name)
        cards.append(
            ModelCard(
                id=name,
                created=created,
                owned_by="swapos",
                swapos={
                    "state": st.state if st else "absent",
                    "resident": st is not None and st.state == "ready",
                    "leases": st.leases if st else 0,
                    "footprint_bytes": st.footprint_bytes if st else 0,
                    "n_ctx": spec.n_ctx,
                    "waiting": waiting.get(name, 0),
                },
            )
        )
    return _json(ModelList(data=cards))


async def running(server: Server, request: Request) -> Response:
    """Resident models, leases, queues and the budget."""
    loader = server.system.statistics()["loader"]
    return _json(
        {
            "mode": server.system.mode,
            "budget_bytes": server.system.budget_bytes,
            "used_bytes": loader.used_bytes,
            "models": await server.system.models(),
            "queues": server.scheduler.snapshot(),
            "max_wait_s": server.settings.max_wait,
        }
    )


async def unload(server: Server, request: Request) -> Response:
    """Unload one model (``{"model": name}``) or all (``{}`` or no body): new requests for
    it wait, running ones finish first, then it is evicted; queued requests then load it
    again."""
    raw = await read_body(request, server.settings.max_body_bytes)
    body = decode(raw, UnloadRequest) if raw.strip() else UnloadRequest()
    if body.model is not None and body.model not in server.system.specs:
        known = ", ".join(sorted(server.system.specs))
        raise RequestError(
            404, f"The model {body.model!r} does not exist; models: {known}", param="model",
            code="model_not_found",
        )  # fmt: skip
    names = [body.model] if body.model is not None else sorted(server.system.specs)
    async with server.scheduler.hold(names):
        done = await server.system.unload(names)
    return _json({"unloaded": done.unloaded, "skipped": done.skipped})


async def metrics(server: Server, request: Request) -> Response:
    """Prometheus text: per-model request counters, queue depths, loads and evictions."""
    stats = server.system.statistics()
    loader, prefetcher = stats["loader"], stats["prefetcher"]
    system = {
        "swapos_model_loads_total": float(loader.loads),
        "swapos_model_evictions_total": float(loader.evictions),
        "swapos_prefetch_loads_total": float(prefetcher.loads),
        "swapos_prefetch_warms_total": float(prefetcher.warms),
        "swapos_budget_bytes": float(loader.budget_bytes),
        "swapos_used_bytes": float(loader.used_bytes),
    }
    queues = {q.model: q.waiting for q in server.scheduler.snapshot()}
    text = server.metrics.render(system=system, queues=queues)
    return Response(text, media_type=PROMETHEUS_TEXT)

"""The server's own endpoints: models, running state, unload, health, metrics."""

from __future__ import annotations

import time
from typing import Any

import msgspec
from starlette.requests import Request
from starlette.responses import Response

from swapos.data.residency import ModelState
from swapos.models.spec import ModelSpec
from swapos.serve.bodies import decode, read_body
from swapos.serve.completions import served_model
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
    """The profile's models, each with its residency (``swapos``: state, leases, bytes,
    ``load_progress`` while it loads, its ``aliases``), then each alias as a card of its own
    (``swapos.alias_of``: the model it names)."""
    states = {s.model: s for s in await server.system.models()}
    waiting = {q.model: q.waiting for q in server.scheduler.snapshot()}
    created = int(time.time())
    cards = []
    for name, model in server.names.listed():
        st = states.get(model)
        if name != model:
            info: dict[str, Any] = {"alias_of": model}
        else:
            info = {
                "state": st.state if st else "absent",
                "resident": st is not None and st.state == "ready",
                "leases": st.leases if st else 0,
                "footprint_bytes": st.footprint_bytes if st else 0,
                "load_progress": st.load_progress if st else None,
                **_contexts(server.system.specs[model], st),
                "waiting": waiting.get(model, 0),
                "aliases": server.names.aliases_of(model),
            }
        cards.append(ModelCard(id=name, created=created, owned_by="swapos", swapos=info))
    return _json(ModelList(data=cards))


def _contexts(spec: ModelSpec, st: ModelState | None) -> dict[str, int]:
    """A model's contexts: the one it is loaded with (its start while it is absent), its cap
    and the length it was trained for (0: unknown)."""
    return {
        "n_ctx": st.n_ctx if st is not None and st.n_ctx else spec.n_ctx,
        "n_ctx_max": spec.ctx_cap,
        "n_ctx_train": spec.trained_ctx,
    }


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
    names = (
        [served_model(server, body.model)]
        if body.model is not None
        else sorted(server.system.specs)
    )
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
    snapshot = server.scheduler.snapshot()
    queues = {q.model: q.waiting for q in snapshot}
    running = {q.model: q.running for q in snapshot}
    slots = {name: spec.slots for name, spec in server.system.specs.items()}
    text = server.metrics.render(system=system, queues=queues, running=running, slots=slots)
    return Response(text, media_type=PROMETHEUS_TEXT)

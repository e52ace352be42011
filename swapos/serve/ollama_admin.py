"""Ollama's model routes: ``GET /api/tags``, ``GET /api/ps``, ``POST /api/show``,
``GET /api/version``."""

from __future__ import annotations

import datetime as dt
import time
from typing import Any

import msgspec
from starlette.responses import Response

from swapos.policies.keepalive import FOREVER, KeepAlive
from swapos.serve.bodies import decode
from swapos.serve.errors import RequestError
from swapos.serve.names import ollama_name
from swapos.serve.ollama_models import file_facts, rfc3339
from swapos.serve.ollama_schemas import (
    Running,
    RunningModel,
    Show,
    ShowRequest,
    TagModel,
    Tags,
)
from swapos.serve.state import Server
from swapos.structured.tools import call_format
from swapos.version import __version__

OLLAMA_API_VERSION = "0.5.0"
"""The Ollama release whose API the ``/api/`` routes follow (clients gate features on it)."""
FOREVER_NS = 2**63 - 1
"""What Ollama adds to "now" for a model kept for ever (its ``expires_at`` ~292 years on)."""


def _json(value: Any) -> Response:
    return Response(msgspec.json.encode(value), media_type="application/json; charset=utf-8")


async def version() -> Response:
    """``{"version"}``: the Ollama API level served, and SwapOS's own version."""
    return _json({"version": OLLAMA_API_VERSION, "swapos_version": __version__})


async def tags(server: Server) -> Response:
    """Every model of the profile and every alias, as Ollama lists local models (an alias
    as a copy of its model: the same file, size and digest)."""
    models = []
    for name, model in server.names.listed():
        facts = await file_facts(server.system.specs[model])
        models.append(
            TagModel(
                name=ollama_name(name),
                model=ollama_name(name),
                modified_at=facts.modified_at,
                size=facts.size,
                digest=facts.digest,
                details=facts.details,
            )
        )
    return _json(Tags(models=models))


async def ps(server: Server, keep_alive: KeepAlive) -> Response:
    """The resident models: measured footprint as ``size``, ``expires_at`` from their
    keep-alive (a model with none stays until the budget needs the room: Ollama's "forever"),
    soonest expiry last as Ollama sorts them."""
    clock, wall = server.system.clock, time.time()
    rows: list[tuple[float, RunningModel]] = []
    for st in await server.system.models():
        if st.state != "ready":
            continue
        spec = server.system.specs[st.model]
        facts = await file_facts(spec)
        expiry = keep_alive.expires_at(st.model)
        if expiry == FOREVER:
            when = dt.datetime.fromtimestamp(wall, dt.UTC) + dt.timedelta(
                microseconds=FOREVER_NS // 1000
            )
        else:
            when = dt.datetime.fromtimestamp(wall + expiry - clock.now(), dt.UTC)
        rows.append(
            (
                expiry,
                RunningModel(
                    name=ollama_name(st.model),
                    model=ollama_name(st.model),
                    size=st.footprint_bytes,
                    digest=facts.digest,
                    details=facts.details,
                    expires_at=rfc3339(when),
                    context_length=st.n_ctx or spec.n_ctx,  # the context it is loaded with
                    swapos={"state": st.state, "leases": st.leases, "n_ctx_max": spec.ctx_cap},
                ),
            )
        )
    rows.sort(key=lambda row: (-row[0], row[1].name))
    return _json(Running(models=[m for _, m in rows]))


async def show(server: Server, raw: bytes) -> Response:
    """One model's details, template, parameters and GGUF metadata: ``num_ctx`` in the
    parameters is the context it is first loaded with, ``general.context_length`` the most it
    is loaded with (its cap; the GGUF's own ``<arch>.context_length`` is what it was trained
    for).

    Raises:
        RequestError: no body, no model (400), or an unknown model (404).
    """
    if not raw.strip():
        raise RequestError(400, "missing request body")
    body = decode(raw, ShowRequest)
    requested = body.model or body.name
    if not requested:
        raise RequestError(400, "model is required")
    model = server.names.resolve(requested)
    if model is None:
        raise RequestError(404, f"model '{requested}' not found")
    spec = server.system.specs[model]
    facts = await file_facts(spec)
    fmt = await server.system.chat_format(model)
    parameters = [f"num_ctx {spec.n_ctx}"]
    if spec.n_threads is not None:
        parameters.append(f"num_thread {spec.n_threads}")
    return _json(
        Show(
            modelfile=f"# served by SwapOS from the profile's model {model!r}\nFROM {spec.path}\n",
            parameters="\n".join(parameters),
            template=fmt.template if fmt is not None else facts.chat_template,
            details=facts.details,
            model_info={**facts.model_info, "general.context_length": spec.ctx_cap},
            capabilities=await capabilities(server, model),
            modified_at=facts.modified_at,
        )
    )


async def capabilities(server: Server, model: str) -> list[str]:
    """What ``model`` can do, in Ollama's words: ``completion``; ``tools`` where its chat
    template renders tools in a call format SwapOS reads; ``insert`` where its vocabulary
    has fill-in-the-middle tokens."""
    fmt = await server.system.chat_format(model)
    found = ["completion"]
    if fmt is not None and not fmt.messages and call_format(fmt.template) is not None:
        found.append("tools")
    if await server.system.fim_tokens(model) is not None:
        found.append("insert")
    return found

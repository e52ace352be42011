"""What the routes share: the system, the settings, the queues, the counters."""

from __future__ import annotations

from dataclasses import dataclass

import msgspec

from swapos.actors.system import System
from swapos.models.spec import ModelSpec
from swapos.serve.expiry import Expiry
from swapos.serve.metrics import Metrics
from swapos.serve.names import ModelNames
from swapos.serve.scheduler import Scheduler
from swapos.serve.transitions import NextModels

MiB = 2**20


class ServeSettings(msgspec.Struct, frozen=True, kw_only=True):
    """How the server behaves (the command line's flags).

    Attributes:
        max_wait: the starvation bound: seconds a request may wait while another model's
            queue is served before its own queue goes next.
        parallel: requests of one model that may run at the same time, at least (a model
            with more slots runs as many as its slots).
        slots: pins the slots of every local model: the requests it decodes side by side,
            as sequences of its one context (:func:`served_specs` applies it to the specs
            the system opens with; the command line's ``--slots``); None: each model's own
            count from its measured cost curve (``policies/slots.py``; 1 where nothing is
            measured).
        api_key: when set, every request but ``GET /health`` needs
            ``Authorization: Bearer <api_key>``.
        max_body_bytes: larger request bodies are refused with 413.
        default_max_tokens: ``max_tokens`` of a request that names none (always also
            bounded by the room left in the model's context).
        heartbeat_s: a streamed response silent this many seconds (of the system's clock)
            is sent its request's status: queued, loading, running
            (:mod:`swapos.serve.heartbeat`); 0: never.
        cors_origins: origins a browser may call the server from (CORS); empty: none.
    """

    max_wait: float = 30.0
    parallel: int = 1
    slots: int | None = None
    api_key: str | None = None
    max_body_bytes: int = MiB
    default_max_tokens: int = 1024
    heartbeat_s: float = 5.0
    cors_origins: tuple[str, ...] = ()


def served_specs(specs: dict[str, ModelSpec], settings: ServeSettings) -> dict[str, ModelSpec]:
    """``specs`` as the server opens them: every local model's ``slots`` pinned by
    ``settings.slots``, or 0 (planned from its cost curve when the system opens)."""
    slots = settings.slots if settings.slots is not None else 0
    return {
        name: spec if spec.remote else msgspec.structs.replace(spec, slots=slots)
        for name, spec in specs.items()
    }


@dataclass
class Server:
    """The state of one served app (``names``: what its models answer to; ``expiry``:
    their keep-alive timers)."""

    system: System
    settings: ServeSettings
    scheduler: Scheduler
    metrics: Metrics
    next_models: NextModels
    names: ModelNames
    expiry: Expiry

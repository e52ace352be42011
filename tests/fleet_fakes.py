"""Fake-backend pieces for the fleet tests, importable by Ray's worker processes.

Ray pickles a fleet's replica factory by reference, so it lives in a module every worker
can import (the tests put the repository on the workers' ``PYTHONPATH``:
:data:`tests.cluster_fakes.RAY_OPTIONS`).
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Sequence
from contextlib import asynccontextmanager
from dataclasses import dataclass, field
from typing import Any

import httpx

from swapos.actors.system import System, open_system
from swapos.backends.fake import FakeBackend
from swapos.backends.fake_script import FakeModelScript
from swapos.clock import Clock, MonotonicClock
from swapos.cluster.fleet_replica import ReplicaSpec
from swapos.models.profile import ModelConfig, Profile
from swapos.models.spec import ModelSpec

MODELS = ["m0", "m1", "m2", "m3"]
FOOTPRINT = 100
BUDGET = 250
"""A replica's budget: two of the models, never three."""


def scripts(load_s: float = 0.2, token_s: float = 0.02) -> dict[str, FakeModelScript]:
    """Four fake models of one footprint; each answers six words."""
    return {
        m: FakeModelScript(
            load_s=load_s, token_s=token_s, footprint_bytes=FOOTPRINT,
            reply=f"this is {m} speaking, hello",
        )
        for m in MODELS
    }  # fmt: skip


def profile(names: Sequence[str] = MODELS) -> Profile:
    return Profile(
        name="fleet-fake",
        budget="auto",
        models={
            n: ModelConfig(path=f"/nonexistent/{n}.gguf", aliases=[f"alias-{n}"]) for n in names
        },
    )


@dataclass(frozen=True)
class FakeReplicaFactory:
    """A fleet replica's system on the fake backend, on ``clock`` (in-process tests share
    one :class:`~swapos.testing.FakeClock` whose autojump they run; None: the real clock,
    as in Ray's processes)."""

    models: dict[str, FakeModelScript] = field(default_factory=scripts)
    clock: Clock | None = None

    @asynccontextmanager
    async def __call__(self, spec: ReplicaSpec) -> AsyncIterator[System]:
        clock = self.clock or MonotonicClock()
        specs = {n: ModelSpec(name=n, path=f"/nonexistent/{n}.gguf") for n in spec.profile.models}
        async with open_system(
            spec.profile,
            backend=FakeBackend(clock, self.models),
            specs=specs,
            clock=clock,
            mode=spec.mode,
            budget_bytes=spec.budget_bytes,
            event_log=spec.event_log,
        ) as system:
            yield system


def chat_body(model: str, text: str = "hi", **extra: Any) -> dict[str, Any]:
    return {"model": model, "messages": [{"role": "user", "content": text}], **extra}


async def send(
    client: httpx.AsyncClient, model: str, session: str | None = None, text: str = "hi"
) -> httpx.Response:
    """One non-streamed chat request, in ``session`` when given."""
    headers = {"x-swapos-session": session} if session else {}
    return await client.post("/v1/chat/completions", json=chat_body(model, text), headers=headers)


def mixed_trace(rounds: int = 4) -> list[list[str]]:
    """Four clients, each alternating between two of the four models: every model is
    asked for by two clients; two replicas that hold two models each never need to swap,
    while a replica that gets every model swaps on most requests."""
    pairs = [("m0", "m1"), ("m2", "m3"), ("m0", "m2"), ("m1", "m3")]
    return [[pair[i % 2] for i in range(2 * rounds)] for pair in pairs]

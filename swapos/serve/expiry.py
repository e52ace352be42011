"""Unloading idle models: Ollama's ``keep_alive`` hints and a profile model's ``ttl``.

Every model stays resident until the budget needs the room, unless it was given a time to
live: per request (Ollama's ``keep_alive``), or per model (``ttl`` in the profile, applied
at the end of each of its requests on every route, and when it is preloaded).
:class:`~swapos.policies.keepalive.KeepAlive` keeps the timers (pure); :class:`Expiry`
sleeps on the system's clock until the next one runs out and unloads that model, unless a
request is running or waiting for it (its timer then restarts when it is next idle).
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Mapping
from contextlib import asynccontextmanager

import anyio

from swapos.actors.system import System
from swapos.policies.keepalive import FOREVER, KeepAlive
from swapos.serve.scheduler import Scheduler


class Expiry:
    """The keep-alive timers of one served app and the task that carries them out.

    Args:
        system: the open system (its clock; the models unloaded).
        scheduler: the queues (a model with requests running or waiting is busy).
        ttls: seconds each model with a ``ttl`` stays once idle.
    """

    def __init__(self, system: System, scheduler: Scheduler, ttls: Mapping[str, float]) -> None:
        self._system = system
        self._scheduler = scheduler
        self.ttls = dict(ttls)
        self.keep_alive = KeepAlive()
        self._wake = anyio.Event()

    def finished(self, model: str, keep: float | None = None) -> None:
        """A request of ``model`` ended (or ``model`` was preloaded): its timer starts, for
        ``keep`` seconds (a request's ``keep_alive``), else for the model's ``ttl``, else an
        earlier hint's timer restarts."""
        seconds = keep if keep is not None else self.ttls.get(model)
        self.keep_alive.finished(model, seconds, self._system.clock.now())
        self._wake.set()
        self._wake = anyio.Event()

    def busy(self) -> set[str]:
        """Models with requests running or waiting."""
        return {q.model for q in self._scheduler.snapshot() if q.waiting or q.running}

    async def unload_if_idle(self, model: str) -> bool:
        """Unload ``model`` unless a request is running or waiting for it (then the hint
        yields: the model stays for that request). True when it was unloaded."""
        self.keep_alive.forget(model)
        if model in self.busy():
            return False
        async with self._scheduler.hold([model]):
            done = await self._system.unload([model])
        return model in done.unloaded

    async def sweep(self) -> None:
        """Unload models whose time ran out, for as long as the app serves (run it in the
        app's lifespan). Sleeps on the system's clock until the next expiry, or until a
        request sets a new one."""
        clock = self._system.clock
        while True:
            deadline = self.keep_alive.next_expiry()
            async with anyio.create_task_group() as tg:
                tg.start_soon(_cancel_when, self._wake, tg.cancel_scope)
                if deadline == FOREVER:
                    await anyio.sleep_forever()
                await clock.sleep(max(0.0, deadline - clock.now()))
                tg.cancel_scope.cancel()
            for model in self.keep_alive.expired(clock.now(), busy=self.busy()):
                await self.unload_if_idle(model)

    @asynccontextmanager
    async def lifespan(self) -> AsyncIterator[None]:
        """Runs :meth:`sweep` while the block runs (the app's lifespan)."""
        async with anyio.create_task_group() as tg:
            tg.start_soon(self.sweep)
            yield
            tg.cancel_scope.cancel()


async def _cancel_when(event: anyio.Event, scope: anyio.CancelScope) -> None:
    await event.wait()
    scope.cancel()

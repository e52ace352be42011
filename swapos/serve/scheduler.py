"""Swap-aware admission: one queue per model, served by :func:`~swapos.policies.serving.pick_queue`.

A request waits in its model's queue until the scheduler admits it; it then holds its turn
(and, inside it, its model's lease) until it ends. Requests of one model run together, up
to its slots (the requests it decodes side by side: ``ModelSpec.slots``) or ``parallel``
if that is more; a request for another model is admitted only once the running
ones have drained, so two models that do not fit together are never asked for at once and
nothing fails for lack of room: it waits. Which queue goes next is the pure policy's
decision (the resident model first, unless another queue's oldest request has waited
``max_wait`` seconds).
"""

from __future__ import annotations

from collections import deque
from collections.abc import AsyncIterator, Callable, Collection, Sequence
from contextlib import asynccontextmanager
from dataclasses import dataclass, field

import anyio
import msgspec

from swapos.clock import Clock
from swapos.policies.serving import pick_queue

ADMISSIONS_KEPT = 256


@dataclass(eq=False)
class Ticket:
    """One request's place in the queues (``request_id``: its response id, as ``GET
    /running`` lists it)."""

    model: str
    arrived: float
    request_id: str = ""
    admitted_at: float | None = None
    admitted: anyio.Event = field(default_factory=anyio.Event)

    @property
    def queue_wait_s(self) -> float:
        return (self.admitted_at or self.arrived) - self.arrived


class Admission(msgspec.Struct, frozen=True, kw_only=True):
    """A request let through: its model, when it arrived and when it was admitted."""

    model: str
    arrived: float
    admitted: float


class QueuedRequest(msgspec.Struct, frozen=True, kw_only=True):
    """A request waiting in its model's queue: ``position`` 1 is the next one admitted."""

    id: str
    position: int
    wait_s: float


class QueueState(msgspec.Struct, frozen=True, kw_only=True):
    """One model's queue, as ``GET /running`` shows it (``requests``: those waiting, in
    their order)."""

    model: str
    waiting: int
    running: int
    oldest_wait_s: float
    held: bool
    requests: tuple[QueuedRequest, ...] = ()
    slots: int = 1
    """The requests of the model admitted at once."""


class Scheduler:
    """Admits requests per model queue; safe to use from many tasks of one event loop.

    Args:
        clock: the time source (the system's: a ``FakeClock`` in tests).
        max_wait: the starvation bound in seconds.
        parallel: requests of the same model that may run at once, at least.
        resident: returns the models loaded now (a resident model's queue is preferred
            to one whose model needs a load).
        slots: a model's slots: that many of its requests may run at once (when more
            than ``parallel``).
    """

    def __init__(
        self,
        clock: Clock,
        *,
        max_wait: float,
        parallel: int = 1,
        resident: Callable[[], Collection[str]] = frozenset,
        slots: Callable[[str], int] | None = None,
    ) -> None:
        if parallel < 1:
            raise ValueError(f"parallel must be at least 1, got {parallel}")
        self._clock = clock
        self.max_wait = max_wait
        self._parallel = parallel
        self._resident = resident
        self._slots = slots
        self._queues: dict[str, deque[Ticket]] = {}
        self._running: dict[str, int] = {}
        self._held: dict[str, int] = {}
        self._current: str | None = None
        self._changed = anyio.Event()
        self.admissions: deque[Admission] = deque(maxlen=ADMISSIONS_KEPT)
        """The latest admissions, oldest first."""

    def limit(self, model: str) -> int:
        """Requests of ``model`` that may run at once."""
        return max(self._parallel, self._slots(model) if self._slots is not None else 1)

    @asynccontextmanager
    async def turn(
        self,
        model: str,
        *,
        request_id: str = "",
        queued: Callable[[Ticket], None] | None = None,
    ) -> AsyncIterator[Ticket]:
        """Wait for ``model``'s turn and hold it for the block.

        ``queued`` is called with the request's ticket once it is in its queue (admitted at
        once, or not: ``admitted_at``), before it waits.

        Cancelled while waiting, the request leaves its queue; cancelled or failing inside
        the block, its turn is released at once and the next request may be admitted.
        """
        ticket = Ticket(model=model, arrived=self._clock.now(), request_id=request_id)
        self._queues.setdefault(model, deque()).append(ticket)
        self._dispatch()
        if queued is not None:
            queued(ticket)
        try:
            await ticket.admitted.wait()
        except BaseException:
            if ticket.admitted_at is None:
                self._queues[model].remove(ticket)
                self._dispatch()
                raise
            self._release(model)
            raise
        try:
            yield ticket
        finally:
            self._release(model)

    @asynccontextmanager
    async def hold(self, models: Sequence[str]) -> AsyncIterator[None]:
        """Admit nothing for ``models`` and wait until their running requests have ended;
        hold them for the block (``POST /unload``). Queued requests stay queued."""
        for m in models:
            self._held[m] = self._held.get(m, 0) + 1
        try:
            while any(self._running.get(m, 0) for m in models):
                changed = self._changed
                await changed.wait()
            yield
        finally:
            for m in models:
                self._held[m] -= 1
                if not self._held[m]:
                    del self._held[m]
            self._dispatch()

    def queued_models(self, *, exclude: str | None = None) -> list[str]:
        """Models with waiting requests, oldest head first (the likely next uses)."""
        heads = [(q[0].arrived, m) for m, q in self._queues.items() if q and m != exclude]
        return [m for _, m in sorted(heads)]

    def position(self, ticket: Ticket) -> int:
        """``ticket``'s place in its model's queue (1: admitted next of its model), 0 once
        it is admitted or gone."""
        queue = self._queues.get(ticket.model, ())
        return next((i for i, t in enumerate(queue, 1) if t is ticket), 0)

    def snapshot(self) -> list[QueueState]:
        now = self._clock.now()
        models = sorted(set(self._queues) | set(self._running) | set(self._held))
        return [
            QueueState(
                model=m,
                waiting=len(self._queues.get(m, ())),
                running=self._running.get(m, 0),
                oldest_wait_s=now - self._queues[m][0].arrived if self._queues.get(m) else 0.0,
                held=m in self._held,
                requests=tuple(
                    QueuedRequest(id=t.request_id, position=i, wait_s=now - t.arrived)
                    for i, t in enumerate(self._queues.get(m, ()), 1)
                ),
                slots=self.limit(m),
            )
            for m in models
        ]

    def _release(self, model: str) -> None:
        self._running[model] -= 1
        if not self._running[model]:
            del self._running[model]
        self._dispatch()

    def _dispatch(self) -> None:
        """Admit what the policy picks while there is room; then wake waiters of
        :meth:`hold`."""
        while True:
            running = sum(self._running.values())
            heads = {m: q[0].arrived for m, q in self._queues.items() if q and m not in self._held}
            model = pick_queue(
                heads,
                now=self._clock.now(),
                max_wait=self.max_wait,
                current=self._current,
                resident=self._resident() if heads else (),
            )
            if model is None or (running and model not in self._running):
                break  # another model goes next: let the running ones drain first
            if self._running.get(model, 0) >= self.limit(model):
                break  # its slots are taken: it goes next once one is free
            ticket = self._queues[model].popleft()
            ticket.admitted_at = self._clock.now()
            self._running[model] = self._running.get(model, 0) + 1
            self._current = model
            self.admissions.append(
                Admission(model=model, arrived=ticket.arrived, admitted=ticket.admitted_at)
            )
            ticket.admitted.set()
        self._changed.set()
        self._changed = anyio.Event()

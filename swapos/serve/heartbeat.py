"""No silence: a streamed response tells its client how its request goes while it waits.

A streamed request may wait a long time before its first token: in its model's queue (up to
``--max-wait`` behind another model's requests), then for its model's load, then for its
prefill. A client with a read timeout gives up on a silent stream, so while nothing else is
sent the response sends its request's :class:`Status` (:func:`status_of`, pure): at once
when the request has to wait (it is queued, or its model is not ready), at once again when
it is admitted while its model is not ready, and whenever nothing has been sent for
``ServeSettings.heartbeat_s`` seconds of the system's clock. The
OpenAI routes send it as an SSE comment (:func:`sse_comment`: ``: queued, position 2 for
'b'``), which SSE clients skip; the Ollama routes as an NDJSON line with empty content and
``done: false`` that carries the status in its ``swapos`` field, as Ollama's clients take
any piece of an answer.
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Awaitable, Callable
from contextlib import asynccontextmanager
from typing import Literal

import anyio
import msgspec

from swapos.clock import Clock
from swapos.data.residency import ModelState
from swapos.serve.scheduler import Scheduler, Ticket
from swapos.serve.sse import Emit
from swapos.serve.state import Server

Stage = Literal["queued", "loading", "running"]


class Status(msgspec.Struct, frozen=True, kw_only=True, omit_defaults=True):
    """Where a request stands.

    Attributes:
        stage: ``queued`` (waiting for its model's turn), ``loading`` (admitted; its model
            is not ready yet), ``running`` (its model is ready: prefilling or generating).
        model: the model it runs on.
        position: while queued, its place in its model's queue (1: admitted next).
        progress: while loading, how far the load has gone (0 to 1); None while the load
            waits for room (other models' requests drain, victims close).
    """

    stage: Stage
    model: str
    position: int = 0
    progress: float | None = None


def status_of(model: str, *, position: int, admitted: bool, row: ModelState | None) -> Status:
    """The status of a request for ``model`` at ``position`` in its queue (0 once
    ``admitted``), whose model's residency is ``row`` (None: not in the table)."""
    if not admitted:
        return Status(stage="queued", model=model, position=position)
    if row is not None and row.state == "ready":
        return Status(stage="running", model=model)
    progress = row.load_progress if row is not None else None
    return Status(stage="loading", model=model, progress=progress)


def sse_comment(status: Status) -> bytes:
    """``status`` as an SSE comment line (``: loading 'b', 45%``)."""
    model = repr(status.model)
    if status.stage == "queued":
        text = f"queued, position {status.position} for {model}"
    elif status.stage == "running":
        text = f"running on {model}"
    elif status.progress is None:
        text = f"loading {model}, waiting for room"
    else:
        text = f"loading {model}, {status.progress:.0%}"
    return f": {text}\n\n".encode()


class Heartbeat:
    """The sends of one streamed response: its own events (:meth:`send`) and, while it
    runs (:meth:`beating`), its request's status whenever the stream has been silent for
    ``interval`` seconds of ``clock`` (0: never).

    Sends never interleave: a status is never cut by an event, nor an event by a status.

    Args:
        scheduler: the queues (the request's position).
        residency: the model's row of the Loader's table now.
        clock: the system's clock.
        interval: seconds of silence before a status is sent.
        emit: sends bytes to the client.
        render: a status as the bytes of the stream's format.
    """

    def __init__(
        self,
        *,
        scheduler: Scheduler,
        residency: Callable[[str], ModelState | None],
        clock: Clock,
        interval: float,
        emit: Emit,
        render: Callable[[Status], bytes],
    ) -> None:
        self._scheduler = scheduler
        self._residency = residency
        self._clock = clock
        self._interval = interval
        self._emit = emit
        self._render = render
        self._lock = anyio.Lock()
        self._sent_at = clock.now()
        self._ticket: Ticket | None = None
        self._queued = anyio.Event()
        self._stopped = False
        self._waiting: anyio.CancelScope | None = None
        self._watching = anyio.CancelScope()
        self.beats = 0
        """Statuses sent so far."""

    async def send(self, chunk: bytes) -> None:
        """Send one chunk of the response (after any status being sent)."""
        async with self._lock:
            await self._emit(chunk)
            self._sent_at = self._clock.now()

    def queued(self, ticket: Ticket) -> None:
        """The request is in its queue (the scheduler's ``queued`` callback)."""
        self._ticket = ticket
        self._queued.set()

    def status(self) -> Status | None:
        """The request's status now (None before it is queued)."""
        ticket = self._ticket
        if ticket is None:
            return None
        return status_of(
            ticket.model,
            position=self._scheduler.position(ticket),
            admitted=ticket.admitted_at is not None,
            row=self._residency(ticket.model),
        )

    @asynccontextmanager
    async def beating(self) -> AsyncIterator[None]:
        """Send statuses while the block runs. On leaving it a status being sent is
        finished, and none is sent after."""
        if self._interval <= 0:
            yield
            return
        async with anyio.create_task_group() as tg:
            tg.start_soon(self._watch)
            tg.start_soon(self._run)
            try:
                yield
            finally:
                self._stopped = True
                self._watching.cancel()
                if self._waiting is not None:
                    self._waiting.cancel()

    async def _run(self) -> None:
        if not await self._wait(self._queued.wait):
            return
        ticket = self._ticket
        assert ticket is not None
        await self._tell_if_waiting()  # it has to wait: say so at once
        while ticket.admitted_at is None:  # queued: beat on silence, until admitted
            if not await self._wait(self._until_silent):  # (:meth:`_watch` cuts it short)
                return
            if ticket.admitted_at is None:
                await self._beat_if_silent()
        await self._tell_if_waiting()  # admitted, its model not ready: say so at once
        while await self._wait(self._until_silent):
            await self._beat_if_silent()

    async def _watch(self) -> None:
        """Cut :meth:`_run`'s wait short when the request is admitted. (The clock wakes
        :meth:`_run` itself: a ``FakeClock`` driver sees it run before moving time on.)"""
        with self._watching:
            await self._queued.wait()
            assert self._ticket is not None
            await self._ticket.admitted.wait()
            if self._waiting is not None:
                self._waiting.cancel()

    async def _tell_if_waiting(self) -> None:
        status = self.status()
        if status is not None and status.stage != "running":
            await self._beat(status)

    async def _beat_if_silent(self) -> None:
        status = self.status()
        if status is not None and self._clock.now() - self._sent_at >= self._interval:
            await self._beat(status)

    async def _until_silent(self) -> None:
        """Sleep until the stream has been silent for the interval."""
        await self._clock.sleep(max(0.0, self._sent_at + self._interval - self._clock.now()))

    async def _wait(self, waiting: Callable[[], Awaitable[None]]) -> bool:
        """Await ``waiting()`` unless stopped meanwhile (or cut short by :meth:`_watch`);
        False once stopped."""
        with anyio.CancelScope() as scope:
            self._waiting = scope
            if not self._stopped:
                await waiting()
        self._waiting = None
        return not self._stopped

    async def _beat(self, status: Status) -> None:
        async with self._lock:
            if self._stopped:
                return
            await self._emit(self._render(status))
            self._sent_at = self._clock.now()
            self.beats += 1


def heartbeat(server: Server, emit: Emit, render: Callable[[Status], bytes]) -> Heartbeat:
    """The :class:`Heartbeat` of one streamed response of ``server``'s app."""
    return Heartbeat(
        scheduler=server.scheduler,
        residency=lambda model: server.system.residency().get(model),
        clock=server.system.clock,
        interval=server.settings.heartbeat_s,
        emit=emit,
        render=render,
    )

"""The small amount of plumbing every actor shares: outboxes, events, and asking.

An actor sends to other actors by :data:`~swapos.messages.base.Address`, never by reference.
A request's reply comes back into the asker's own inbox; :class:`Pending` matches it to the
waiting task by ``request_id``.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import AsyncIterator, Awaitable, Callable, Mapping
from contextlib import asynccontextmanager
from typing import Any, TypeVar

import anyio
import anyio.lowlevel
import structlog
from anyio.abc import TaskGroup
from anyio.streams.memory import MemoryObjectReceiveStream, MemoryObjectSendStream

from swapos.clock import Clock
from swapos.errors import SystemClosedError
from swapos.messages.base import Address, Message, Reply, Request
from swapos.messages.events import Event

CLEANUP_TIMEOUT_S = 30.0
"""Bound on shielded cleanup (closing models, flushing the log) at shutdown."""

M = TypeVar("M", bound=Message)

log = structlog.get_logger(__name__)


class Outbox:
    """Named send streams of one actor. Closing it closes every stream it holds."""

    def __init__(self, sends: Mapping[Address, MemoryObjectSendStream[Any]]) -> None:
        self._sends = dict(sends)
        self.sent: Counter[str] = Counter()
        """Messages sent (events to the Recorder excluded), by message type."""

    async def send(self, to: Address, message: Message) -> None:
        """Send ``message`` to ``to``, waiting while its inbox is full.

        Raises:
            SystemClosedError: ``to`` has shut down while this task was not being cancelled
                (when the whole system is being cancelled, a closed inbox is part of that
                cancellation, which is raised instead).
        """
        stream = self._sends[to]
        self._count(message)
        try:
            try:
                # Fast path: no scheduling round-trip when the inbox has room (anyio's send()
                # always yields). Cancellation is still honoured; a full inbox still blocks.
                stream.send_nowait(message)
            except anyio.WouldBlock:
                await stream.send(message)
            else:
                await anyio.lowlevel.checkpoint_if_cancelled()
        except (anyio.BrokenResourceError, anyio.ClosedResourceError) as exc:
            await anyio.lowlevel.checkpoint_if_cancelled()
            raise SystemClosedError(f"{to} is no longer running") from exc

    async def send_if_open(self, to: Address, message: Message) -> bool:
        """Send unless ``to`` has shut down (for cleanup during shutdown); False if it had."""
        try:
            await self.send(to, message)
        except SystemClosedError:
            return False
        return True

    def send_nowait(self, to: Address, message: Message) -> bool:
        """Send without waiting; False (message dropped) if the inbox is full or closed."""
        try:
            self._sends[to].send_nowait(message)
        except (anyio.WouldBlock, anyio.BrokenResourceError, anyio.ClosedResourceError):
            return False
        self._count(message)
        return True

    def _count(self, message: Message) -> None:
        if not isinstance(message, Event):  # events to the Recorder are not messages
            self.sent[type(message).__name__] += 1

    async def aclose(self) -> None:
        for stream in self._sends.values():
            await stream.aclose()


class Events:
    """Stamps events with run time and sends them to the Recorder."""

    def __init__(self, outbox: Outbox, clock: Clock, t0: float) -> None:
        self._outbox = outbox
        self._clock = clock
        self._t0 = t0

    def t(self) -> float:
        """Seconds since the run started."""
        return self._clock.now() - self._t0

    async def emit(self, event: Event) -> None:
        """Send ``event`` to the Recorder (waiting while its inbox is full). Once the Recorder
        has shut down (the system is closing: Ctrl-C, SIGTERM, a cancelled caller) the event
        is dropped, since nothing can record it any more, and the shutdown goes on."""
        if not await self._outbox.send_if_open("recorder", event):
            log.debug("event.dropped_after_shutdown", kind=type(event).__name__)

    def emit_nowait(self, event: Event) -> None:
        """For progress events from sync callbacks: dropped if the Recorder is full."""
        self._outbox.send_nowait("recorder", event)


class _Slot:
    __slots__ = ("event", "reply")

    def __init__(self) -> None:
        self.event = anyio.Event()
        self.reply: Reply | None = None


class Pending:
    """Tasks waiting for replies, by ``request_id``: one reply (:meth:`ask`), or a stream of
    them (:meth:`stream`, for a request answered several times)."""

    def __init__(self) -> None:
        self._slots: dict[str, _Slot] = {}
        self._streams: dict[str, MemoryObjectSendStream[Reply]] = {}

    def __len__(self) -> int:
        return len(self._slots) + len(self._streams)

    def resolve(self, reply: Reply) -> bool:
        """Hand ``reply`` to its waiter; False if nobody waits (a late reply is dropped)."""
        stream = self._streams.get(reply.request_id)
        if stream is not None:
            stream.send_nowait(reply)
            return True
        slot = self._slots.pop(reply.request_id, None)
        if slot is None:
            return False
        slot.reply = reply
        slot.event.set()
        return True

    @asynccontextmanager
    async def stream(
        self, request_id: str, size: int
    ) -> AsyncIterator[MemoryObjectReceiveStream[Reply]]:
        """The replies to ``request_id`` while the context is open (at most ``size`` of
        them, buffered); after it, a late reply is dropped."""
        send, receive = anyio.create_memory_object_stream[Reply](max(size, 1))
        self._streams[request_id] = send
        try:
            async with receive:
                yield receive
        finally:
            self._streams.pop(request_id, None)
            send.close()

    async def ask(self, outbox: Outbox, to: Address, request: Request) -> Reply:
        """Send ``request`` and wait for its reply.

        On cancellation the waiter is forgotten; a reply arriving later is dropped.
        """
        slot = self._slots[request.request_id] = _Slot()
        try:
            await outbox.send(to, request)
            await slot.event.wait()
        finally:
            self._slots.pop(request.request_id, None)
        assert slot.reply is not None
        return slot.reply


@asynccontextmanager
async def serving(
    inbox: MemoryObjectReceiveStream[Any],
    outbox: Outbox,
    *,
    cleanup: Callable[[], Awaitable[None]] | None = None,
) -> AsyncIterator[TaskGroup]:
    """The lifecycle every actor shares.

    Owns ``inbox`` and yields a task group for the actor's long-running handlers. On any
    exit (the inbox closed, cancellation, or a bug) the handlers are cancelled, then
    ``cleanup`` runs and ``outbox`` closes, shielded and bounded by
    :data:`CLEANUP_TIMEOUT_S`. Cancellation is never swallowed.
    """
    try:
        async with inbox, anyio.create_task_group() as tg:
            yield tg
            tg.cancel_scope.cancel()
    finally:
        with anyio.move_on_after(CLEANUP_TIMEOUT_S, shield=True):
            if cleanup is not None:
                await cleanup()
            await outbox.aclose()

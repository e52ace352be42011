"""The live page's event stream: the Recorder's events, folded into timeline bars and fanned
out to every open page, each through a bounded buffer.

The hub watches the system's Recorder (:meth:`System.watch
<swapos.actors.handle.System.watch>`): each event goes through the one
:class:`~swapos.records.timeline.Timeline` fold (the same fold the HTML report draws a
finished run with), and the bars it changed are encoded once and appended to every
subscriber's buffer. A page that reads too slowly does not make the server hold more: when
its buffer is full it is emptied and the subscriber is marked, and its stream tells the page
to fetch the whole state again (``event: resync``) instead.
"""

from __future__ import annotations

from collections import deque
from collections.abc import Callable

import anyio
import msgspec

from swapos.messages.events import AnyEvent
from swapos.records.timeline import Bar, Timeline

SUBSCRIBER_BUFFER = 256
"""Messages (each the bars one event changed) a page may fall behind by before it resyncs."""
WINDOW_S = 600.0
"""The timeline the page is sent: the last ten minutes of run time."""
BARS_KEPT = 2000
"""The most bars kept for the page (the oldest finished ones go first)."""


class BarsChanged(msgspec.Struct, frozen=True, kw_only=True):
    """One message of the stream: the bars an event opened or changed, at run time ``t``."""

    t: float
    bars: list[Bar]


class Subscriber:
    """One open page's buffer: the encoded messages it has not read yet, bounded."""

    def __init__(self, size: int) -> None:
        self._buffer: deque[bytes] = deque()
        self._size = size
        self._ready = anyio.Event()
        self.overflowed = False
        """The buffer filled up and was emptied: the page must fetch the whole state."""

    def put(self, message: bytes) -> None:
        if self.overflowed:
            return
        if len(self._buffer) >= self._size:
            self._buffer.clear()
            self.overflowed = True
        else:
            self._buffer.append(message)
        self._ready.set()

    @property
    def pending(self) -> int:
        """Messages buffered and not read yet (never more than the bound)."""
        return len(self._buffer)

    def take(self) -> tuple[list[bytes], bool]:
        """Everything buffered, and whether the page must resync (both reset)."""
        messages, overflowed = list(self._buffer), self.overflowed
        self._buffer.clear()
        self.overflowed = False
        self._ready = anyio.Event()
        return messages, overflowed

    async def wait(self, seconds: float) -> None:
        """Until something is buffered, or ``seconds`` (real time) have passed."""
        with anyio.move_on_after(seconds):
            await self._ready.wait()


class EventHub:
    """Folds the system's events into the live timeline and fans them out to pages.

    Args:
        watch: subscribes a callback to the Recorder's events; returns the unsubscribe
            function (:meth:`System.watch <swapos.actors.handle.System.watch>`).
        buffer: each subscriber's bound (:data:`SUBSCRIBER_BUFFER`).
    """

    def __init__(
        self,
        watch: Callable[[Callable[[AnyEvent], None]], Callable[[], None]],
        *,
        buffer: int = SUBSCRIBER_BUFFER,
    ) -> None:
        self.timeline = Timeline()
        self._subscribers: set[Subscriber] = set()
        self._buffer = buffer
        self._encoder = msgspec.json.Encoder()
        self._fed = 0
        self._stop = watch(self._on_event)

    def close(self) -> None:
        """Stop watching the system's events (the app's lifespan ends)."""
        self._stop()

    def _on_event(self, ev: AnyEvent) -> None:
        changed = self.timeline.feed(ev)
        self._fed += 1
        if self._fed % 256 == 0:
            self.timeline.prune(ev.t - WINDOW_S, BARS_KEPT)
        if changed and self._subscribers:
            message = self._encoder.encode(BarsChanged(t=ev.t, bars=changed))
            for sub in self._subscribers:
                sub.put(message)

    def subscribe(self) -> Subscriber:
        sub = Subscriber(self._buffer)
        self._subscribers.add(sub)
        return sub

    def unsubscribe(self, sub: Subscriber) -> None:
        self._subscribers.discard(sub)

    @property
    def subscribers(self) -> int:
        return len(self._subscribers)

    def backlog(self) -> int:
        """The most messages any page has not read yet."""
        return max((sub.pending for sub in self._subscribers), default=0)

    def bars(self, now: float) -> list[Bar]:
        """The bars of the last :data:`WINDOW_S` seconds before ``now``, open ones included."""
        since = now - WINDOW_S
        return [b for b in self.timeline.bars.values() if b.end is None or b.end >= since]

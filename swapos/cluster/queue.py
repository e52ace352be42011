"""The driver's work queue: one task (with the mode/arms it still needs) per item.

Workers *pull*: each takes the next item when it finishes one, so a fast node takes more.
An item taken by a worker that dies goes back to the front of the queue with only the
mode/arms that did not finish (finished ones are already committed, so nothing runs or
counts twice). An item that has killed ``max_losses`` workers is given up (reported, left
for ``--resume``) rather than allowed to take the whole cluster down one node at a time.

Decisions only; waiting is done by the driver (:meth:`WorkQueue.wait_for_work`).
"""

from __future__ import annotations

from collections import deque
from collections.abc import Sequence

import anyio
import msgspec

from swapos.cluster.protocol import Key
from swapos.data.task import Task

DEFAULT_MAX_LOSSES = 2
"""Workers an item may take down with it before it is given up."""


class Item(msgspec.Struct, kw_only=True):
    """A task and the mode/arms it still needs, in the order they run."""

    index: int
    task: Task
    keys: list[Key]
    losses: int = 0


class WorkQueue:
    """Items waiting, items in flight, items given up."""

    def __init__(self, items: Sequence[Item], *, max_losses: int = DEFAULT_MAX_LOSSES) -> None:
        self._waiting: deque[Item] = deque(items)
        self._in_flight: dict[int, Item] = {}
        self._changed: anyio.Event | None = None  # made by the first waiter (needs a loop)
        self.max_losses = max_losses
        self.given_up: list[Item] = []
        self.reruns = 0

    @property
    def finished(self) -> bool:
        """Nothing waiting and nothing in flight."""
        return not self._waiting and not self._in_flight

    @property
    def waiting(self) -> int:
        return len(self._waiting)

    def take(self) -> Item | None:
        """The next item (now in flight), or None when nothing is waiting."""
        if not self._waiting:
            return None
        item = self._waiting.popleft()
        self._in_flight[item.index] = item
        return item

    def peek(self) -> Task | None:
        """The task that would be taken next (a prefetch hint)."""
        return self._waiting[0].task if self._waiting else None

    def done(self, item: Item) -> None:
        """``item`` finished every mode/arm."""
        del self._in_flight[item.index]
        self._notify()

    def lost(self, item: Item, remaining: Sequence[Key]) -> bool:
        """The worker running ``item`` died before ``remaining`` finished: requeue them at
        the front (True), or give the item up after :attr:`max_losses` (False)."""
        del self._in_flight[item.index]
        item.keys = list(remaining)
        item.losses += 1
        requeued = bool(item.keys) and item.losses < self.max_losses
        if requeued:
            self._waiting.appendleft(item)
            self.reruns += 1
        elif item.keys:
            self.given_up.append(item)
        self._notify()
        return requeued

    def abandon(self) -> list[Item]:
        """Everything still waiting, removed (no worker is left to run it)."""
        left = list(self._waiting)
        self._waiting.clear()
        self._notify()
        return left

    async def wait_for_work(self) -> Item | None:
        """The next item; waits while items are in flight (one of them may come back);
        None once the queue is finished."""
        while True:
            item = self.take()
            if item is not None or self.finished:
                return item
            if self._changed is None:
                self._changed = anyio.Event()
            await self._changed.wait()

    def _notify(self) -> None:
        if self._changed is not None:
            self._changed.set()
            self._changed = None

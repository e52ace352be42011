"""A virtual clock for deterministic tests of timing behaviour, on asyncio and trio."""

from __future__ import annotations

import asyncio
import heapq
import itertools
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager

import anyio
import anyio.lowlevel
import sniffio
from anyio.abc import TaskGroup


async def _wait_all_tasks_blocked() -> None:
    """:func:`anyio.wait_all_tasks_blocked`, without its 0.1 s polling sleep on asyncio."""
    if sniffio.current_async_library() != "asyncio":
        await anyio.wait_all_tasks_blocked()
        return
    this = asyncio.current_task()
    while True:
        await asyncio.sleep(0)
        for task in asyncio.all_tasks():
            waiter = getattr(task, "_fut_waiter", None)
            if task is not this and (waiter is None or waiter.done()):
                break
        else:
            return


class FakeClock:
    """Virtual time that jumps forward when every task is blocked.

    ``sleep`` registers a wake-up; the driver started by :meth:`autojump` waits until all
    other tasks are blocked (:func:`anyio.wait_all_tasks_blocked`), then advances ``now`` to
    the earliest wake-up and releases its sleepers. Work that takes no virtual time happens
    "instantly", so a scripted 2 s load overlapping a 3 s generation ends the run at t=3.

    Use::

        clock = FakeClock()
        async with clock.autojump():
            ...  # code that calls clock.sleep / clock.now
    """

    def __init__(self, start: float = 0.0) -> None:
        self._now = start
        self._heap: list[tuple[float, int, anyio.Event]] = []
        self._seq = itertools.count()
        self._new_sleeper = anyio.Event()

    def now(self) -> float:
        return self._now

    async def sleep(self, seconds: float) -> None:
        """Sleep ``seconds`` of virtual time. Cancellable."""
        if seconds <= 0:
            await anyio.lowlevel.checkpoint()
            return
        wake = anyio.Event()
        entry = (self._now + seconds, next(self._seq), wake)
        heapq.heappush(self._heap, entry)
        self._new_sleeper.set()
        try:
            await wake.wait()
        finally:
            if not wake.is_set():  # cancelled: a dead wake-up must not move time
                self._heap.remove(entry)
                heapq.heapify(self._heap)

    def advance(self, seconds: float) -> None:
        """Move time forward by hand, releasing every sleeper that is due."""
        self._now += seconds
        self._release_due()

    def _release_due(self) -> None:
        while self._heap and self._heap[0][0] <= self._now:
            _, _, wake = heapq.heappop(self._heap)
            wake.set()

    async def _drive(self) -> None:
        while True:
            await _wait_all_tasks_blocked()
            if not self._heap:
                self._new_sleeper = anyio.Event()
                await self._new_sleeper.wait()
                continue
            due = self._heap[0][0]
            self._now = max(self._now, due)
            self._release_due()

    @asynccontextmanager
    async def autojump(self) -> AsyncIterator[FakeClock]:
        """Run the time driver for the duration of the block."""
        async with anyio.create_task_group() as tg:
            tg.start_soon(self._drive)
            try:
                yield self
            finally:
                tg.cancel_scope.cancel()

    def start_driver(self, tg: TaskGroup) -> None:
        """Start the time driver in ``tg`` (cancel ``tg`` to stop it)."""
        tg.start_soon(self._drive)

"""The clock every actor reads time from.

Actors never call :func:`time.monotonic` or :func:`anyio.sleep` directly: they use the injected
:class:`Clock`, so tests can swap in :class:`swapos.testing.FakeClock` and run overlap and
eviction scenarios in virtual time, deterministically, on asyncio and trio alike.
"""

from __future__ import annotations

import time
from typing import Protocol

import anyio


class Clock(Protocol):
    """A monotonic clock with a matching sleep."""

    def now(self) -> float:
        """Seconds on a monotonic scale (only differences are meaningful)."""
        ...

    async def sleep(self, seconds: float) -> None:
        """Sleep for ``seconds`` of this clock's time. Cancellable like :func:`anyio.sleep`."""
        ...


class MonotonicClock:
    """The real clock: :func:`time.perf_counter` and :func:`anyio.sleep`."""

    def now(self) -> float:
        return time.perf_counter()

    async def sleep(self, seconds: float) -> None:
        await anyio.sleep(seconds)

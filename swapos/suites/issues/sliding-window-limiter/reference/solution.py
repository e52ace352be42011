"""Per-key rate limiters with an injectable clock."""

from __future__ import annotations

import time
from collections.abc import Callable, Hashable


class FixedWindowLimiter:
    """At most ``limit`` requests per key in each aligned window of ``window`` seconds."""

    def __init__(
        self, limit: int, window: float, clock: Callable[[], float] = time.monotonic
    ) -> None:
        if limit < 1 or window <= 0:
            raise ValueError("limit and window must be positive")
        self.limit = limit
        self.window = window
        self._clock = clock
        self._counts: dict[Hashable, tuple[int, int]] = {}  # key -> (window index, count)

    def _index(self) -> int:
        return int(self._clock() // self.window)

    def allow(self, key: Hashable) -> bool:
        index = self._index()
        start, count = self._counts.get(key, (index, 0))
        if start != index:
            count = 0
        if count >= self.limit:
            return False
        self._counts[key] = (index, count + 1)
        return True

    def remaining(self, key: Hashable) -> int:
        index = self._index()
        start, count = self._counts.get(key, (index, 0))
        return self.limit if start != index else self.limit - count

    def __len__(self) -> int:
        index = self._index()
        return sum(1 for start, _ in self._counts.values() if start == index)


class SlidingWindowLimiter:
    """At most ``limit`` requests per key in any period of ``window`` seconds."""

    def __init__(
        self, limit: int, window: float, clock: Callable[[], float] = time.monotonic
    ) -> None:
        if limit < 1 or window <= 0:
            raise ValueError("limit and window must be positive")
        self.limit = limit
        self.window = window
        self._clock = clock
        self._hits: dict[Hashable, list[float]] = {}

    def _live(self, key: Hashable, now: float) -> list[float]:
        hits = [t for t in self._hits.get(key, []) if t + self.window > now]
        if hits:
            self._hits[key] = hits
        else:
            self._hits.pop(key, None)
        return hits

    def allow(self, key: Hashable) -> bool:
        now = self._clock()
        hits = self._live(key, now)
        if len(hits) >= self.limit:
            return False
        self._hits[key] = [*hits, now]
        return True

    def remaining(self, key: Hashable) -> int:
        return self.limit - len(self._live(key, self._clock()))

    def __len__(self) -> int:
        now = self._clock()
        for key in list(self._hits):
            self._live(key, now)
        return len(self._hits)

"""A small time-to-live cache with an injectable clock."""

from __future__ import annotations

import time
from collections.abc import Callable, Hashable
from typing import Any

_MISSING = object()


class TTLCache:
    """Map keys to values that expire ``ttl`` seconds after they were set.

    Args:
        ttl: lifetime of an entry, in seconds.
        clock: returns the current time in seconds (default: ``time.monotonic``).
    """

    def __init__(self, ttl: float, clock: Callable[[], float] = time.monotonic) -> None:
        if ttl <= 0:
            raise ValueError("ttl must be positive")
        self.ttl = ttl
        self._clock = clock
        self._data: dict[Hashable, tuple[Any, float]] = {}

    def set(self, key: Hashable, value: Any) -> None:
        self._data[key] = (value, self._clock() + self.ttl)

    def get(self, key: Hashable, default: Any = None) -> Any:
        entry = self._data.get(key, _MISSING)
        if entry is _MISSING:
            return default
        value, expires_at = entry  # type: ignore[misc]
        if self._clock() >= expires_at:
            del self._data[key]
            return default
        return value

    def __contains__(self, key: Hashable) -> bool:
        return self.get(key, _MISSING) is not _MISSING

    def __len__(self) -> int:
        self.purge()
        return len(self._data)

    def purge(self) -> int:
        """Drop every expired entry; returns how many were dropped."""
        now = self._clock()
        dead = [k for k, (_, exp) in self._data.items() if now >= exp]
        for k in dead:
            del self._data[k]
        return len(dead)

"""A sliding window of recent samples for the metrics endpoint."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any


class RingBuffer:
    """At most ``capacity`` items; appending to a full buffer overwrites the oldest."""

    def __init__(self, capacity: int) -> None:
        if not isinstance(capacity, int) or capacity < 1:
            raise ValueError("capacity must be a positive int")
        self.capacity = capacity
        self._items: list[Any] = []
        self._start = 0

    def append(self, item: Any) -> None:
        if len(self._items) < self.capacity:
            self._items.append(item)
        else:
            self._items[self._start] = item
            self._start = (self._start + 1) % self.capacity

    @property
    def full(self) -> bool:
        return len(self._items) == self.capacity

    def __len__(self) -> int:
        return len(self._items)

    def __getitem__(self, index: int) -> Any:
        n = len(self._items)
        if index < 0:
            index += n
        if not 0 <= index < n:
            raise IndexError("RingBuffer index out of range")
        return self._items[(self._start + index) % n]

    def __iter__(self) -> Iterator[Any]:
        for i in range(len(self._items)):
            yield self[i]

    def clear(self) -> None:
        self._items = []
        self._start = 0


class MetricsWindow:
    """The last ``size`` samples and a few statistics over them."""

    def __init__(self, size: int = 60) -> None:
        if size < 1:
            raise ValueError("size must be >= 1")
        self.size = size
        self._samples = RingBuffer(size)

    def add(self, value: float) -> None:
        self._samples.append(value)

    def _window(self) -> list[float]:
        return list(self._samples)

    def __len__(self) -> int:
        return len(self._samples)

    def mean(self) -> float:
        window = self._window()
        return sum(window) / len(window) if window else 0.0

    def maximum(self) -> float:
        window = self._window()
        return max(window) if window else 0.0

    def recent(self, n: int) -> list[float]:
        """The newest ``n`` samples, oldest first."""
        return self._window()[-n:] if n > 0 else []

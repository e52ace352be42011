"""A sliding window of recent samples for the metrics endpoint."""

from __future__ import annotations


class MetricsWindow:
    """The last ``size`` samples and a few statistics over them."""

    def __init__(self, size: int = 60) -> None:
        if size < 1:
            raise ValueError("size must be >= 1")
        self.size = size
        self._samples: list[float] = []

    def add(self, value: float) -> None:
        self._samples.append(value)

    def _window(self) -> list[float]:
        return self._samples[-self.size :]

    def __len__(self) -> int:
        return len(self._window())

    def mean(self) -> float:
        window = self._window()
        return sum(window) / len(window) if window else 0.0

    def maximum(self) -> float:
        window = self._window()
        return max(window) if window else 0.0

    def recent(self, n: int) -> list[float]:
        """The newest ``n`` samples, oldest first."""
        return self._window()[-n:] if n > 0 else []

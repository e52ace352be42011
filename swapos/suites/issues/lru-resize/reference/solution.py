"""An LRU cache with an eviction callback."""

from __future__ import annotations

from collections import OrderedDict
from collections.abc import Callable, Hashable, Iterator
from typing import Any

EvictCallback = Callable[[Hashable, Any], None]


class LRUCache:
    """A mapping that holds at most ``capacity`` entries, evicting the least recently used.

    ``get`` and ``put`` both count as a use. ``on_evict(key, value)`` is called for every
    entry the cache drops to make room.
    """

    def __init__(self, capacity: int, on_evict: EvictCallback | None = None) -> None:
        if not isinstance(capacity, int) or capacity < 1:
            raise ValueError("capacity must be a positive int")
        self._capacity = capacity
        self._on_evict = on_evict
        self._items: OrderedDict[Hashable, Any] = OrderedDict()

    @property
    def capacity(self) -> int:
        return self._capacity

    def get(self, key: Hashable, default: Any = None) -> Any:
        if key not in self._items:
            return default
        self._items.move_to_end(key)
        return self._items[key]

    def put(self, key: Hashable, value: Any) -> None:
        if key in self._items:
            self._items.move_to_end(key)
        self._items[key] = value
        self._evict_overflow()

    def resize(self, capacity: int) -> None:
        """Change the capacity, evicting least recently used entries that no longer fit."""
        if not isinstance(capacity, int) or capacity < 1:
            raise ValueError("capacity must be a positive int")
        self._capacity = capacity
        self._evict_overflow()

    def _evict_overflow(self) -> None:
        while len(self._items) > self._capacity:
            key, value = self._items.popitem(last=False)
            if self._on_evict is not None:
                self._on_evict(key, value)

    def __len__(self) -> int:
        return len(self._items)

    def __contains__(self, key: object) -> bool:
        return key in self._items

    def __iter__(self) -> Iterator[Hashable]:
        """Keys from least to most recently used."""
        return iter(list(self._items))

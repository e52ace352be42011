"""Leased models, by lease id: how the Generator reaches a model the Loader holds.

Model objects cannot travel in messages (they are not data), so the Loader registers each
lease here and the Generator looks the model up by the ``lease_id`` it was given. Only the
Loader writes; a lease is removed before its model can be evicted.
"""

from __future__ import annotations

from swapos.backends.base import LoadedModel


class Residency:
    """``lease_id -> LoadedModel`` for the leases currently held."""

    def __init__(self) -> None:
        self._leases: dict[str, LoadedModel] = {}

    def add(self, lease_id: str, model: LoadedModel) -> None:
        self._leases[lease_id] = model

    def remove(self, lease_id: str) -> LoadedModel | None:
        return self._leases.pop(lease_id, None)

    def get(self, lease_id: str) -> LoadedModel | None:
        return self._leases.get(lease_id)

    def __len__(self) -> int:
        return len(self._leases)

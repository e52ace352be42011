"""A saved KV prefix state (plain data shared by messages, backends and the KV stores)."""

from __future__ import annotations

import msgspec


class PrefixState(msgspec.Struct, frozen=True, kw_only=True):
    """A saved KV state: the model's state after prefilling exactly ``tokens``."""

    tokens: tuple[int, ...]
    state: bytes

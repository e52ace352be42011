"""Token-sequence helpers shared by the KV cache, the Generator and the backends."""

from __future__ import annotations

from collections.abc import Sequence
from typing import TypeVar

_T = TypeVar("_T")


def common_prefix_len(a: Sequence[_T], b: Sequence[_T]) -> int:
    """How many leading tokens (or characters) ``a`` and ``b`` share (bisecting on slice
    equality, which compares at C speed: prompts run to thousands of tokens)."""
    n = min(len(a), len(b))
    if list(a[:n]) == list(b[:n]):
        return n
    lo, hi = 0, n  # a[:lo] == b[:lo], a[:hi] != b[:hi]
    while hi - lo > 1:
        mid = (lo + hi) // 2
        if list(a[:mid]) == list(b[:mid]):
            lo = mid
        else:
            hi = mid
    return lo


def can_cut_back(saved: int, common: int, window: int | None) -> bool:
    """Whether a restored state of ``saved`` tokens can be cut back to the ``common`` tokens
    it shares with a prompt: always with full attention (``window`` None) or when nothing is
    cut; with a sliding attention window only if the state fits in it (a longer state's
    oldest cells were reused by later tokens)."""
    return window is None or common >= saved or saved <= window

"""Token-sequence helpers shared by the KV cache, the Generator and the backends."""

from __future__ import annotations

from collections.abc import Sequence


def common_prefix_len(a: Sequence[int], b: Sequence[int]) -> int:
    """How many leading tokens ``a`` and ``b`` share."""
    n = 0
    for x, y in zip(a, b, strict=False):
        if x != y:
            break
        n += 1
    return n


def can_cut_back(saved: int, common: int, window: int | None) -> bool:
    """Whether a restored state of ``saved`` tokens can be cut back to the ``common`` tokens
    it shares with a prompt: always with full attention (``window`` None) or when nothing is
    cut; with a sliding attention window only if the state fits in it (a longer state's
    oldest cells were reused by later tokens)."""
    return window is None or common >= saved or saved <= window

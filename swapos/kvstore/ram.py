"""The RAM tier: prefix states under a byte budget, least recently used dropped first."""

from __future__ import annotations

from collections import OrderedDict

import msgspec

from swapos.data.prefix import PrefixState
from swapos.policies.tokens import can_cut_back, common_prefix_len

Key = tuple[str, tuple[int, ...]]


def usable(common: int, saved: int, min_partial: int, window: int | None = None) -> bool:
    """Whether a state of ``saved`` tokens sharing ``common`` with a prompt is worth restoring:
    a whole-state match always is (``common > 0``); a partial one (the state must be
    truncated to ``common``) needs at least ``min_partial`` tokens, and for a model with a
    sliding attention ``window`` (None: none) a state no longer than the window (a longer
    one's oldest cells were reused, so it cannot be cut back)."""
    if common <= 0 or common == saved:
        return common > 0
    return common >= min_partial and can_cut_back(saved, common, window)


class Dropped(msgspec.Struct, frozen=True, kw_only=True):
    """A state a tier let go of (or refused), and why."""

    tokens: int
    nbytes: int
    reason: str


class RamStore:
    """Prefix states in memory, keyed by ``(identity, tokens)``; never above ``budget_bytes``.

    Only the state bytes count against the budget (the token tuple is small next to them).
    """

    def __init__(self, budget_bytes: int) -> None:
        self.budget_bytes = budget_bytes
        self._entries: OrderedDict[Key, PrefixState] = OrderedDict()
        self._bytes = 0

    def __len__(self) -> int:
        return len(self._entries)

    @property
    def nbytes(self) -> int:
        """Bytes of state held now."""
        return self._bytes

    def longest_prefix(
        self, identity: str, tokens: list[int], *, longer_than: int = 0
    ) -> PrefixState | None:
        """The state for ``identity`` with the longest proper prefix of ``tokens``.

        Only prefixes longer than ``longer_than`` tokens count. A hit becomes the most
        recently used entry.
        """
        best: Key | None = None
        best_len = longer_than
        n = len(tokens)
        for key in self._entries:
            ident, prefix = key
            k = len(prefix)
            if ident != identity or k >= n or k <= best_len:
                continue
            if list(prefix) == tokens[:k]:
                best, best_len = key, k
        if best is None:
            return None
        self._entries.move_to_end(best)
        return self._entries[best]

    def longest_common(
        self,
        identity: str,
        tokens: list[int],
        *,
        min_partial: int = 1,
        window: int | None = None,
    ) -> tuple[PrefixState | None, int]:
        """The state for ``identity`` sharing the longest common prefix with ``tokens``.

        A state whose tokens all match counts whatever its length; one that diverges (it
        would be truncated on restore) counts only with ``min_partial`` common tokens or more,
        and with a sliding ``window`` only if it fits in it (see :func:`usable`). Ties go to
        the shorter state. A hit becomes the most recently used entry.

        Returns:
            The state (None if none is usable) and the common prefix length.
        """
        best: Key | None = None
        best_common, best_len = 0, 0
        for key in self._entries:
            ident, prefix = key
            if ident != identity:
                continue
            common = common_prefix_len(prefix, tokens)
            if not usable(common, len(prefix), min_partial, window):
                continue
            if common > best_common or (common == best_common and len(prefix) < best_len):
                best, best_common, best_len = key, common, len(prefix)
        if best is None:
            return None, 0
        self._entries.move_to_end(best)
        return self._entries[best], best_common

    def resize(self, budget_bytes: int, *, reason: str) -> list[Dropped]:
        """Set the budget to ``budget_bytes``, dropping least recently used entries until
        the held states fit; what was dropped (each with ``reason``)."""
        self.budget_bytes = max(0, budget_bytes)
        dropped: list[Dropped] = []
        while self._entries and self._bytes > self.budget_bytes:
            (_, tokens), gone = self._entries.popitem(last=False)
            self._bytes -= len(gone.state)
            dropped.append(Dropped(tokens=len(tokens), nbytes=len(gone.state), reason=reason))
        return dropped

    def put(self, identity: str, state: PrefixState) -> tuple[bool, list[Dropped]]:
        """Keep ``state``, dropping least recently used entries to stay within budget.

        Returns:
            Whether it was kept (False when it alone exceeds the budget), and what was
            dropped to make room.
        """
        size = len(state.state)
        if size > self.budget_bytes:
            return False, [
                Dropped(tokens=len(state.tokens), nbytes=size, reason="larger than the RAM budget")
            ]
        key = (identity, state.tokens)
        old = self._entries.pop(key, None)
        if old is not None:
            self._bytes -= len(old.state)
        dropped: list[Dropped] = []
        while self._entries and self._bytes + size > self.budget_bytes:
            (_, tokens), gone = self._entries.popitem(last=False)
            self._bytes -= len(gone.state)
            dropped.append(
                Dropped(
                    tokens=len(tokens),
                    nbytes=len(gone.state),
                    reason="least recently used, over the RAM budget",
                )
            )
        self._entries[key] = state
        self._bytes += size
        return True, dropped

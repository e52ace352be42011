"""Stop sequences over streamed text: where one starts, and how much text to hold back."""

from __future__ import annotations


def find_stop(text: str, stops: list[str], emitted: int) -> int | None:
    """Index of the earliest stop sequence in ``text`` not entirely before ``emitted``."""
    longest = max((len(s) for s in stops), default=0)
    start = max(0, emitted - longest + 1)
    found = [i for s in stops if (i := text.find(s, start)) >= 0]
    return min(found) if found else None


def held_back(text: str, stops: list[str]) -> int:
    """Length of the longest suffix of ``text`` that could begin a stop sequence."""
    best = 0
    for s in stops:
        for n in range(min(len(s) - 1, len(text)), best, -1):
            if s.startswith(text[-n:]):
                best = n
                break
    return best

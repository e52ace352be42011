"""Half-open integer intervals for the scheduler."""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True, order=True)
class Interval:
    """``[start, end)``: ``start`` included, ``end`` excluded."""

    start: int
    end: int

    def __post_init__(self) -> None:
        if self.end < self.start:
            raise ValueError(f"end {self.end} is before start {self.start}")

    def __len__(self) -> int:
        return self.end - self.start

    def overlaps(self, other: Interval) -> bool:
        return self.start < other.end and other.start < self.end

    def contains(self, point: int) -> bool:
        return self.start <= point < self.end


def total_length(intervals: list[Interval]) -> int:
    """The summed length of ``intervals`` (overlaps counted twice)."""
    return sum(len(i) for i in intervals)


def free_slots(busy: list[Interval], day: Interval) -> list[Interval]:
    """The parts of ``day`` not covered by ``busy`` (which must be sorted and disjoint)."""
    slots = []
    cursor = day.start
    for b in busy:
        if b.start > cursor:
            slots.append(Interval(cursor, min(b.start, day.end)))
        cursor = max(cursor, b.end)
        if cursor >= day.end:
            break
    if cursor < day.end:
        slots.append(Interval(cursor, day.end))
    return slots

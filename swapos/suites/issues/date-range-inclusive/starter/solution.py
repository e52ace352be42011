"""Calendar helpers for reports."""

from __future__ import annotations

from datetime import date, timedelta

ONE_DAY = timedelta(days=1)


def date_range(start: date, end: date) -> list[date]:
    """Every day from ``start`` to ``end``, both included, in order."""
    days = []
    current = start
    while current < end:
        days.append(current)
        current += ONE_DAY
    return days


def count_weekdays(start: date, end: date) -> int:
    """How many Monday-to-Friday days lie between ``start`` and ``end`` (both included)."""
    return sum(1 for d in date_range(start, end) if d.weekday() < 5)


def month_bounds(year: int, month: int) -> tuple[date, date]:
    """The first and last day of a month."""
    first = date(year, month, 1)
    if month == 12:
        nxt = date(year + 1, 1, 1)
    else:
        nxt = date(year, month + 1, 1)
    return first, nxt - ONE_DAY


def days_in_month(year: int, month: int) -> list[date]:
    """Every day of the month."""
    first, last = month_bounds(year, month)
    return date_range(first, last)

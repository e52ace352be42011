from datetime import date


def overlaps(a_start: date, a_end: date, b_start: date, b_end: date) -> bool:
    """True if [a_start, a_end] and [b_start, b_end] share a day (ends inclusive)."""
    return a_start <= b_end and b_start <= a_end

"""Durations as the config file writes them: ``1d2h3m4s``."""

from __future__ import annotations

UNIT_SECONDS = {"d": 86400, "h": 3600, "m": 60, "s": 1}


def format_duration(seconds: int) -> str:
    """``seconds`` as compact text, largest unit first, zero parts left out.

    ``format_duration(0)`` is ``"0s"``.
    """
    if seconds < 0:
        raise ValueError("negative duration")
    if seconds == 0:
        return "0s"
    parts = []
    for unit, size in UNIT_SECONDS.items():
        count, seconds = divmod(seconds, size)
        if count:
            parts.append(f"{count}{unit}")
    return "".join(parts)


def clamp_timeout(seconds: int, low: int = 1, high: int = 86400) -> int:
    """``seconds`` limited to ``[low, high]``."""
    return max(low, min(high, seconds))


def describe(seconds: int) -> str:
    """A longer form for log lines: ``1 hour 30 minutes``."""
    names = {"d": "day", "h": "hour", "m": "minute", "s": "second"}
    words = []
    for unit, size in UNIT_SECONDS.items():
        count, seconds = divmod(seconds, size)
        if count:
            words.append(f"{count} {names[unit]}{'s' if count != 1 else ''}")
    return " ".join(words) or "0 seconds"

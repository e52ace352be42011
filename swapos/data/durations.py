"""Durations as people write them: seconds, or Go duration strings (``"5m"``, ``"1h30m"``).

Ollama's ``keep_alive`` (:mod:`swapos.policies.keepalive`) and a profile's per-model
``ttl`` (:mod:`swapos.models.profile`) are read by :func:`parse_duration`. Pure.
"""

from __future__ import annotations

import math
import re

FOREVER = math.inf
"""A duration that never ends (a negative value)."""

UNITS = {
    "ns": 1e-9,
    "us": 1e-6,
    "µs": 1e-6,
    "μs": 1e-6,
    "ms": 1e-3,
    "s": 1.0,
    "m": 60.0,
    "h": 3600.0,
}
_PART = re.compile(r"(\d+(?:\.\d*)?|\.\d+)(ns|us|µs|μs|ms|s|m|h)")


class DurationError(ValueError):
    """A value that is neither a number of seconds nor a duration string."""


def parse_duration(value: float | str) -> float:
    """Seconds in ``value`` (:data:`FOREVER` for a negative one).

    Numbers are seconds. Strings are Go durations: a sign, then one or more
    ``<number><unit>`` parts with units ``ns us µs ms s m h`` (``"1h30m"``), or ``"0"``.

    Raises:
        DurationError: neither (the message says what was given; callers add what is
            accepted).
    """
    if isinstance(value, bool):
        raise DurationError(f"a number or a duration, not {value!r}")
    if isinstance(value, int | float):
        if math.isnan(value):
            raise DurationError("a number or a duration, not NaN")
        return FOREVER if value < 0 else float(value)
    raw = value.strip()
    sign, body = (-1.0, raw[1:]) if raw[:1] == "-" else (1.0, raw.removeprefix("+"))
    if body == "0":
        return 0.0
    seconds, pos = 0.0, 0
    for match in _PART.finditer(body):
        if match.start() != pos:
            break
        seconds += float(match.group(1)) * UNITS[match.group(2)]
        pos = match.end()
    if not body or pos != len(body):
        raise DurationError(f'invalid duration "{value}"')
    return FOREVER if sign < 0 else seconds

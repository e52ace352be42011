"""Retry a flaky call with exponential backoff."""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import TypeVar

T = TypeVar("T")

RETRYABLE: tuple[type[BaseException], ...] = (OSError, TimeoutError)


def backoff(attempt: int, base_delay: float) -> float:
    """The delay before retry number ``attempt`` (1-based): base, 2*base, 4*base..."""
    return base_delay * 2 ** (attempt - 1)


def call_with_retry(
    fn: Callable[[], T],
    *,
    attempts: int = 3,
    base_delay: float = 0.5,
    max_delay: float = 30.0,
    retry_on: tuple[type[BaseException], ...] = RETRYABLE,
    sleep: Callable[[float], object] = time.sleep,
) -> T:
    """Call ``fn`` until it returns, at most ``attempts`` times.

    Between attempts it sleeps ``backoff(n, base_delay)`` seconds, never more than
    ``max_delay``. An exception not in ``retry_on`` propagates at once; when every attempt
    fails, the last exception is re-raised.
    """
    if attempts < 1:
        raise ValueError("attempts must be >= 1")
    last: BaseException | None = None
    for attempt in range(1, attempts + 1):
        try:
            return fn()
        except retry_on as exc:
            last = exc
            sleep(backoff(attempt, base_delay))
    assert last is not None
    raise last

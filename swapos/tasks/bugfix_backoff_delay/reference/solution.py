def backoff_delay(attempt: int, base: float = 0.5, cap: float = 30.0) -> float:
    """Seconds to wait before retry number `attempt` (1, 2, 3, ...).

    The first retry waits `base`; each later one waits twice as long; never more than `cap`.
    """
    return min(base * 2 ** (attempt - 1), cap)

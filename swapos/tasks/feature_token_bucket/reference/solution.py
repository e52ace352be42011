from collections.abc import Callable


class TokenBucket:
    """A rate limiter holding up to `capacity` tokens, refilled at `rate` tokens per second.

    `clock` returns the current time in seconds. The bucket starts full.
    """

    def __init__(self, capacity: float, rate: float, clock: Callable[[], float]) -> None:
        self.capacity = capacity
        self.rate = rate
        self.clock = clock
        self.tokens = capacity
        self.updated = clock()

    def allow(self, cost: float = 1.0) -> bool:
        """Refill, then take cost tokens if there are enough; True if they were taken."""
        now = self.clock()
        self.tokens = min(self.capacity, self.tokens + (now - self.updated) * self.rate)
        self.updated = now
        if self.tokens >= cost:
            self.tokens -= cost
            return True
        return False

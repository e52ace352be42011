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

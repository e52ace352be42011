import pytest

from solution import FixedWindowLimiter, SlidingWindowLimiter


class Clock:
    def __init__(self, now=0.0):
        self.now = now

    def __call__(self):
        return self.now


def test_no_burst_across_the_boundary():
    clock = Clock(9.0)
    limiter = SlidingWindowLimiter(2, 10, clock=clock)
    assert limiter.allow("a") and limiter.allow("a")
    clock.now = 10.5
    assert not limiter.allow("a")
    clock.now = 18.999
    assert not limiter.allow("a")
    clock.now = 19.0
    assert limiter.allow("a")


def test_rejected_requests_are_not_recorded():
    clock = Clock()
    limiter = SlidingWindowLimiter(1, 5, clock=clock)
    assert limiter.allow("k")
    for t in (1, 2, 3, 4):
        clock.now = t
        assert not limiter.allow("k")
    clock.now = 5
    assert limiter.allow("k")


def test_keys_are_independent_and_remaining():
    clock = Clock()
    limiter = SlidingWindowLimiter(3, 1, clock=clock)
    assert limiter.remaining("x") == 3
    limiter.allow("x")
    limiter.allow("x")
    limiter.allow("y")
    assert (limiter.remaining("x"), limiter.remaining("y")) == (1, 2)
    clock.now = 0.5
    limiter.allow("x")
    clock.now = 1.2
    assert limiter.remaining("x") == 2


def test_memory_is_bounded():
    clock = Clock()
    limiter = SlidingWindowLimiter(5, 2, clock=clock)
    for i in range(100):
        limiter.allow(f"user{i}")
    assert len(limiter) == 100
    clock.now = 2.0
    assert len(limiter) == 0
    limiter.allow("late")
    assert len(limiter) == 1


@pytest.mark.parametrize("limit, window", [(0, 1), (1, 0), (-1, 5)])
def test_bad_arguments(limit, window):
    with pytest.raises(ValueError):
        SlidingWindowLimiter(limit, window)


def test_fixed_window_unchanged():
    clock = Clock(9.0)
    limiter = FixedWindowLimiter(2, 10, clock=clock)
    assert limiter.allow("a") and limiter.allow("a") and not limiter.allow("a")
    clock.now = 10.0
    assert limiter.allow("a") and limiter.remaining("a") == 1

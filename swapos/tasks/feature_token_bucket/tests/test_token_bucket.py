from solution import TokenBucket


class FakeClock:
    def __init__(self) -> None:
        self.now = 100.0

    def __call__(self) -> float:
        return self.now


def test_starts_full_then_refuses() -> None:
    bucket = TokenBucket(3, 1.0, FakeClock())
    assert [bucket.allow() for _ in range(4)] == [True, True, True, False]


def test_refills_over_time() -> None:
    clock = FakeClock()
    bucket = TokenBucket(2, 0.5, clock)
    assert bucket.allow() and bucket.allow()
    assert not bucket.allow()
    clock.now += 1.0
    assert not bucket.allow()
    clock.now += 1.0
    assert bucket.allow()
    assert not bucket.allow()


def test_refill_is_capped_at_capacity() -> None:
    clock = FakeClock()
    bucket = TokenBucket(3, 1.0, clock)
    assert bucket.allow()
    clock.now += 1000.0
    assert [bucket.allow() for _ in range(4)] == [True, True, True, False]


def test_cost() -> None:
    bucket = TokenBucket(3, 1.0, FakeClock())
    assert bucket.allow(cost=2)
    assert not bucket.allow(cost=2)
    assert bucket.allow(cost=1)


def test_refusal_takes_nothing() -> None:
    clock = FakeClock()
    bucket = TokenBucket(1, 1.0, clock)
    assert bucket.allow()
    clock.now += 0.5
    assert not bucket.allow()
    clock.now += 0.5
    assert bucket.allow()

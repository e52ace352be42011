import pytest

from solution import TTLCache


class FakeClock:
    def __init__(self) -> None:
        self.now = 0.0

    def __call__(self) -> float:
        return self.now


@pytest.fixture
def clock() -> FakeClock:
    return FakeClock()


def test_value_is_served_before_expiry(clock):
    cache = TTLCache(10, clock=clock)
    cache.set("a", 1)
    clock.now = 9.999
    assert cache.get("a") == 1
    assert "a" in cache


def test_value_expires_at_exactly_ttl(clock):
    cache = TTLCache(10, clock=clock)
    cache.set("a", 1)
    clock.now = 10
    assert cache.get("a") is None
    assert cache.get("a", "gone") == "gone"
    assert "a" not in cache


def test_len_counts_only_live_entries(clock):
    cache = TTLCache(5, clock=clock)
    cache.set("a", 1)
    clock.now = 3
    cache.set("b", 2)
    assert len(cache) == 2
    clock.now = 5
    assert len(cache) == 1
    clock.now = 8
    assert len(cache) == 0


def test_purge_reports_dropped_entries(clock):
    cache = TTLCache(2, clock=clock)
    cache.set("a", 1)
    cache.set("b", 2)
    clock.now = 1
    cache.set("c", 3)
    clock.now = 2
    assert cache.purge() == 2
    assert cache.get("c") == 3


def test_set_refreshes_expiry(clock):
    cache = TTLCache(4, clock=clock)
    cache.set("a", 1)
    clock.now = 3
    cache.set("a", 2)
    clock.now = 6
    assert cache.get("a") == 2


def test_ttl_must_be_positive():
    with pytest.raises(ValueError):
        TTLCache(0)

import pytest

from solution import LRUCache


def filled(n, capacity, log=None):
    cache = LRUCache(capacity, on_evict=(lambda k, v: log.append((k, v))) if log is not None else None)
    for i in range(n):
        cache.put(i, str(i))
    return cache


def test_shrink_evicts_least_recently_used_in_order():
    log = []
    cache = filled(5, 5, log)
    cache.get(0)  # 0 becomes the most recent
    cache.resize(2)
    assert log == [(1, "1"), (2, "2"), (3, "3")]
    assert list(cache) == [4, 0]
    assert cache.capacity == 2 and len(cache) == 2


def test_grow_keeps_everything_and_allows_more():
    cache = filled(3, 3)
    cache.resize(5)
    cache.put("a", 1)
    cache.put("b", 2)
    assert len(cache) == 5 and 0 in cache
    cache.put("c", 3)
    assert 0 not in cache


@pytest.mark.parametrize("bad", [0, -1, 2.5, "3"])
def test_resize_rejects_bad_capacity(bad):
    cache = filled(2, 2)
    with pytest.raises(ValueError):
        cache.resize(bad)
    assert cache.capacity == 2 and len(cache) == 2


def test_existing_behaviour():
    log = []
    cache = filled(3, 2, log)
    assert log == [(0, "0")]
    assert cache.get(0, "missing") == "missing"
    cache.put(1, "one")
    cache.put(9, "nine")
    assert list(cache) == [1, 9]

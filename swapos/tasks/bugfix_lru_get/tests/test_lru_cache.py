from solution import LRUCache


def test_get_refreshes_recency() -> None:
    cache = LRUCache(2)
    cache.put("a", 1)
    cache.put("b", 2)
    assert cache.get("a") == 1
    cache.put("c", 3)
    assert cache.get("b") is None
    assert cache.get("a") == 1
    assert cache.get("c") == 3


def test_repeated_gets_keep_hot_key() -> None:
    cache = LRUCache(3)
    for k in "abc":
        cache.put(k, k.upper())
    for k in "dea":
        cache.get("a")
        cache.put(k, k.upper())
    assert cache.get("a") == "A"
    assert cache.get("b") is None
    assert len(cache) == 3


def test_evicts_oldest_without_gets() -> None:
    cache = LRUCache(2)
    cache.put(1, "one")
    cache.put(2, "two")
    cache.put(3, "three")
    assert cache.get(1) is None
    assert cache.get(2) == "two"
    assert len(cache) == 2


def test_miss_returns_default() -> None:
    cache = LRUCache(1)
    assert cache.get("x") is None
    assert cache.get("x", 0) == 0

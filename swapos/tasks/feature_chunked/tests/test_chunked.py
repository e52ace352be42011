import pytest
from solution import chunked


def test_last_batch_is_shorter() -> None:
    assert chunked([1, 2, 3, 4, 5], 2) == [[1, 2], [3, 4], [5]]


def test_exact_multiple() -> None:
    assert chunked(["a", "b", "c", "d"], 2) == [["a", "b"], ["c", "d"]]


def test_size_larger_than_list() -> None:
    assert chunked([1, 2], 10) == [[1, 2]]


def test_empty_list() -> None:
    assert chunked([], 3) == []


def test_size_one() -> None:
    assert chunked([1, 2, 3], 1) == [[1], [2], [3]]


def test_bad_size_raises() -> None:
    with pytest.raises(ValueError):
        chunked([1, 2], 0)
    with pytest.raises(ValueError):
        chunked([1, 2], -1)

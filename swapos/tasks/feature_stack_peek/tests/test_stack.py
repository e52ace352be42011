import pytest
from solution import Stack


def test_peek_returns_top_without_removing() -> None:
    s = Stack()
    s.push(1)
    s.push(2)
    assert s.peek() == 2
    assert s.peek() == 2
    assert s.pop() == 2


def test_peek_empty_raises_index_error() -> None:
    with pytest.raises(IndexError):
        Stack().peek()


def test_len_counts_items() -> None:
    s = Stack()
    assert len(s) == 0
    s.push("a")
    s.push("b")
    assert len(s) == 2
    s.pop()
    assert len(s) == 1

import ast
import inspect

import pytest

import solution
from solution import MetricsWindow, RingBuffer


def test_append_until_full_then_overwrite_oldest():
    buf = RingBuffer(3)
    for i in range(2):
        buf.append(i)
    assert list(buf) == [0, 1] and len(buf) == 2 and not buf.full
    for i in range(2, 7):
        buf.append(i)
    assert list(buf) == [4, 5, 6] and len(buf) == 3 and buf.full


def test_indexing_oldest_first():
    buf = RingBuffer(4)
    for c in "abcdef":
        buf.append(c)
    assert [buf[0], buf[1], buf[-1], buf[-4]] == ["c", "d", "f", "c"]
    with pytest.raises(IndexError):
        buf[4]
    with pytest.raises(IndexError):
        buf[-5]


def test_clear():
    buf = RingBuffer(2)
    buf.append(1)
    buf.append(2)
    buf.append(3)
    buf.clear()
    assert len(buf) == 0 and list(buf) == []
    buf.append(9)
    assert list(buf) == [9]


@pytest.mark.parametrize("bad", [0, -3])
def test_capacity_must_be_positive(bad):
    with pytest.raises(ValueError):
        RingBuffer(bad)


def test_metrics_window_unchanged():
    w = MetricsWindow(3)
    assert (len(w), w.mean(), w.maximum(), w.recent(2)) == (0, 0.0, 0.0, [])
    for v in [5.0, 1.0, 2.0, 3.0]:
        w.add(v)
    assert len(w) == 3 and w.mean() == 2.0 and w.maximum() == 3.0
    assert w.recent(2) == [2.0, 3.0]


def test_no_deque_and_window_uses_ring_buffer():
    source = inspect.getsource(solution)
    tree = ast.parse(source)
    names = {n.id for n in ast.walk(tree) if isinstance(n, ast.Name)}
    attrs = {n.attr for n in ast.walk(tree) if isinstance(n, ast.Attribute)}
    assert "deque" not in names | attrs
    w = MetricsWindow(2)
    assert any(isinstance(v, RingBuffer) for v in vars(w).values())

from datetime import date

from solution import overlaps


def d(day: int) -> date:
    return date(2024, 3, day)


def test_b_starts_inside_a() -> None:
    assert overlaps(d(10), d(20), d(15), d(25))


def test_b_starts_before_a() -> None:
    assert overlaps(d(10), d(20), d(5), d(12))


def test_b_contains_a() -> None:
    assert overlaps(d(10), d(12), d(1), d(31))


def test_touching_on_one_day() -> None:
    assert overlaps(d(1), d(3), d(3), d(5))
    assert overlaps(d(3), d(5), d(1), d(3))


def test_disjoint_ranges() -> None:
    assert not overlaps(d(1), d(3), d(4), d(6))
    assert not overlaps(d(4), d(6), d(1), d(3))


def test_single_day_ranges() -> None:
    assert overlaps(d(7), d(7), d(7), d(7))
    assert not overlaps(d(7), d(7), d(8), d(8))

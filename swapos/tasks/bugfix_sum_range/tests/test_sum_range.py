from solution import sum_range


def test_small_values() -> None:
    assert sum_range(1) == 1
    assert sum_range(2) == 3
    assert sum_range(5) == 15


def test_zero_and_negative() -> None:
    assert sum_range(0) == 0
    assert sum_range(-3) == 0


def test_larger_value() -> None:
    assert sum_range(100) == 5050

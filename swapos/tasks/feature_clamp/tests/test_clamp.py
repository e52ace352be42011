from solution import clamp, percent


def test_inside_range_is_unchanged() -> None:
    assert clamp(42, 0, 100) == 42
    assert clamp(0.5, 0.0, 1.0) == 0.5


def test_below_low() -> None:
    assert clamp(-5, 0, 100) == 0


def test_above_high() -> None:
    assert clamp(150, 0, 100) == 100


def test_bounds_themselves() -> None:
    assert clamp(0, 0, 100) == 0
    assert clamp(100, 0, 100) == 100
    assert clamp(7, 3, 3) == 3


def test_percent_still_works() -> None:
    assert percent(1, 4) == 25.0
    assert clamp(percent(3, 2), 0, 100) == 100

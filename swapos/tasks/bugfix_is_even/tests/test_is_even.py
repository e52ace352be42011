from solution import is_even


def test_even_numbers() -> None:
    assert is_even(0) is True
    assert is_even(2) is True
    assert is_even(-4) is True


def test_odd_numbers() -> None:
    assert is_even(1) is False
    assert is_even(7) is False
    assert is_even(-3) is False

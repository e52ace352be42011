from solution import average


def test_whole_mean() -> None:
    assert average([2, 4, 6]) == 4


def test_fractional_mean() -> None:
    assert average([1, 2]) == 1.5


def test_empty_list() -> None:
    assert average([]) == 0.0

from solution import find_max


def test_positive_numbers() -> None:
    assert find_max([1, 5, 3]) == 5


def test_all_negative_numbers() -> None:
    assert find_max([-3, -1, -7]) == -1


def test_single_element() -> None:
    assert find_max([-42]) == -42

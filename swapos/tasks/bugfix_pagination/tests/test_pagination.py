from solution import page_items

ITEMS = list(range(10))


def test_first_page() -> None:
    assert page_items(ITEMS, 1, 3) == [0, 1, 2]


def test_middle_page() -> None:
    assert page_items(ITEMS, 2, 3) == [3, 4, 5]


def test_last_page_is_short() -> None:
    assert page_items(ITEMS, 4, 3) == [9]


def test_past_the_end_is_empty() -> None:
    assert page_items(ITEMS, 5, 3) == []
    assert page_items([], 1, 20) == []


def test_one_page_holds_everything() -> None:
    assert page_items(["a", "b"], 1, 20) == ["a", "b"]

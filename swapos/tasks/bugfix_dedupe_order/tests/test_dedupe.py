from solution import dedupe


def test_keeps_first_occurrence_in_order() -> None:
    assert dedupe([3, 1, 3, 2, 1]) == [3, 1, 2]


def test_strings() -> None:
    assert dedupe(["b", "a", "b", "c", "a"]) == ["b", "a", "c"]


def test_already_unique_is_unchanged() -> None:
    assert dedupe([5, 4, 3]) == [5, 4, 3]


def test_empty() -> None:
    assert dedupe([]) == []
